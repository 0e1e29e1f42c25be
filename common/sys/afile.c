#include "sys/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The directory of path, fsynced: the rename or unlink in it lasts. */
static int afile_sync_dir(const char *path)
{
	char dir[AFILE_PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 && errno != EINVAL ? -errno : 0;
	close(fd);
	return rc;
}

int afile_begin(struct afile *f, const char *path)
{
	f->fd = -1;
	int n = snprintf(f->path, sizeof f->path, "%s", path);
	if (n < 0 || (size_t)n >= sizeof f->path)
		return -ENAMETOOLONG;
	snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%d", path, (int)getpid());
	f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return f->fd < 0 ? -errno : 0;
}

int afile_write(struct afile *f, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(f->fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void afile_abort(struct afile *f)
{
	if (f->fd >= 0) {
		close(f->fd);
		unlink(f->tmp);
	}
	f->fd = -1;
}

int afile_commit(struct afile *f)
{
	int rc = fsync(f->fd) < 0 ? -errno : 0;
	if (close(f->fd) < 0 && rc == 0)
		rc = -errno;
	f->fd = -1;
	if (rc == 0 && rename(f->tmp, f->path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(f->tmp);
		return rc;
	}
	return afile_sync_dir(f->path);
}

int afile_write_all(const char *path, const void *buf, size_t len)
{
	struct afile f;
	int rc = afile_begin(&f, path);
	if (rc == 0)
		rc = afile_write(&f, buf, len);
	if (rc < 0) {
		afile_abort(&f);
		return rc;
	}
	return afile_commit(&f);
}

int afile_remove(const char *path)
{
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	return afile_sync_dir(path);
}
