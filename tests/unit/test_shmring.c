/* Shared-memory ring across two real processes: the test process creates the
 * segment and consumes (builderd's side), a forked child attaches and
 * produces (readoutd's side). Eventfds go to the child over a socketpair
 * with SCM_RIGHTS, as between the daemons. Random sizes come from a seed
 * that is logged and can be set with ES_TEST_SEED. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "wire/crc.h"
#include "io/shmring.h"

#define WAIT_MS 10000 /* any single wait longer than this is a failure */
#define RUN_ID 42u

static pid_t main_pid;
static uint64_t seed;
static unsigned test_seq; /* tells tests apart under CK_FORK=no */
static unsigned name_seq;
static unsigned scale_div = 1; /* record counts are divided by this under valgrind */

/* ---- helpers shared by both processes ---------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* 1 B .. 64 KiB, weighted towards small records so that both many small
 * ones and wraps of large ones happen in one run. */
static uint32_t random_len(uint64_t *rng)
{
	static const uint32_t limits[] = { 16, 256, 4096, 65536 };
	uint64_t x = splitmix(rng);
	return 1 + (uint32_t)((x >> 2) % limits[x & 3]);
}

static uint8_t fill_byte(uint64_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131 + (seq >> 8) + i * 7);
}

/* A record of 12 bytes or more is: sequence number, CRC-32 of the rest,
 * filler; a shorter one is filler only, still a function of its sequence. */
static void record_fill(uint8_t *p, uint64_t seq, uint32_t len)
{
	if (len < 12) {
		for (uint32_t i = 0; i < len; i++)
			p[i] = fill_byte(seq, i);
		return;
	}
	memcpy(p, &seq, 8);
	for (uint32_t i = 12; i < len; i++)
		p[i] = fill_byte(seq, i);
	uint32_t crc = crc_update(0, p + 12, len - 12);
	memcpy(p + 8, &crc, 4);
}

static bool record_ok(const uint8_t *p, uint64_t seq, uint32_t len)
{
	if (len < 12) {
		for (uint32_t i = 0; i < len; i++)
			if (p[i] != fill_byte(seq, i))
				return false;
		return true;
	}
	uint64_t got_seq;
	uint32_t got_crc;
	memcpy(&got_seq, p, 8);
	memcpy(&got_crc, p + 8, 4);
	return got_seq == seq && got_crc == crc_update(0, p + 12, len - 12);
}

/* Fixed-size messages on the test's socketpair, next to the fd passing. */
enum msg_kind { MSG_ATTACHED = 1, MSG_FULL, MSG_DONE, MSG_READY };

struct msg {
	int32_t kind;
	int32_t rc;
	uint64_t a, b, c;
};

static int msg_send(int sock, int kind, int rc, uint64_t a, uint64_t b, uint64_t c)
{
	struct msg m = { .kind = kind, .rc = rc, .a = a, .b = b, .c = c };
	return write(sock, &m, sizeof m) == (ssize_t)sizeof m ? 0 : -EIO;
}

static int msg_recv(int sock, struct msg *m)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	if (poll(&p, 1, WAIT_MS) != 1)
		return -ETIMEDOUT;
	ssize_t n = read(sock, m, sizeof *m);
	return n == (ssize_t)sizeof *m ? 0 : -EIO;
}

static int wait_fd(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;
	do
		n = poll(&p, 1, WAIT_MS);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	if (n < 0)
		return -errno;
	return shr_clear_wakeup(fd);
}

struct wait_stats {
	uint64_t full;   /* reservations refused with -EAGAIN */
	uint64_t sleeps; /* polls on an eventfd */
};

/* Producer: a reservation, sleeping on space_efd while the ring is full. */
static int reserve_wait(struct shr_ring *r, int data_efd, int space_efd, uint32_t len,
			void **ptr, struct wait_stats *st)
{
	for (;;) {
		int rc = shr_reserve(r, len, ptr);
		if (rc != -EAGAIN)
			return rc;
		st->full++;
		/* Commits not yet announced must be before we sleep, or both
		 * sides could wait for each other. */
		shr_notify_consumer(r, data_efd);
		if (!shr_wait_space(r, len))
			continue;
		st->sleeps++;
		rc = wait_fd(space_efd);
		if (rc < 0)
			return rc;
	}
}

/* Consumer: the next record, releasing what was read and sleeping on
 * data_efd while the ring is empty. */
static int peek_wait(struct shr_ring *r, int data_efd, int space_efd, const void **ptr,
		     uint32_t *len, struct wait_stats *st)
{
	for (;;) {
		int rc = shr_peek(r, ptr, len);
		if (rc != -EAGAIN)
			return rc;
		shr_release(r);
		shr_notify_producer(r, space_efd);
		if (!shr_wait_data(r))
			continue;
		st->sleeps++;
		rc = wait_fd(data_efd);
		if (rc < 0)
			return rc;
	}
}

/* ---- the producer child --------------------------------------------------- */

enum len_mode { LEN_RANDOM, LEN_FIXED };

struct producer {
	const char *name;
	uint32_t run_id;
	uint64_t count;
	enum len_mode mode;
	uint32_t fixed_len;
	uint32_t notify_every;   /* commits between shr_notify_consumer() calls */
	bool report_full;        /* stop at the first -EAGAIN and report it */
	bool hang;               /* after producing, wait to be killed */
};

#define CHILD_FAIL(...)                                                         \
	do {                                                                    \
		fprintf(stderr, "producer %d: line %d: ", (int)getpid(), __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                   \
		fprintf(stderr, "\n");                                          \
		_exit(1);                                                       \
	} while (0)

static void producer_main(int sock, const struct producer *p)
{
	struct shr_ring r;
	struct wait_stats st = { 0 };
	int data_efd, space_efd;
	uint64_t rng = seed;

	int rc = shr_recv_fds(sock, &data_efd, &space_efd);
	if (rc < 0)
		CHILD_FAIL("receiving eventfds: %s", shr_strerror(rc));
	rc = shr_attach(&r, p->name, p->run_id);
	msg_send(sock, MSG_ATTACHED, rc, 0, 0, 0);
	if (rc < 0)
		_exit(0); /* the parent asserts on the code */
	shr_heartbeat(&r);
	for (uint64_t seq = 0; seq < p->count; seq++) {
		uint32_t len = p->mode == LEN_FIXED ? p->fixed_len : random_len(&rng);
		void *ptr;
		if (p->report_full && st.full == 0) {
			rc = shr_reserve(&r, len, &ptr);
			if (rc == -EAGAIN) {
				/* Still full on a second try: nothing was
				 * overwritten to make room. */
				if (shr_reserve(&r, len, &ptr) != -EAGAIN)
					CHILD_FAIL("full ring accepted a record");
				st.full++;
				shr_notify_consumer(&r, data_efd);
				msg_send(sock, MSG_FULL, 0, seq, 0, 0);
				rc = reserve_wait(&r, data_efd, space_efd, len, &ptr, &st);
			}
		} else {
			rc = reserve_wait(&r, data_efd, space_efd, len, &ptr, &st);
		}
		if (rc == -EPIPE)
			_exit(3); /* the consumer closed: expected by one test */
		if (rc < 0)
			CHILD_FAIL("reserve of record %" PRIu64 ": %s", seq, shr_strerror(rc));
		record_fill(ptr, seq, len);
		rc = shr_commit(&r, len);
		if (rc < 0)
			CHILD_FAIL("commit: %s", shr_strerror(rc));
		if (p->notify_every <= 1 || seq % p->notify_every == p->notify_every - 1)
			shr_notify_consumer(&r, data_efd);
	}
	shr_notify_consumer(&r, data_efd);
	if (p->hang) {
		msg_send(sock, MSG_READY, shr_peer_alive(&r), 0, 0, 0);
		for (;;)
			pause();
	}
	shr_close(&r, data_efd);
	msg_send(sock, MSG_DONE, 0, st.full, st.sleeps, 0);
	_exit(0);
}

/* ---- the test process's side --------------------------------------------- */

static void segment_name(char *buf, size_t n)
{
	snprintf(buf, n, "/es-test-shr-%d-%d-%u-%u", (int)main_pid, (int)getpid(), test_seq,
		 name_seq++);
}

/* Segments of this test process (or of every test, with all) in /dev/shm. */
static int count_segments(bool all, bool remove)
{
	char prefix[64];
	if (all)
		snprintf(prefix, sizeof prefix, "es-test-shr-%d-", (int)main_pid);
	else
		snprintf(prefix, sizeof prefix, "es-test-shr-%d-%d-%u-", (int)main_pid,
			 (int)getpid(), test_seq);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		n++;
		if (remove) {
			char name[300];
			snprintf(name, sizeof name, "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	closedir(d);
	return n;
}

#define ck_assert_no_segments() ck_assert_int_eq(count_segments(false, false), 0)

/* One consumer with its producer child, as builderd and readoutd. */
struct pair {
	char name[96];
	struct shr_ring ring;
	int data_efd, space_efd;
	int sock;
	pid_t child;
	struct wait_stats st;
};

static void pair_start(struct pair *pp, struct producer *p, uint64_t capacity)
{
	int sv[2];
	memset(pp, 0, sizeof *pp);
	segment_name(pp->name, sizeof pp->name);
	ck_assert_int_eq(shr_create(&pp->ring, pp->name, RUN_ID, capacity), 0);
	p->name = pp->name;
	if (!p->run_id)
		p->run_id = RUN_ID;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid_t parent = getpid();
	pp->child = fork();
	ck_assert_int_ge(pp->child, 0);
	if (pp->child == 0) {
		close(sv[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		producer_main(sv[1], p);
	}
	close(sv[1]);
	pp->sock = sv[0];
	/* Made after the fork so the child can only have them from the
	 * socket, as a separately started readoutd would. */
	ck_assert_int_eq(shr_eventfds(&pp->data_efd, &pp->space_efd), 0);
	ck_assert_int_eq(shr_send_fds(pp->sock, pp->data_efd, pp->space_efd), 0);
	struct msg m;
	ck_assert_int_eq(msg_recv(pp->sock, &m), 0);
	ck_assert_int_eq(m.kind, MSG_ATTACHED);
	ck_assert_msg(m.rc == 0, "producer attach: %s", shr_strerror(m.rc));
}

static int pair_reap(struct pair *pp)
{
	int status = -1;
	if (pp->child > 0 && waitpid(pp->child, &status, 0) != pp->child)
		status = -1;
	pp->child = 0;
	return status;
}

/* Expects the DONE message, a clean exit, then tears everything down. */
static void pair_finish(struct pair *pp, struct msg *done)
{
	ck_assert_int_eq(msg_recv(pp->sock, done), 0);
	ck_assert_int_eq(done->kind, MSG_DONE);
	int status = pair_reap(pp);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "producer status %#x", status);
	ck_assert(!shr_peer_alive(&pp->ring));
	shr_close(&pp->ring, pp->space_efd);
	ck_assert_int_eq(shr_unlink(pp->name), 0);
	close(pp->data_efd);
	close(pp->space_efd);
	close(pp->sock);
	ck_assert_no_segments();
}

/* ck_assert() records its location through Check's message channel, a
 * system call per assertion in fork mode; per-record checks would measure
 * Check instead of the ring. */
#define hot_assert(cond, ...)                                                   \
	do {                                                                    \
		if (!(cond))                                                    \
			ck_abort_msg(__VA_ARGS__);                              \
	} while (0)

/* Consumes count records and expects -EPIPE after them; lengths follow the
 * producer's rule; release every batch records. Returns bytes consumed
 * including prefixes. */
static uint64_t consume_all(struct pair *pp, const struct producer *p, uint32_t batch,
			    uint32_t pause_every, useconds_t pause_us)
{
	uint64_t rng = seed, bytes = 0;
	for (uint64_t seq = 0; seq < p->count; seq++) {
		uint32_t want = p->mode == LEN_FIXED ? p->fixed_len : random_len(&rng);
		const void *ptr;
		uint32_t len;
		int rc = peek_wait(&pp->ring, pp->data_efd, pp->space_efd, &ptr, &len, &pp->st);
		hot_assert(rc == 0, "record %" PRIu64 ": %s", seq, shr_strerror(rc));
		hot_assert(len == want, "record %" PRIu64 ": length %u, expected %u",
			      seq, len, want);
		hot_assert(((uintptr_t)ptr & 7) == 0, "payload not 8-aligned");
		hot_assert(record_ok(ptr, seq, len), "record %" PRIu64 " (%u bytes) corrupt",
			      seq, len);
		bytes += (SHR_RECORD_PREFIX_BYTES + len + 7) & ~7u;
		if (seq % batch == batch - 1) {
			shr_release(&pp->ring);
			shr_notify_producer(&pp->ring, pp->space_efd);
		}
		if (pause_every && seq % pause_every == pause_every - 1)
			usleep(pause_us);
	}
	const void *ptr;
	uint32_t len;
	int rc = peek_wait(&pp->ring, pp->data_efd, pp->space_efd, &ptr, &len, &pp->st);
	hot_assert(rc == -EPIPE, "after the last record: %s", shr_strerror(rc));
	return bytes;
}

/* Record counts, smaller under valgrind but never below what a test needs
 * to reach its condition (a full ring, a pause of the consumer). */
static uint64_t scaled(uint64_t n, uint64_t min)
{
	n /= scale_div;
	return n > min ? n : min;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(test_wrap_varying_sizes)
{
	struct pair pp;
	struct msg done;
	struct producer p = { .count = scaled(6000, 100), .mode = LEN_RANDOM, .notify_every = 4 };
	uint64_t cap = 256 * 1024;
	pair_start(&pp, &p, cap);
	uint64_t bytes = consume_all(&pp, &p, 8, 0, 0);
	pair_finish(&pp, &done);
	/* Many laps, so wraps at every kind of offset were exercised. */
	if (scale_div == 1)
		ck_assert_msg(bytes > 20 * cap, "only %" PRIu64 " bytes", bytes);
}
END_TEST

START_TEST(test_full_ring_backpressure)
{
	struct pair pp;
	struct msg m, done;
	/* 112-byte records: 36 fill 4032 of 4096 bytes, the 37th must wait;
	 * the remainder makes later laps wrap with padding. */
	struct producer p = { .count = scaled(2000, 200), .mode = LEN_FIXED, .fixed_len = 100,
			      .notify_every = 1, .report_full = true };
	pair_start(&pp, &p, 4096);
	ck_assert_int_eq(msg_recv(pp.sock, &m), 0);
	ck_assert_int_eq(m.kind, MSG_FULL);
	ck_assert_uint_eq(m.a, 36);
	/* Let the producer go to sleep on its eventfd before we drain. */
	usleep(20000);
	consume_all(&pp, &p, 4, 0, 0);
	pair_finish(&pp, &done);
	ck_assert_uint_ge(done.a, 1);
	ck_assert_uint_ge(done.b, 1);
}
END_TEST

START_TEST(test_slow_consumer)
{
	struct pair pp;
	struct msg done;
	struct producer p = { .count = scaled(20000, 2000), .mode = LEN_FIXED, .fixed_len = 1000,
			      .notify_every = 16 };
	pair_start(&pp, &p, 64 * 1024);
	consume_all(&pp, &p, 16, 250, 2000);
	pair_finish(&pp, &done);
	/* The producer ran into the full ring and slept rather than spun. */
	ck_assert_uint_ge(done.a, 1);
	ck_assert_uint_ge(done.b, 1);
	ck_assert_uint_le(done.b, done.a);
}
END_TEST

START_TEST(test_rewind_when_caught_up)
{
	char name[96];
	struct shr_ring cons, prod;
	const uint64_t cap = 1 << 20;
	const uint32_t len = 100;
	segment_name(name, sizeof name);
	ck_assert_int_eq(shr_create(&cons, name, RUN_ID, cap), 0);
	ck_assert_int_eq(shr_attach(&prod, name, RUN_ID), 0);
	void *ptr;
	const void *cptr;
	uint32_t got;
	uint64_t seq = 0, highest = 0;
	const uint64_t early = cap / SHR_REWIND_DIVISOR, check = cap / SHR_REWIND_CHECKS;

	/* A consumer that keeps up: the producer never goes further than a
	 * eighth of the ring plus the stretch after which it looks at the
	 * consumer's tail again. */
	for (int i = 0; i < 20000; i++, seq++) {
		ck_assert_int_eq(shr_reserve(&prod, len, &ptr), 0);
		record_fill(ptr, seq, len);
		ck_assert_int_eq(shr_commit(&prod, len), 0);
		ck_assert_int_eq(shr_peek(&cons, &cptr, &got), 0);
		ck_assert_uint_eq(got, len);
		ck_assert(record_ok(cptr, seq, got));
		uint64_t off = shr_record_offset(&cons, cptr);
		highest = off > highest ? off : highest;
		shr_release(&cons);
	}
	ck_assert_uint_ge(highest, early - 2 * 112);
	ck_assert_uint_lt(highest, early + check + 112);

	/* A growing backlog gets the room it needs: the records follow one
	 * another well past the early-wrap offset. */
	const int backlog = 3000; /* 336 kB of 112-byte records */
	for (int i = 0; i < backlog; i++) {
		ck_assert_int_eq(shr_reserve(&prod, len, &ptr), 0);
		record_fill(ptr, seq + (uint64_t)i, len);
		ck_assert_int_eq(shr_commit(&prod, len), 0);
	}
	highest = 0;
	for (int i = 0; i < backlog; i++, seq++) {
		ck_assert_int_eq(shr_peek(&cons, &cptr, &got), 0);
		ck_assert(record_ok(cptr, seq, got));
		uint64_t off = shr_record_offset(&cons, cptr);
		highest = off > highest ? off : highest;
	}
	shr_release(&cons);
	ck_assert_uint_gt(highest, early + check);
	ck_assert_int_eq(shr_peek(&cons, &cptr, &got), -EAGAIN);

	/* Caught up again: back to the start within one more stretch. */
	int rewound_at = -1;
	for (int i = 0; i < 400; i++, seq++) {
		ck_assert_int_eq(shr_reserve(&prod, len, &ptr), 0);
		record_fill(ptr, seq, len);
		ck_assert_int_eq(shr_commit(&prod, len), 0);
		ck_assert_int_eq(shr_peek(&cons, &cptr, &got), 0);
		ck_assert(record_ok(cptr, seq, got));
		if (shr_record_offset(&cons, cptr) == 0 && rewound_at < 0)
			rewound_at = i;
		shr_release(&cons);
	}
	ck_assert_int_ge(rewound_at, 0);
	ck_assert_int_le(rewound_at, (int)(check / 112) + 1);
	shr_close(&prod, -1);
	shr_close(&cons, -1);
	ck_assert_int_eq(shr_unlink(name), 0);
	ck_assert_no_segments();
}
END_TEST

START_TEST(test_million_small_records)
{
	struct pair pp;
	struct msg done;
	struct producer p = { .count = scaled(4000000, 10000), .mode = LEN_FIXED, .fixed_len = 64,
			      .notify_every = 32 };
	double t0 = now_s();
	pair_start(&pp, &p, 256 * 1024);
	consume_all(&pp, &p, 32, 0, 0);
	double dt = now_s() - t0;
	pair_finish(&pp, &done);
	fprintf(stderr, "test_shmring: %" PRIu64 " records of 64 B in %.3f s = %.2f M/s; "
		"consumer slept %" PRIu64 ", producer full %" PRIu64 " slept %" PRIu64 "\n",
		p.count, dt, p.count / dt / 1e6, pp.st.sleeps, done.a, done.b);
	/* Wake-ups are per sleep, not per record. */
	if (scale_div == 1)
		ck_assert_uint_lt(pp.st.sleeps + done.b, p.count / 8);
}
END_TEST

/* Maps a segment directly, as a corrupting process would. */
static void *raw_map(const char *name, size_t *size)
{
	int fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	*size = (size_t)st.st_size;
	void *map = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	close(fd);
	return map;
}

/* The return code of shr_attach() in a separate process. */
static int attach_in_child(const char *name, uint32_t run_id)
{
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shr_ring r;
		int rc = shr_attach(&r, name, run_id);
		if (rc == 0)
			shr_close(&r, -1);
		_exit(write(pfd[1], &rc, sizeof rc) == sizeof rc ? 0 : 1);
	}
	close(pfd[1]);
	int rc = 1;
	ck_assert_int_eq(read(pfd[0], &rc, sizeof rc), (ssize_t)sizeof rc);
	close(pfd[0]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return rc;
}

START_TEST(test_stale_segment)
{
	char name[96];
	struct shr_ring r, old, second;
	segment_name(name, sizeof name);

	/* A builder of run 7 dies without unlinking its segment. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shr_ring gone;
		if (shr_create(&gone, name, 7, 4096) != 0)
			_exit(1);
		kill(getpid(), SIGKILL);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(count_segments(false, false), 1);

	/* A reader of run 8 refuses it; so does one of run 7: nobody reads. */
	ck_assert_int_eq(attach_in_child(name, 8), -ESTALE);
	ck_assert_int_eq(attach_in_child(name, 7), -EOWNERDEAD);

	/* The run 8 builder replaces it and says so. */
	ck_assert_int_eq(shr_create(&r, name, 8, 8192), SHR_REPLACED);
	ck_assert_int_eq(attach_in_child(name, 7), -ESTALE);

	/* A new segment replacing a live one cuts off the old mapping's
	 * users without touching the new ring. */
	ck_assert_int_eq(shr_attach(&old, name, 8), 0);
	ck_assert_int_eq(shr_attach(&second, name, 8), -EBUSY);
	ck_assert_int_eq(attach_in_child(name, 8), -EBUSY);
	ck_assert_int_eq(shr_create(&second, name, 9, 4096), SHR_REPLACED);
	void *ptr;
	ck_assert_int_eq(shr_reserve(&old, 10, &ptr), 0);
	ck_assert_int_eq(shr_commit(&old, 10), 0);
	const void *cptr;
	uint32_t len;
	ck_assert_int_eq(shr_peek(&second, &cptr, &len), -EAGAIN);
	ck_assert_int_eq(shr_peek(&r, &cptr, &len), 0);
	ck_assert_uint_eq(len, 10);
	ck_assert_int_eq(attach_in_child(name, 9), 0);
	ck_assert_int_eq(attach_in_child(name, 9), -ESHUTDOWN); /* detached: stream over */
	shr_close(&old, -1);
	shr_close(&r, -1);
	shr_close(&second, -1);
	ck_assert_int_eq(shr_unlink(name), 0);
	ck_assert_int_eq(shr_unlink(name), 0);
	ck_assert_int_eq(shr_create(&r, "no-slash", 1, 4096), -EINVAL);
	ck_assert_int_eq(shr_create(&r, name, 1, 4096 + 8), -EINVAL);
	ck_assert_int_eq(shr_attach(&r, name, 1), -ENOENT);
	ck_assert_no_segments();
}
END_TEST

enum header_fault {
	HF_NONE, HF_MAGIC, HF_VERSION, HF_CAP_LARGER, HF_CAP_ODD, HF_HEADER_BYTES,
	HF_SHORT, HF_TAIL_AHEAD, HF_HEAD_MISALIGNED, HF_STATE, HF_COUNT
};

START_TEST(test_corrupt_header)
{
	static const int expect[HF_COUNT] = {
		[HF_NONE] = 0,
		[HF_MAGIC] = -EBADMSG,
		[HF_VERSION] = -EPROTONOSUPPORT,
		[HF_CAP_LARGER] = -ERANGE,
		[HF_CAP_ODD] = -ERANGE,
		[HF_HEADER_BYTES] = -EBADMSG,
		[HF_SHORT] = -EBADMSG,
		[HF_TAIL_AHEAD] = -EBADMSG,
		[HF_HEAD_MISALIGNED] = -EBADMSG,
		[HF_STATE] = -EBADMSG,
	};
	for (int f = 0; f < HF_COUNT; f++) {
		char name[96];
		struct shr_ring r;
		size_t size;
		segment_name(name, sizeof name);
		ck_assert_int_eq(shr_create(&r, name, RUN_ID, 4096), 0);
		struct shr_header *h = raw_map(name, &size);
		switch (f) {
		case HF_MAGIC:
			h->magic ^= 1;
			break;
		case HF_VERSION:
			h->version = SHR_VERSION + 1;
			break;
		case HF_CAP_LARGER:
			h->capacity_bytes = 1 << 20;
			break;
		case HF_CAP_ODD:
			h->capacity_bytes = 4000;
			break;
		case HF_HEADER_BYTES:
			h->header_bytes = 256;
			break;
		case HF_SHORT: {
			int fd = shm_open(name, O_RDWR, 0);
			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(ftruncate(fd, 100), 0);
			close(fd);
			break;
		}
		case HF_TAIL_AHEAD:
			atomic_store(&h->tail, 64);
			break;
		case HF_HEAD_MISALIGNED:
			atomic_store(&h->head, 12);
			break;
		case HF_STATE:
			atomic_store(&h->state, 99);
			break;
		}
		munmap(h, size);
		int rc = attach_in_child(name, RUN_ID);
		ck_assert_msg(rc == expect[f], "fault %d: got %d (%s), expected %d (%s)", f, rc,
			      shr_strerror(rc), expect[f], shr_strerror(expect[f]));
		if (f != HF_SHORT)
			shr_close(&r, -1);
		else
			munmap(shr_header(&r), shr_map_bytes(&r)); /* no stores beyond the new end */
		ck_assert_int_eq(shr_unlink(name), 0);
	}
	ck_assert_no_segments();
}
END_TEST

enum data_fault {
	DF_LEN_HUGE, DF_LEN_OVER_HALF, DF_LEN_BEYOND_HEAD, DF_LEN_SHIFTED, DF_TAG, DF_HEAD_MISALIGNED,
	DF_HEAD_TOO_FAR, DF_WRAP_AT_ZERO, DF_COUNT
};

/* Thirty 100-byte records (112 bytes each in the ring) from a child, then one
 * corruption of the data area or head; the consumer must stop with -EPROTO
 * at the right record and stay stopped. */
START_TEST(test_corrupt_length)
{
	/* Records returned intact before the error. */
	static const int good[DF_COUNT] = {
		[DF_LEN_HUGE] = 3, [DF_LEN_OVER_HALF] = 0, [DF_LEN_BEYOND_HEAD] = 29,
		[DF_LEN_SHIFTED] = 4,
		[DF_TAG] = 2, [DF_HEAD_MISALIGNED] = 0, [DF_HEAD_TOO_FAR] = 0,
		[DF_WRAP_AT_ZERO] = 0,
	};
	for (int f = 0; f < DF_COUNT; f++) {
		struct pair pp;
		struct msg done;
		struct producer p = { .count = 30, .mode = LEN_FIXED, .fixed_len = 100 };
		size_t size;
		pair_start(&pp, &p, 4096);
		ck_assert_int_eq(msg_recv(pp.sock, &done), 0);
		ck_assert_int_eq(done.kind, MSG_DONE);
		uint8_t *map = raw_map(pp.name, &size);
		struct shr_header *h = (struct shr_header *)map;
		uint8_t *data = map + SHR_HEADER_BYTES;
		uint32_t v;
		switch (f) {
		case DF_LEN_HUGE:
			v = 0x7fffffff;
			memcpy(data + 3 * 112, &v, 4);
			break;
		case DF_LEN_OVER_HALF: /* inside the data and before head */
			v = 2100;
			memcpy(data, &v, 4);
			break;
		case DF_LEN_BEYOND_HEAD: /* inside the data area */
			v = 300;
			memcpy(data + 29 * 112, &v, 4);
			break;
		case DF_LEN_SHIFTED: /* record 3 claims 8 more bytes */
			v = 108;
			memcpy(data + 3 * 112, &v, 4);
			break;
		case DF_TAG:
			data[2 * 112 + 4] ^= 0x01;
			break;
		case DF_HEAD_MISALIGNED:
			atomic_store(&h->head, 30 * 112 - 4);
			break;
		case DF_HEAD_TOO_FAR:
			atomic_store(&h->head, 4096 + 8);
			break;
		case DF_WRAP_AT_ZERO:
			v = SHR_WRAP_LEN;
			memcpy(data, &v, 4);
			break;
		}
		munmap(map, size);
		const void *ptr;
		uint32_t len;
		int rc;
		for (int i = 0; i < good[f]; i++) {
			rc = shr_peek(&pp.ring, &ptr, &len);
			ck_assert_msg(rc == 0, "fault %d record %d: %s", f, i, shr_strerror(rc));
			if (f == DF_LEN_SHIFTED && i == 3)
				ck_assert_uint_eq(len, 108); /* the ring cannot know; the frame CRC will */
			else
				ck_assert(record_ok(ptr, (uint64_t)i, len));
		}
		rc = shr_peek(&pp.ring, &ptr, &len);
		ck_assert_msg(rc == -EPROTO, "fault %d: got %s", f, shr_strerror(rc));
		ck_assert_int_eq(shr_peek(&pp.ring, &ptr, &len), -EPROTO);
		ck_assert(!shr_wait_data(&pp.ring));
		int status = pair_reap(&pp);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		shr_close(&pp.ring, -1);
		ck_assert_int_eq(shr_unlink(pp.name), 0);
		close(pp.data_efd);
		close(pp.space_efd);
		close(pp.sock);
	}
	ck_assert_no_segments();
}
END_TEST

/* The producer side of the same guarantee, in one process: a tail the
 * producer could not have allowed stops it instead of overwriting. */
START_TEST(test_corrupt_tail)
{
	char name[96];
	struct shr_ring c, p;
	segment_name(name, sizeof name);
	ck_assert_int_eq(shr_create(&c, name, RUN_ID, 4096), 0);
	ck_assert_int_eq(shr_attach(&p, name, RUN_ID), 0);
	void *ptr;
	int n = 0;
	while (shr_reserve(&p, 100, &ptr) == 0) {
		memset(ptr, 0xab, 100);
		ck_assert_int_eq(shr_commit(&p, 100), 0);
		n++;
	}
	ck_assert_int_eq(n, 36);
	ck_assert_int_eq(shr_reserve(&p, 4096, &ptr), -EMSGSIZE);
	ck_assert_uint_eq(shr_max_payload(&p), 2048 - 8);
	atomic_store(&shr_header(&c)->tail, 36 * 112 + 8); /* beyond head */
	ck_assert_int_eq(shr_reserve(&p, 100, &ptr), -EPROTO);
	ck_assert_int_eq(shr_reserve(&p, 1, &ptr), -EPROTO);
	shr_close(&p, -1);
	shr_close(&c, -1);
	ck_assert_int_eq(shr_unlink(name), 0);
	ck_assert_no_segments();
}
END_TEST

/* Another process cuts the segment short while both sides have it mapped:
 * the next access to the lost pages would be SIGBUS. Both sides must carry
 * on to a clear -EFAULT instead. */
START_TEST(test_truncated_while_mapped)
{
	char name[96];
	struct shr_ring c, p;
	segment_name(name, sizeof name);
	ck_assert_int_eq(shr_create(&c, name, RUN_ID, 65536), 0);
	ck_assert_int_eq(shr_attach(&p, name, RUN_ID), 0);
	void *ptr;
	ck_assert_int_eq(shr_reserve(&p, 100, &ptr), 0);
	memset(ptr, 1, 100);
	ck_assert_int_eq(shr_commit(&p, 100), 0);
	int fd = shm_open(name, O_RDWR, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	close(fd);
	/* The producer's next access lands on vanished pages: the call that
	 * meets them completes on zeros, a following one says what happened. */
	int rc = 0;
	for (int i = 0; i < 3 && rc != -EFAULT; i++) {
		rc = shr_reserve(&p, 100, &ptr);
		if (rc == 0) {
			memset(ptr, 2, 100);   /* would have been SIGBUS */
			rc = shr_commit(&p, 100);
		}
	}
	ck_assert_int_eq(rc, -EFAULT);
	ck_assert_int_eq(shr_reserve(&p, 100, &ptr), -EFAULT);
	/* The consumer the same. */
	const void *rec;
	uint32_t len;
	rc = 0;
	for (int i = 0; i < 3 && rc != -EFAULT; i++)
		rc = shr_peek(&c, &rec, &len);
	ck_assert_int_eq(rc, -EFAULT);
	ck_assert_str_eq(shr_strerror(-EFAULT), "segment truncated while mapped");
	shr_close(&p, -1);
	shr_close(&c, -1);
	ck_assert_int_eq(shr_unlink(name), 0);
	ck_assert_no_segments();
}
END_TEST

START_TEST(test_dead_peer)
{
	struct pair pp;
	struct msg m;
	struct producer p = { .count = 5, .mode = LEN_FIXED, .fixed_len = 64, .hang = true };
	pair_start(&pp, &p, 4096);
	ck_assert_int_eq(msg_recv(pp.sock, &m), 0);
	ck_assert_int_eq(m.kind, MSG_READY);
	ck_assert_int_eq(m.rc, 1); /* the producer saw us alive */
	ck_assert(shr_peer_alive(&pp.ring));
	ck_assert_uint_ge(shr_peer_heartbeat(&pp.ring), 1);

	ck_assert_int_eq(kill(pp.child, SIGKILL), 0);
	/* Dead before it is reaped: a zombie must not count as alive. */
	bool alive = true;
	for (int i = 0; i < 2000 && alive; i++) {
		alive = shr_peer_alive(&pp.ring);
		if (alive)
			usleep(1000);
	}
	ck_assert(!alive);
	int status = pair_reap(&pp);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert(!shr_peer_alive(&pp.ring));

	/* What it committed before dying is intact; no -EPIPE, since it never
	 * detached: only the liveness check tells the consumer. */
	const void *ptr;
	uint32_t len;
	for (uint64_t i = 0; i < 5; i++) {
		ck_assert_int_eq(shr_peek(&pp.ring, &ptr, &len), 0);
		ck_assert(record_ok(ptr, i, len));
	}
	ck_assert_int_eq(shr_peek(&pp.ring, &ptr, &len), -EAGAIN);
	shr_close(&pp.ring, -1);
	ck_assert_int_eq(shr_unlink(pp.name), 0);
	close(pp.data_efd);
	close(pp.space_efd);
	close(pp.sock);
	ck_assert_no_segments();
}
END_TEST

/* The consumer closing wakes a producer asleep on a full ring, which then
 * gets -EPIPE instead of waiting forever. */
START_TEST(test_consumer_close_wakes_producer)
{
	struct pair pp;
	struct msg m;
	struct producer p = { .count = 1000, .mode = LEN_FIXED, .fixed_len = 100,
			      .report_full = true };
	pair_start(&pp, &p, 4096);
	ck_assert_int_eq(msg_recv(pp.sock, &m), 0);
	ck_assert_int_eq(m.kind, MSG_FULL);
	usleep(20000);
	shr_close(&pp.ring, pp.space_efd);
	int status = pair_reap(&pp);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3,
		      "producer did not see -EPIPE: status %#x", status);
	ck_assert_int_eq(shr_unlink(pp.name), 0);
	close(pp.data_efd);
	close(pp.space_efd);
	close(pp.sock);
	ck_assert_no_segments();
}
END_TEST

START_TEST(test_fd_passing_errors)
{
	int sv[2], a, b, efd[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(shr_eventfds(&efd[0], &efd[1]), 0);

	/* A byte without descriptors. */
	ck_assert_int_eq(write(sv[0], "E", 1), 1);
	ck_assert_int_eq(shr_recv_fds(sv[1], &a, &b), -EBADMSG);
	ck_assert_int_eq(a, -1);

	/* Three descriptors: refused, and none of them leaks. */
	int three[3] = { efd[0], efd[1], efd[0] };
	char byte = 'E';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof three)];
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof three);
	memcpy(CMSG_DATA(c), three, sizeof three);
	ck_assert_int_eq(sendmsg(sv[0], &msg, 0), 1);
	int probe = dup(0);
	close(probe);
	ck_assert_int_eq(shr_recv_fds(sv[1], &a, &b), -EBADMSG);
	int after = dup(0);
	ck_assert_int_eq(after, probe); /* lowest free descriptor unchanged */
	close(after);

	/* The real thing: the received eventfds are the same objects. */
	ck_assert_int_eq(shr_send_fds(sv[0], efd[0], efd[1]), 0);
	ck_assert_int_eq(shr_recv_fds(sv[1], &a, &b), 0);
	uint64_t one = 1, got = 0;
	ck_assert_int_eq(write(efd[1], &one, 8), 8);
	ck_assert_int_eq(read(b, &got, 8), 8);
	ck_assert_uint_eq(got, 1);
	ck_assert_int_eq(shr_clear_wakeup(a), 0); /* nothing pending: still 0 */
	close(a);
	close(b);

	close(sv[0]);
	ck_assert_int_eq(shr_recv_fds(sv[1], &a, &b), -EPIPE);
	close(sv[1]);
	close(efd[0]);
	close(efd[1]);
}
END_TEST

static void test_setup(void)
{
	test_seq++;
}

static Suite *shmring_suite(void)
{
	Suite *s = suite_create("shmring");
	TCase *tc = tcase_create("two processes");
	tcase_set_timeout(tc, RUNNING_ON_VALGRIND ? 600 : 60);
	tcase_add_checked_fixture(tc, test_setup, NULL);
	tcase_add_test(tc, test_wrap_varying_sizes);
	tcase_add_test(tc, test_full_ring_backpressure);
	tcase_add_test(tc, test_slow_consumer);
	tcase_add_test(tc, test_million_small_records);
	tcase_add_test(tc, test_rewind_when_caught_up);
	tcase_add_test(tc, test_stale_segment);
	tcase_add_test(tc, test_corrupt_header);
	tcase_add_test(tc, test_corrupt_length);
	tcase_add_test(tc, test_corrupt_tail);
	tcase_add_test(tc, test_truncated_while_mapped);
	tcase_add_test(tc, test_dead_peer);
	tcase_add_test(tc, test_consumer_close_wakes_producer);
	tcase_add_test(tc, test_fd_passing_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	main_pid = getpid();
	const char *env = getenv("ES_TEST_SEED");
	seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)main_pid << 32;
	if (RUNNING_ON_VALGRIND)
		scale_div = 20;
	fprintf(stderr, "test_shmring: seed %" PRIu64 " (set ES_TEST_SEED to repeat)\n", seed);

	SRunner *sr = srunner_create(shmring_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	/* A test that failed half-way may have left its segment behind. */
	int left = count_segments(true, true);
	if (left) {
		fprintf(stderr, "test_shmring: %d segment(s) left in /dev/shm, removed\n", left);
		failed++;
	}
	return failed ? 1 : 0;
}
