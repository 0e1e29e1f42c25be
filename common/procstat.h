/* What a daemon reports about itself at the end of a run: CPU time and peak
 * memory from getrusage(), the figures metrics.json lists per process. */
#ifndef ES_PROCSTAT_H
#define ES_PROCSTAT_H

#include "ctl.h"

/* Adds the group "process" (cpu_user_us, cpu_sys_us, max_rss_kib) to r. */
void procstat_report(struct ctl_report *r);

#endif
