#include "sys/replay.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct replay_entry {
	uint64_t expires_ms;           /* 0: free */
	char nonce[REPLAY_NONCE_HEX];
};

struct replay_set {
	uint64_t skew_ms;
	struct replay_entry entries[REPLAY_MAX_NONCES];
};

struct replay_set *replay_new(uint64_t skew_ms)
{
	struct replay_set *s = calloc(1, sizeof *s);
	if (s != NULL)
		s->skew_ms = skew_ms;
	return s;
}

void replay_free(struct replay_set *s)
{
	free(s);
}

static bool replay_expired(const struct replay_entry *e, uint64_t now_ms)
{
	return e->expires_ms == 0 || e->expires_ms < now_ms;
}

/* One pass over a fixed table (a few microseconds): the set is asked once
 * per authenticated request, never per message of a run. */
enum replay_verdict replay_check(struct replay_set *s, const char *nonce, uint64_t request_ms,
				 uint64_t now_ms)
{
	struct replay_entry *free_slot = NULL;
	for (size_t i = 0; i < REPLAY_MAX_NONCES; i++) {
		struct replay_entry *e = &s->entries[i];
		if (replay_expired(e, now_ms)) {
			if (free_slot == NULL)
				free_slot = e;
			continue;
		}
		if (memcmp(e->nonce, nonce, REPLAY_NONCE_HEX) == 0)
			return REPLAY_REPLAYED;
	}
	if (free_slot == NULL)
		return REPLAY_FULL;
	uint64_t expires = request_ms + s->skew_ms;
	free_slot->expires_ms = expires > now_ms ? expires : now_ms;
	memcpy(free_slot->nonce, nonce, REPLAY_NONCE_HEX);
	return REPLAY_FRESH;
}

unsigned replay_live(const struct replay_set *s, uint64_t now_ms)
{
	unsigned n = 0;
	for (size_t i = 0; i < REPLAY_MAX_NONCES; i++)
		n += !replay_expired(&s->entries[i], now_ms);
	return n;
}
