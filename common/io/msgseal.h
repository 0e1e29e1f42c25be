/* The seal of a control connection after its greeting (docs/PROTOCOL.md,
 * "Sealed control messages"): every message, both ways, goes behind an
 * 8-byte sequence number and a 16-byte tag, HMAC-SHA256 truncated, under
 * the connection's session key (sys/auth's auth_session_key: the run key
 * over both greeting nonces and the HELLO), over the direction, the
 * sequence and the message's bytes. The receiver takes a message only with
 * a good tag and the sequence it expects next, so a message injected,
 * altered, reordered, dropped from the middle or replayed (from this
 * connection or another) is refused by name. Pure: no I/O, no allocation. */
#ifndef ES_IO_MSGSEAL_H
#define ES_IO_MSGSEAL_H

#include "sys/auth.h"

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MSGSEAL_SEQUENCE_BYTES 8u
#define MSGSEAL_TAG_BYTES 16u
/* What precedes each sealed message on the wire: sequence, then tag. */
#define MSGSEAL_HEADER_BYTES (MSGSEAL_SEQUENCE_BYTES + MSGSEAL_TAG_BYTES)

/* One connection's seal, both ways. Copied by value: the greeting hands one
 * to whoever makes the connection's message stream. */
struct msgseal {
	/* HMAC-SHA256 keyed with the session key, before any byte: each tag
	 * starts from a copy, so the key's two pads are hashed once. */
	crypto_auth_hmacsha256_state keyed;
	unsigned char send_direction;   /* MSGSEAL_DIALER or MSGSEAL_LISTENER */
	uint64_t sent;                  /* the sequence of the next message out */
	uint64_t received;              /* the sequence expected of the next one in */
};

/* The direction a message travels in, as the tag covers it: sent by the
 * dialer (the greeting's client) or by the listener. */
#define MSGSEAL_DIALER 'D'
#define MSGSEAL_LISTENER 'L'

enum msgseal_verdict {
	MSGSEAL_OK,
	MSGSEAL_BAD_TAG,          /* not sealed under this key for this direction */
	MSGSEAL_OUT_OF_SEQUENCE,  /* sealed, but not the next one: replayed, reordered or after a gap */
};

/* A seal of key for the dialer's end (dialer true) or the listener's. */
void msgseal_init(struct msgseal *s, const unsigned char key[AUTH_SESSION_KEY_BYTES], bool dialer);

/* Seals the next message out: msg (len bytes: its length prefix and body)
 * gets header (MSGSEAL_HEADER_BYTES) to go before it. */
void msgseal_seal(struct msgseal *s, const uint8_t *msg, size_t len,
		  uint8_t header[MSGSEAL_HEADER_BYTES]);

/* The verdict on a message in: header as it came, then msg (len bytes).
 * MSGSEAL_OK moves on to the next sequence; otherwise nothing changes and
 * *sequence is what the header carried (for the error text). */
enum msgseal_verdict msgseal_open(struct msgseal *s, const uint8_t header[MSGSEAL_HEADER_BYTES],
				  const uint8_t *msg, size_t len, uint64_t *sequence);

/* The verdict as the error that closes the connection. */
const char *msgseal_verdict_text(enum msgseal_verdict v);

#endif
