/* Clock offset estimation and chrony's view of the host clocks; see
 * clocksync.h for the contracts and docs/CLOCKS.md for the reasoning. */
#include "core/clockoffset.h"

#include "core/saturate.h"
#include "wire/control.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- in-band estimator ---- */

void cks_reset(struct cks_estimator *est)
{
	memset(est, 0, sizeof(*est));
	est->drift_ppm = CKS_DEFAULT_DRIFT_PPM;
}

int cks_set_drift_ppm(struct cks_estimator *est, double drift_ppm)
{
	/* Written so that NaN fails the test too. */
	if (!(drift_ppm >= 0.0 && drift_ppm <= CKS_MAX_DRIFT_PPM))
		return -EINVAL;
	est->drift_ppm = drift_ppm;
	return 0;
}

/* (a + b) / 2 without forming a + b, which may overflow; within 0.5 of the
 * exact half-sum, which keeps the ceil(delay/2) bound valid (CLOCKS.md). */
static int64_t half_sum(int64_t a, int64_t b)
{
	return a / 2 + b / 2 + (a % 2 + b % 2) / 2;
}

int cks_add_sample(struct cks_estimator *est, int64_t t1_ns, int64_t t2_ns, int64_t t3_ns,
		   int64_t t4_ns)
{
	int64_t rtt, hold, out, back;
	struct cks_sample *s;
	int ret;

	if (t4_ns < t1_ns || t3_ns < t2_ns) {
		ret = -EINVAL;
		goto reject;
	}
	if (__builtin_sub_overflow(t4_ns, t1_ns, &rtt) ||
	    __builtin_sub_overflow(t3_ns, t2_ns, &hold) ||
	    __builtin_sub_overflow(t2_ns, t1_ns, &out) ||
	    __builtin_sub_overflow(t3_ns, t4_ns, &back)) {
		ret = -ERANGE;
		goto reject;
	}
	/* A peer that held the PING longer than the whole round trip has a
	 * clock that jumped, or is lying; the sample would carry a bound
	 * smaller than its error. */
	if (rtt < hold) {
		ret = -EINVAL;
		goto reject;
	}

	if (est->count == CKS_WINDOW)
		est->evicted++;
	else
		est->count++;
	s = &est->samples[est->next];
	est->next = (est->next + 1) % CKS_WINDOW;
	s->offset_ns = half_sum(out, back);
	s->delay_ns = rtt - hold;
	/* Age counts from t1, not t4: the peer read its clock somewhere
	 * between the two, so drift during the exchange is covered too. */
	s->taken_ns = t1_ns;
	est->accepted++;
	return 0;

reject:
	est->rejected++;
	return ret;
}

int64_t cks_sample_bound_ns(const struct cks_sample *s, double drift_ppm, int64_t now_ns)
{
	/* A negative age means the builder clock stepped back; the distance
	 * still measures how far the offset may have wandered. */
	uint64_t age = abs_diff_i64(now_ns, s->taken_ns);
	double widen = ceil(drift_ppm * (double)age / 1e6);
	int64_t half = s->delay_ns / 2 + (s->delay_ns & 1);

	if (!(widen < 9.2e18))
		return INT64_MAX;
	return sat_add_i64(half, (int64_t)widen);
}

int cks_estimate(const struct cks_estimator *est, int64_t now_ns, int64_t *offset_ns,
		 int64_t *bound_ns)
{
	const struct cks_sample *best = NULL;
	int64_t best_bound = INT64_MAX;
	unsigned i, slot;

	if (est->count == 0)
		return -ENODATA;

	/* Oldest to newest, so "<=" lets a newer sample win a tie. */
	slot = (est->next + CKS_WINDOW - est->count) % CKS_WINDOW;
	for (i = 0; i < est->count; i++, slot = (slot + 1) % CKS_WINDOW) {
		const struct cks_sample *s = &est->samples[slot];
		int64_t b = cks_sample_bound_ns(s, est->drift_ppm, now_ns);

		if (!best || b <= best_bound) {
			best = s;
			best_bound = b;
		}
	}
	*offset_ns = best->offset_ns;
	*bound_ns = best_bound;
	return 0;
}

int cks_estimate_range(const struct cks_estimator *est, int64_t now_ns, int64_t *lo_ns,
		       int64_t *hi_ns)
{
	int64_t lo = INT64_MIN, hi = INT64_MAX, off, bound;
	unsigned i;

	if (cks_estimate(est, now_ns, &off, &bound) < 0)
		return -ENODATA;
	for (i = 0; i < est->count; i++) {
		const struct cks_sample *s = &est->samples[i];
		int64_t b = cks_sample_bound_ns(s, est->drift_ppm, now_ns);
		int64_t slo = sat_sub_i64(s->offset_ns, b), shi = sat_add_i64(s->offset_ns, b);

		if (slo > lo)
			lo = slo;
		if (shi < hi)
			hi = shi;
	}
	if (lo > hi) {
		*lo_ns = sat_sub_i64(off, bound);
		*hi_ns = sat_add_i64(off, bound);
		return -ERANGE;
	}
	*lo_ns = lo;
	*hi_ns = hi;
	return 0;
}

int64_t cks_correct(int64_t peer_ts_ns, int64_t offset_ns)
{
	return sat_sub_i64(peer_ts_ns, offset_ns);
}

/* ---- chrony tracking ---- */

#define CHRONY_FIELDS 14
#define CHRONY_LINE_MAX 512

static void set_reason(struct cks_chrony *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_reason(struct cks_chrony *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
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

bool cks_chrony_parse(struct cks_chrony *c, const char *line)
{
	/* Field names as chronyc's human-readable tracking output has them. */
	static const char *const names[CHRONY_FIELDS] = {
		"Reference ID", "reference name", "Stratum", "Ref time", "System time",
		"Last offset", "RMS offset", "Frequency", "Residual freq", "Skew",
		"Root delay", "Root dispersion", "Update interval", "Leap status",
	};
	struct {
		double *dst;
		bool allow_negative;
	} num[CHRONY_FIELDS] = {
		[3] = { &c->ref_time_s, false },
		[4] = { &c->offset_s, true },
		[5] = { &c->last_offset_s, true },
		[6] = { &c->rms_offset_s, false },
		[7] = { &c->frequency_ppm, true },
		[8] = { &c->residual_freq_ppm, true },
		[9] = { &c->skew_ppm, false },
		[10] = { &c->root_delay_s, false },
		[11] = { &c->root_dispersion_s, false },
		[12] = { &c->update_interval_s, false },
	};
	char buf[CHRONY_LINE_MAX];
	char *field[CHRONY_FIELDS];
	size_t len, i;
	int n;
	char *p;

	memset(c, 0, sizeof(*c));
	if (!line) {
		set_reason(c, "No chronyc output");
		return false;
	}
	len = strlen(line);
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len >= sizeof(buf)) {
		set_reason(c, "Tracking line too long (%zu bytes)", len);
		return false;
	}
	memcpy(buf, line, len);
	buf[len] = '\0';

	/* No field chronyc prints in CSV mode can hold a comma: the name is
	 * an IP address or a refclock ID, never a DNS name. */
	n = 0;
	field[n++] = buf;
	for (p = buf; *p; p++) {
		if (*p != ',')
			continue;
		if (n == CHRONY_FIELDS) {
			set_reason(c, "Tracking line has more than %d fields", CHRONY_FIELDS);
			return false;
		}
		*p = '\0';
		field[n++] = p + 1;
	}
	if (n != CHRONY_FIELDS) {
		set_reason(c, "Tracking line has %d fields, expected %d", n, CHRONY_FIELDS);
		return false;
	}

	if (!parse_refid(field[0], &c->ref_id)) {
		set_reason(c, "Bad %s '%.16s'", names[0], field[0]);
		goto fail;
	}
	if (strlen(field[1]) >= sizeof(c->reference)) {
		set_reason(c, "Reference name too long");
		goto fail;
	}
	for (p = field[1]; *p; p++) {
		if (*p <= ' ' || *p > '~') {
			set_reason(c, "Reference name has an unprintable byte");
			goto fail;
		}
	}
	strcpy(c->reference, field[1]);
	/* NTP strata run 0 (unsynchronised) to 16. */
	if (!parse_uint(field[2], 16, &c->stratum)) {
		set_reason(c, "Bad %s '%.16s'", names[2], field[2]);
		goto fail;
	}
	for (i = 3; i < 13; i++) {
		if (!parse_decimal(field[i], num[i].allow_negative, num[i].dst)) {
			set_reason(c, "Bad %s '%.24s'", names[i], field[i]);
			goto fail;
		}
	}
	for (i = 0; i < sizeof(leap_names) / sizeof(leap_names[0]); i++)
		if (strcmp(field[13], leap_names[i]) == 0)
			break;
	if (i == sizeof(leap_names) / sizeof(leap_names[0])) {
		set_reason(c, "Bad %s '%.24s'", names[13], field[13]);
		goto fail;
	}
	strcpy(c->leap, leap_names[i]);

	c->available = true;
	/* chronyd reports placeholder root delay and dispersion (1 s each)
	 * until it first synchronises; "Invalid" is no better. */
	c->synchronised = i <= 2;
	return true;

fail:
	{
		/* Keep the reason, drop whatever was parsed before the error. */
		char reason[sizeof(c->reason)];

		memcpy(reason, c->reason, sizeof(reason));
		memset(c, 0, sizeof(*c));
		memcpy(c->reason, reason, sizeof(reason));
	}
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

bool cks_chrony_encode(const struct cks_chrony *c, struct ctl_group *g)
{
	uint64_t leap = 0;
	bool ok;
	size_t i;

	if (!g)
		return false;
	if (!c->available)
		return ctl_group_set(g, "available", 0);
	for (i = 0; i < sizeof(leap_names) / sizeof(leap_names[0]); i++)
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
	if (ok && c->read_mono_ns != 0) {
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		ok = ctl_group_set(g, "read_age_ns", now > c->read_mono_ns ? now - c->read_mono_ns : 0);
	}
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
		set_reason(c, "No chrony state received");
		return false;
	}
	if (!available) {
		set_reason(c, "chrony not readable on that host (its log says why)");
		return true;
	}
	c->available = true;
	c->synchronised = ctl_group_get(g, "synchronised", &v) && v != 0;
	if (ctl_group_get(g, "stratum", &v) && v <= 16)
		c->stratum = (int)v;
	if (ctl_group_get(g, "leap", &v) && v < sizeof(leap_names) / sizeof(leap_names[0]))
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

/* One host's frequency error bound in ppm, NaN when it cannot be told. */
static double host_drift_ppm(const struct cks_chrony *c)
{
	double slew = 0.0;

	if (cks_chrony_bound_ns(c) < 0)
		return NAN;
	/* chronyd removes its pending correction by slewing; it aims to be
	 * done within a few update intervals (correction_time_ratio in
	 * reference.c), so |offset| / interval is the rate it adds. */
	if (c->offset_s != 0.0) {
		if (!(c->update_interval_s > 0.0))
			return NAN;
		slew = fabs(c->offset_s) / c->update_interval_s * 1e6;
	}
	return c->skew_ppm + fabs(c->residual_freq_ppm) + slew;
}

double cks_drift_ppm_from_chrony(const struct cks_chrony *peer, const struct cks_chrony *builder)
{
	double d;

	if (!peer || !builder)
		return CKS_DEFAULT_DRIFT_PPM;
	d = host_drift_ppm(peer) + host_drift_ppm(builder);
	if (isnan(d))
		return CKS_DEFAULT_DRIFT_PPM;
	/* chrony claiming more than any clock could drift: trust the claim
	 * as far as the estimator accepts, never shrink it to the default. */
	if (!(d <= CKS_MAX_DRIFT_PPM))
		return CKS_MAX_DRIFT_PPM;
	return d;
}

enum cks_verdict cks_check_consistent(int64_t offset_ns, int64_t bound_inband_ns,
				      int64_t chrony_bound_a_ns, int64_t chrony_bound_b_ns)
{
	uint64_t limit;

	if (bound_inband_ns < 0 || chrony_bound_a_ns < 0 || chrony_bound_b_ns < 0)
		return CKS_UNKNOWN;
	limit = sat_add_u64(sat_add_u64((uint64_t)bound_inband_ns, (uint64_t)chrony_bound_a_ns),
			 (uint64_t)chrony_bound_b_ns);
	return abs_diff_i64(offset_ns, 0) <= limit ? CKS_CONSISTENT : CKS_INCONSISTENT;
}

/* ---- running chronyc ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Copies the first non-empty line of out into c->reason, for the error
 * message: it is chronyc's own explanation ("506 Cannot talk to daemon"). */
static void reason_from_output(struct cks_chrony *c, const char *prefix, const char *out)
{
	const char *start = out, *end;
	size_t n;
	char *p;

	while (*start == '\n' || *start == '\r')
		start++;
	end = strpbrk(start, "\r\n");
	n = end ? (size_t)(end - start) : strlen(start);
	snprintf(c->reason, sizeof(c->reason), "%s%.*s", prefix, (int)n, start);
	for (p = c->reason; *p; p++)
		if ((unsigned char)*p < ' ' || (unsigned char)*p > '~')
			*p = '?';
}

int cks_chrony_run(struct cks_chrony *c, char *const argv[], int timeout_ms)
{
	posix_spawn_file_actions_t fa;
	bool fa_ready = false, reaped = false;
	int pipefd[2] = { -1, -1 };
	char out[2048];
	size_t len = 0;
	pid_t pid = -1;
	int64_t deadline;
	struct timespec started;
	int ret, status = 0;
	char *line, *next;

	/* Before chronyc runs, so before chronyd writes its report: an age
	 * counted from here is never too small. */
	clock_gettime(CLOCK_MONOTONIC, &started);
	memset(c, 0, sizeof(*c));
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		ret = -errno;
		set_reason(c, "Cannot create pipe for %s: %s", argv[0], strerror(-ret));
		goto out;
	}
	ret = posix_spawn_file_actions_init(&fa);
	if (ret) {
		ret = -ret;
		set_reason(c, "Cannot prepare %s: %s", argv[0], strerror(-ret));
		goto out;
	}
	fa_ready = true;
	/* stderr too: chronyc reports some failures there ("Could not open
	 * connection to daemon"), and the caller wants its words. */
	ret = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!ret)
		ret = posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	if (!ret)
		ret = posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	if (ret) {
		ret = -ret;
		set_reason(c, "Cannot prepare %s: %s", argv[0], strerror(-ret));
		goto out;
	}
	ret = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	if (ret) {
		pid = -1;
		ret = -ret;
		if (ret == -ENOENT)
			set_reason(c, "%s not found", argv[0]);
		else
			set_reason(c, "Cannot run %s: %s", argv[0], strerror(-ret));
		goto out;
	}
	close(pipefd[1]);
	pipefd[1] = -1;

	deadline = mono_ms() + timeout_ms;
	for (;;) {
		struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
		int64_t left = deadline - mono_ms();
		char scratch[256];
		ssize_t r;

		if (left <= 0) {
			ret = -ETIMEDOUT;
			set_reason(c, "%s did not answer within %d ms", argv[0], timeout_ms);
			goto out;
		}
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			set_reason(c, "Cannot wait for %s: %s", argv[0], strerror(-ret));
			goto out;
		}
		if (r == 0)
			continue;
		/* Past a full buffer keep draining, so chronyc never blocks
		 * on a pipe we stopped reading. */
		if (len < sizeof(out) - 1)
			r = read(pipefd[0], out + len, sizeof(out) - 1 - len);
		else
			r = read(pipefd[0], scratch, sizeof(scratch));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			set_reason(c, "Cannot read from %s: %s", argv[0], strerror(-ret));
			goto out;
		}
		if (r == 0)
			break;
		if (len < sizeof(out) - 1)
			len += (size_t)r;
	}
	out[len] = '\0';

	while (waitpid(pid, &status, 0) < 0) {
		/* ECHILD: the daemon ignores SIGCHLD and the kernel reaped
		 * chronyc; its output is all we need. */
		if (errno != EINTR) {
			status = 0;
			break;
		}
	}
	reaped = true;

	for (line = out; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (cks_chrony_parse(c, line)) {
			ret = 0;
			goto out;
		}
	}
	/* Nothing parsed: restore the lines for the message. */
	for (size_t i = 0; i < len; i++)
		if (out[i] == '\0')
			out[i] = '\n';

	if (strncmp(out, "506 ", 4) == 0 || strstr(out, "Could not open connection")) {
		ret = -ECONNREFUSED;
		reason_from_output(c, "", out);
	} else if (len == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		/* Where posix_spawn cannot report a failed exec (it forks
		 * instead of vforking, as under valgrind) the child exits 127,
		 * the shell's "command not found". */
		ret = -ENOENT;
		set_reason(c, "%s not found (exit status 127)", argv[0]);
	} else if (len == 0) {
		ret = -EBADMSG;
		if (WIFEXITED(status))
			set_reason(c, "%s exited with status %d and no output", argv[0],
				   WEXITSTATUS(status));
		else
			set_reason(c, "%s died without output", argv[0]);
	} else {
		char what[sizeof(c->reason)];

		ret = -EBADMSG;
		/* The parse reason of the last line is the informative one when
		 * chronyc said something tracking-like; its first line
		 * otherwise. */
		memcpy(what, c->reason, sizeof(what));
		if (strchr(out, ',') && what[0])
			set_reason(c, "Unexpected chronyc output: %s", what);
		else
			reason_from_output(c, "Unexpected chronyc output: ", out);
	}

out:
	if (ret)
		c->available = c->synchronised = false;
	c->read_mono_ns = (uint64_t)started.tv_sec * 1000000000u + (uint64_t)started.tv_nsec;

	if (pid > 0 && !reaped) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (fa_ready)
		posix_spawn_file_actions_destroy(&fa);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	return ret;
}

const char *cks_chrony_socket(void)
{
	const char *s = getenv(CKS_SOCKET_ENV);

	return s && *s ? s : NULL;
}

int cks_chrony_read(struct cks_chrony *c, const char *socket)
{
	char *argv_default[] = { "chronyc", "-c", "tracking", NULL };
	char *argv_socket[] = { "chronyc", "-c", "-h", (char *)socket, "tracking", NULL };

	return cks_chrony_run(c, socket ? argv_socket : argv_default, CKS_CHRONYC_TIMEOUT_MS);
}
