/* The slow half of closing an event file, on a thread of its own, so that
 * the builder's loop goes on writing the next file meanwhile
 * (docs/RECORDING.md, "Crash rules"): the file's fdatasync (which also
 * flushes the disk's cache, about a tenth of a second measured on this
 * project's machines), its close, its rename from NAME.writing to NAME, the
 * directory's fsync and its manifest. The crash rules are the same as
 * closing in the loop: until the rename the file is NAME.writing, and
 * recovery closes it. One file at a time: a second waits for the first. */
#ifndef ES_SYS_EVCLOSE_H
#define ES_SYS_EVCLOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "sys/evpublish.h"

struct evclose;

/* The file to finish: its descriptor (the trailer written), its final
 * name in directory dir_fd (it is NAME.writing until renamed), and what
 * its manifest says. sync false: no fdatasync or fsync (`sync = never`). */
struct evclose_job {
	int fd;
	bool sync;
	struct evw_file_info info;
};

/* What became of it. err 0, or an errno with step naming what failed
 * ("fdatasync", "rename", "fsync", "manifest"). */
struct evclose_result {
	int err;
	const char *step;
	uint64_t sync_ns;
	struct evw_file_info info;
};

/* The thread, for the files of directory dir (open as dir_fd) of run and
 * builder_id. -errno. */
int evclose_start(struct evclose **out, const char *dir, int dir_fd, uint32_t run,
		  uint16_t builder_id);

/* Hands a file over (waiting first until the one before is finished and
 * collected: call evclose_collect). */
void evclose_submit(struct evclose *c, const struct evclose_job *job);

/* true with *out filled when a file handed over is finished; with wait,
 * waits for the one in flight. false: none in flight (or, without wait,
 * not finished yet). */
bool evclose_collect(struct evclose *c, bool wait, struct evclose_result *out);

/* Waits for the file in flight (its result dropped) and ends the thread. */
void evclose_stop(struct evclose *c);

#endif
