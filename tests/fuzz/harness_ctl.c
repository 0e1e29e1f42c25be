/* Control-message harness: the input is a mode byte, then either (bit 0
 * clear) a byte stream of length-prefixed messages, or (bit 0 set) one
 * message body, which gets its length prefix here. The stream is decoded
 * as a whole (message after message at increasing
 * offsets) and by a reader that receives one byte at a time and keeps the
 * unconsumed bytes contiguous, with every byte beyond them poisoned for
 * AddressSanitizer. Both must agree message by message and on how the
 * stream ended.
 *
 * Every result of ctl_decode() is judged against the contract in ctl.h:
 * incomplete means *need is more than was given and is the prefix's length
 * (4 + body) once the prefix is there; an error comes with a terminated,
 * non-empty reason and only once the body is complete, unless the prefix
 * alone is impossible; a message accepted must re-encode with ctl_encode()
 * (the canonical form is never longer than what was accepted), that encoding
 * must decode to an equal message and encode again to the same bytes, and
 * the encoder must refuse, not overrun, a buffer one byte too small. */
#include "harness.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "wire/control.h"

#define T "ctl"
#define CHECK(cond, ...) FUZZ_CHECK(T, cond, __VA_ARGS__)

#define CTL_FRAME_MAX_BYTES (CTL_LENGTH_BYTES + CTL_MAX_MESSAGE_BYTES)

/* Static: a report is about 78 kB. */
static struct ctl_msg msg_in, msg_again;
static uint8_t enc_first[CTL_FRAME_MAX_BYTES], enc_again[CTL_FRAME_MAX_BYTES];

/* What one way of reading saw; both must see the same. */
struct ctl_trace {
	size_t messages;
	size_t consumed;
	long last;          /* 0 (incomplete at the end) or -1 */
	size_t need;        /* *need of that last call */
	uint64_t digest;    /* of the canonical encoding of every message */
};

static bool report_equal(const struct ctl_report *a, const struct ctl_report *b)
{
	if (a->status != b->status || a->group_count != b->group_count ||
	    a->group_count > CTL_MAX_GROUPS)
		return false;
	for (uint32_t i = 0; i < a->group_count; i++) {
		const struct ctl_group *ga = &a->groups[i], *gb = &b->groups[i];
		if (strcmp(ga->name, gb->name) != 0 || ga->count != gb->count ||
		    ga->count > CTL_MAX_COUNTERS)
			return false;
		for (uint32_t j = 0; j < ga->count; j++) {
			if (strcmp(ga->counters[j].name, gb->counters[j].name) != 0 ||
			    ga->counters[j].value != gb->counters[j].value)
				return false;
		}
	}
	return true;
}

/* Field by field: padding and the unused tails of arrays do not count.
 * A type not listed here (added to ctl.h since) is compared by its
 * canonical encoding, enc (n bytes) being a's. */
static bool msg_equal(const struct ctl_msg *a, const struct ctl_msg *b, const uint8_t *enc,
		      size_t n)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case CTL_HELLO: {
		const struct ctl_hello *x = &a->u.hello, *y = &b->u.hello;
		return x->role == y->role && x->id == y->id && x->channel == y->channel &&
		       x->run_id == y->run_id && x->protocol == y->protocol && x->pid == y->pid &&
		       strcmp(x->host, y->host) == 0 && x->source_count == y->source_count &&
		       x->source_count <= CTL_MAX_SOURCE_LIST &&
		       memcmp(x->sources, y->sources, x->source_count * sizeof x->sources[0]) == 0 &&
		       strcmp(x->proof, y->proof) == 0 && strcmp(x->nonce, y->nonce) == 0;
	}
	case CTL_CHALLENGE:
		return strcmp(a->u.challenge.nonce, b->u.challenge.nonce) == 0;
	case CTL_STOP:
		return a->u.stop.source == b->u.stop.source &&
		       strcmp(a->u.stop.reason, b->u.stop.reason) == 0;
	case CTL_WELCOME:
		return a->u.welcome.run_id == b->u.welcome.run_id &&
		       a->u.welcome.role == b->u.welcome.role && a->u.welcome.id == b->u.welcome.id;
	case CTL_ERROR:
		return strcmp(a->u.error.code, b->u.error.code) == 0 &&
		       strcmp(a->u.error.reason, b->u.error.reason) == 0;
	case CTL_CREDIT:
		return a->u.credit.limit == b->u.credit.limit &&
		       a->u.credit.sequence == b->u.credit.sequence;
	case CTL_PING:
		return a->u.ping.sequence == b->u.ping.sequence && a->u.ping.t1_ns == b->u.ping.t1_ns;
	case CTL_PONG:
		return a->u.pong.sequence == b->u.pong.sequence && a->u.pong.t1_ns == b->u.pong.t1_ns &&
		       a->u.pong.t2_ns == b->u.pong.t2_ns && a->u.pong.t3_ns == b->u.pong.t3_ns;
	case CTL_STATS:
	case CTL_END:
		return report_equal(&a->u.report, &b->u.report);
	case CTL_BYE:
		return a->u.bye.status == b->u.bye.status;
	case CTL_START:
		return a->u.start.delay_ns == b->u.start.delay_ns &&
		       a->u.start.at_realtime_ns == b->u.start.at_realtime_ns;
	case CTL_LOST:
		return a->u.lost.builder == b->u.lost.builder &&
		       strcmp(a->u.lost.reason, b->u.lost.reason) == 0;
	default:
		break;
	}
	static uint8_t enc_b[CTL_FRAME_MAX_BYTES];
	size_t nb = ctl_encode(b, enc_b, sizeof enc_b);
	return nb == n && memcmp(enc, enc_b, n) == 0;
}

/* Checks a message accepted from consumed bytes; returns the digest of its
 * canonical encoding. */
static uint64_t check_accepted(const struct ctl_msg *m, size_t consumed)
{
	char err[256];
	size_t need = 0;
	const char *type = ctl_type_name(m->type);

	CHECK(strcmp(type, "unknown") != 0, "accepted a message of type %d", (int)m->type);
	size_t n = ctl_encode(m, enc_first, sizeof enc_first);
	CHECK(n > 0, "accepted %s message of %zu bytes does not re-encode", type, consumed);
	CHECK(n <= consumed, "%s message of %zu bytes re-encodes to %zu, longer than accepted",
	      type, consumed, n);

	/* From an exact-size copy, so a read past the end is caught. */
	uint8_t *copy = malloc(n);
	CHECK(copy != NULL, "out of memory");
	memcpy(copy, enc_first, n);
	long r = ctl_decode(copy, n, &msg_again, &need, err, sizeof err);
	free(copy);
	CHECK(r == (long)n && need == n, "re-encoded %s message of %zu bytes decodes to %ld: %s",
	      type, n, r, err);
	CHECK(msg_equal(m, &msg_again, enc_first, n),
	      "re-encoded %s message decodes to a different message",
	      type);
	size_t n2 = ctl_encode(&msg_again, enc_again, sizeof enc_again);
	CHECK(n2 == n && memcmp(enc_first, enc_again, n) == 0,
	      "%s encoding not canonical: %zu bytes, then %zu bytes", type, n, n2);

	uint8_t *small = malloc(n - 1);
	CHECK(small != NULL, "out of memory");
	CHECK(ctl_encode(m, small, n - 1) == 0, "%s message of %zu bytes encoded into %zu", type,
	      n, n - 1);
	free(small);
	return fuzz_hash(FUZZ_HASH_INIT, enc_first, n);
}

/* Judges one call of ctl_decode() on the avail bytes at buf. err may be
 * NULL. Returns the digest of the message when one was accepted. */
static uint64_t check_result(long r, size_t need, const uint8_t *buf, size_t avail,
			     const char *err, size_t errlen)
{
	uint64_t len = 0;
	bool prefix = avail >= CTL_LENGTH_BYTES;

	if (prefix)
		len = (uint64_t)buf[0] << 24 | (uint64_t)buf[1] << 16 | (uint64_t)buf[2] << 8 | buf[3];
	bool len_ok = len >= 1 && len <= CTL_MAX_MESSAGE_BYTES;

	if (r == 0) {
		CHECK(need > avail, "incomplete with need %zu and %zu bytes given", need, avail);
		CHECK(need == (prefix ? CTL_LENGTH_BYTES + len : CTL_LENGTH_BYTES),
		      "incomplete with need %zu, prefix says %llu", need, (unsigned long long)len);
		CHECK(!prefix || len_ok, "incomplete although the body length %llu is impossible",
		      (unsigned long long)len);
		CHECK(err == NULL || errlen == 0 || err[0] == '\0', "incomplete with reason '%.*s'",
		      (int)errlen, err);
		return 0;
	}
	if (r < 0) {
		CHECK(r == -1, "returned %ld", r);
		CHECK(prefix, "error with %zu bytes, before the length prefix is complete", avail);
		CHECK(!len_ok || avail >= CTL_LENGTH_BYTES + len,
		      "error at %zu of the %llu bytes of a message with a possible length", avail,
		      (unsigned long long)(CTL_LENGTH_BYTES + len));
		if (err != NULL && errlen > 0) {
			CHECK(memchr(err, '\0', errlen) != NULL, "reason not terminated");
			CHECK(errlen == 1 || err[0] != '\0', "error without a reason");
		}
		return 0;
	}
	CHECK(prefix && len_ok && (uint64_t)r == CTL_LENGTH_BYTES + len,
	      "accepted %ld bytes, prefix says %llu", r, (unsigned long long)len);
	CHECK((size_t)r <= avail && need == (size_t)r, "accepted %ld bytes of %zu, need %zu", r,
	      avail, need);
	return check_accepted(&msg_in, (size_t)r);
}

static void decode_whole(const uint8_t *in, size_t n, struct ctl_trace *t)
{
	memset(t, 0, sizeof *t);
	t->digest = FUZZ_HASH_INIT;
	for (;;) {
		char err[256];
		size_t need = 0, avail = n - t->consumed;
		long r = ctl_decode(in + t->consumed, avail, &msg_in, &need, err, sizeof err);
		uint64_t h = check_result(r, need, in + t->consumed, avail, err, sizeof err);
		if (r <= 0) {
			t->last = r;
			t->need = r == 0 ? need : 0;
			return;
		}
		t->digest = fuzz_hash(t->digest, &h, sizeof h);
		t->messages++;
		t->consumed += (size_t)r;
	}
}

static void decode_bytewise(const uint8_t *in, size_t n, struct ctl_trace *t)
{
	size_t cap = n ? n : 1, plen = 0, fed = 0;
	uint8_t *buf = malloc(cap);
	long r;

	CHECK(buf != NULL, "out of memory");
	FUZZ_POISON(buf, cap);
	memset(t, 0, sizeof *t);
	t->digest = FUZZ_HASH_INIT;
	for (;;) {
		for (;;) {
			/* A small reason buffer on odd calls, none on even ones. */
			char err[8];
			size_t need = 0;
			char *e = (fed & 1) ? err : NULL;
			r = ctl_decode(buf, plen, &msg_in, &need, e, e ? sizeof err : 0);
			uint64_t h = check_result(r, need, buf, plen, e, e ? sizeof err : 0);
			if (r <= 0) {
				t->need = r == 0 ? need : 0;
				break;
			}
			t->digest = fuzz_hash(t->digest, &h, sizeof h);
			t->messages++;
			t->consumed += (size_t)r;
			memmove(buf, buf + r, plen - (size_t)r);
			FUZZ_POISON(buf + plen - (size_t)r, (size_t)r);
			plen -= (size_t)r;
		}
		t->last = r;
		if (r < 0 || fed == n)
			break;
		FUZZ_UNPOISON(buf + plen, 1);
		buf[plen++] = in[fed++];
	}
	FUZZ_UNPOISON(buf, cap);
	free(buf);
}

static void run_stream(const uint8_t *data, size_t size)
{
	static const uint8_t none;
	struct ctl_trace whole, bytes;

	if (size == 0)
		data = &none;   /* offsets are added to it */
	decode_whole(data, size, &whole);
	decode_bytewise(data, size, &bytes);
	CHECK(whole.messages == bytes.messages && whole.consumed == bytes.consumed &&
		      whole.last == bytes.last && whole.need == bytes.need &&
		      whole.digest == bytes.digest,
	      "whole: %zu messages, %zu bytes, ended %ld need %zu; one byte at a time: %zu messages, %zu bytes, ended %ld need %zu%s",
	      whole.messages, whole.consumed, whole.last, whole.need, bytes.messages,
	      bytes.consumed, bytes.last, bytes.need,
	      whole.digest != bytes.digest ? ", other messages" : "");
}

void fuzz_ctl_input(const uint8_t *data, size_t size)
{
	if (size == 0)
		return;
	if (!(data[0] & 1)) {
		run_stream(data + 1, size - 1);
		return;
	}
	/* One body: the prefix is written here, so that mutations of the body
	 * need not keep a length in step. */
	size_t n = size - 1;
	uint8_t *msg = malloc(CTL_LENGTH_BYTES + n);
	CHECK(msg != NULL, "out of memory");
	msg[0] = (uint8_t)(n >> 24);
	msg[1] = (uint8_t)(n >> 16);
	msg[2] = (uint8_t)(n >> 8);
	msg[3] = (uint8_t)n;
	memcpy(msg + CTL_LENGTH_BYTES, data + 1, n);
	run_stream(msg, CTL_LENGTH_BYTES + n);
	free(msg);
}
