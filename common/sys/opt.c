#include "sys/opt.h"

#include <errno.h>
#include <getopt.h>
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

/* ---- Options declared once ------------------------------------------- */

static bool opt_store_uint(void *field, size_t size, uint64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)field = (uint8_t)v; return true;
	case 2: *(uint16_t *)field = (uint16_t)v; return true;
	case 4: *(uint32_t *)field = (uint32_t)v; return true;
	case 8: *(uint64_t *)field = v; return true;
	default: return false;
	}
}

static bool opt_double(const char *flag, const char *arg, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno != 0 || end == arg || *end != '\0' || !(v >= min && v <= max)) {
		opt_error(flag, "expected a number from %g to %g, got '%s'", min, max, arg);
		return false;
	}
	*out = v;
	return true;
}

static bool opt_choice(const char *flag, const char *arg, const char *const *choices, int *out)
{
	for (int i = 0; choices[i] != NULL; i++) {
		if (strcmp(arg, choices[i]) == 0) {
			*out = i;
			return true;
		}
	}
	char list[256];
	size_t n = 0;
	list[0] = '\0';
	for (int i = 0; choices[i] != NULL && n < sizeof list; i++)
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
	opt_error(flag, "expected one of %s, got '%s'", list, arg);
	return false;
}

/* Parses one argument of spec s into the table's struct; flag is "--name". */
static bool opt_take(const struct opt_spec *s, const char *flag, const char *arg, void *opts)
{
	char *field = (char *)opts + s->offset;
	switch (s->kind) {
	case OPT_KIND_UINT: {
		uint64_t v;
		return opt_u64(flag, arg, s->min, s->max, &v) && opt_store_uint(field, s->size, v);
	}
	case OPT_KIND_INT:
		return opt_i64(flag, arg, (int64_t *)(void *)field);
	case OPT_KIND_DOUBLE:
		return opt_double(flag, arg, s->dmin, s->dmax, (double *)(void *)field);
	case OPT_KIND_STRING:
		if (strlen(arg) >= s->size) {
			opt_error(flag, "expected at most %zu bytes, got '%s'", s->size - 1, arg);
			return false;
		}
		memcpy(field, arg, strlen(arg) + 1);
		return true;
	case OPT_KIND_STRING_REF:
		*(const char **)(void *)field = arg;
		return true;
	case OPT_KIND_HOSTPORT:
		return opt_hostport(flag, arg, field, s->size, (uint16_t *)(void *)((char *)opts + s->aux),
				    s->min == 0);
	case OPT_KIND_FLAG:
		*(bool *)(void *)field = true;
		return true;
	case OPT_KIND_CHOICE:
		return opt_choice(flag, arg, s->choices, (int *)(void *)field);
	case OPT_KIND_CUSTOM:
		return s->parse(flag, arg, opts);
	case OPT_KIND_HELP:
	case OPT_KIND_VERSION:
	case OPT_KIND_NOTE:
		break;
	}
	return false;
}

/* "  --name ARG" padded to the help column, or followed by two spaces when
 * it reaches past it. */
#define OPT_HELP_COLUMN 26

static void opt_usage_entry(const struct opt_spec *s, FILE *out)
{
	char left[128];
	if (s->label != NULL)
		snprintf(left, sizeof left, "%s", s->label);
	else
		snprintf(left, sizeof left, "--%s%s%s", s->name, s->arg ? " " : "", s->arg ? s->arg : "");
	int n = fprintf(out, "  %s", left);
	if (s->help[0] == '\0') {
		fputc('\n', out);
		return;
	}
	fprintf(out, "%*s", n + 2 <= OPT_HELP_COLUMN ? OPT_HELP_COLUMN - n : 2, "");
	for (const char *p = s->help; *p != '\0'; p++) {
		if (*p == '\n') {
			fprintf(out, "\n%*s", OPT_HELP_COLUMN, "");
		} else if (*p == '{' && strncmp(p, "{default}", 9) == 0 && s->def != NULL) {
			fputs(s->def, out);
			p += 8;
		} else {
			fputc(*p, out);
		}
	}
	fputc('\n', out);
}

void opt_usage(const struct opt_program *p, FILE *out)
{
	fprintf(out, "Usage: %s ", p->name);
	for (const char *c = p->synopsis; *c != '\0'; c++) {
		if (*c == '\n')
			fprintf(out, "\n%*s", (int)strlen("Usage: ") + (int)strlen(p->name) + 1, "");
		else
			fputc(*c, out);
	}
	fprintf(out, "\n%s\n\n", p->description);
	for (size_t t = 0; t < p->n_tables; t++) {
		const struct opt_table *tab = &p->tables[t];
		for (size_t i = 0; i < tab->count; i++) {
			const struct opt_spec *s = &tab->specs[i];
			if (s->group != NULL)
				fprintf(out, "%s:\n", s->group);
			if (s->help != NULL)
				opt_usage_entry(s, out);
		}
	}
	if (p->epilogue != NULL)
		fputs(p->epilogue, out);
	fprintf(out, "\nExample:\n%s", p->example);
}

/* Entry i of all the program's tables together; NULL past the end. */
static const struct opt_spec *opt_nth(const struct opt_program *p, size_t i, void **opts)
{
	for (size_t t = 0; t < p->n_tables; t++) {
		if (i < p->tables[t].count) {
			*opts = p->tables[t].opts;
			return &p->tables[t].specs[i];
		}
		i -= p->tables[t].count;
	}
	return NULL;
}

static void opt_flag_name(const struct opt_spec *s, char *flag, size_t len)
{
	snprintf(flag, len, "--%s", s->name);
}

static bool opt_record_add(const struct opt_program *p, struct opt_record *rec, size_t spec,
			   const char *arg)
{
	if (rec->count == OPT_RECORD_MAX) {
		fprintf(stderr, "%s: more than %u options given\n", p->name, OPT_RECORD_MAX);
		return false;
	}
	rec->given[rec->count].spec = (uint16_t)spec;
	rec->given[rec->count].arg = arg != NULL ? arg : "";
	rec->count++;
	return true;
}

enum opt_result opt_parse(const struct opt_program *p, int argc, char **argv)
{
	return opt_parse_recorded(p, argc, argv, NULL);
}

enum opt_result opt_parse_recorded(const struct opt_program *p, int argc, char **argv,
				   struct opt_record *rec)
{
	struct option longopts[OPT_MAX_SPECS + 1];
	bool given[OPT_MAX_SPECS] = { false };
	size_t n = 0, count = 0;
	enum opt_result result = OPT_RESULT_BAD;
	char flag[80];
	void *opts;
	const struct opt_spec *s;
	for (; (s = opt_nth(p, count, &opts)) != NULL; count++) {
		if (count == OPT_MAX_SPECS) {
			fprintf(stderr, "%s: more than %d options declared\n", p->name, OPT_MAX_SPECS);
			return OPT_RESULT_BAD;
		}
		if (s->kind == OPT_KIND_NOTE)
			continue;
		opt_flag_name(s, flag, sizeof flag);
		if (s->def != NULL && !opt_take(s, flag, s->def, opts)) {
			fprintf(stderr, "%s: the default of %s does not parse\n", p->name, flag);
			return OPT_RESULT_BAD;
		}
		bool takes_arg = s->kind != OPT_KIND_FLAG && s->kind != OPT_KIND_HELP &&
				 s->kind != OPT_KIND_VERSION;
		longopts[n++] = (struct option){ s->name, takes_arg ? required_argument : no_argument,
						 NULL, 256 + (int)count };
	}
	longopts[n] = (struct option){ NULL, 0, NULL, 0 };
	int c;
	/* 0, not 1: glibc's getopt then forgets all state of an earlier parse. */
	optind = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		s = c >= 256 ? opt_nth(p, (size_t)(c - 256), &opts) : NULL;
		if (s == NULL) {
			opt_usage(p, stderr);
			goto out;
		}
		if (s->kind == OPT_KIND_HELP) {
			opt_usage(p, stdout);
			return OPT_RESULT_DONE;
		}
		if (s->kind == OPT_KIND_VERSION) {
			printf("%s %s\n", p->name, p->version);
			return OPT_RESULT_DONE;
		}
		opt_flag_name(s, flag, sizeof flag);
		if (!opt_take(s, flag, optarg, opts))
			goto out;
		given[c - 256] = true;
		if (rec != NULL && !opt_record_add(p, rec, (size_t)(c - 256), optarg))
			goto out;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", p->name, argv[optind]);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		s = opt_nth(p, i, &opts);
		if (s->required && !given[i]) {
			fprintf(stderr, "%s: --%s is required (see --help)\n", p->name, s->name);
			goto out;
		}
	}
	result = OPT_RESULT_OK;
out:
	return result;
}

/* Whether args give option name, as "--name" or "--name=...". */
static bool opt_args_give(int argc, char **args, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < argc; i++) {
		const char *a = args[i];
		if (a[0] == '-' && a[1] == '-' && strncmp(a + 2, name, n) == 0 &&
		    (a[2 + n] == '\0' || a[2 + n] == '='))
			return true;
	}
	return false;
}

int opt_run_argv(const struct opt_program *p, const struct opt_record *base, int argc,
		 char **args, char **out, int cap, char *text, size_t textcap)
{
	int n = 0;
	size_t used = 0;
	void *opts;
	if (cap < 1)
		return -1;
	out[n++] = (char *)p->name;
	for (size_t i = 0; i < base->count; i++) {
		const struct opt_spec *s = opt_nth(p, base->given[i].spec, &opts);
		if (!s->fixed || opt_args_give(argc, args, s->name))
			continue;
		int w = snprintf(text + used, textcap - used, "--%s%s%s", s->name,
				 s->arg != NULL ? "=" : "", s->arg != NULL ? base->given[i].arg : "");
		if (w < 0 || (size_t)w >= textcap - used || n == cap)
			return -1;
		out[n++] = text + used;
		used += (size_t)w + 1;
	}
	for (int i = 0; i < argc; i++) {
		if (n == cap)
			return -1;
		out[n++] = args[i];
	}
	return n;
}

/* The arguments rec gave entry spec, joined with ", " into buf. */
static void opt_record_join(const struct opt_record *rec, size_t spec, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < rec->count && used < cap; i++) {
		if (rec->given[i].spec == spec)
			used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
						 rec->given[i].arg);
	}
}

bool opt_fixed_unchanged(const struct opt_program *p, const struct opt_record *base,
			 const struct opt_record *run, char *err, size_t errlen)
{
	char was[512], now[512];
	void *opts;
	for (size_t i = 0; i < run->count; i++) {
		size_t spec = run->given[i].spec;
		const struct opt_spec *s = opt_nth(p, spec, &opts);
		if (!s->fixed)
			continue;
		opt_record_join(base, spec, was, sizeof was);
		opt_record_join(run, spec, now, sizeof now);
		if (strcmp(was, now) != 0) {
			snprintf(err, errlen, "--%s is fixed for this daemon's life (%s); restart it to "
				 "change it", s->name, was[0] != '\0' ? was : "not given");
			return false;
		}
	}
	return true;
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
