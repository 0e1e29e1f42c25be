#include "daemon.h"

#include "auth.h"
#include "clk.h"
#include "log.h"

#include <event2/event.h>
#include <signal.h>

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
