#include "sys/evpublish.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "wire/crc.h"

int evp_crc_and_sync(int dir_fd, const char *name, bool sync, uint8_t *buf, size_t size,
		     uint64_t *bytes, uint32_t *crc)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
	uint64_t at = 0;
	uint32_t sum = 0;
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, size)) > 0) {
		sum = crc_update(sum, buf, (size_t)n);
		posix_fadvise(fd, (off_t)at, n, POSIX_FADV_DONTNEED);
		at += (uint64_t)n;
	}
	if (n < 0 || (sync && fdatasync(fd) != 0))
		rc = -errno;
	close(fd);
	*bytes = at;
	*crc = sum;
	return rc;
}

int evp_rename(int dir_fd, const char *open_name, const char *name, bool sync)
{
	if (renameat(dir_fd, open_name, dir_fd, name) != 0)
		return -errno;
	if (sync && fsync(dir_fd) != 0)
		return -errno;
	return 0;
}

int evp_manifest(int dir_fd, const struct evw_file_info *info, uint32_t run, uint16_t builder_id,
		 bool sync)
{
	char tmp[96], name[80];
	json_t *doc = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:b}",
				"format", "esdq-event-file-manifest/1", "name", info->name,
				"bytes", (json_int_t)info->bytes, "event_count", (json_int_t)info->events,
				"first_event", (json_int_t)info->first_event,
				"last_event", (json_int_t)info->last_event,
				"file_crc", (json_int_t)info->file_crc, "run", (json_int_t)run,
				"builder", (int)builder_id, "file_seq", (json_int_t)info->file_seq,
				"slice", (json_int_t)info->slice, "recovered", 0);
	char *text = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
	int fd, rc = 0;

	json_decref(doc);
	if (text == NULL)
		return -ENOMEM;
	snprintf(name, sizeof(name), "%s.json", info->name);
	snprintf(tmp, sizeof(tmp), "%s.json.tmp", info->name);
	errno = 0;
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 ||
	    (sync && fsync(fd) != 0) || renameat(dir_fd, tmp, dir_fd, name) != 0)
		rc = errno ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}
