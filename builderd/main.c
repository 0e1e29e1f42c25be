/* builderd: the event builder and the run's control hub. Declares its
 * options (options.c) and wires the run to the event loop: --role both and
 * hub run the hub (run.c), --role builder one builder of several (brun.c);
 * with --session-listen the hub serves many runs (serve_session.h). */
#include "builder/brun.h"
#include "serve/serve.h"
#include "io/daemon.h"
#include "io/session.h"
#include "options.h"
#include "hub/hub.h"

static struct options o;

static bool builder_role(void) { return o.role == ROLE_BUILDER; }

static bool hub_serves(const void *opts)
{
	return ((const struct options *)opts)->session_listen_host[0] != '\0';
}

static void *create(struct event_base *base, const void *opts)
{
	return builder_role() ? (void *)brun_create(base, opts) : (void *)hub_create(base, opts);
}

static void stop(void *run, const char *why)
{
	if (builder_role())
		brun_stop(run, why);
	else
		hub_stop(run, why);
}

/* SIGUSR2: the operator's drained stop; a builder of several has none of
 * its own (its hub stops the sources). */
static void drain(void *run, const char *why)
{
	if (!builder_role())
		hub_stop_drained(run, why);
}

static int exit_status(const void *run)
{
	return builder_role() ? brun_exit_status(run) : hub_exit_status(run);
}

static void destroy(void *run)
{
	if (builder_role())
		brun_destroy(run);
	else
		hub_destroy(run);
}

int main(int argc, char **argv)
{
	const struct daemon_def def = {
		.role = "builderd",
		.synopsis = options_usage_synopsis, .description = options_usage_description,
		.epilogue = options_usage_epilogue, .example = options_usage_example,
		.specs = options_specs, .n_specs = options_count, .opts = &o,
		.quiet = &o.quiet, .title = "Run", .title_id = &o.run_id,
		.check = options_check, .check_listen = options_check_listen,
		.create = create, .stop = stop, .drain = drain, .exit_status = exit_status,
		.destroy = destroy,
		.opts_size = sizeof o, .serve_runs = session_peer_main, .prepare = hub_prepare_builder,
		.session_role = CTL_ROLE_BUILDER, .session_id = &o.builder_id,
		.hub_serves = hub_serves, .hub_main = serve_main,
	};
	return daemon_main(&def, argc, argv);
}
