/* Peer authentication with a run key: the same secret file on every host of
 * a run. A listener greets every connection with a random nonce; the client
 * answers with HELLO carrying HMAC-SHA256(key, nonce and the HELLO's
 * identity), compared in constant time. Without a key a daemon accepts
 * loopback peers only. HMAC, randomness and the comparison are libsodium's. */
#ifndef ES_SYS_AUTH_H
#define ES_SYS_AUTH_H

#include "wire/control.h"

#include <stdbool.h>
#include <stddef.h>

#define AUTH_MIN_KEY_BYTES 16u
#define AUTH_MAX_KEY_BYTES 4096u

/* Reads the run key from path (raw bytes; a final newline is ignored).
 * 0, or -errno / -EINVAL with the reason logged (unreadable, shorter than
 * AUTH_MIN_KEY_BYTES, longer than AUTH_MAX_KEY_BYTES). Warns when other
 * users may read it. */
int auth_load_key_file(const char *path);

/* Whether a run key was loaded. */
bool auth_have_key(void);

/* A fresh random nonce as 64 hex digits. */
void auth_new_nonce(char nonce[CTL_NONCE_TEXT]);

/* Fills hello->proof for nonce ("" without a key). */
void auth_sign_hello(const char *nonce, struct ctl_hello *hello);

/* True when hello->proof is the proof for nonce under our key. */
bool auth_check_hello(const char *nonce, const struct ctl_hello *hello);

/* The session key of one control connection (io/msgseal): HMAC-SHA256,
 * under the run key (an empty key without one), of a label, the listener's
 * challenge and every field of the client's HELLO, its own nonce among
 * them. Both ends derive it from what the greeting carried; it is new on
 * every connection, since each end chose a fresh nonce, and only holders
 * of the run key can derive it (docs/PROTOCOL.md, "Sealed control
 * messages"). */
#define AUTH_SESSION_KEY_BYTES 32u
void auth_session_key(const char *challenge, const struct ctl_hello *hello,
		      unsigned char key[AUTH_SESSION_KEY_BYTES]);

/* HMAC-SHA256 of msg under the run key as 64 lowercase hex digits and a
 * NUL: the proof an operator's HTTP request carries (io/ctlhttp). False,
 * hex "", without a key. */
#define AUTH_HMAC_HEX 65u
bool auth_hmac_hex(const void *msg, size_t len, char hex[AUTH_HMAC_HEX]);

/* Drops the key (tests). */
void auth_forget_key(void);

#endif
