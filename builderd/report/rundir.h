/* The state of a run's output directory (docs/METRICS.md, "A run in
 * progress"): while a run writes into it, it holds running.json; its end
 * document (the hub's metrics.json, a builder's builder.json) is removed
 * when the run starts and written only at its end, after which running.json
 * goes. So a run killed in the directory of an earlier one leaves
 * running.json and no end document: it can never pass for a complete,
 * balanced run. Private to builderd. */
#ifndef ES_BD_RUNDIR_H
#define ES_BD_RUNDIR_H

#include <stdint.h>

#define RUNDIR_MARKER "running.json"

/* Creates dir if needed, removes its end document end_doc, writes
 * running.json (state "running", the run, role and id, pid, host, start
 * time). 0 or -errno (logged). */
int rundir_begin(const char *dir, const char *end_doc, uint32_t run, const char *role,
		 uint32_t id);

/* The end document is written: removes running.json. 0 or -errno. */
int rundir_end(const char *dir);

#endif
