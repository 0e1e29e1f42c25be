#include "io/shmring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The header is shared between processes, so its atomics must be plain
 * memory operations, never a lock hidden in this process. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free");
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
	       "64-bit atomics must be lock-free");
_Static_assert(sizeof(struct shr_header) == SHR_HEADER_BYTES, "header layout");
_Static_assert(offsetof(struct shr_header, head) == 1 * SHR_CACHE_LINE_BYTES, "head line");
_Static_assert(offsetof(struct shr_header, tail) == 2 * SHR_CACHE_LINE_BYTES, "tail line");

static uint64_t align8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static uint32_t pos_tag(uint64_t pos)
{
	return (uint32_t)(pos >> 3);
}

static bool name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n >= 2 && n <= NAME_MAX && name[0] == '/' && !strchr(name + 1, '/');
}

static bool capacity_valid(uint64_t cap)
{
	return cap >= SHR_MIN_CAPACITY_BYTES && cap <= SHR_MAX_CAPACITY_BYTES &&
	       (cap & (cap - 1)) == 0;
}

/* State and start time (clock ticks after boot) of a process from
 * /proc/<pid>/stat. The comm field may hold spaces and parentheses, so
 * fields are counted from the last ')'. */
static int proc_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	int rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc < 0)
		return rc;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	p += 2;
	*state = *p;
	/* p is at field 3; starttime is field 22. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

static uint64_t self_start(void)
{
	char state;
	uint64_t start;
	return proc_stat(getpid(), &state, &start) == 0 ? start : 0;
}

/* start 0 means unknown (no /proc): only existence is checked then. */
static bool process_alive(pid_t pid, uint64_t start)
{
	char state;
	uint64_t now_start;
	if (pid <= 0)
		return false;
	int rc = proc_stat(pid, &state, &now_start);
	if (rc == -ENOENT || rc == -ESRCH)
		return false;
	if (rc < 0)
		return kill(pid, 0) == 0 || errno == EPERM;
	/* kill(pid, 0) succeeds on a zombie, which can no longer touch the
	 * ring: a killed reader whose parent has not reaped it yet. */
	if (state == 'Z' || state == 'X' || state == 'x')
		return false;
	return start == 0 || now_start == start;
}

/* A segment cut short while mapped (ftruncate by a confused or hostile
 * process) turns the next access to the lost pages into SIGBUS. Every
 * mapping is registered here; the handler maps private zero pages over the
 * lost part, so the access completes on zeros instead of killing the
 * daemon, and marks the ring, whose next call then reports -EFAULT. */
#define SHR_MAX_GUARDED 64
static struct {
	uintptr_t start, end;
	volatile sig_atomic_t truncated;
} shr_guarded[SHR_MAX_GUARDED];
static struct sigaction shr_previous_bus;
static bool shr_handler_installed;
static uintptr_t shr_page_bytes;

static void shr_on_sigbus(int sig, siginfo_t *si, void *context)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	for (int i = 0; i < SHR_MAX_GUARDED; i++) {
		if (shr_guarded[i].start != 0 && a >= shr_guarded[i].start && a < shr_guarded[i].end) {
			uintptr_t page = a & ~(shr_page_bytes - 1);
			mmap((void *)page, shr_guarded[i].end - page, PROT_READ | PROT_WRITE,
			     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			shr_guarded[i].truncated = 1;
			return;
		}
	}
	/* Not a ring: what would have happened without us. */
	(void)context;
	sigaction(SIGBUS, &shr_previous_bus, NULL);
	raise(sig);
}

static int shr_guard(void *map, size_t bytes)
{
	if (!shr_handler_installed) {
		shr_page_bytes = (uintptr_t)sysconf(_SC_PAGESIZE);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = shr_on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, &shr_previous_bus);
		shr_handler_installed = true;
	}
	for (int i = 0; i < SHR_MAX_GUARDED; i++) {
		if (shr_guarded[i].start == 0) {
			shr_guarded[i].truncated = 0;
			shr_guarded[i].end = (uintptr_t)map + bytes;
			shr_guarded[i].start = (uintptr_t)map;
			return i;
		}
	}
	return -1;   /* more rings than slots: that one goes unguarded */
}

static void shr_unguard(int slot)
{
	if (slot >= 0 && slot < SHR_MAX_GUARDED)
		shr_guarded[slot].start = shr_guarded[slot].end = 0;
}

/* -EFAULT once the segment was found cut short; sticky like -EPROTO. */
static int shr_check_truncated(struct shr_ring *r)
{
	if (r->guard >= 0 && shr_guarded[r->guard].truncated)
		r->err = -EFAULT;
	return r->err;
}

int shr_status(struct shr_ring *r)
{
	return r->hdr != NULL ? shr_check_truncated(r) : 0;
}

static void ring_set(struct shr_ring *r, void *map, size_t map_bytes, bool producer)
{
	memset(r, 0, sizeof *r);
	r->guard = shr_guard(map, map_bytes);
	r->hdr = map;
	r->data = (uint8_t *)map + SHR_HEADER_BYTES;
	r->map_bytes = map_bytes;
	/* From our own mapping's size, not from the header, which the other
	 * process could change after it was checked. */
	r->capacity_bytes = map_bytes - SHR_HEADER_BYTES;
	r->mask = r->capacity_bytes - 1;
	r->producer = producer;
}

int shr_create(struct shr_ring *r, const char *name, uint32_t run_id, uint64_t capacity_bytes)
{
	int rc = 0, fd = -1;
	bool replaced = false, created = false;
	void *map = MAP_FAILED;
	size_t size = SHR_HEADER_BYTES + capacity_bytes;

	memset(r, 0, sizeof *r);
	if (!name_valid(name) || !capacity_valid(capacity_bytes))
		return -EINVAL;
	/* A segment under our name is never ours: this builder has not made
	 * one yet. Removing it first also cuts off a reader still mapping it. */
	if (shm_unlink(name) == 0)
		replaced = true;
	else if (errno != ENOENT)
		return -errno;
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	created = true;
	if (ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	/* Reserve the pages now: on a full tmpfs a later store would be a
	 * SIGBUS in the middle of a run instead of an error here. */
	rc = posix_fallocate(fd, 0, (off_t)size);
	if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
		rc = -rc;
		goto out;
	}
	rc = 0;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	struct shr_header *h = map;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	h->magic = SHR_MAGIC;
	h->version = SHR_VERSION;
	h->header_bytes = SHR_HEADER_BYTES;
	h->capacity_bytes = capacity_bytes;
	h->run_id = run_id;
	h->created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	atomic_store_explicit(&h->consumer_start, self_start(), memory_order_relaxed);
	atomic_store_explicit(&h->consumer_pid, (int32_t)getpid(), memory_order_relaxed);
	/* READY last: a producer that sees it sees the whole header. */
	atomic_store_explicit(&h->state, SHR_STATE_READY, memory_order_release);
	ring_set(r, map, size, false);
	rc = replaced ? SHR_REPLACED : 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		if (map != MAP_FAILED)
			munmap(map, size);
		if (created)
			shm_unlink(name);
	}
	return rc;
}

/* Everything a producer must prove before trusting the header, in an order
 * that names the most useful cause: a stale segment usually also differs
 * in capacity, but "another run" is what the operator needs to read. */
static int header_check(const struct shr_header *h, uint64_t size, uint32_t run_id)
{
	if (h->magic != SHR_MAGIC)
		return -EBADMSG;
	if (h->version != SHR_VERSION)
		return -EPROTONOSUPPORT;
	if (h->header_bytes != SHR_HEADER_BYTES)
		return -EBADMSG;
	if (h->run_id != run_id)
		return -ESTALE;
	if (!capacity_valid(h->capacity_bytes) || h->capacity_bytes != size - SHR_HEADER_BYTES)
		return -ERANGE;
	uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
	if (state == SHR_STATE_INIT)
		return -EAGAIN;
	if (state == SHR_STATE_ATTACHED)
		return -EBUSY;
	if (state == SHR_STATE_DETACHED || state == SHR_STATE_CLOSED)
		return -ESHUTDOWN;
	if (state != SHR_STATE_READY)
		return -EBADMSG;
	uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&h->tail, memory_order_acquire);
	if ((head | tail) & 7 || tail > head || head - tail > h->capacity_bytes)
		return -EBADMSG;
	if (!process_alive(atomic_load_explicit(&h->consumer_pid, memory_order_acquire),
			   atomic_load_explicit(&h->consumer_start, memory_order_relaxed)))
		return -EOWNERDEAD;
	return 0;
}

int shr_attach(struct shr_ring *r, const char *name, uint32_t run_id)
{
	int rc = 0, fd = -1;
	void *map = MAP_FAILED;
	struct stat st;
	size_t size = 0;

	memset(r, 0, sizeof *r);
	if (!name_valid(name))
		return -EINVAL;
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	/* Empty: the creator is between shm_open() and ftruncate(). */
	if (st.st_size == 0) {
		rc = -EAGAIN;
		goto out;
	}
	if ((uint64_t)st.st_size < SHR_HEADER_BYTES) {
		rc = -EBADMSG;
		goto out;
	}
	if ((uint64_t)st.st_size > SHR_HEADER_BYTES + SHR_MAX_CAPACITY_BYTES) {
		rc = -ERANGE;
		goto out;
	}
	size = (size_t)st.st_size;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	struct shr_header *h = map;
	rc = header_check(h, size, run_id);
	if (rc < 0)
		goto out;
	uint32_t expect = SHR_STATE_READY;
	if (!atomic_compare_exchange_strong_explicit(&h->state, &expect, SHR_STATE_ATTACHED,
						     memory_order_acq_rel, memory_order_acquire)) {
		rc = expect == SHR_STATE_ATTACHED ? -EBUSY : -ESHUTDOWN;
		goto out;
	}
	atomic_store_explicit(&h->producer_start, self_start(), memory_order_relaxed);
	atomic_store_explicit(&h->producer_pid, (int32_t)getpid(), memory_order_release);
	ring_set(r, map, size, true);
	r->pos = atomic_load_explicit(&h->head, memory_order_acquire);
	r->peer_pos = atomic_load_explicit(&h->tail, memory_order_acquire);
out:
	close(fd);
	if (rc < 0 && map != MAP_FAILED)
		munmap(map, size);
	return rc;
}

void shr_close(struct shr_ring *r, int peer_efd)
{
	struct shr_header *h = r->hdr;
	if (!h)
		return;
	if (r->producer) {
		atomic_store_explicit(&h->producer_pid, 0, memory_order_relaxed);
		uint32_t expect = SHR_STATE_ATTACHED;
		/* Release: the consumer that sees DETACHED sees the final head. */
		atomic_compare_exchange_strong_explicit(&h->state, &expect, SHR_STATE_DETACHED,
							memory_order_release, memory_order_relaxed);
	} else {
		atomic_store_explicit(&h->consumer_pid, 0, memory_order_relaxed);
		atomic_store_explicit(&h->state, SHR_STATE_CLOSED, memory_order_release);
	}
	if (peer_efd >= 0) {
		uint64_t one = 1;
		ssize_t n = write(peer_efd, &one, sizeof one);
		(void)n; /* fails only if the count would overflow: already woken */
	}
	shr_unguard(r->guard);
	munmap(h, r->map_bytes);
	memset(r, 0, sizeof *r);
}

int shr_unlink(const char *name)
{
	if (!name_valid(name))
		return -EINVAL;
	if (shm_unlink(name) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int shr_remove_orphan(const char *name, int32_t *creator_pid)
{
	int rc = 0;
	struct stat st;
	*creator_pid = 0;
	if (!name_valid(name))
		return -EINVAL;
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < SHR_HEADER_BYTES) {
		/* Too short to say whose it is (or a creator between
		 * shm_open() and ftruncate()): not ours to judge. */
		close(fd);
		return 0;
	}
	void *map = mmap(NULL, SHR_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	const struct shr_header *h = map;
	int32_t pid = atomic_load_explicit(&h->consumer_pid, memory_order_acquire);
	uint64_t start = atomic_load_explicit(&h->consumer_start, memory_order_relaxed);
	if (h->magic == SHR_MAGIC && !process_alive(pid, start)) {
		*creator_pid = pid;
		rc = shm_unlink(name) == 0 || errno == ENOENT ? 1 : -errno;
	}
	munmap(map, SHR_HEADER_BYTES);
	return rc;
}

uint32_t shr_max_payload(const struct shr_ring *r)
{
	return (uint32_t)(r->capacity_bytes / 2 - SHR_RECORD_PREFIX_BYTES);
}

/* Bytes a record of len needs at the producer's position, wrap padding
 * included. Half-capacity records always fit once the consumer catches up:
 * padding is wasted only when the record does not fit before the end,
 * i.e. when the record starts beyond the first half of a lap. */
static uint64_t record_need(const struct shr_ring *r, uint32_t len, bool rewind, uint64_t *skip)
{
	uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len);
	uint64_t off = r->pos & r->mask;
	uint64_t room = r->capacity_bytes - off;
	*skip = rec > room || (rewind && rec <= off) ? room : 0;
	return *skip + rec;
}

/* Sticky: after one impossible value nothing in the ring can be trusted.
 * A value read from pages the segment lost reads as zero and looks
 * impossible too: truncation, if that is what happened, is the cause. */
static int corrupt(struct shr_ring *r)
{
	if (shr_check_truncated(r) < 0)
		return r->err;
	r->err = -EPROTO;
	return -EPROTO;
}

/* Reloads the consumer's tail; a tail the producer could not have allowed
 * means the segment is corrupt, and writing on would overwrite unread data. */
static int load_tail(struct shr_ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_acquire);
	if (tail & 7 || tail > r->pos || r->pos - tail > r->capacity_bytes)
		return corrupt(r);
	r->peer_pos = tail;
	return 0;
}

/* Whether the next record of len bytes goes back to offset 0 now. The
 * producer wraps early once its offset leaves, after what the consumer has
 * still to read and the record, room for at least that backlog again and
 * for an eighth of the ring. Until the consumer passes the wrap the
 * padding counts as used, so that room is what the producer can write
 * meanwhile; it is large enough that the early wrap almost never makes the
 * producer wait. The ring then cycles through about twice its backlog (an
 * eighth of it when the consumer keeps up) instead of its whole
 * capacity: those pages stay in cache and the rest of the segment is never
 * faulted in, and a process's resident memory counts only the ring pages
 * it touched. A backlog that keeps growing stops the early wraps and gets
 * the whole capacity. The consumer's line, which it keeps writing, is read
 * once per 1/64 of the ring crossed (64 KiB of a 4 MiB ring), not per
 * record. */
static int rewind_now(struct shr_ring *r, uint32_t len, bool *rewind)
{
	*rewind = false;
	uint64_t off = r->pos & r->mask;
	/* Capacities are powers of two: a shift, not a division per record. */
	uint64_t chunk = r->pos >> __builtin_ctzll(r->capacity_bytes / SHR_REWIND_CHECKS);
	uint64_t room = r->capacity_bytes / SHR_REWIND_DIVISOR;
	if (off < room || chunk == r->rewind_chunk)
		return 0;
	r->rewind_chunk = chunk;
	int rc = load_tail(r);
	if (rc < 0)
		return rc;
	uint64_t backlog = r->pos - r->peer_pos;
	uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len);
	if (backlog > room)
		room = backlog;
	*rewind = off >= backlog + rec + room;
	return 0;
}

int shr_reserve(struct shr_ring *r, uint32_t len, void **ptr)
{
	uint64_t skip;
	if (shr_check_truncated(r))
		return r->err;
	if (r->reserved)
		return -EBUSY;
	if (len > shr_max_payload(r))
		return -EMSGSIZE;
	/* Checked every time, not only when full: a record written after the
	 * builder left would be counted as forwarded but never received. The
	 * line is read-only while both run, so the load costs no traffic. */
	if (atomic_load_explicit(&r->hdr->state, memory_order_relaxed) == SHR_STATE_CLOSED)
		return -EPIPE;
	bool rewind;
	int rc = rewind_now(r, len, &rewind);
	if (rc < 0)
		return rc;
	uint64_t need = record_need(r, len, rewind, &skip);
	if (r->pos + need - r->peer_pos > r->capacity_bytes) {
		rc = load_tail(r);
		if (rc < 0)
			return rc;
		if (r->pos + need - r->peer_pos > r->capacity_bytes)
			return -EAGAIN;
	}
	r->res_skip = skip;
	r->res_len = len;
	r->reserved = true;
	*ptr = r->data + ((r->pos + skip) & r->mask) + SHR_RECORD_PREFIX_BYTES;
	return 0;
}

int shr_commit(struct shr_ring *r, uint32_t len)
{
	if (!r->reserved || len > r->res_len)
		return -EINVAL;
	if (shr_check_truncated(r)) {
		r->reserved = false;
		return r->err;
	}
	uint64_t pos = r->pos;
	if (r->res_skip) {
		*(volatile uint64_t *)(r->data + (pos & r->mask)) =
			SHR_WRAP_LEN | (uint64_t)pos_tag(pos) << 32;
		pos += r->res_skip;
	}
	*(volatile uint64_t *)(r->data + (pos & r->mask)) = len | (uint64_t)pos_tag(pos) << 32;
	pos += align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)len);
	r->pos = pos;
	r->reserved = false;
	/* Release: payload and prefix are visible before the new head. */
	atomic_store_explicit(&r->hdr->head, pos, memory_order_release);
	return 0;
}

int shr_peek(struct shr_ring *r, const void **ptr, uint32_t *len)
{
	if (shr_check_truncated(r))
		return r->err;
	for (;;) {
		if (r->pos == r->peer_pos) {
			struct shr_header *h = r->hdr;
			uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
			uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
			if (head & 7 || head < r->pos || head - r->released > r->capacity_bytes)
				return corrupt(r);
			r->peer_pos = head;
			if (head == r->pos)
				return state == SHR_STATE_DETACHED ? -EPIPE : -EAGAIN;
		}
		uint64_t off = r->pos & r->mask;
		/* One load: the word checked is the word used, whatever the
		 * other process writes meanwhile. */
		uint64_t word = *(const volatile uint64_t *)(r->data + off);
		uint32_t n = (uint32_t)word;
		if ((uint32_t)(word >> 32) != pos_tag(r->pos))
			return corrupt(r);
		if (n == SHR_WRAP_LEN) {
			/* Padding at offset 0 would be a whole lap: never written. */
			uint64_t skip = r->capacity_bytes - off;
			if (off == 0 || r->peer_pos - r->pos < skip)
				return corrupt(r);
			r->pos += skip;
			continue;
		}
		uint64_t rec = align8(SHR_RECORD_PREFIX_BYTES + (uint64_t)n);
		if (n > shr_max_payload(r) || off + rec > r->capacity_bytes ||
		    r->peer_pos - r->pos < rec)
			return corrupt(r);
		*ptr = r->data + off + SHR_RECORD_PREFIX_BYTES;
		*len = n;
		r->pos += rec;
		return 0;
	}
}

void shr_release(struct shr_ring *r)
{
	if (r->pos == r->released || r->err)
		return;
	r->released = r->pos;
	/* Release: our reads of the records finish before the producer may
	 * reuse their bytes. */
	atomic_store_explicit(&r->hdr->tail, r->pos, memory_order_release);
}

/* The other half of the handshake in shr_notify_*(): the waiter stores its
 * target, fences, loads the counter; the waker stores the counter, fences,
 * loads the target. With a seq_cst fence on each side at least one of them
 * sees the other's store, so either the waiter does not sleep or the waker
 * writes the eventfd (whose count survives until the waiter polls). */
bool shr_wait_data(struct shr_ring *r)
{
	struct shr_header *h = r->hdr;
	if (r->err)
		return false;
	/* Any record: the builder's latency matters more than its wake-ups,
	 * and the producer already batches its notifications. */
	atomic_store_explicit(&h->consumer_wake_head, r->pos + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->head, memory_order_relaxed) != r->pos ||
	    atomic_load_explicit(&h->state, memory_order_relaxed) >= SHR_STATE_DETACHED) {
		atomic_store_explicit(&h->consumer_wake_head, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

bool shr_wait_space(struct shr_ring *r, uint32_t len)
{
	struct shr_header *h = r->hdr;
	uint64_t skip;
	if (r->err)
		return false;
	uint64_t need = record_need(r, len, false, &skip);
	/* Woken per release, a producer behind a slow consumer would sleep
	 * and wake once per batch; a quarter ring of slack makes that once
	 * per many records. The target never exceeds head, which the tail
	 * reaches whenever the consumer empties the ring. */
	uint64_t want = r->pos + need + r->capacity_bytes / 4;
	want = want > r->capacity_bytes ? want - r->capacity_bytes : 1;
	if (want > r->pos)
		want = r->pos ? r->pos : 1;
	atomic_store_explicit(&h->producer_wake_tail, want, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (load_tail(r) < 0 || r->pos + need - r->peer_pos <= r->capacity_bytes ||
	    atomic_load_explicit(&h->state, memory_order_relaxed) == SHR_STATE_CLOSED) {
		atomic_store_explicit(&h->producer_wake_tail, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

static int wake(_Atomic uint64_t *target, uint64_t reached, int efd)
{
	atomic_thread_fence(memory_order_seq_cst);
	/* Plain load first: while the peer is busy the target's line stays
	 * shared and no locked instruction or system call is issued. */
	uint64_t t = atomic_load_explicit(target, memory_order_relaxed);
	if (!t || reached < t)
		return 0;
	/* A target replaced meanwhile is cleared too: that wake-up is only
	 * spurious, the waiter rechecks and sleeps again. */
	if (!atomic_exchange_explicit(target, 0, memory_order_relaxed))
		return 0;
	uint64_t one = 1;
	if (write(efd, &one, sizeof one) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int shr_notify_consumer(struct shr_ring *r, int data_efd)
{
	return wake(&r->hdr->consumer_wake_head, r->pos, data_efd);
}

int shr_notify_producer(struct shr_ring *r, int space_efd)
{
	return wake(&r->hdr->producer_wake_tail, r->released, space_efd);
}

int shr_clear_wakeup(int efd)
{
	uint64_t count;
	ssize_t n;
	do
		n = read(efd, &count, sizeof count);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int shr_eventfds(int *data_efd, int *space_efd)
{
	int rc = 0;
	*data_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	*space_efd = -1;
	if (*data_efd < 0) {
		rc = -errno;
		goto out;
	}
	*space_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (*space_efd < 0)
		rc = -errno;
out:
	if (rc < 0 && *data_efd >= 0) {
		close(*data_efd);
		*data_efd = -1;
	}
	return rc;
}

#define SHR_FDS_BYTE 'E'

int shr_send_fds(int sock, int data_efd, int space_efd)
{
	int fds[2] = { data_efd, space_efd };
	char byte = SHR_FDS_BYTE;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof fds)];
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof u.buf,
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

int shr_recv_fds(int sock, int *data_efd, int *space_efd)
{
	int got[2] = { -1, -1 }, count = 0, rc = 0;
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	/* Room for a few more than two, so a wrong sender is seen and its
	 * descriptors closed rather than silently dropped by the kernel. */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} u;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof u.buf,
	};
	ssize_t n;
	*data_efd = *space_efd = -1;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (count < 2)
				got[count] = fd;
			else
				close(fd);
			count++;
		}
	}
	if (count != 2 || byte != SHR_FDS_BYTE || (msg.msg_flags & MSG_CTRUNC)) {
		rc = -EBADMSG;
		goto out;
	}
	*data_efd = got[0];
	*space_efd = got[1];
out:
	if (rc < 0) {
		for (int i = 0; i < 2; i++)
			if (got[i] >= 0)
				close(got[i]);
	}
	return rc;
}

bool shr_peer_alive(const struct shr_ring *r)
{
	const struct shr_header *h = r->hdr;
	if (!h)
		return false;
	/* pid is stored after the start time with release: acquire here so a
	 * set pid comes with its start time. */
	if (r->producer)
		return process_alive(atomic_load_explicit(&h->consumer_pid, memory_order_acquire),
				     atomic_load_explicit(&h->consumer_start, memory_order_relaxed));
	return process_alive(atomic_load_explicit(&h->producer_pid, memory_order_acquire),
			     atomic_load_explicit(&h->producer_start, memory_order_relaxed));
}

void shr_heartbeat(struct shr_ring *r)
{
	_Atomic uint64_t *beat = r->producer ? &r->hdr->producer_heartbeat :
					       &r->hdr->consumer_heartbeat;
	/* One writer per counter: load and store, no locked add. */
	atomic_store_explicit(beat, atomic_load_explicit(beat, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

uint64_t shr_peer_heartbeat(const struct shr_ring *r)
{
	return atomic_load_explicit(r->producer ? &r->hdr->consumer_heartbeat :
						  &r->hdr->producer_heartbeat,
				    memory_order_relaxed);
}

uint64_t shr_capacity(const struct shr_ring *r)
{
	return r->hdr != NULL ? r->capacity_bytes : 0;
}

uint64_t shr_fill_bytes(const struct shr_ring *r)
{
	if (r->hdr == NULL)
		return 0;
	uint64_t tail = atomic_load_explicit(&r->hdr->tail, memory_order_relaxed);
	uint64_t head = r->producer ? r->pos
				    : atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
	return head - tail;
}

struct shr_header *shr_header(const struct shr_ring *r)
{
	return r->hdr;
}

size_t shr_map_bytes(const struct shr_ring *r)
{
	return r->map_bytes;
}

uint64_t shr_record_offset(const struct shr_ring *r, const void *payload)
{
	return (uint64_t)((const uint8_t *)payload - r->data) - SHR_RECORD_PREFIX_BYTES;
}

int shr_commit_bad_length(struct shr_ring *r, uint32_t length_word)
{
	if (!r->reserved)
		return -EINVAL;
	uint64_t pos = r->pos;
	if (r->res_skip) {
		*(volatile uint64_t *)(r->data + (pos & r->mask)) =
			SHR_WRAP_LEN | (uint64_t)pos_tag(pos) << 32;
		pos += r->res_skip;
	}
	/* The reservation proved the prefix free. */
	*(volatile uint64_t *)(r->data + (pos & r->mask)) =
		length_word | (uint64_t)pos_tag(pos) << 32;
	pos += SHR_RECORD_PREFIX_BYTES;
	r->pos = pos;
	r->reserved = false;
	atomic_store_explicit(&r->hdr->head, pos, memory_order_release);
	return 0;
}

void shr_publish_head_ahead(struct shr_ring *r, uint64_t bytes)
{
	atomic_store_explicit(&r->hdr->head, r->pos + bytes, memory_order_release);
}

const char *shr_strerror(int rc)
{
	switch (rc) {
	case 0:
		return "ok";
	case SHR_REPLACED:
		return "replaced a stale segment";
	case -EBADMSG:
		return "corrupt segment header or descriptor message";
	case -EPROTONOSUPPORT:
		return "segment layout version mismatch";
	case -ESTALE:
		return "segment of another run";
	case -ESHUTDOWN:
		return "ring already closed: its stream is over";
	case -EOWNERDEAD:
		return "the builder that created the segment is no longer running";
	case -ERANGE:
		return "capacity does not match segment size";
	case -EPROTO:
		return "impossible record length or counter in ring";
	case -EFAULT:
		return "segment truncated while mapped";
	case -EBUSY:
		return "ring already has a producer";
	case -EPIPE:
		return "peer closed the ring";
	case -EAGAIN:
		return "would block";
	case -EMSGSIZE:
		return "record larger than half the ring";
	default:
		return rc < 0 ? strerror(-rc) : "unknown";
	}
}
