/* The serving hub's start (hubserve.h): the session port and the HTTP
 * endpoint first, then the run listeners kept and the port file, then the
 * runs. */
#include "serve/hubserve.h"

#include "serve/hubhttp.h"
#include "serve/hubsession.h"
#include "options.h"
#include "hub/run.h"

#include "io/net.h"
#include "sys/log.h"
#include "sys/notify.h"

#include <stdio.h>

int hub_serve_main(const struct daemon_def *def, const struct daemon_options *d,
		   struct event_base *base, int argc, char **argv)
{
	(void)d;
	const struct bd_options *o = def->opts;
	uint16_t session_port = 0, http_port = 0;
	struct hub_session *hs = hub_session_new(def, base, argc, argv, &session_port);
	struct hubhttp *http = hs != NULL ? hubhttp_new(base, o->control_http_host,
							o->control_http_port, hs, &http_port)
					  : NULL;
	int status = 1;
	if (http != NULL) {
		net_keep_listeners();
		if (bd_prepare_listeners(o, session_port, http_port)) {
			notify_ready("session port open; idle");
			status = hub_session_run(hs);
		}
		else
			log_error("The hub cannot open its run listeners");
	} else {
		log_error("The hub could not start");
	}
	hubhttp_free(http);
	hub_session_free(hs);
	net_close_kept();
	return status;
}
