/* What every daemon's main() shares once its options are parsed: an event
 * base with precise timers, SIGPIPE ignored, and the loop run with SIGTERM
 * and SIGINT asking for an orderly stop (a second SIGINT exits at once). */
#ifndef ES_DAEMON_H
#define ES_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;

/* The settings every daemon shares, applied once its options are parsed:
 * the run key (NULL: none) and the injected clock offset. false when the
 * key cannot be loaded (the reason is printed). */
bool daemon_apply_common(const char *run_key_file, int64_t clock_offset_ns);

/* Starts logging as role[id] (id < 0: none) and says when there is no run
 * key, so a person knows only local peers can connect. */
void daemon_start_log(const char *role, int id, bool quiet);

/* An event base with precise timers (paced sources and the builder's tick
 * sleep well under a millisecond); NULL when libevent cannot make one. */
struct event_base *daemon_base_new(void);

/* Runs the loop until it is exited; SIGTERM and the first SIGINT call
 * stop(arg, signal name) from the loop. */
void daemon_run(struct event_base *base, void (*stop)(void *arg, const char *why), void *arg);

#endif
