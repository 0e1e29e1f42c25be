/* Seeded randomised tests: a splitmix64 generator, the run's seed, and a
 * check that names the seed so a failure can be repeated. Shared by the
 * builder core's, the event manager's and the routing table's tests. */
#ifndef ES_TEST_SEEDED_H
#define ES_TEST_SEEDED_H

#include <check.h>
#include <inttypes.h>
#include <stdint.h>

static uint64_t test_seed;

/* Every ck_assert sends a checkpoint to the runner; loops of thousands
 * check with a plain if and fail through ck_abort_msg. */
#define REQUIRE(cond)                                                                       \
	do {                                                                                \
		if (!(cond))                                                                \
			ck_abort_msg("%s:%d: %s (seed %" PRIu64 ")", __FILE__, __LINE__, #cond, \
				     test_seed);                                            \
	} while (0)

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

#endif
