/* What a daemon reports about itself at the end of a run: CPU time from
 * getrusage() and peak memory, the figures metrics.json lists per process. */
#ifndef ES_SYS_PROCSTAT_H
#define ES_SYS_PROCSTAT_H

#include "wire/control.h"

#include <stdint.h>

/* Peak resident memory of this process image in KiB (VmHWM). getrusage's
 * ru_maxrss is not used: Linux carries it across execve, so a daemon started
 * by a large launcher would report the launcher's peak. */
uint64_t procstat_peak_rss_kib(void);

/* A run begins (a serving daemon's configure): what procstat_report says
 * from here on is this run's CPU and peak memory, not the process's since
 * it started. */
void procstat_mark_run_start(void);

/* Adds the group "process" (cpu_user_us, cpu_sys_us, max_rss_kib) to r:
 * since the run began (procstat_mark_run_start), or the process did. */
void procstat_report(struct ctl_report *r);

#endif
