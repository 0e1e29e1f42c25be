/* Appending to a file with direct I/O (O_DIRECT): the bytes are gathered
 * into an aligned staging buffer and its whole blocks go to the device
 * without the page cache, whose copy, page management and writeback cost
 * about ten times the CPU per byte of a direct write on these machines;
 * but each write waits for the device (docs/RECORDING.md, "Direct I/O":
 * measured slower in the pipeline, so not the default). What is left past the last whole
 * block (less than one block) is written through the ordinary descriptor
 * at every append, so every byte appended has left the process when the
 * append returns, and the next direct write starts again at that block.
 * Private to the event-file writer (sys/evwriter). */
#ifndef ES_SYS_DWRITE_H
#define ES_SYS_DWRITE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The block every direct write is aligned to, in memory, offset and size:
 * the largest logical block size of the devices this runs on. */
#define DWRITE_BLOCK 4096u
/* The staging buffer: how much is gathered before a direct write. */
#define DWRITE_STAGE_BYTES (4u << 20)

struct dwrite {
	int fd;                  /* the file's ordinary descriptor (the caller's) */
	int direct_fd;           /* the same file opened O_DIRECT; -1 when none */
	uint8_t *stage;          /* DWRITE_STAGE_BYTES, aligned to DWRITE_BLOCK */
	size_t staged;           /* bytes in stage: the file's from block_start */
	uint64_t block_start;    /* the file offset of stage[0], a multiple of DWRITE_BLOCK */
	uint64_t direct_bytes;   /* written by direct I/O, over the writer's life */
	uint64_t calls;          /* write system calls, both kinds */
};

/* The staging buffer; 0 or -ENOMEM. */
int dwrite_init(struct dwrite *d);
void dwrite_free(struct dwrite *d);

/* Opens name (in dir_fd, already created and open as fd, holding the
 * len bytes at head from offset 0) for direct writes too. -EINVAL on
 * tmpfs and ramfs (their files live in the page cache: nothing to
 * bypass), -errno when the file system refuses O_DIRECT: the caller then
 * writes through fd. */
int dwrite_begin(struct dwrite *d, int dir_fd, const char *name, int fd, const void *head,
		 size_t len);

/* Appends the iovecs' bytes at the end of what was written. 0, or -errno
 * (ENOSPC, EIO) after which the file's end is undefined past its last
 * acknowledged byte (the caller truncates back to it). */
int dwrite_append(struct dwrite *d, const struct iovec *iov, unsigned int count);

/* The file's next byte: where an append or a trailer goes. */
static inline uint64_t dwrite_end(const struct dwrite *d)
{
	return d->block_start + d->staged;
}

/* Closes the direct descriptor (the caller keeps and closes fd). */
void dwrite_end_file(struct dwrite *d);

#endif
