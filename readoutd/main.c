/* readoutd: a reader of the event builder. Declares its options
 * (options.c) and wires the reader to the event loop; see lifecycle.c. */
#include "io/daemon.h"
#include "io/session.h"
#include "options.h"
#include "reader.h"

static void *create(struct event_base *base, const void *opts) { return rdr_create(base, opts); }
static void stop(void *reader, const char *why) { (void)why; rdr_stop(reader); }
static int exit_status(const void *reader) { return rdr_exit_status(reader); }
static void destroy(void *reader) { rdr_destroy(reader); }

int main(int argc, char **argv)
{
	static struct rdr_options o;
	const struct daemon_def def = {
		.role = "readoutd",
		.synopsis = rdr_usage_synopsis, .description = rdr_usage_description,
		.example = rdr_usage_example,
		.specs = rdr_option_specs, .n_specs = rdr_option_count, .opts = &o,
		.quiet = &o.quiet, .log_id = &o.id, .title = "Reader", .title_id = &o.id,
		.check = rdr_options_check, .check_listen = rdr_options_check_listen,
		.create = create, .stop = stop, .exit_status = exit_status, .destroy = destroy,
		.opts_size = sizeof o, .serve_runs = session_peer_main,
		.session_role = CTL_ROLE_READER, .session_id = &o.id,
	};
	return daemon_main(&def, argc, argv);
}
