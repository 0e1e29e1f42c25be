#include "sys/evpublish.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <jansson.h>

#include "sys/afile.h"
#include "wire/crc.h"

int evp_crc_and_sync(int dir_fd, const char *name, bool sync, size_t window, uint64_t *bytes,
		     uint32_t *crc)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint32_t sum = 0;
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	/* Mapped, not read: the CRC runs over the page cache itself, one
	 * window at a time, each dropped behind it. */
	for (uint64_t at = 0; at < (uint64_t)st.st_size; at += window) {
		size_t n = (uint64_t)st.st_size - at < window ? (size_t)((uint64_t)st.st_size - at) : window;
		void *map = mmap(NULL, n, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)at);

		if (map == MAP_FAILED) {
			rc = -errno;
			goto out;
		}
		sum = crc_update(sum, map, n);
		munmap(map, n);
		posix_fadvise(fd, (off_t)at, (off_t)n, POSIX_FADV_DONTNEED);
	}
	if (sync && fdatasync(fd) != 0)
		rc = -errno;
	*bytes = (uint64_t)st.st_size;
	*crc = sum;
out:
	close(fd);
	return rc;
}

int evp_check_space(int dir_fd, const char *dir, uint64_t need, uint64_t reserve,
		    uint64_t *free_bytes, char *error, size_t error_size)
{
	struct statvfs sv;

	if (fstatvfs(dir_fd, &sv) != 0) {
		int err = errno;
		snprintf(error, error_size, "output: cannot read the free space of %s: %s", dir,
			 strerror(err));
		return -err;
	}
	*free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (*free_bytes < need + reserve) {
		snprintf(error, error_size, "disk full: %" PRIu64 " bytes free in %s, %" PRIu64
			 " needed beside a reserve of %" PRIu64, *free_bytes, dir, need, reserve);
		return -ENOSPC;
	}
	return 0;
}

int evp_rename(int dir_fd, const char *open_name, const char *name, bool sync)
{
	if (renameat(dir_fd, open_name, dir_fd, name) != 0)
		return -errno;
	if (sync && fsync(dir_fd) != 0)
		return -errno;
	return 0;
}

int evp_manifest(const char *dir, const struct evw_file_info *info, uint32_t run,
		 uint16_t builder_id)
{
	char path[PATH_MAX + 96];
	json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:b}",
				"format", "esdq-event-file-manifest/1", "name", info->name,
				"bytes", (json_int_t)info->bytes, "event_count", (json_int_t)info->events,
				"first_event", (json_int_t)info->first_event,
				"last_event", (json_int_t)info->last_event,
				"file_crc", (json_int_t)info->file_crc, "run", (json_int_t)run,
				"builder", (int)builder_id, "file_seq", (json_int_t)info->file_seq,
				"slice", (json_int_t)info->slice, "recovered", 0);
	char *text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
	int rc;

	json_decref(doc);
	if (text == NULL)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s.json", dir, info->name);
	size_t len = strlen(text);
	text[len] = '\n';    /* json_dumps leaves room: its NUL becomes the newline */
	rc = afile_write_all(path, text, len + 1);
	free(text);
	return rc;
}
