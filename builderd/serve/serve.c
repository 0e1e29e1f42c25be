/* The serving hub's start (serve.h): the session port and the HTTP
 * endpoint first, then the run listeners kept and the port file, then the
 * runs. */
#include "serve/serve.h"

#include "serve/serve_http.h"
#include "serve/serve_session.h"
#include "options.h"
#include "hub/hub.h"

#include "io/net.h"
#include "sys/log.h"
#include "sys/notify.h"

#include <stdio.h>

int serve_main(const struct daemon_def *def, const struct daemon_options *d,
		   struct event_base *base, int argc, char **argv)
{
	(void)d;
	const struct options *o = def->opts;
	uint16_t session_port = 0, http_port = 0;
	struct serve_session *hs = serve_session_new(def, base, argc, argv, &session_port);
	struct serve_http *http = hs != NULL ? serve_http_new(base, o->control_http_host,
							o->control_http_port, o->console_dir, hs,
							&http_port)
					  : NULL;
	int status = 1;
	if (http != NULL) {
		net_keep_listeners();
		if (hub_prepare_listeners(o, session_port, http_port)) {
			notify_ready("session port open; idle");
			status = serve_session_run(hs);
		}
		else
			log_error("The hub cannot open its run listeners");
	} else {
		log_error("The hub could not start");
	}
	serve_http_free(http);
	serve_session_free(hs);
	net_close_kept();
	return status;
}
