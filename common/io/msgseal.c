/* The seal of a control connection's messages. See msgseal.h. */
#include "io/msgseal.h"

#include <sodium.h>
#include <string.h>

void msgseal_init(struct msgseal *s, const unsigned char key[AUTH_SESSION_KEY_BYTES], bool dialer)
{
	memset(s, 0, sizeof *s);
	crypto_auth_hmacsha256_init(&s->keyed, key, AUTH_SESSION_KEY_BYTES);
	s->send_direction = dialer ? MSGSEAL_DIALER : MSGSEAL_LISTENER;
}

static void msgseal_put_sequence(uint8_t out[MSGSEAL_SEQUENCE_BYTES], uint64_t v)
{
	for (unsigned i = 0; i < MSGSEAL_SEQUENCE_BYTES; i++)
		out[i] = (uint8_t)(v >> (8 * (MSGSEAL_SEQUENCE_BYTES - 1 - i)));
}

/* The tag of a message travelling in direction with sequence (its 8 bytes
 * as on the wire): the direction keeps a message from being reflected back
 * to its sender, the sequence from being replayed or moved. */
static void msgseal_tag(const struct msgseal *s, unsigned char direction,
			const uint8_t sequence[MSGSEAL_SEQUENCE_BYTES], const uint8_t *msg, size_t len,
			uint8_t tag[MSGSEAL_TAG_BYTES])
{
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st = s->keyed;
	crypto_auth_hmacsha256_update(&st, &direction, 1);
	crypto_auth_hmacsha256_update(&st, sequence, MSGSEAL_SEQUENCE_BYTES);
	crypto_auth_hmacsha256_update(&st, msg, len);
	crypto_auth_hmacsha256_final(&st, mac);
	memcpy(tag, mac, MSGSEAL_TAG_BYTES);
	sodium_memzero(&st, sizeof st);
}

void msgseal_seal(struct msgseal *s, const uint8_t *msg, size_t len,
		  uint8_t header[MSGSEAL_HEADER_BYTES])
{
	msgseal_put_sequence(header, s->sent++);
	msgseal_tag(s, s->send_direction, header, msg, len, header + MSGSEAL_SEQUENCE_BYTES);
}

enum msgseal_verdict msgseal_open(struct msgseal *s, const uint8_t header[MSGSEAL_HEADER_BYTES],
				  const uint8_t *msg, size_t len, uint64_t *sequence)
{
	unsigned char from = s->send_direction == MSGSEAL_DIALER ? MSGSEAL_LISTENER : MSGSEAL_DIALER;
	uint8_t want[MSGSEAL_TAG_BYTES];
	msgseal_tag(s, from, header, msg, len, want);
	uint64_t seq = 0;
	for (unsigned i = 0; i < MSGSEAL_SEQUENCE_BYTES; i++)
		seq = seq << 8 | header[i];
	*sequence = seq;
	if (sodium_memcmp(want, header + MSGSEAL_SEQUENCE_BYTES, MSGSEAL_TAG_BYTES) != 0)
		return MSGSEAL_BAD_TAG;
	if (seq != s->received)
		return MSGSEAL_OUT_OF_SEQUENCE;
	s->received++;
	return MSGSEAL_OK;
}

const char *msgseal_verdict_text(enum msgseal_verdict v)
{
	switch (v) {
	case MSGSEAL_OK: return "sealed";
	case MSGSEAL_BAD_TAG: return "control message failed authentication";
	case MSGSEAL_OUT_OF_SEQUENCE: return "control message out of sequence";
	}
	return "control message refused";
}
