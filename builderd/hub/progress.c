#include "hub/progress.h"

#include "peer.h"
#include "snapshot.h"

#include "core/builder.h"
#include "core/evm.h"
#include "core/hist.h"
#include "sys/log.h"

#include <inttypes.h>
#include <stdlib.h>

struct progress {
	FILE *terminal;            /* NULL: logged */
	bool shown;                /* a line is left on the terminal */
	uint64_t shown_ns;         /* when the last line was shown */
	uint64_t complete_at_shown;
	double rate;               /* completions per second over the last second */
	uint64_t sample_ns;
	uint64_t sample_complete;
};

struct progress *progress_create(uint64_t now, FILE *terminal)
{
	struct progress *p = calloc(1, sizeof *p);
	if (p == NULL)
		return NULL;
	p->terminal = terminal;
	p->shown_ns = now;
	return p;
}

void progress_destroy(struct progress *p)
{
	free(p);
}

void progress_sample(struct progress *p, uint64_t now, uint64_t complete)
{
	if (now - p->sample_ns < 1000000000u)
		return;
	p->rate = (double)(complete - p->sample_complete) * 1e9 / (double)(now - p->sample_ns);
	p->sample_ns = now;
	p->sample_complete = complete;
}

double progress_rate(const struct progress *p)
{
	return p->rate;
}

bool progress_due(const struct progress *p, uint64_t now)
{
	return now - p->shown_ns >= (p->terminal != NULL ? 1000000000u : 5000000000u);
}

void progress_show(struct progress *p, uint64_t now, const struct snapshot *s)
{
	uint64_t complete = s->builder.events_complete;
	double secs = (double)(now - p->shown_ns) / 1e9;
	double rate = secs > 0 ? (double)(complete - p->complete_at_shown) / secs : 0;
	char line[1024];
	progress_line(line, sizeof line, s, rate);
	if (p->terminal != NULL) {
		fprintf(p->terminal, "\r%s\033[K", line);
		fflush(p->terminal);
		p->shown = true;
	} else {
		log_info("%s", line);
	}
	p->shown_ns = now;
	p->complete_at_shown = complete;
}

void progress_end(struct progress *p)
{
	if (p->shown)
		fputc('\n', p->terminal);
	p->shown = false;
}

/* Role hub: "; backlog N; b0 4800/s 9728 built, 3000 tokens, 1096/1200 held/cap; ..."
 * (each builder's rate and events from its STATS, the rest the manager's). */
static void progress_builders(char *line, size_t size, const struct snapshot *s)
{
	int n = snprintf(line, size, "; backlog %" PRIu64, s->assignment_backlog);
	for (uint32_t k = 0; k < s->opt->builders && k < EVM_MAX_BUILDERS && n > 0 && (size_t)n < size;
	     k++) {
		const struct peer *p = peer_builder(s->peers, k);
		const struct evm_builder_view v = s->builder_views[k];
		n += snprintf(line + n, size - (size_t)n,
			      "; b%u %" PRIu64 "/s %" PRIu64 " built, %u tokens, %" PRIu64 "/%" PRIu64
			      " held/cap%s", k, p->report != NULL ? 0 : p->live.events_per_s,
			      p->live.events_complete, v.tokens, v.in_flight, v.cap,
			      v.dead ? " (lost)" : "");
	}
}

void progress_line(char *line, size_t size, const struct snapshot *s, double rate)
{
	const struct bld_counters *c = &s->builder;
	uint64_t expected = s->opt->events;
	char complete[48] = "", eta[32] = "", p99[32] = "n/a";
	if (expected > 0) {
		snprintf(complete, sizeof complete, ", %.1f%% complete",
			 100.0 * (double)c->events_complete / (double)expected);
		uint64_t done = c->events_complete + c->events_expired + c->events_unobserved;
		if (rate > 0 && done < expected)
			snprintf(eta, sizeof eta, ", ETA %.0f s", (double)(expected - done) / rate);
	}
	const struct hist *lat = s->latency;
	if (lat != NULL && lat->samples > 0)
		snprintf(p99, sizeof p99, "%.3f ms", (double)hist_quantile(lat, 0.99) / 1e6);
	uint64_t oldest = s->oldest_pending;
	char pending[64] = "";
	if (oldest != UINT64_MAX)
		snprintf(pending, sizeof pending, " (oldest %" PRIu64 ")", oldest);
	char limit[40] = "off";
	if (!s->opt->no_admission)
		snprintf(limit, sizeof limit, "%" PRIu64, s->admission_limit);
	/* Summed as doubles: peers' counters must not wrap the line's figure. */
	double held_ns = 0;
	for (uint32_t r = 0; r < s->opt->readers; r++)
		held_ns += (double)peer_reader(s->peers, r)->held_ns;
	int n = snprintf(line, size,
			 "Run %u: %" PRIu64 " built (%.0f/s), %" PRIu64 " accepted, %" PRIu64
			 " expired%s, %u pending%s, limit %s, readers held %.1f ms, p99 %s%s",
			 s->opt->run_id, c->events_complete, rate, c->events_accepted,
			 c->events_expired, complete, s->pending, pending, limit, held_ns / 1e6, p99,
			 eta);
	if (s->hub && n > 0 && (size_t)n < size)
		progress_builders(line + n, size - (size_t)n, s);
}
