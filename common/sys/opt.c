#include "sys/opt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void opt_error(const char *flag, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", flag);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool opt_u64(const char *flag, const char *arg, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (arg == NULL || arg[0] == '\0' || arg[0] == '-')
		goto bad;
	unsigned long long v = strtoull(arg, &end, 10);
	if (errno != 0 || end == arg)
		goto bad;
	uint64_t mult = 1;
	if (strcmp(end, "k") == 0)
		mult = 1000;
	else if (strcmp(end, "M") == 0)
		mult = 1000000;
	else if (strcmp(end, "G") == 0)
		mult = 1000000000;
	else if (strcmp(end, "Ki") == 0)
		mult = 1024;
	else if (strcmp(end, "Mi") == 0)
		mult = 1024 * 1024;
	else if (*end != '\0')
		goto bad;
	if (v > UINT64_MAX / mult)
		goto bad;
	v *= mult;
	if (v < min || v > max)
		goto bad;
	*out = v;
	return true;
bad:
	opt_error(flag, "expected an integer from %" PRIu64 " to %" PRIu64 ", got '%s'", min, max,
		  arg ? arg : "");
	return false;
}

bool opt_u32(const char *flag, const char *arg, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	if (!opt_u64(flag, arg, min, max, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

bool opt_i64(const char *flag, const char *arg, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(arg, &end, 10);
	if (errno != 0 || end == arg || *end != '\0') {
		opt_error(flag, "expected a signed integer, got '%s'", arg);
		return false;
	}
	*out = v;
	return true;
}

bool opt_hostport(const char *flag, const char *arg, char *host, size_t host_len,
		  uint16_t *port, bool allow_zero)
{
	const char *colon;
	const char *h = arg;
	size_t hl;
	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');
		if (close == NULL || close[1] != ':')
			goto bad;
		h = arg + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(arg, ':');
		if (colon == NULL)
			goto bad;
		hl = (size_t)(colon - arg);
	}
	if (hl == 0 || hl >= host_len)
		goto bad;
	uint64_t p;
	char *end;
	errno = 0;
	p = strtoull(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || p > 65535 || (p == 0 && !allow_zero))
		goto bad;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return true;
bad:
	opt_error(flag, "expected HOST:PORT with a port from %d to 65535, got '%s'",
		  allow_zero ? 0 : 1, arg);
	return false;
}

bool opt_id_list(const char *flag, const char *arg, uint16_t *ids, size_t cap, size_t *count,
		 uint32_t limit)
{
	size_t n = 0;
	const char *p = arg;
	while (*p != '\0') {
		char *end;
		errno = 0;
		unsigned long lo = strtoul(p, &end, 10), hi;
		if (errno != 0 || end == p)
			goto bad;
		hi = lo;
		if (*end == '-') {
			p = end + 1;
			hi = strtoul(p, &end, 10);
			if (errno != 0 || end == p || hi < lo)
				goto bad;
		}
		if (hi >= limit) {
			opt_error(flag, "ID %lu is out of range: IDs go from 0 to %u", hi,
				  (unsigned)(limit - 1));
			return false;
		}
		for (unsigned long v = lo; v <= hi; v++) {
			for (size_t i = 0; i < n; i++) {
				if (ids[i] == v) {
					opt_error(flag, "ID %lu is listed twice in '%s'", v, arg);
					return false;
				}
			}
			if (n == cap) {
				opt_error(flag, "more than %zu IDs in '%s'", cap, arg);
				return false;
			}
			ids[n++] = (uint16_t)v;
		}
		if (*end == ',')
			end++;
		else if (*end != '\0')
			goto bad;
		p = end;
	}
	if (n == 0)
		goto bad;
	*count = n;
	return true;
bad:
	opt_error(flag, "expected a comma-separated list of IDs or ranges such as 0,1,4-7, got '%s'",
		  arg);
	return false;
}

bool opt_kind_at(const char *arg, const char *const *names, size_t count, size_t *kind,
		 uint64_t *after)
{
	const char *at = strchr(arg, '@');
	size_t n = at ? (size_t)(at - arg) : strlen(arg);
	for (size_t i = 0; i < count; i++) {
		if (strlen(names[i]) != n || strncmp(arg, names[i], n) != 0)
			continue;
		*kind = i;
		*after = 0;
		if (at == NULL)
			return true;
		/* strtoull alone would take " 5", "+5" and "-5". */
		if (at[1] < '0' || at[1] > '9')
			return false;
		char *end;
		errno = 0;
		*after = strtoull(at + 1, &end, 10);
		return *end == '\0' && errno == 0;
	}
	return false;
}
