/* Documents written whole or not at all (metrics.json, builder.json,
 * running.json, port files, a fenced builder's cut record files): the text
 * goes to a temporary file in the target's own directory, is fsynced, renamed
 * over the target, and the directory is fsynced. A reader polling the path
 * sees the old document or the new one, never an empty or cut one, and a
 * crash at any moment leaves at most a stray temporary (NAME.tmp.PID) beside
 * the old document. The one writer of the project's documents. */
#ifndef ES_SYS_AFILE_H
#define ES_SYS_AFILE_H

#include <stdbool.h>
#include <stddef.h>

#define AFILE_PATH_MAX 4096

/* One document being written; opaque but for its size (on the caller's
 * stack). */
struct afile {
	int fd;
	char path[AFILE_PATH_MAX];
	char tmp[AFILE_PATH_MAX + 32];
};

/* Opens the temporary beside path. 0 or -errno (-ENAMETOOLONG). */
int afile_begin(struct afile *f, const char *path);

/* Appends len bytes. 0 or -errno; after an error only afile_abort(). */
int afile_write(struct afile *f, const void *buf, size_t len);

/* fsync, rename over path, fsync the directory: the document is now path.
 * On an error the temporary is removed and path is left as it was.
 * 0 or -errno. */
int afile_commit(struct afile *f);

/* Drops the temporary; path is left as it was. */
void afile_abort(struct afile *f);

/* The whole document in one call: begin, write, commit. 0 or -errno. */
int afile_write_all(const char *path, const void *buf, size_t len);

/* Removes path and fsyncs its directory, so the removal survives a crash
 * as a rename would. 0, or -errno (a path already absent is 0). */
int afile_remove(const char *path);

#endif
