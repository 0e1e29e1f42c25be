/* The ring's segment: creating it (builderd), attaching to it (readoutd),
 * closing, unlinking and removing one a dead builder left; every mapping
 * guarded against SIGBUS (shmguard.h). See shmring.h and docs/SHM.md. */
#include "io/shmring.h"

#include "io/shmguard.h"
#include "sys/proclive.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static void ring_set(struct shr_ring *r, void *map, size_t map_bytes, bool producer)
{
	memset(r, 0, sizeof *r);
	r->guard = shg_guard(map, map_bytes);
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
	atomic_store_explicit(&h->consumer_start, proclive_self_start(), memory_order_relaxed);
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
	if (!proclive_alive(atomic_load_explicit(&h->consumer_pid, memory_order_acquire),
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
	atomic_store_explicit(&h->producer_start, proclive_self_start(), memory_order_relaxed);
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
	shg_unguard(r->guard);
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
	if (h->magic == SHR_MAGIC && !proclive_alive(pid, start)) {
		*creator_pid = pid;
		rc = shm_unlink(name) == 0 || errno == ENOENT ? 1 : -errno;
	}
	munmap(map, SHR_HEADER_BYTES);
	return rc;
}
