/* readoutd's options, declared once: the table --help, the man page and the
 * parsing come from (see sys/opt.h). */
#ifndef ES_READOUTD_OPTIONS_H
#define ES_READOUTD_OPTIONS_H

#include "io/daemon.h"
#include "sys/opt.h"

extern const struct opt_spec rdr_option_specs[];
extern const size_t rdr_option_count;
extern const char rdr_usage_synopsis[], rdr_usage_description[], rdr_usage_example[];

/* What no single option can check: --shm-inject needs an shm:// builder. */
bool rdr_options_check(void *opts, const struct daemon_options *d);

/* Once the run key is loaded: --listen on loopback unless there is one. */
bool rdr_options_check_listen(void *opts, const struct daemon_options *d);

#endif
