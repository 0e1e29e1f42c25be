/* What every equation of core/acct is made with (acct_internal.h): a
 * counter read from a report, a violation recorded, overflow-checked sums,
 * an equation added. It calls no other acct file, so they all stand on it. */
#include "core/acct.h"
#include "core/acct_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t acct_value(const struct ctl_report *r, const char *group, const char *name, bool *found)
{
	uint64_t v = 0;
	bool ok = false;
	if (r != NULL) {
		const struct ctl_group *g = ctl_report_find(r, group);
		if (g != NULL)
			ok = ctl_group_get(g, name, &v);
	}
	if (found != NULL)
		*found = ok;
	return ok ? v : 0;
}

int acct_violation(struct acct *a, const char *fmt, ...)
{
	if (a->violation_count == a->violation_cap) {
		size_t cap = a->violation_cap ? 2 * a->violation_cap : 8;
		struct acct_violation *v = realloc(a->violations, cap * sizeof *v);
		if (v == NULL)
			return -ENOMEM;
		a->violations = v;
		a->violation_cap = cap;
	}
	struct acct_violation *v = &a->violations[a->violation_count++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->text, sizeof v->text, fmt, ap);
	va_end(ap);
	return 0;
}

int acct_check_le(struct acct *a, const char *xdesc, uint64_t x, bool fx, const char *ydesc,
			 uint64_t y, bool fy)
{
	if (!fx || !fy || x <= y)
		return 0;
	return acct_violation(a, "Impossible counters: %s = %" PRIu64 " exceeds %s = %" PRIu64, xdesc,
			      x, ydesc, y);
}

bool acct_sum(uint64_t *sum, uint64_t v)
{
	if (v > UINT64_MAX - *sum) {
		*sum = UINT64_MAX;
		return false;
	}
	*sum += v;
	return true;
}

struct acct_equation *acct_add(struct acct *a, uint64_t lhs, uint64_t rhs, bool known,
			       const char *note, enum acct_kind kind, ...)
{
	if (a->count == a->cap)
		return NULL;
	struct acct_equation *e = &a->equations[a->count++];
	va_list ap;
	va_start(ap, kind);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	vsnprintf(e->name, sizeof e->name, acct_kind_describe(kind)->format, ap);
#pragma GCC diagnostic pop
	va_end(ap);
	e->kind = kind;
	e->lhs = lhs;
	e->rhs = rhs;
	e->ok = known && lhs == rhs;
	snprintf(e->note, sizeof e->note, "%s", known ? "" : note);
	return e;
}

const char ACCT_OVERFLOW_NOTE[] = "a side's sum overflows 2^64: impossible counters";
