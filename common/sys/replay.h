/* The memory that makes a signed request usable once (io/ctlhttp): each
 * request names a nonce of its own and is good while its time is within
 * the skew allowed either way of ours, so a nonce is kept until the last
 * moment its request could still be taken (its time plus the skew) and a
 * second request with it in that window is a replay. The table is fixed
 * (REPLAY_MAX_NONCES entries, allocated with the set): when every entry is
 * still needed a new request is refused as "full" rather than an old nonce
 * forgotten, so a replay is never let through. Pure: time is an argument. */
#ifndef ES_SYS_REPLAY_H
#define ES_SYS_REPLAY_H

#include <stdint.h>

/* Nonces remembered at once (40 bytes each): at the endpoint's 30 s
 * either way a request stays remembered 30 s when the clocks agree and at
 * most 60 s, so this takes 270 to 540 signed requests a second sustained,
 * several times a launcher polling /state every 20 ms besides an
 * operator's. */
#define REPLAY_MAX_NONCES 16384u

/* A nonce as the client sends it: 32 hex digits (16 random bytes). */
#define REPLAY_NONCE_HEX 32u

enum replay_verdict {
	REPLAY_FRESH,     /* first seen: remembered until it expires */
	REPLAY_REPLAYED,  /* seen within its window: refuse it */
	REPLAY_FULL,      /* every entry still in its window: refuse, retry later */
};

struct replay_set;

/* A set whose entries expire skew_ms after the request's time; NULL when
 * out of memory. */
struct replay_set *replay_new(uint64_t skew_ms);
void replay_free(struct replay_set *s);

/* The verdict on nonce (REPLAY_NONCE_HEX lowercase hex digits, checked by
 * the caller) of a request signed at request_ms, at now_ms; a fresh one is
 * remembered. Call it only for a request whose proof was good, so that
 * only the key's holders take entries. */
enum replay_verdict replay_check(struct replay_set *s, const char *nonce, uint64_t request_ms,
				 uint64_t now_ms);

/* Entries still in their window at now_ms. */
unsigned replay_live(const struct replay_set *s, uint64_t now_ms);

#endif
