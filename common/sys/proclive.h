/* Whether another process still runs, telling a reused pid from the
 * process that had it: a pid is recorded with its start time from
 * /proc/<pid>/stat (clock ticks after boot), and a process counts as alive
 * only while that pid exists, is not a zombie and has that start time.
 * Both processes must be in one PID namespace. */
#ifndef ES_SYS_PROCLIVE_H
#define ES_SYS_PROCLIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* This process's start time, 0 when /proc cannot tell. */
uint64_t proclive_self_start(void);

/* True while pid runs with start time start (start 0, unknown: whether pid
 * exists at all). False for pid <= 0, a zombie, a pid that is gone or now
 * belongs to a process started at another time. */
bool proclive_alive(pid_t pid, uint64_t start);

#endif
