/* Shared-memory ring harness. The consumer (builderd's side) creates a real
 * segment with shr_create() (struct ring_segment below); the input is then a
 * script of operations: some write the segment as a hostile or broken
 * producer process could (any bytes of the header or data area, head, tail,
 * state, record words with a valid tag but any length, a truncation of the
 * segment), some produce through the real producer side (shr_attach() on
 * first use, reserve, fill, commit), some consume (peek, release, wait,
 * notify). At the end the consumer drains until an error or empty. The
 * bytes between the end of each mapping and the end of its last page are
 * poisoned, so with AddressSanitizer any access past the segment is
 * reported.
 *
 * Always checked: shr_peek() returns 0, -EAGAIN, -EPIPE or -EPROTO (or
 * -EFAULT once the segment was truncated), and errors are sticky; a record
 * it returns lies inside the data area, 8-aligned, at most
 * shr_max_payload() long; draining ends within capacity / 8 records (no
 * loop); a reservation points inside the data area.
 * While nothing has written the segment except the real producer, a model
 * of the committed records is also checked: peek returns them in order with
 * their contents, -EAGAIN (or -EPIPE once detached) exactly when none is
 * left, never -EPROTO; peeked records are intact until released; reserve
 * fails only for -EMSGSIZE or a full ring, after which shr_wait_space() may
 * sleep; shr_wait_data() may sleep exactly when nothing is unread. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/shmring.h"

#define T "ring"
#define CHECK(cond, ...) FUZZ_CHECK(T, cond, __VA_ARGS__)

#define RING_RUN_ID 0x52494e47u
/* More than a ring of the largest fuzzed capacity holds unread (one 8-byte
 * record word each at least). */
#define RING_MODEL_SLOTS 2048u

/* Payloads are cut from one pseudo-random pattern at an offset, the seed,
 * so that filling and checking them are a memcpy and a memcmp. */
#define RING_PATTERN_BYTES (256u + 2 * SHR_MIN_CAPACITY_BYTES)

struct ring_record {
	const uint8_t *ptr; /* peeked: where the consumer was given it */
	uint32_t len;
	uint8_t seed;       /* the payload is ring_pattern[seed ...] */
};

/* One segment per capacity, created on first use and kept for the whole
 * process: creating and mapping one per input would take most of the time.
 * Each input starts from a copy of the consumer's ring as shr_create() left
 * it, the header as it wrote it and a zeroed data area, which is the state
 * of a fresh segment. The names are unlinked at exit or on a failure. */
struct ring_segment {
	bool made;
	char name[64];
	struct shr_ring fresh;
	uint8_t header[SHR_HEADER_BYTES];
};

struct ring_fuzz {
	const uint8_t *in;
	size_t n, at;
	const char *name;
	struct shr_ring cons, prod;
	bool prod_open;
	unsigned attaches;  /* attempts: attaching maps, at most two per input */
	bool detached;      /* the producer closed */
	bool tampered;      /* the segment was written other than by the producer */
	bool truncated;     /* the segment was cut short (TRUNCATE) */
	int sticky;         /* the consumer's -EPROTO or -EFAULT, once seen */
	uint64_t cap;
	/* Committed, not yet peeked: a FIFO of the model. */
	struct ring_record queue[RING_MODEL_SLOTS];
	size_t q_first, q_count;
	/* Peeked, not yet released. */
	struct ring_record peeked[RING_MODEL_SLOTS];
	size_t p_count;
};

/* Static: large. */
static struct ring_fuzz ring;
static struct ring_segment ring_segments[2];
static int ring_data_efd = -1, ring_space_efd = -1;
static uint8_t ring_pattern[RING_PATTERN_BYTES];
static uint8_t ring_scratch[2 * SHR_MIN_CAPACITY_BYTES];
static volatile uint8_t ring_sink;

static void ring_pattern_init(void)
{
	uint64_t s = 1;
	if (ring_pattern[0] != 0)
		return;
	for (size_t i = 0; i < sizeof ring_pattern; i++)
		ring_pattern[i] = (uint8_t)(fuzz_rand(&s) | (i == 0));
}

static void ring_unlink(void)
{
	for (size_t i = 0; i < sizeof ring_segments / sizeof ring_segments[0]; i++) {
		if (ring_segments[i].made)
			shr_unlink(ring_segments[i].name);
	}
}

static bool take(struct ring_fuzz *f, unsigned bytes, uint64_t *v)
{
	if (f->n - f->at < bytes)
		return false;
	*v = 0;
	for (unsigned i = 0; i < bytes; i++)
		*v = *v << 8 | f->in[f->at++];
	return true;
}

/* Poisons (on) or unpoisons the rest of the last page after a mapping. */
static void guard(const struct shr_ring *r, bool on)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *end = (uint8_t *)shr_header(r) + shr_map_bytes(r);
	size_t slack = (page - shr_map_bytes(r) % page) % page;

	if (on)
		FUZZ_POISON(end, slack);
	else
		FUZZ_UNPOISON(end, slack);
}

static uint8_t *data_of(const struct shr_ring *r)
{
	return (uint8_t *)shr_header(r) + SHR_HEADER_BYTES;
}

static struct shr_header *hdr(struct ring_fuzz *f)
{
	return shr_header(&f->cons);
}

/* The records of the model are intact where the consumer was given them. */
static void verify(const struct ring_record *rec, const uint8_t *p, const char *when)
{
	const uint8_t *want = ring_pattern + rec->seed;
	if (memcmp(p, want, rec->len) == 0)
		return;
	for (uint32_t i = 0; i < rec->len; i++)
		CHECK(p[i] == want[i], "%s: byte %u of a %u-byte record is 0x%02x, committed 0x%02x",
		      when, i, rec->len, p[i], want[i]);
}

static int peek(struct ring_fuzz *f)
{
	const void *ptr = NULL;
	uint32_t len = 0;
	int rc = shr_peek(&f->cons, &ptr, &len);

	CHECK(rc == 0 || rc == -EAGAIN || rc == -EPIPE || rc == -EPROTO ||
		      (rc == -EFAULT && f->truncated),
	      "shr_peek returned %d%s", rc, f->truncated ? "" : " on a segment never truncated");
	/* Errors are sticky; -EFAULT (truncated) may follow -EPROTO, not
	 * the other way round. */
	CHECK(!f->sticky || rc == f->sticky || (rc == -EFAULT && f->sticky == -EPROTO),
	      "shr_peek returned %d after %d", rc, f->sticky);
	if (rc == -EPROTO || rc == -EFAULT)
		f->sticky = rc;
	if (rc == 0) {
		const uint8_t *data = data_of(&f->cons), *p = ptr;
		CHECK(p >= data + SHR_RECORD_PREFIX_BYTES && p <= data + f->cap &&
			      (size_t)(p - data) + len <= f->cap,
		      "record of %u bytes at data offset %td, outside the %llu-byte data area", len,
		      p - data, (unsigned long long)f->cap);
		CHECK(((uintptr_t)p & 7) == 0, "record at data offset %td not 8-aligned", p - data);
		CHECK(len <= shr_max_payload(&f->cons), "record of %u bytes, more than %u", len,
		      shr_max_payload(&f->cons));
		/* Every byte is read (memcpy's range is checked under ASan). */
		memcpy(ring_scratch, p, len);
		ring_sink = len ? ring_scratch[len - 1] : 0;
	}
	if (f->tampered)
		return rc;
	if (f->q_count > 0) {
		struct ring_record *rec = &f->queue[f->q_first];
		CHECK(rc == 0, "shr_peek returned %d with %zu committed records unread", rc,
		      f->q_count);
		CHECK(len == rec->len, "peeked a record of %u bytes, committed %u", len, rec->len);
		verify(rec, ptr, "peek");
		CHECK(f->p_count < RING_MODEL_SLOTS, "model: too many records peeked");
		f->peeked[f->p_count] = *rec;
		f->peeked[f->p_count++].ptr = ptr;
		f->q_first = (f->q_first + 1) % RING_MODEL_SLOTS;
		f->q_count--;
	} else {
		CHECK(rc == (f->detached ? -EPIPE : -EAGAIN),
		      "shr_peek returned %d with nothing committed unread (producer %s)", rc,
		      f->detached ? "detached" : "attached");
	}
	return rc;
}

static void release(struct ring_fuzz *f)
{
	if (!f->tampered) {
		for (size_t i = 0; i < f->p_count; i++)
			verify(&f->peeked[i], f->peeked[i].ptr, "before release");
	}
	f->p_count = 0;
	shr_release(&f->cons);
}

static void drain(struct ring_fuzz *f)
{
	uint64_t limit = f->cap / SHR_RECORD_PREFIX_BYTES + 2;
	uint64_t calls = 0;

	while (peek(f) == 0) {
		calls++;
		CHECK(calls < limit, "drain still returning records after %llu",
		      (unsigned long long)calls);
		if ((calls & 3) == 0)
			release(f);
	}
	release(f);
}

static void produce(struct ring_fuzz *f, uint32_t len, uint32_t shortfall, uint8_t seed)
{
	void *ptr = NULL;
	int rc;

	if (!f->prod_open) {
		if (f->attaches >= 2)
			return;
		f->attaches++;
		rc = shr_attach(&f->prod, f->name, RING_RUN_ID);
		if (!f->tampered)
			CHECK(rc == (f->detached ? -ESHUTDOWN : 0), "shr_attach returned %d (%s)", rc,
			      shr_strerror(rc));
		if (rc < 0)
			return;
		guard(&f->prod, true);
		f->prod_open = true;
	}
	uint32_t max = shr_max_payload(&f->prod);
	rc = shr_reserve(&f->prod, len, &ptr);
	CHECK(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE || rc == -EPIPE || rc == -EPROTO ||
		      (rc == -EFAULT && f->truncated),
	      "shr_reserve(%u) returned %d", len, rc);
	CHECK(rc != -EMSGSIZE || len > max, "shr_reserve(%u) returned -EMSGSIZE, max %u", len, max);
	CHECK(len <= max || rc == -EMSGSIZE || rc == -EPROTO || rc == -EFAULT,
	      "shr_reserve(%u) returned %d over the max %u", len, rc, max);
	if (!f->tampered)
		CHECK(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE,
		      "shr_reserve(%u) returned %d on an intact ring", len, rc);
	if (rc == -EAGAIN) {
		bool sleep = shr_wait_space(&f->prod, len);
		if (!f->tampered)
			CHECK(sleep, "shr_wait_space refuses to sleep on a full ring");
		return;
	}
	if (rc != 0)
		return;
	uint8_t *p = ptr, *data = data_of(&f->prod);
	CHECK(p >= data + SHR_RECORD_PREFIX_BYTES && (size_t)(p - data) + len <= f->cap &&
		      ((uintptr_t)p & 7) == 0,
	      "reservation of %u bytes at data offset %td", len, p - data);
	CHECK(seed + (size_t)len <= sizeof ring_pattern, "reserved %u bytes, more than a record holds",
	      len);
	memcpy(p, ring_pattern + seed, len);
	CHECK(shr_commit(&f->prod, len + 1) == -EINVAL, "committed more than reserved");
	uint32_t committed = len - (shortfall < len ? shortfall : len);
	rc = shr_commit(&f->prod, committed);
	CHECK(rc == 0 || (rc == -EFAULT && f->truncated), "shr_commit returned %d", rc);
	if (!f->tampered) {
		CHECK(f->q_count < RING_MODEL_SLOTS, "model: too many records unread");
		struct ring_record *rec = &f->queue[(f->q_first + f->q_count++) % RING_MODEL_SLOTS];
		rec->ptr = NULL;
		rec->len = committed;
		rec->seed = seed;
	}
}

/* Sets head or tail (c) to v, adds v or 8 v to it, or sets it to the other
 * counter plus v, which keeps a forged head within reach of the tail. */
static void set_counter(_Atomic uint64_t *c, _Atomic uint64_t *other, uint64_t mode, uint64_t v)
{
	uint64_t old = atomic_load(c);
	switch (mode % 4) {
	case 0:
		atomic_store(c, v);
		break;
	case 1:
		atomic_store(c, old + v);
		break;
	case 2:
		atomic_store(c, old + 8 * v);
		break;
	default:
		atomic_store(c, atomic_load(other) + v);
		break;
	}
}

/* A record word at data offset off, tagged for the position with that
 * offset that a producer may write, in [tail, tail + capacity): a forged
 * record the consumer will take for one written for where it reads. */
static void write_word(struct ring_fuzz *f, uint64_t off, uint32_t len)
{
	uint64_t mask = f->cap - 1;
	uint64_t tail = atomic_load(&hdr(f)->tail);
	off &= mask & ~(uint64_t)7;
	uint64_t pos = tail + ((off - tail) & mask);
	uint64_t word = len | (uint64_t)(uint32_t)(pos >> 3) << 32;
	memcpy(data_of(&f->cons) + off, &word, sizeof word);
}

static void notify(struct ring_fuzz *f)
{
	if (ring_data_efd < 0) {
		int rc = shr_eventfds(&ring_data_efd, &ring_space_efd);
		CHECK(rc == 0, "shr_eventfds: %s", shr_strerror(rc));
	}
	if (f->prod_open)
		CHECK(shr_notify_consumer(&f->prod, ring_data_efd) == 0, "shr_notify_consumer failed");
	CHECK(shr_notify_producer(&f->cons, ring_space_efd) == 0, "shr_notify_producer failed");
	CHECK(shr_clear_wakeup(ring_data_efd) == 0 && shr_clear_wakeup(ring_space_efd) == 0,
	      "shr_clear_wakeup failed");
}

/* Cuts the segment to size bytes, as a hostile or confused process could:
 * the next access to a lost page raises SIGBUS, which shmguard.c turns into
 * zero pages and -EFAULT. The segment is replaced after this input. */
static void truncate_segment(struct ring_fuzz *f, uint64_t size)
{
	int fd = shm_open(f->name, O_RDWR | O_CLOEXEC, 0);
	CHECK(fd >= 0, "shm_open %s: %s", f->name, strerror(errno));
	CHECK(ftruncate(fd, (off_t)size) == 0, "ftruncate %s to %llu: %s", f->name,
	      (unsigned long long)size, strerror(errno));
	close(fd);
	f->truncated = true;
}

/* Runs one operation; false when the input ran out. */
static bool step(struct ring_fuzz *f)
{
	uint64_t op, a, b, c;
	uint64_t seg = SHR_HEADER_BYTES + f->cap;

	if (!take(f, 1, &op))
		return false;
	switch (op % FUZZ_RING_OP_COUNT) {
	case FUZZ_RING_RAW:
		if (!take(f, 2, &a) || !take(f, 2, &b))
			return false;
		a %= seg;
		if (b > seg - a)
			b = seg - a;
		if (b > f->n - f->at)
			b = f->n - f->at;
		memcpy((uint8_t *)hdr(f) + a, f->in + f->at, b);
		f->at += b;
		f->tampered = true;
		return true;
	case FUZZ_RING_HEAD:
	case FUZZ_RING_TAIL:
		if (!take(f, 1, &a) || !take(f, 8, &b))
			return false;
		if (op % FUZZ_RING_OP_COUNT == FUZZ_RING_HEAD)
			set_counter(&hdr(f)->head, &hdr(f)->tail, a, b);
		else
			set_counter(&hdr(f)->tail, &hdr(f)->head, a, b);
		f->tampered = true;
		return true;
	case FUZZ_RING_STATE:
		if (!take(f, 1, &a))
			return false;
		atomic_store(&hdr(f)->state, (uint32_t)a);
		f->tampered = true;
		return true;
	case FUZZ_RING_WORD:
		if (!take(f, 2, &a) || !take(f, 4, &b))
			return false;
		write_word(f, a, (uint32_t)b);
		f->tampered = true;
		return true;
	case FUZZ_RING_PRODUCE:
		if (!take(f, 2, &a) || !take(f, 2, &b) || !take(f, 1, &c))
			return false;
		produce(f, (uint32_t)a, (uint32_t)b, (uint8_t)c);
		return true;
	case FUZZ_RING_PEEK:
		peek(f);
		return true;
	case FUZZ_RING_RELEASE:
		release(f);
		return true;
	case FUZZ_RING_WAIT: {
		bool sleep = shr_wait_data(&f->cons);
		if (!f->tampered && !f->sticky)
			CHECK(sleep == (f->q_count == 0 && !f->detached),
			      "shr_wait_data says %s with %zu records unread, producer %s",
			      sleep ? "sleep" : "do not sleep", f->q_count,
			      f->detached ? "detached" : "attached");
		return true;
	}
	case FUZZ_RING_DETACH:
		if (f->prod_open) {
			guard(&f->prod, false);
			shr_close(&f->prod, -1);
			f->prod_open = false;
			f->detached = true;
		}
		return true;
	case FUZZ_RING_NOTIFY:
		notify(f);
		return true;
	case FUZZ_RING_DRAIN:
		drain(f);
		return true;
	case FUZZ_RING_TRUNCATE:
		if (!take(f, 2, &a))
			return false;
		truncate_segment(f, a % (seg + 1));
		f->tampered = true;
		return true;
	}
	return true;
}

void fuzz_ring_input(const uint8_t *data, size_t size)
{
	struct ring_fuzz *f = &ring;
	int rc;

	if (size < 1)
		return;
	ring_pattern_init();
	memset(f, 0, sizeof *f);
	f->in = data;
	f->n = size;
	f->at = 1;
	f->cap = SHR_MIN_CAPACITY_BYTES << (data[0] & 1);
	struct ring_segment *s = &ring_segments[data[0] & 1];
	if (!s->made) {
		static bool at_exit;
		snprintf(s->name, sizeof s->name, "/es-fuzz-ring-%ld-%u", (long)getpid(),
			 (unsigned)(data[0] & 1));
		rc = shr_create(&s->fresh, s->name, RING_RUN_ID, f->cap);
		CHECK(rc == 0 || rc == SHR_REPLACED, "shr_create %s: %s", s->name, shr_strerror(rc));
		memcpy(s->header, shr_header(&s->fresh), sizeof s->header);
		guard(&s->fresh, true);
		s->made = true;
		fuzz_set_cleanup(ring_unlink);
		if (!at_exit)
			at_exit = atexit(ring_unlink) == 0;
	}
	f->name = s->name;
	f->cons = s->fresh;
	memcpy(shr_header(&f->cons), s->header, sizeof s->header);
	memset(data_of(&f->cons), 0, f->cap);

	while (step(f))
		;
	drain(f);
	if (!f->tampered)
		CHECK(f->q_count == 0, "%zu committed records never read", f->q_count);

	if (f->prod_open) {
		guard(&f->prod, false);
		shr_close(&f->prod, -1);
	}
	if (f->truncated) {
		/* Its lost pages are private zeros now: start the next input on
		 * a new segment. */
		guard(&f->cons, false);
		shr_close(&f->cons, -1);
		shr_unlink(s->name);
		s->made = false;
	}
}
