/* How the run goes, as it goes: the completion rate over the last second
 * (for /status and /metrics) and the progress line, rewritten in place every
 * second on a terminal, logged every five seconds elsewhere (a log file,
 * CI). Time is passed in. Private to builderd. */
#ifndef ES_BD_PROGRESS_H
#define ES_BD_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct snapshot;
struct progress;

/* Starts counting at now (monotonic ns). terminal: the stream the line is
 * rewritten on, NULL to log it instead. NULL when out of memory. */
struct progress *progress_create(uint64_t now, FILE *terminal);

void progress_destroy(struct progress *p);

/* Each tick, with the events completed so far: once a second the rate
 * becomes the completions since the last sample over the time since. */
void progress_sample(struct progress *p, uint64_t now, uint64_t complete);

/* Events completed per second over the last second. */
double progress_rate(const struct progress *p);

/* Whether the line is due at now. */
bool progress_due(const struct progress *p, uint64_t now);

/* Shows the line for s, its rate over the time since the last one. */
void progress_show(struct progress *p, uint64_t now, const struct snapshot *s);

/* The run is over: ends a line left on the terminal. */
void progress_end(struct progress *p);

/* The run's progress in one line: built, accepted, expired, pending, the
 * admission limit, readers' hold time, p99, ETA; rate in events/s. */
void progress_line(char *line, size_t size, const struct snapshot *s, double rate);

#endif
