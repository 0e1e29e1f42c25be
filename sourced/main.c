/* sourced: one readout sector of the event builder. Declares its options
 * (options.c) and wires the source to the event loop; see source.c. */
#include "io/daemon.h"
#include "io/session.h"
#include "options.h"
#include "source.h"

#include <sys/prctl.h>

static void *create(struct event_base *base, const void *opts) { return src_create(base, opts); }
static void stop(void *source, const char *why) { (void)why; src_stop(source); }
static int exit_status(const void *source) { return src_exit_status(source); }
static void destroy(void *source) { src_destroy(source); }

int main(int argc, char **argv)
{
	static struct src_options o;
	const struct daemon_def def = {
		.role = "sourced",
		.synopsis = src_usage_synopsis, .description = src_usage_description,
		.example = src_usage_example,
		.specs = src_option_specs, .n_specs = src_option_count, .opts = &o,
		.quiet = &o.quiet, .log_id = &o.id, .title = "Source", .title_id = &o.id,
		.check = src_options_check,
		.create = create, .stop = stop, .exit_status = exit_status, .destroy = destroy,
		.opts_size = sizeof o, .serve_runs = session_peer_main,
		.session_role = CTL_ROLE_SOURCE, .session_id = &o.id,
	};
	/* Paced sources sleep tens of microseconds: the default 50 us of timer
	 * slack would be most of the tick. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	return daemon_main(&def, argc, argv);
}
