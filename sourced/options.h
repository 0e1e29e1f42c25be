/* sourced's options, declared once: the table --help, the man page and the
 * parsing come from (see sys/opt.h). */
#ifndef ES_SOURCED_OPTIONS_H
#define ES_SOURCED_OPTIONS_H

#include "io/daemon.h"
#include "sys/opt.h"

extern const struct opt_spec src_option_specs[];
extern const size_t src_option_count;
extern const char src_usage_synopsis[], src_usage_description[], src_usage_example[];

/* What no single option can check: --delay-every needs --delay-ms. */
bool src_options_check(void *opts, const struct daemon_options *d);

#endif
