/* Rate-limited warning lines for what strangers can cause at will (a
 * listener's refusals, evictions, failed accepts): the first
 * RATELOG_PER_SECOND lines of a second are logged, the others only counted
 * and summed up in one line when the second is over, so a flood of bad
 * connections cannot flood the log. Every event is still counted by its
 * owner; the log only says so. Used by the greeting's doors
 * (io/handshake_listen.c) and the HTTP listeners (io/httplisten.c). */
#ifndef ES_IO_RATELOG_H
#define ES_IO_RATELOG_H

#include <stdint.h>

struct event;
struct event_base;

#define RATELOG_PER_SECOND 5u

/* Embedded in its owner; set up with ratelog_init(), ended with
 * ratelog_close(). */
struct ratelog {
	char what[96];                 /* "Greetings refused or failed on the builder's data port" */
	char counted_in[64];           /* "refused_connections": where every one is counted */
	uint64_t window_ns;            /* the start of the current second */
	unsigned lines;                /* logged in the current second */
	uint64_t suppressed;           /* held back since the last summary */
	uint64_t suppressed_total;     /* held back in all */
	struct event *ev_summary;      /* the summary at the second's end */
};

void ratelog_init(struct ratelog *r, struct event_base *base, const char *what,
		  const char *counted_in);

/* One warning line, within the rate. */
void ratelog_warn(struct ratelog *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs the summary of what is still held back and frees the timer. */
void ratelog_close(struct ratelog *r);

#endif
