#include "sys/log.h"

#include "wire/text.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static char log_role[16] = "es";
static int log_id = -1;
static enum log_level log_min = LOG_LEVEL_INFO;

void log_init(const char *role, int id, enum log_level min_level)
{
	snprintf(log_role, sizeof log_role, "%s", role);
	log_id = id;
	log_min = min_level;
}

int log_enabled(enum log_level level)
{
	return level >= log_min;
}

void log_write(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "DEBUG", "INFO", "NOTE", "WARN", "ERROR" };
	if (level < log_min)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char line[2048];
	int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %s",
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_role);
	if (log_id >= 0)
		n += snprintf(line + n, sizeof line - (size_t)n, "[%d]", log_id);
	n += snprintf(line + n, sizeof line - (size_t)n, " %s ", names[level]);
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	if ((size_t)m >= sizeof msg)
		m = (int)sizeof msg - 1;
	/* Messages quote peers' words (host names, reasons, decode errors):
	 * whatever a peer sent, it cannot end this line or start another. */
	n += (int)text_log_escape(line + n, sizeof line - (size_t)n - 1, msg, (size_t)m);
	line[n++] = '\n';
	/* One write per line so lines of concurrent daemons sharing a log file
	 * never interleave mid-line. */
	fwrite(line, 1, (size_t)n, stderr);
	fflush(stderr);
}
