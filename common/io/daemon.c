#include "io/daemon.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"
#include "sys/opt.h"

#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>

struct daemon_stop {
	struct event_base *base;
	void (*stop)(void *arg, const char *why);
	void *arg;
	int signals;
};

/* Signals only set intent; the loop acts on it here. */
static void daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct daemon_stop *d = arg;
	if (++d->signals > 1 && sig == SIGINT) {
		log_warn("Second interrupt: exiting now");
		event_base_loopbreak(d->base);
		return;
	}
	d->stop(d->arg, sig == SIGINT ? "interrupted" : "terminated");
}

struct event_base *daemon_base_new(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct event_config *cfg = event_config_new();
	if (cfg == NULL)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	struct event_base *base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

void daemon_run(struct event_base *base, void (*stop)(void *arg, const char *why), void *arg)
{
	struct daemon_stop d = { .base = base, .stop = stop, .arg = arg };
	struct event *sigterm = evsignal_new(base, SIGTERM, daemon_on_signal, &d);
	struct event *sigint = evsignal_new(base, SIGINT, daemon_on_signal, &d);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	event_base_dispatch(base);
	event_free(sigterm);
	event_free(sigint);
}

enum daemon_option_result daemon_take_option(struct daemon_options *d, int code, const char *arg)
{
	switch (code) {
	case DAEMON_OPT_CLOCK_OFFSET:
		return opt_i64("--clock-offset-ns", arg, &d->clock_offset_ns) ? DAEMON_OPTION_TAKEN
									    : DAEMON_OPTION_BAD;
	case DAEMON_OPT_QUIET:
		d->quiet = true;
		return DAEMON_OPTION_TAKEN;
	case DAEMON_OPT_RUN_KEY:
		d->run_key_file = arg;
		return DAEMON_OPTION_TAKEN;
	case DAEMON_OPT_HELP:
		d->usage(stdout);
		exit(0);
	case DAEMON_OPT_VERSION:
		printf("%s %s\n", d->role, ES_VERSION);
		exit(0);
	default:
		return DAEMON_OPTION_NOT_COMMON;
	}
}

bool daemon_options_complete(const struct daemon_options *d, int argc, char **argv,
			     const char *missing)
{
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", d->role, argv[optind]);
		return false;
	}
	if (missing != NULL) {
		fprintf(stderr, "%s: %s is required (see --help)\n", d->role, missing);
		return false;
	}
	return true;
}

bool daemon_listen_allowed(const struct daemon_options *d, const char *flag, const char *host)
{
	if (auth_have_key() || net_host_is_loopback(host))
		return true;
	fprintf(stderr, "%s: %s %s is not a loopback address: without a run key only peers on "
		"this host could connect; give --run-key-file (the same file on every host)\n",
		d->role, flag, host);
	return false;
}

bool daemon_apply_common(const char *run_key_file, int64_t clock_offset_ns)
{
	if (run_key_file != NULL && auth_load_key_file(run_key_file) < 0)
		return false;
	clk_set_offset_ns(clock_offset_ns);
	return true;
}

void daemon_start_log(const char *role, int id, bool quiet)
{
	log_init(role, id, quiet ? LOG_LEVEL_WARN : LOG_LEVEL_INFO);
	if (!auth_have_key())
		log_info("No run key: accepting peers on this host only");
}
