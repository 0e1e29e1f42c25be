#include "io/daemon.h"

#include "sys/auth.h"
#include "sys/clock.h"
#include "sys/log.h"
#include "io/net.h"
#include "sys/opt.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>

struct daemon_stop {
	struct event_base *base;
	void (*stop)(void *arg, const char *why);
	void (*drain)(void *arg, const char *why);
	void *arg;
	int signals;
};

/* Signals only set intent; the loop acts on it here. */
static void daemon_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct daemon_stop *d = arg;
	if (sig == SIGUSR2) {
		d->drain(d->arg, "SIGUSR2");
		return;
	}
	if (++d->signals > 1 && sig == SIGINT) {
		log_warn("Second interrupt: exiting now");
		event_base_loopbreak(d->base);
		return;
	}
	d->stop(d->arg, sig == SIGINT ? "interrupted" : "terminated");
}

static bool daemon_port_printed(const struct daemon_port *p)
{
	return p->host != NULL && p->port != 0;
}

int daemon_announce(const struct daemon_port *ports, size_t count, const char *port_file)
{
	bool shared_line = false;
	for (size_t i = 0; i < count; i++)
		if (daemon_port_printed(&ports[i]) && !ports[i].own_line) {
			printf("%s %s %s:%u", shared_line ? "" : "listening", ports[i].name,
			       ports[i].host, (unsigned)ports[i].port);
			shared_line = true;
		}
	if (shared_line)
		putchar('\n');
	for (size_t i = 0; i < count; i++)
		if (daemon_port_printed(&ports[i]) && ports[i].own_line)
			printf("listening %s %s:%u\n", ports[i].name, ports[i].host,
			       (unsigned)ports[i].port);
	fflush(stdout);
	if (port_file == NULL || port_file[0] == '\0')
		return 0;
	struct net_port written[8];
	if (count > sizeof written / sizeof written[0]) {
		log_error("Cannot write port file %s: %zu ports, at most %zu", port_file, count,
			  sizeof written / sizeof written[0]);
		return -E2BIG;
	}
	for (size_t i = 0; i < count; i++)
		written[i] = (struct net_port){ ports[i].name, ports[i].port };
	return net_write_ports(port_file, written, count);
}

struct event_base *daemon_base_new(void)
{
	signal(SIGPIPE, SIG_IGN);
	struct event_config *cfg = event_config_new();
	if (cfg == NULL)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	/* A link that ends its turn with work left activates itself again;
	 * libevent would run it again in the same pass, before any timer or
	 * socket, for as long as it has work. After 5 ms of callbacks the loop
	 * polls first: a busy builder still answers its hub and ticks. */
	const struct timeval turn = { 0, 5000 };
	event_config_set_max_dispatch_interval(cfg, &turn, -1, 0);
	struct event_base *base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

void daemon_run(struct event_base *base, void (*stop)(void *arg, const char *why), void *arg)
{
	daemon_run_drain(base, stop, NULL, arg);
}

void daemon_run_drain(struct event_base *base, void (*stop)(void *arg, const char *why),
		      void (*drain)(void *arg, const char *why), void *arg)
{
	struct daemon_stop d = { .base = base, .stop = stop, .drain = drain, .arg = arg };
	struct event *sigterm = evsignal_new(base, SIGTERM, daemon_on_signal, &d);
	struct event *sigint = evsignal_new(base, SIGINT, daemon_on_signal, &d);
	struct event *sigusr2 = drain != NULL ? evsignal_new(base, SIGUSR2, daemon_on_signal, &d) : NULL;
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	if (sigusr2 != NULL)
		evsignal_add(sigusr2, NULL);
	event_base_dispatch(base);
	event_free(sigterm);
	event_free(sigint);
	if (sigusr2 != NULL)
		event_free(sigusr2);
}

const struct opt_spec daemon_option_specs[] = {
	OPT_STRING_REF("run-key-file", "PATH", struct daemon_options, run_key_file,
		.fixed = true, .group = "Security",
		.help = "secret shared by every daemon of the run (16+ bytes);\n"
			"without it only peers on this host are accepted"),
	OPT_HOSTPORT("session", "HOST:PORT", struct daemon_options, session_host, session_port, 1,
		     .fixed = true, .group = "Run control",
		     .help = "serve many runs: join the hub's session there and make a run\n"
			     "at each configure (docs/RUNCONTROL.md)"),
	OPT_UINT("session-ignore-configure", "RUN", struct daemon_options,
		 session_ignore_configure, 1, UINT32_MAX, .fixed = true, .group = "Testing",
		 .help = "test hook with --session: make run RUN's object at its\n"
			 "configure but never answer it (a peer the hub must name)"),
	OPT_INT("clock-offset-ns", "N", struct daemon_options, clock_offset_ns, .group = "Other",
		.help = "add N ns to every clock reading (an unsynchronised host)"),
	OPT_FLAG("quiet", struct daemon_options, quiet, .help = "log warnings and errors only"),
	{ .name = "help", .kind = OPT_KIND_HELP, .label = "--help, --version", .help = "" },
	{ .name = "version", .kind = OPT_KIND_VERSION },
};
const size_t daemon_option_count = sizeof daemon_option_specs / sizeof daemon_option_specs[0];

bool daemon_listen_allowed(const struct daemon_options *d, const char *flag, const char *host)
{
	if (auth_have_key() || net_host_is_loopback(host))
		return true;
	fprintf(stderr, "%s: %s %s is not a loopback address: without a run key only peers on "
		"this host could connect; give --run-key-file (the same file on every host)\n",
		d->role, flag, host);
	return false;
}

/* The settings every daemon shares, applied once its options are parsed:
 * the run key (NULL: none) and the injected clock offset. false when the
 * key cannot be loaded (the reason is printed). */
static bool daemon_apply_common(const char *run_key_file, int64_t clock_offset_ns)
{
	if (run_key_file != NULL && auth_load_key_file(run_key_file) < 0)
		return false;
	clk_set_offset_ns(clock_offset_ns);
	return true;
}

/* An environment variable's value for the log ("-" when unset); the log
 * escapes whatever it holds. */
static const char *daemon_env(const char *name)
{
	const char *value = getenv(name);
	return value != NULL ? value : "-";
}

/* Starts logging as role[id] (id < 0: none) and says when there is no run
 * key, so a person knows only local peers can connect. Started as a Slurm
 * job step, it names the job, step and node first: the log then shows
 * where the batch system placed it. */
static void daemon_start_log(const char *role, int id, bool quiet)
{
	log_init(role, id, quiet ? LOG_LEVEL_NOTE : LOG_LEVEL_INFO);
	if (getenv("SLURM_JOB_ID") != NULL)
		log_note("Slurm job step: SLURM_JOB_ID=%s SLURM_STEP_ID=%s SLURMD_NODENAME=%s",
			 daemon_env("SLURM_JOB_ID"), daemon_env("SLURM_STEP_ID"),
			 daemon_env("SLURMD_NODENAME"));
	if (!auth_have_key())
		log_info("No run key: accepting peers on this host only");
}

int daemon_main(const struct daemon_def *def, int argc, char **argv)
{
	struct daemon_options d = { .role = def->role };
	const struct opt_table tables[] = {
		{ def->specs, def->n_specs, def->opts },
		{ daemon_option_specs, daemon_option_count, &d },
	};
	const struct opt_program prog = {
		.name = def->role, .version = ES_VERSION, .synopsis = def->synopsis,
		.description = def->description, .epilogue = def->epilogue, .example = def->example,
		.tables = tables, .n_tables = 2,
	};
	enum opt_result parsed = opt_parse(&prog, argc, argv);
	if (parsed != OPT_RESULT_OK)
		return parsed == OPT_RESULT_DONE ? 0 : 2;
	*def->quiet = d.quiet;
	if (def->check != NULL && !def->check(def->opts, &d))
		return 2;
	if (!daemon_apply_common(d.run_key_file, d.clock_offset_ns))
		return 2;
	if (def->check_listen != NULL && !def->check_listen(def->opts, &d))
		return 2;
	daemon_start_log(def->role, def->log_id ? (int)*def->log_id : -1, d.quiet);
	if (d.session_port != 0 && def->serve_runs == NULL) {
		fprintf(stderr, "%s: --session: this daemon does not serve many runs yet\n", def->role);
		return 2;
	}
	struct event_base *base = daemon_base_new();
	if (base != NULL && def->hub_serves != NULL && def->hub_serves(def->opts)) {
		int status = def->hub_main(def, &d, base, argc, argv);
		event_base_free(base);
		return status;
	}
	if (base != NULL && d.session_port != 0) {
		int status = def->serve_runs(def, &d, base, argc, argv);
		event_base_free(base);
		return status;
	}
	void *daemon = base ? def->create(base, def->opts) : NULL;
	if (daemon == NULL) {
		log_error("%s %u could not start", def->title, *def->title_id);
		if (base)
			event_base_free(base);
		return 1;
	}
	daemon_run_drain(base, def->stop, def->drain, daemon);
	int status = def->exit_status(daemon);
	def->destroy(daemon);
	event_base_free(base);
	return status;
}
