#include "sys/procstat.h"

#include "wire/counters.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

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

void procstat_report(struct ctl_report *r)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	struct ctl_group *g = ctl_report_group(r, CNT_GROUP_PROCESS);
	if (g == NULL)
		return;
	ctl_group_set(g, CNT_PROCESS(cpu_user_us),
		      (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec);
	ctl_group_set(g, CNT_PROCESS(cpu_sys_us),
		      (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec);
	ctl_group_set(g, CNT_PROCESS(max_rss_kib), procstat_peak_rss_kib());
}
