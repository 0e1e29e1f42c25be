/* Fuzz harness bodies, shared by the libFuzzer targets (tests/fuzz/fuzz_*.c,
 * built with clang by `make fuzz`) and by the Check test that replays the
 * committed inputs of tests/fuzz/regressions/<target>/ with the normal gcc
 * build (tests/unit/test_fuzz_regressions.c). One function per target runs
 * one input through a common/ module the way a daemon would and checks the
 * module's contract; docs/FUZZING.md lists what each checks.
 *
 * A broken invariant prints the target, the condition and the input's name
 * (fuzz_set_input_name()) and aborts: libFuzzer records that as a crash and
 * keeps the input, Check reports the test as failed by a signal. Reads past
 * the bytes handed to a decoder are caught by AddressSanitizer when it is on
 * (clang's fuzz build, `make asan`): the harness poisons every byte of its
 * buffers beyond what it has handed over. */
#ifndef ES_FUZZ_HARNESS_H
#define ES_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* Frame decoder (common/wire/frame.c). Input: run_id (4 bytes, big-endian), the
 * configured max payload (4 bytes, may exceed 1 MiB: the decoder clamps),
 * a seed for piece sizes (4 bytes), then the byte stream of a connection.
 * The stream is decoded whole, one byte at a time and in random-sized
 * pieces; all three must agree. */
void fuzz_frame_input(const uint8_t *data, size_t size);

/* Control-message decoder (common/wire/control_decode.c). Input: a mode byte, then (bit 0
 * clear) a byte stream of length-prefixed messages or (bit 0 set) one
 * message body, to which the harness adds the length prefix. The stream is
 * decoded whole and byte by byte; every message accepted must re-encode to
 * a canonical form that decodes to itself. */
void fuzz_ctl_input(const uint8_t *data, size_t size);

/* Shared-memory ring (common/io/shmring*.c), consumer first. Input: a config
 * byte (bit 0: capacity 4096 or 8192 bytes), then operations that write
 * the segment's header or data area as a hostile producer would, produce
 * through the real producer side, or consume. See harness_ring.c. */
void fuzz_ring_input(const uint8_t *data, size_t size);

/* Operation codes of fuzz_ring_input(), each followed by its arguments
 * (big-endian). Shared with tests/fuzz/make_corpus.py, which writes seeds. */
enum fuzz_ring_op {
	FUZZ_RING_RAW = 0,      /* u16 offset into the segment, u16 n, n bytes */
	FUZZ_RING_HEAD = 1,     /* u8 mode, u64 v: mode % 4 = 0 set to v, 1 add v,
				 * 2 add 8 v, 3 set to tail + v */
	FUZZ_RING_TAIL = 2,     /* the same for tail (3: head + v) */
	FUZZ_RING_STATE = 3,    /* u8 state */
	FUZZ_RING_WORD = 4,     /* u16 data offset, u32 length: a record word tagged
				 * for the position at that offset in the lap the
				 * producer may write, [tail, tail + capacity) */
	FUZZ_RING_PRODUCE = 5,  /* u16 length, u16 shortfall, u8 fill seed */
	FUZZ_RING_PEEK = 6,
	FUZZ_RING_RELEASE = 7,
	FUZZ_RING_WAIT = 8,     /* shr_wait_data() */
	FUZZ_RING_DETACH = 9,   /* producer closes */
	FUZZ_RING_NOTIFY = 10,  /* both notify helpers, then clear the eventfds */
	FUZZ_RING_DRAIN = 11,   /* peek and release until an error or empty */
	FUZZ_RING_TRUNCATE = 12, /* u16 size: ftruncate the segment (mod its size + 1) */
	FUZZ_RING_OP_COUNT
};

/* Event file scan and recovery (common/wire/evfile.c). Input: the largest
 * payload allowed (4 bytes, big-endian), then a file's bytes. The scan's
 * verdict must fit the bytes, its good prefix scan the same alone, and that
 * prefix with a trailer from the scan must be a complete, valid file. */
void fuzz_evfile_input(const uint8_t *data, size_t size);

/* Names the input being run, for the failure message (a file name in the
 * regression test; NULL for none). */
void fuzz_set_input_name(const char *name);

/* Prints "fuzz <target>: <file>:<line>: <what>" and the input's name, runs
 * the cleanup set by fuzz_set_cleanup() and aborts. */
_Noreturn void fuzz_fail(const char *target, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* One function called by fuzz_fail() before aborting (e.g. unlinking a
 * shared-memory segment); NULL for none. */
void fuzz_set_cleanup(void (*cleanup)(void));

#define FUZZ_CHECK(target, cond, ...)                                                  \
	do {                                                                           \
		if (!(cond))                                                           \
			fuzz_fail(target, __FILE__, __LINE__, __VA_ARGS__);            \
	} while (0)

/* AddressSanitizer's manual poisoning when it is on, nothing otherwise: a
 * buffer's bytes beyond what the harness handed to the decoder are
 * poisoned, so any read of them is reported. */
#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif

#ifdef FUZZ_ASAN
/* Declared here rather than from <sanitizer/asan_interface.h>, and with a
 * plain pointer, so that gcc does not take poisoning fresh memory for a
 * read of uninitialised bytes (-Wmaybe-uninitialized). */
void __asan_poison_memory_region(void *addr, size_t size);
void __asan_unpoison_memory_region(void *addr, size_t size);
#define FUZZ_POISON(addr, size) __asan_poison_memory_region((void *)(addr), (size))
#define FUZZ_UNPOISON(addr, size) __asan_unpoison_memory_region((void *)(addr), (size))
#else
#define FUZZ_POISON(addr, size) ((void)(addr), (void)(size))
#define FUZZ_UNPOISON(addr, size) ((void)(addr), (void)(size))
#endif

/* SplitMix64, for piece sizes drawn from a seed in the input. */
static inline uint64_t fuzz_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* FNV-1a over n bytes, continuing from h: digests that let two ways of
 * decoding one input be compared. */
static inline uint64_t fuzz_hash(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

#define FUZZ_HASH_INIT 0xcbf29ce484222325ULL

#endif
