/* builderd --session-listen: the hub serving many runs, its session and
 * its operator's endpoint wired together (docs/RUNCONTROL.md). */
#ifndef ES_BD_SERVE_H
#define ES_BD_SERVE_H

#include "io/daemon.h"

/* The whole of main() for a serving hub (daemon_def.hub_main). */
int serve_main(const struct daemon_def *def, const struct daemon_options *d,
		   struct event_base *base, int argc, char **argv);

#endif
