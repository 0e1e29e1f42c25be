#include "hub/hub_internal.h"
#include "report/rundir.h"

#include "hub/ctlport.h"
#include "hub/fleet.h"
#include "data/ingest.h"
#include "report/live.h"
#include "hub/manager.h"
#include "report/metrics.h"
#include "hub/progress.h"
#include "snapshot.h"

#include "core/evm.h"
#include "io/daemon.h"
#include "io/net.h"
#include "io/prom.h"
#include "sys/log.h"
#include "sys/procstat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Events decided so far: the core's complete ones, or in role hub what the
 * builders' tokens said. */
uint64_t hub_events_done(const struct hub *b)
{
	if (!b->role_hub)
		return ingest_counters(b->ing)->events_complete;
	uint64_t n = 0;
	for (uint32_t k = 0; k < b->opt.builders; k++) {
		struct evm_builder_view v;
		if (manager_builder_view(b->mgr, k, &v))
			n += v.decided;
	}
	return n;
}


/* The run's figures for a report: the hub's own, then the data side's.
 * self (may be NULL) gets the builder process's own counters. */
void hub_snapshot_fill(struct hub *b, struct snapshot *s, struct ctl_report *self)
{
	*s = (struct snapshot){
		.opt = &b->opt,
		.running = b->phase == HUB_RUNNING,
		.status = b->status,
		.peers = &b->peers,
		.errors = (const char *const *)b->errors,
		.error_count = b->error_count,
		.errors_dropped = b->errors_dropped,
		.credits_sent = b->credits_sent,
		.recent_events_per_s = progress_rate(b->prog),
		.started_ns = b->started_ns,
		.first_built_ns = b->first_built_ns,
		.drain_ns = b->drain_ns,
		.fault_ns = b->fault_ns,
		.drain_proposed = b->drain_proposed,
		.drain_last_event = b->drain_last_event,
		.books_ns = b->books_ns,
		.links = b->snap_links,
		.clocks = b->clocks,
		.self = self,
		.self_pid = (uint32_t)getpid(),
		.self_host = b->host,
		.self_peak_rss_kib = procstat_peak_rss_kib(),
	};
	ctlport_snapshot(b->ctlport, s);
	if (b->role_hub)
		fleet_snapshot(b->fleet, s);
	else
		ingest_snapshot(b->ing, s);
	if (b->mgr != NULL)
		manager_snapshot(b->mgr, s);
}

static void hub_fill_live(struct evbuffer *out, bool json, void *arg)
{
	struct snapshot s;
	hub_snapshot_fill(arg, &s, NULL);
	live_fill(out, json, &s);
}

json_t *hub_live_json(struct hub *b)
{
	struct snapshot s;
	hub_snapshot_fill(b, &s, NULL);
	return live_json(&s);
}

/* metrics.json and the summary. */
void hub_report(struct hub *b, const struct acct *a)
{
	struct ctl_report *self = calloc(1, sizeof *self);
	if (self != NULL)
		procstat_report(self);
	struct snapshot snap;
	hub_snapshot_fill(b, &snap, self);
	if (metrics_write(&snap, a) < 0)
		b->status = 1;
	else
		rundir_end(b->opt.out_dir);
	snap.status = b->status;
	metrics_print_summary(stdout, &snap, a);
	fflush(stdout);
	free(self);
}


/* The port file and the "listening" lines the launcher reads back; a hub
 * (data_port 0) has no data port. */
int hub_announce(struct hub *b, uint16_t data_port, uint16_t control_port)
{
	const struct options *opt = &b->opt;
	uint16_t metrics_port = 0;
	if (opt->metrics_host[0] != '\0') {
		b->prom = prom_server_start(b->base, opt->metrics_host, opt->metrics_port,
					    hub_fill_live, b, &metrics_port);
		if (b->prom == NULL)
			return -EADDRNOTAVAIL;
	}
	const struct daemon_port ports[] = {
		{ "data", opt->listen_hosts[0], b->role_hub ? 0 : data_port, false },
		{ "control", opt->control_host, control_port, false },
		{ "metrics", opt->metrics_host, metrics_port, true },
	};
	/* A serving hub wrote its port file once, at start (hub_prepare_listeners). */
	return daemon_announce(ports, 3, opt->session_listen_host[0] == '\0' ? opt->port_file : NULL);
}

/* One kept listener opened and its descriptor closed: the socket stays. */
static bool hub_keep_one(const char *host, uint16_t port, uint16_t *bound)
{
	int fd = net_listen(host, port, bound);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* The data port's listeners, one per rail, all on rail 0's port. */
static bool hub_keep_data(const struct options *opt, uint16_t *data_port)
{
	uint16_t rail_port = 0;
	*data_port = 0;
	for (uint32_t k = 0; k < opt->listen_count; k++) {
		if (!hub_keep_one(opt->listen_hosts[k], k == 0 ? opt->listen_port : *data_port,
				 &rail_port))
			return false;
		if (k == 0)
			*data_port = rail_port;
	}
	return true;
}

static bool hub_keep_metrics(const struct options *opt, uint16_t *metrics_port)
{
	*metrics_port = 0;
	return opt->metrics_host[0] == '\0' ||
	       hub_keep_one(opt->metrics_host, opt->metrics_port, metrics_port);
}

bool hub_prepare_listeners(const struct options *opt, uint16_t session_port, uint16_t http_port)
{
	uint16_t data_port = 0, control_port = 0, metrics_port = 0;
	bool hub = opt->role == ROLE_HUB;
	if ((!hub && !hub_keep_data(opt, &data_port)) ||
	    !hub_keep_one(opt->control_host, opt->control_port, &control_port) ||
	    !hub_keep_metrics(opt, &metrics_port))
		return false;
	/* Each run announces its data, control and metrics ports as it starts. */
	const struct daemon_port ports[] = {
		{ "data", NULL, data_port, false }, { "control", NULL, control_port, false },
		{ "metrics", NULL, metrics_port, false },
		{ "session", opt->session_listen_host, session_port, false },
		{ "http", opt->control_http_host, http_port, false },
	};
	return daemon_announce(ports, 5, opt->port_file) >= 0;
}

bool hub_prepare_builder(void *opts)
{
	const struct options *opt = opts;
	uint16_t data_port, metrics_port;
	if (!hub_keep_data(opt, &data_port) || !hub_keep_metrics(opt, &metrics_port))
		return false;
	const struct daemon_port ports[] = { { "data", opt->listen_hosts[0], data_port, false },
					     { "metrics", NULL, metrics_port, false } };
	return daemon_announce(ports, 2, opt->port_file) >= 0;
}

void hub_log_waiting(const struct hub *b)
{
	const struct options *opt = &b->opt;
	if (opt->quiet)
		return;
	if (b->role_hub)
		log_info("Run %u: waiting for %u sources, %u readers and %u builders; %s routing, batches of %u events, %u live at most",
			 opt->run_id, opt->sources, opt->readers, opt->builders,
			 ctl_routing_mode_name((enum ctl_routing_mode)opt->routing), opt->batch,
			 opt->window_batches);
	else
		log_info("Run %u: waiting for %u sources and %u readers; window %u events, timeout %" PRIu64
			 " ms, admission %s", opt->run_id, opt->sources, opt->readers, opt->max_inflight,
			 opt->timeout_ms, opt->no_admission ? "off" : "on");
}

/* What the serving session reads of a run that is over. */
bool hub_books_balanced(const struct hub *b)
{
	return b->books_balanced;
}

uint64_t hub_events_decided(const struct hub *b)
{
	return hub_events_done(b);
}

int hub_exit_status(const struct hub *b)
{
	return b->status;
}
