#include "sys/procstat.h"

#include "wire/counters.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The CPU used before the current run began: a daemon serving many runs
 * reports each run's own. Zero for a daemon of one run. */
static struct rusage procstat_run_start;

uint64_t procstat_peak_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long kib = 0;
	if (f != NULL) {
		char line[256];
		while (fgets(line, sizeof line, f) != NULL)
			if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
				break;
		fclose(f);
	}
	return kib;
}

static uint64_t procstat_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

void procstat_mark_run_start(void)
{
	getrusage(RUSAGE_SELF, &procstat_run_start);
	/* "5" resets the peak resident set (VmHWM) to the current one
	 * (proc(5), clear_refs): the next run's peak is its own. */
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "5", 1) != 1) {
			/* the peak then spans the runs so far: an upper bound */
		}
		close(fd);
	}
}

void procstat_report(struct ctl_report *r)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	struct ctl_group *g = ctl_report_group(r, CNT_GROUP_PROCESS);
	if (g == NULL)
		return;
	ctl_group_set(g, CNT_PROCESS(cpu_user_us),
		      procstat_us(&ru.ru_utime) - procstat_us(&procstat_run_start.ru_utime));
	ctl_group_set(g, CNT_PROCESS(cpu_sys_us),
		      procstat_us(&ru.ru_stime) - procstat_us(&procstat_run_start.ru_stime));
	ctl_group_set(g, CNT_PROCESS(max_rss_kib), procstat_peak_rss_kib());
}
