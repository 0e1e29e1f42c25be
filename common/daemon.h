/* What every daemon's main() shares once its options are parsed: an event
 * base with precise timers, SIGPIPE ignored, and the loop run with SIGTERM
 * and SIGINT asking for an orderly stop (a second SIGINT exits at once). */
#ifndef ES_DAEMON_H
#define ES_DAEMON_H

struct event_base;

/* An event base with precise timers (paced sources and the builder's tick
 * sleep well under a millisecond); NULL when libevent cannot make one. */
struct event_base *daemon_base_new(void);

/* Runs the loop until it is exited; SIGTERM and the first SIGINT call
 * stop(arg, signal name) from the loop. */
void daemon_run(struct event_base *base, void (*stop)(void *arg, const char *why), void *arg);

#endif
