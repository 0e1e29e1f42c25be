#include "sys/dwrite.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

int dwrite_init(struct dwrite *d)
{
	void *stage = NULL;

	*d = (struct dwrite){ .fd = -1, .direct_fd = -1 };
	if (posix_memalign(&stage, DWRITE_BLOCK, DWRITE_STAGE_BYTES) != 0)
		return -ENOMEM;
	d->stage = stage;
	return 0;
}

void dwrite_free(struct dwrite *d)
{
	dwrite_end_file(d);
	free(d->stage);
	d->stage = NULL;
}

int dwrite_begin(struct dwrite *d, int dir_fd, const char *name, int fd, const void *head,
		 size_t len)
{
	struct statfs fs;

	if (d->stage == NULL || len >= DWRITE_BLOCK)
		return -EINVAL;
	/* tmpfs keeps files in the page cache whatever the flags (and newer
	 * kernels take O_DIRECT on it): staging would be a copy for nothing. */
	if (fstatfs(fd, &fs) != 0 || fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)
		return -EINVAL;
	d->direct_fd = openat(dir_fd, name, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (d->direct_fd < 0)
		return -errno;
	d->fd = fd;
	memcpy(d->stage, head, len);
	d->staged = len;
	d->block_start = 0;
	return 0;
}

/* Writes all n bytes of buf at off through fd; 0 or -errno. */
static int dwrite_all(struct dwrite *d, int fd, const uint8_t *buf, size_t n, uint64_t off)
{
	while (n > 0) {
		ssize_t k = pwrite(fd, buf, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		d->calls++;
		buf += k;
		off += (uint64_t)k;
		n -= (size_t)k;
	}
	return 0;
}

/* The stage's whole blocks to the device; what is past them moves to the
 * stage's start. */
static int dwrite_blocks(struct dwrite *d)
{
	size_t whole = d->staged & ~(size_t)(DWRITE_BLOCK - 1u);
	int rc;

	if (whole == 0)
		return 0;
	rc = dwrite_all(d, d->direct_fd, d->stage, whole, d->block_start);
	if (rc != 0)
		return rc;
	d->direct_bytes += whole;
	d->block_start += whole;
	d->staged -= whole;
	memmove(d->stage, d->stage + whole, d->staged);
	return 0;
}

int dwrite_append(struct dwrite *d, const struct iovec *iov, unsigned int count)
{
	int rc;

	for (unsigned int i = 0; i < count; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left > 0) {
			size_t n = DWRITE_STAGE_BYTES - d->staged;

			if (n > left)
				n = left;
			memcpy(d->stage + d->staged, p, n);
			d->staged += n;
			p += n;
			left -= n;
			if (d->staged == DWRITE_STAGE_BYTES && (rc = dwrite_blocks(d)) != 0)
				return rc;
		}
	}
	if ((rc = dwrite_blocks(d)) != 0)
		return rc;
	/* The part block through the page cache: the next direct write of
	 * this block replaces it. */
	return d->staged > 0 ? dwrite_all(d, d->fd, d->stage, d->staged, d->block_start) : 0;
}

void dwrite_end_file(struct dwrite *d)
{
	if (d->direct_fd >= 0)
		close(d->direct_fd);
	d->direct_fd = -1;
	d->fd = -1;
}
