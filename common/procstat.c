#include "procstat.h"

#include <sys/resource.h>

void procstat_report(struct ctl_report *r)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	struct ctl_group *g = ctl_report_group(r, "process");
	if (g == NULL)
		return;
	ctl_group_set(g, "cpu_user_us",
		      (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec);
	ctl_group_set(g, "cpu_sys_us",
		      (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec);
	ctl_group_set(g, "max_rss_kib", (uint64_t)ru.ru_maxrss);
}
