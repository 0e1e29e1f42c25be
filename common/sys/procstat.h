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

/* Adds the group "process" (cpu_user_us, cpu_sys_us, max_rss_kib) to r. */
void procstat_report(struct ctl_report *r);

#endif
