/* Process liveness from /proc; see proclive.h. */
#include "sys/proclive.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* State and start time (clock ticks after boot) of a process from
 * /proc/<pid>/stat. The comm field may hold spaces and parentheses, so
 * fields are counted from the last ')'. */
static int proc_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	int rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return rc;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	p += 2;
	*state = *p;
	/* p is at field 3; starttime is field 22. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

uint64_t proclive_self_start(void)
{
	char state;
	uint64_t start;
	return proc_stat(getpid(), &state, &start) == 0 ? start : 0;
}

bool proclive_alive(pid_t pid, uint64_t start)
{
	char state;
	uint64_t now_start;
	if (pid <= 0)
		return false;
	int rc = proc_stat(pid, &state, &now_start);
	if (rc == -ENOENT || rc == -ESRCH)
		return false;
	if (rc < 0)
		return kill(pid, 0) == 0 || errno == EPERM;
	/* kill(pid, 0) succeeds on a zombie, which can no longer touch shared
	 * memory: a killed reader whose parent has not reaped it yet. */
	if (state == 'Z' || state == 'X' || state == 'x')
		return false;
	return start == 0 || now_start == start;
}
