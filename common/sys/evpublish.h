/* Publishing a closed event file, whichever its format (docs/RECORDING.md,
 * "Crash safety"): its bytes read back once for their CRC and fdatasynced,
 * NAME.writing renamed to NAME and the directory fsynced, then the
 * manifest NAME.json written whole or not at all (sys/afile). For a writer that cannot follow its
 * file's CRC as it writes (HDF5's library rewrites its metadata in place);
 * evwriter keeps the CRC of its append-only files itself. Each function
 * returns 0 or -errno and names nothing: the writer names the failure. */
#ifndef ES_SYS_EVPUBLISH_H
#define ES_SYS_EVPUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A closed file, as its manifest says. */
struct evw_file_info {
	char name[64];
	uint32_t file_seq;
	uint32_t slice;
	uint64_t bytes;
	uint64_t events;
	uint64_t first_event;
	uint64_t last_event;
	uint32_t file_crc;
};

/* The file `name` of directory dir_fd mapped `window` bytes at a time
 * (the CRC runs over the page cache, nothing copied), each window dropped
 * from the cache behind it: *bytes and *crc. With `sync`, fdatasynced on
 * the same descriptor. */
int evp_crc_and_sync(int dir_fd, const char *name, bool sync, size_t window, uint64_t *bytes,
		     uint32_t *crc);

/* The free bytes of the file system of dir_fd (dir names it in messages)
 * for an unprivileged writer into *free_bytes, and whether `need` more fit
 * beside `reserve`: 0, -ENOSPC with error "disk full: N bytes free in
 * DIR, ...", or -errno with error naming the failed call. */
int evp_check_space(int dir_fd, const char *dir, uint64_t need, uint64_t reserve,
		    uint64_t *free_bytes, char *error, size_t error_size);

/* open_name renamed to name, then (with `sync`) the directory fsynced. */
int evp_rename(int dir_fd, const char *open_name, const char *name, bool sync);

/* dir/info->name + ".json", through the one writer of documents
 * (sys/afile): the raw writer's manifest keys (docs/RECORDING.md). */
int evp_manifest(const char *dir, const struct evw_file_info *info, uint32_t run,
		 uint16_t builder_id);

#endif
