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

#include "sys/opt.h"
#include "wire/control.h"

/* What the options every daemon takes set (--run-key-file,
 * --clock-offset-ns, --quiet; --help and --version exit). */
struct daemon_options {
	const char *role;                /* "builderd" */
	const char *run_key_file;        /* NULL: none */
	char session_host[256];          /* --session HOST:PORT: serve runs for that hub */
	uint16_t session_port;           /* 0: serve one run and exit */
	uint32_t session_ignore_configure; /* test hook: never answer run N's configure; 0: off */
	int64_t clock_offset_ns;
	bool quiet;
};

/* Their table, declared once for the three daemons; it follows each
 * daemon's own table in the usage. */
extern const struct opt_spec daemon_option_specs[];
extern const size_t daemon_option_count;

/* Options more than one daemon takes with the same meaning, declared once
 * each; T is the daemon's options struct, which names the fields so. */
#define DAEMON_OPT_METRICS_LISTEN(T, ...) \
	OPT_HOSTPORT("metrics-listen", "HOST:PORT", T, metrics_host, metrics_port, 0, \
		     .help = "serve /metrics (Prometheus) and /status (JSON)", __VA_ARGS__)
#define DAEMON_OPT_CONNECT_TIMEOUT(T, ...) \
	OPT_UINT("connect-timeout-ms", "T", T, connect_timeout_ms, 1, 86400000, .def = "10000", \
		 .help = "keep retrying connections, and greetings refused\n" \
			 "busy or cut, this long (default {default})", __VA_ARGS__)

/* A daemon: its options table and prose, and how its one object is made,
 * stopped and ended. daemon_main() is the whole of main(): parse the
 * options (exit 2 on a usage error), apply the common ones, start the log,
 * create the object on an event base (exit 1 when that fails), run the loop
 * with SIGTERM/SIGINT calling stop, then destroy and exit with its status. */
struct daemon_def {
	const char *role;                /* "sourced" */
	const char *synopsis, *description, *epilogue, *example;    /* struct opt_program */
	const struct opt_spec *specs;
	size_t n_specs;
	void *opts;                      /* the struct specs point into */
	bool *quiet;                     /* in opts: set from --quiet */
	const uint32_t *log_id;          /* in opts: the ID in log lines; NULL: none */
	const char *title;               /* "Reader": "Reader 3 could not start" */
	const uint32_t *title_id;        /* in opts: the 3 */
	/* Checks between options after parsing (NULL: none): false, with the
	 * reason on stderr, ends with status 2. */
	bool (*check)(void *opts, const struct daemon_options *d);
	/* The same once the run key is loaded: where the daemon may listen. */
	bool (*check_listen)(void *opts, const struct daemon_options *d);
	void *(*create)(struct event_base *base, const void *opts);
	void (*stop)(void *daemon, const char *why);
	/* The operator's drained stop of a one-run hub (docs/RUNCONTROL.md,
	 * "stop"): asked by SIGUSR2, registered only when this is set. */
	void (*drain)(void *daemon, const char *why);
	int (*exit_status)(const void *daemon);
	void (*destroy)(void *daemon);
	/* Serving runs (docs/RUNCONTROL.md, io/session.h); zero: one run only. */
	size_t opts_size;                /* of *opts: a run's options are a fresh copy */
	/* The whole process after parsing when started with --session (main.c
	 * sets session_peer_main); NULL: --session is refused. */
	int (*serve_runs)(const struct daemon_def *def, const struct daemon_options *d,
			  struct event_base *base, int argc, char **argv);
	/* Opens once, at start, the listeners every run will use (io/net keeps
	 * them) and writes the port file; false, with the reason logged, ends
	 * the process with status 1. NULL: nothing to open. */
	bool (*prepare)(void *opts);
	enum ctl_role session_role;      /* a peer's HELLO on the session link */
	const uint32_t *session_id;      /* in opts */
	/* The hub (builderd): when hub_serves(opts), daemon_main() hands the
	 * process to hub_main() instead of the one-run loop. */
	bool (*hub_serves)(const void *opts);
	int (*hub_main)(const struct daemon_def *def, const struct daemon_options *d,
			struct event_base *base, int argc, char **argv);
};

int daemon_main(const struct daemon_def *def, int argc, char **argv);

/* Whether the daemon may listen on host for flag: without a run key
 * (so only in check_listen, after the key is loaded) only on loopback,
 * since only peers on this host could be trusted. false, with the reason on
 * stderr, otherwise. */
bool daemon_listen_allowed(const struct daemon_options *d, const char *flag, const char *host);

/* One port a daemon listens on, as its start-up announcement gives it. */
struct daemon_port {
	const char *name;   /* its word in the line and the port file: "data", "metrics" */
	const char *host;   /* the address it is bound on; NULL: in the port file, not printed */
	uint16_t port;      /* 0: not listening, neither printed nor written */
	bool own_line;      /* printed on a "listening" line of its own (/metrics) */
};

/* The start-up announcement of every daemon and role, the one place that
 * makes it: on stdout, flushed, "listening NAME HOST:PORT NAME HOST:PORT"
 * for the printed ports in order (a port marked own_line on a line of its
 * own), then, when port_file is not NULL or empty, the port file with
 * every listening port (net_write_ports: "NAME PORT" lines, written
 * atomically). deploy/daqrun and the tests read both (docs/DEPLOY.md).
 * 0, or -errno when the port file cannot be written (logged). */
int daemon_announce(const struct daemon_port *ports, size_t count, const char *port_file);

/* An event base with precise timers (paced sources and the builder's tick
 * sleep well under a millisecond); NULL when libevent cannot make one. */
struct event_base *daemon_base_new(void);

/* Runs the loop until it is exited; SIGTERM and the first SIGINT call
 * stop(arg, signal name) from the loop. */
void daemon_run(struct event_base *base, void (*stop)(void *arg, const char *why), void *arg);

/* The same, and when drain is not NULL SIGUSR2 calls drain(arg, "SIGUSR2")
 * from the loop. */
void daemon_run_drain(struct event_base *base, void (*stop)(void *arg, const char *why),
		      void (*drain)(void *arg, const char *why), void *arg);

#endif
