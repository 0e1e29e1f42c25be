/* Option parsing helpers: every bad value is reported with the flag's name,
 * what was expected and what was given, so a daemon's usage errors read
 * "--rate: expected an integer from 0 to 100000000, got 'fast'". */
#ifndef ES_SYS_OPT_H
#define ES_SYS_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Unsigned integer in [min, max]; accepts k/M/G suffixes (x1000) for
 * counts and Ki/Mi suffixes (x1024) for sizes. */
bool opt_u64(const char *flag, const char *arg, uint64_t min, uint64_t max, uint64_t *out);
bool opt_u32(const char *flag, const char *arg, uint32_t min, uint32_t max, uint32_t *out);
bool opt_i64(const char *flag, const char *arg, int64_t *out);

/* HOST:PORT (host may be a name, IPv4, or [IPv6]); port 0 allowed when
 * allow_zero. */
bool opt_hostport(const char *flag, const char *arg, char *host, size_t host_len,
		  uint16_t *port, bool allow_zero);

/* Comma list of IDs and ranges ("0,1,4-7") into ids (capacity cap), each
 * below limit, no repeats. */
bool opt_id_list(const char *flag, const char *arg, uint16_t *ids, size_t cap, size_t *count,
		 uint32_t limit);

/* KIND or KIND@N, KIND one of names[0..count): *kind its index, *after N
 * (0 without "@N"). False for another KIND, an N that is not decimal
 * digits or does not fit 64 bits. */
bool opt_kind_at(const char *arg, const char *const *names, size_t count, size_t *kind,
		 uint64_t *after);

/* Reports a usage error (flag and message) on stderr. */
void opt_error(const char *flag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
