/* chrony's tracking state of a host: parsing `chronyc -c tracking`, its
 * bound, and its report group; see chrony.h and docs/CLOCKS.md. */
#include "core/chrony.h"

#include "core/saturate.h"
#include "wire/control.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CHRONY_FIELDS 14
#define CHRONY_LINE_MAX 512

void cks_chrony_set_reason(struct cks_chrony *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	c->available = c->synchronised = false;
}

/* Strict decimal "[+-]digits[.digits]" as chronyc prints with %f. Done by
 * hand rather than strtod so that a daemon's locale cannot change what
 * parses (chronyc itself never calls setlocale, so it always prints '.'),
 * and so that "nan", "1e3" or hex are refused. */
static bool parse_decimal(const char *s, bool allow_negative, double *out)
{
	uint64_t ip = 0, fp = 0;
	double scale = 1.0;
	bool neg = false;
	int nd = 0, nf = 0;

	if (*s == '+' || *s == '-') {
		neg = *s == '-';
		s++;
	}
	for (; *s >= '0' && *s <= '9'; s++, nd++) {
		if (nd == 18)
			return false;
		ip = ip * 10 + (uint64_t)(*s - '0');
	}
	if (nd == 0)
		return false;
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++, nf++) {
			if (nf == 18)
				return false;
			fp = fp * 10 + (uint64_t)(*s - '0');
			scale *= 10.0;
		}
		if (nf == 0)
			return false;
	}
	if (*s != '\0')
		return false;
	if (neg && !allow_negative && (ip != 0 || fp != 0))
		return false;
	*out = ((double)ip + (double)fp / scale) * (neg ? -1.0 : 1.0);
	return true;
}

static bool parse_uint(const char *s, unsigned max, int *out)
{
	unsigned v = 0;
	int nd = 0;

	for (; *s >= '0' && *s <= '9'; s++, nd++) {
		v = v * 10 + (unsigned)(*s - '0');
		if (v > max)
			return false;
	}
	if (nd == 0 || *s != '\0')
		return false;
	*out = (int)v;
	return true;
}

static bool parse_refid(const char *s, uint32_t *out)
{
	uint32_t v = 0;
	int i;

	/* chronyc prints %08X: exactly eight hex digits. */
	for (i = 0; i < 8; i++) {
		char ch = s[i];
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'A' && ch <= 'F')
			d = (unsigned)(ch - 'A' + 10);
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else
			return false;
		v = v << 4 | d;
	}
	if (s[8] != '\0')
		return false;
	*out = v;
	return true;
}

/* The leap strings of client.c print_report() %L; "Invalid" is what chronyc
 * prints for a value it does not know. */
static const char *const leap_names[] = {
	"Normal", "Insert second", "Delete second", "Not synchronised", "Invalid",
};
#define LEAP_COUNT (sizeof(leap_names) / sizeof(leap_names[0]))

/* Field names as chronyc's human-readable tracking output has them. */
static const char *const field_names[CHRONY_FIELDS] = {
	"Reference ID", "reference name", "Stratum", "Ref time", "System time",
	"Last offset", "RMS offset", "Frequency", "Residual freq", "Skew",
	"Root delay", "Root dispersion", "Update interval", "Leap status",
};

/* Fields 4 to 13: where each decimal goes, and whether it may be negative. */
static const struct {
	size_t offset;
	bool allow_negative;
} decimal_fields[CHRONY_FIELDS] = {
	[3] = { offsetof(struct cks_chrony, ref_time_s), false },
	[4] = { offsetof(struct cks_chrony, offset_s), true },
	[5] = { offsetof(struct cks_chrony, last_offset_s), true },
	[6] = { offsetof(struct cks_chrony, rms_offset_s), false },
	[7] = { offsetof(struct cks_chrony, frequency_ppm), true },
	[8] = { offsetof(struct cks_chrony, residual_freq_ppm), true },
	[9] = { offsetof(struct cks_chrony, skew_ppm), false },
	[10] = { offsetof(struct cks_chrony, root_delay_s), false },
	[11] = { offsetof(struct cks_chrony, root_dispersion_s), false },
	[12] = { offsetof(struct cks_chrony, update_interval_s), false },
};

/* Copies the line (without its line end) into buf and cuts it at its
 * commas into exactly CHRONY_FIELDS fields. No field chronyc prints in CSV
 * mode can hold a comma: the name is an IP address or a refclock ID, never
 * a DNS name. */
static bool split_fields(struct cks_chrony *c, const char *line, char buf[CHRONY_LINE_MAX],
			 char *field[CHRONY_FIELDS])
{
	size_t len = strlen(line);
	int n = 0;

	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len >= CHRONY_LINE_MAX) {
		cks_chrony_set_reason(c, "Tracking line too long (%zu bytes)", len);
		return false;
	}
	memcpy(buf, line, len);
	buf[len] = '\0';
	field[n++] = buf;
	for (char *p = buf; *p; p++) {
		if (*p != ',')
			continue;
		if (n == CHRONY_FIELDS) {
			cks_chrony_set_reason(c, "Tracking line has more than %d fields", CHRONY_FIELDS);
			return false;
		}
		*p = '\0';
		field[n++] = p + 1;
	}
	if (n != CHRONY_FIELDS) {
		cks_chrony_set_reason(c, "Tracking line has %d fields, expected %d", n, CHRONY_FIELDS);
		return false;
	}
	return true;
}

/* Fields 1 to 3: reference ID, reference name, stratum. */
static bool parse_reference(struct cks_chrony *c, char *const field[CHRONY_FIELDS])
{
	if (!parse_refid(field[0], &c->ref_id)) {
		cks_chrony_set_reason(c, "Bad %s '%.16s'", field_names[0], field[0]);
		return false;
	}
	if (strlen(field[1]) >= sizeof(c->reference)) {
		cks_chrony_set_reason(c, "Reference name too long");
		return false;
	}
	for (const char *p = field[1]; *p; p++) {
		if (*p <= ' ' || *p > '~') {
			cks_chrony_set_reason(c, "Reference name has an unprintable byte");
			return false;
		}
	}
	strcpy(c->reference, field[1]);
	/* NTP strata run 0 (unsynchronised) to 16. */
	if (!parse_uint(field[2], 16, &c->stratum)) {
		cks_chrony_set_reason(c, "Bad %s '%.16s'", field_names[2], field[2]);
		return false;
	}
	return true;
}

/* Fields 4 to 14: the decimals and the leap status. */
static bool parse_state(struct cks_chrony *c, char *const field[CHRONY_FIELDS])
{
	size_t i;

	for (i = 3; i < 13; i++) {
		double *dst = (double *)((char *)c + decimal_fields[i].offset);
		if (!parse_decimal(field[i], decimal_fields[i].allow_negative, dst)) {
			cks_chrony_set_reason(c, "Bad %s '%.24s'", field_names[i], field[i]);
			return false;
		}
	}
	for (i = 0; i < LEAP_COUNT; i++)
		if (strcmp(field[13], leap_names[i]) == 0)
			break;
	if (i == LEAP_COUNT) {
		cks_chrony_set_reason(c, "Bad %s '%.24s'", field_names[13], field[13]);
		return false;
	}
	strcpy(c->leap, leap_names[i]);
	c->available = true;
	/* chronyd reports placeholder root delay and dispersion (1 s each)
	 * until it first synchronises; "Invalid" is no better. */
	c->synchronised = i <= 2;
	return true;
}

bool cks_chrony_parse(struct cks_chrony *c, const char *line)
{
	char buf[CHRONY_LINE_MAX];
	char *field[CHRONY_FIELDS];

	memset(c, 0, sizeof(*c));
	if (!line) {
		cks_chrony_set_reason(c, "No chronyc output");
		return false;
	}
	if (!split_fields(c, line, buf, field))
		return false;
	if (parse_reference(c, field) && parse_state(c, field))
		return true;
	/* Keep the reason, drop whatever was parsed before the error. */
	char reason[sizeof(c->reason)];
	memcpy(reason, c->reason, sizeof(reason));
	memset(c, 0, sizeof(*c));
	memcpy(c->reason, reason, sizeof(reason));
	return false;
}

/* Seconds to ns, rounded to nearest: chronyc prints 9 decimals, so this
 * recovers chronyd's value exactly. false beyond ~31 years. */
static bool secs_to_ns(double s, int64_t *ns)
{
	if (!(s >= 0.0 && s < 1e9))
		return false;
	*ns = llround(s * 1e9);
	return true;
}

int64_t cks_chrony_bound_ns(const struct cks_chrony *c)
{
	int64_t off, disp, delay;

	if (!c || !c->available || !c->synchronised)
		return CKS_NO_BOUND;
	if (!secs_to_ns(fabs(c->offset_s), &off) || !secs_to_ns(c->root_dispersion_s, &disp) ||
	    !secs_to_ns(c->root_delay_s, &delay))
		return INT64_MAX;
	return sat_add_i64(sat_add_i64(off, disp), delay / 2 + (delay & 1));
}

/* ---- chrony state in a report group ---- */

/* |v| * scale rounded, with its sign apart; false when it does not fit. */
static bool fixed_point(double v, double scale, uint64_t *mag, bool *negative)
{
	double m = fabs(v) * scale;

	if (!(m < 9.2e18))
		return false;
	*mag = (uint64_t)llround(m);
	*negative = v < 0.0;
	return true;
}

/* name = |v| * scale, and neg_name (unless NULL) = whether v < 0; a value
 * too large to carry saturates, which no bound then trusts. */
static bool set_signed(struct ctl_group *g, const char *name, const char *neg_name, double v,
		       double scale)
{
	uint64_t mag = UINT64_MAX;
	bool negative = v < 0.0;

	fixed_point(v, scale, &mag, &negative);
	return ctl_group_set(g, name, mag) && (!neg_name || ctl_group_set(g, neg_name, negative));
}

bool cks_chrony_encode(const struct cks_chrony *c, uint64_t now_mono_ns, struct ctl_group *g)
{
	uint64_t leap = 0;
	bool ok;
	size_t i;

	if (!g)
		return false;
	if (!c->available)
		return ctl_group_set(g, "available", 0);
	for (i = 0; i < LEAP_COUNT; i++)
		if (strcmp(c->leap, leap_names[i]) == 0)
			leap = i;
	ok = ctl_group_set(g, "available", 1) &&
	     ctl_group_set(g, "synchronised", c->synchronised) &&
	     ctl_group_set(g, "stratum", (uint64_t)c->stratum) &&
	     ctl_group_set(g, "leap", leap) &&
	     ctl_group_set(g, "ref_id", c->ref_id) &&
	     set_signed(g, "offset_ns", "offset_negative", c->offset_s, 1e9) &&
	     set_signed(g, "frequency_ppb", "frequency_negative", c->frequency_ppm, 1e3) &&
	     set_signed(g, "residual_freq_ppb", "residual_freq_negative",
			c->residual_freq_ppm, 1e3) &&
	     /* The parser admits no negative value for these. */
	     set_signed(g, "root_delay_ns", NULL, c->root_delay_s, 1e9) &&
	     set_signed(g, "root_dispersion_ns", NULL, c->root_dispersion_s, 1e9) &&
	     set_signed(g, "skew_ppb", NULL, c->skew_ppm, 1e3) &&
	     set_signed(g, "update_interval_ms", NULL, c->update_interval_s, 1e3);
	if (ok && c->read_mono_ns != 0)
		ok = ctl_group_set(g, "read_age_ns",
				   now_mono_ns > c->read_mono_ns ? now_mono_ns - c->read_mono_ns : 0);
	return ok;
}

static double get_signed(const struct ctl_group *g, const char *name, const char *neg_name,
			 double scale)
{
	uint64_t mag = 0, negative = 0;

	ctl_group_get(g, name, &mag);
	if (neg_name)
		ctl_group_get(g, neg_name, &negative);
	return (negative ? -1.0 : 1.0) * (double)mag / scale;
}

bool cks_chrony_decode(struct cks_chrony *c, const struct ctl_group *g)
{
	uint64_t available = 0, v;

	memset(c, 0, sizeof(*c));
	if (!g || !ctl_group_get(g, "available", &available)) {
		cks_chrony_set_reason(c, "No chrony state received");
		return false;
	}
	if (!available) {
		cks_chrony_set_reason(c, "chrony not readable on that host (its log says why)");
		return true;
	}
	c->available = true;
	c->synchronised = ctl_group_get(g, "synchronised", &v) && v != 0;
	if (ctl_group_get(g, "stratum", &v) && v <= 16)
		c->stratum = (int)v;
	if (ctl_group_get(g, "leap", &v) && v < LEAP_COUNT)
		strcpy(c->leap, leap_names[v]);
	if (ctl_group_get(g, "ref_id", &v))
		c->ref_id = (uint32_t)v;
	c->offset_s = get_signed(g, "offset_ns", "offset_negative", 1e9);
	c->root_delay_s = get_signed(g, "root_delay_ns", NULL, 1e9);
	c->root_dispersion_s = get_signed(g, "root_dispersion_ns", NULL, 1e9);
	c->frequency_ppm = get_signed(g, "frequency_ppb", "frequency_negative", 1e3);
	c->residual_freq_ppm = get_signed(g, "residual_freq_ppb", "residual_freq_negative", 1e3);
	c->skew_ppm = get_signed(g, "skew_ppb", NULL, 1e3);
	c->update_interval_s = get_signed(g, "update_interval_ms", NULL, 1e3);
	ctl_group_get(g, "read_age_ns", &c->read_age_ns);
	return true;
}

