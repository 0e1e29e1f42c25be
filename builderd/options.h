/* builderd's options, declared once: the table --help, the man page and the
 * parsing come from (see sys/opt.h). */
#ifndef ES_BUILDERD_OPTIONS_H
#define ES_BUILDERD_OPTIONS_H

#include "io/daemon.h"
#include "sys/opt.h"

extern const struct opt_spec bd_option_specs[];
extern const size_t bd_option_count;
extern const char bd_usage_synopsis[], bd_usage_description[], bd_usage_epilogue[],
	bd_usage_example[];

/* What no single option can check: readers against sources, --shm-capacity
 * without --shm-listen. */
bool bd_options_check(void *opts, const struct daemon_options *d);

/* Once the run key is loaded: the listeners on loopback unless there is one. */
bool bd_options_check_listen(void *opts, const struct daemon_options *d);

#endif
