/* What every daemon's main() shares once its options are parsed: an event
 * base with precise timers, SIGPIPE ignored, and the loop run with SIGTERM
 * and SIGINT asking for an orderly stop (a second SIGINT exits at once). */
#ifndef ES_IO_DAEMON_H
#define ES_IO_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifndef ES_VERSION
#define ES_VERSION "0.1.0"
#endif

struct event_base;

/* getopt_long codes of the options every daemon takes, above any code of a
 * daemon's own. */
enum daemon_option {
	DAEMON_OPT_CLOCK_OFFSET = 0x10000,
	DAEMON_OPT_QUIET,
	DAEMON_OPT_RUN_KEY,
	DAEMON_OPT_HELP,
	DAEMON_OPT_VERSION,
};

/* Their entries, for the end of each daemon's long_options table (before
 * the terminating zero entry). Needs <getopt.h>. */
#define DAEMON_LONG_OPTIONS \
	{ "clock-offset-ns", required_argument, NULL, DAEMON_OPT_CLOCK_OFFSET }, \
	{ "quiet", no_argument, NULL, DAEMON_OPT_QUIET }, \
	{ "run-key-file", required_argument, NULL, DAEMON_OPT_RUN_KEY }, \
	{ "help", no_argument, NULL, DAEMON_OPT_HELP }, \
	{ "version", no_argument, NULL, DAEMON_OPT_VERSION }

/* What a daemon's option parsing shares: who it is, for messages, and what
 * the common options set. */
struct daemon_options {
	const char *role;                /* "builderd" */
	void (*usage)(FILE *out);
	const char *run_key_file;        /* NULL: none */
	int64_t clock_offset_ns;
	bool quiet;
};

enum daemon_option_result {
	DAEMON_OPTION_NOT_COMMON,   /* a daemon's own option: its switch decides */
	DAEMON_OPTION_TAKEN,
	DAEMON_OPTION_BAD,          /* a bad value, already reported */
};

/* Takes getopt_long's code with its argument when it is a common option.
 * --help prints the usage and --version the version, and both exit 0. */
enum daemon_option_result daemon_take_option(struct daemon_options *d, int code, const char *arg);

/* After getopt_long: false, with the reason on stderr, when an argument is
 * left over or `missing` names a required flag that was not given (NULL:
 * none is missing). */
bool daemon_options_complete(const struct daemon_options *d, int argc, char **argv,
			     const char *missing);

/* Whether the daemon may listen on host for flag: without a run key
 * (daemon_apply_common() first) only on loopback, since only peers on this
 * host could be trusted. false, with the reason on stderr, otherwise. */
bool daemon_listen_allowed(const struct daemon_options *d, const char *flag, const char *host);

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
