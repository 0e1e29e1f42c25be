#include "sys/auth.h"

#include "sys/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char auth_key[AUTH_MAX_KEY_BYTES];
static size_t auth_key_len;

int auth_load_key_file(const char *path)
{
	if (sodium_init() < 0) {
		log_error("Cannot initialise libsodium");
		return -EIO;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		log_error("Cannot read the run key file %s: %s", path, strerror(errno));
		return rc;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && (st.st_mode & 077) != 0)
		log_warn("Run key file %s can be read by other users (mode %03o); chmod 600 it",
			 path, (unsigned)(st.st_mode & 0777));
	unsigned char buf[AUTH_MAX_KEY_BYTES + 2];
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	if (n < 0) {
		log_error("Cannot read the run key file %s: %s", path, strerror(errno));
		return -EIO;
	}
	size_t len = (size_t)n;
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len < AUTH_MIN_KEY_BYTES || len > AUTH_MAX_KEY_BYTES) {
		log_error("Run key file %s holds %zu bytes; a key is %u to %u bytes "
			  "(deploy/daqrun makes one: 32 random bytes in hex)",
			  path, len, AUTH_MIN_KEY_BYTES, AUTH_MAX_KEY_BYTES);
		sodium_memzero(buf, sizeof buf);
		return -EINVAL;
	}
	memcpy(auth_key, buf, len);
	auth_key_len = len;
	sodium_memzero(buf, sizeof buf);
	return 0;
}

bool auth_have_key(void)
{
	return auth_key_len > 0;
}

void auth_forget_key(void)
{
	sodium_memzero(auth_key, sizeof auth_key);
	auth_key_len = 0;
}

void auth_new_nonce(char nonce[CTL_NONCE_TEXT])
{
	unsigned char raw[32];
	if (sodium_init() < 0)
		memset(raw, 0, sizeof raw);
	randombytes_buf(raw, sizeof raw);
	sodium_bin2hex(nonce, CTL_NONCE_TEXT, raw, sizeof raw);
}

/* HMAC under the run key of label, the nonce and every field that says
 * who the peer is, the client's own nonce last, so a proof cannot be
 * replayed on another connection or for another identity. */
static void auth_mac(const char *label, const char *nonce, const struct ctl_hello *h,
		     unsigned char mac[crypto_auth_hmacsha256_BYTES])
{
	char identity[3 * CTL_NONCE_TEXT + CTL_MAX_TEXT + 96];
	int n = snprintf(identity, sizeof identity, "%s%s|%s|%u|%u|%s|%u|%s|%u/%u|%s", label, nonce,
			 ctl_role_name(h->role), h->id, h->run_id,
			 h->channel == CTL_CHANNEL_DATA ? "data" : "control", h->pid, h->host,
			 h->rail, h->rails, h->nonce);
	if (n < 0 || (size_t)n >= sizeof identity)
		n = (int)strlen(identity);
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, auth_key, auth_key_len);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)identity, (size_t)n);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof st);
}

void auth_session_key(const char *challenge, const struct ctl_hello *hello,
		      unsigned char key[AUTH_SESSION_KEY_BYTES])
{
	_Static_assert(AUTH_SESSION_KEY_BYTES == crypto_auth_hmacsha256_BYTES, "one HMAC");
	auth_mac("session|", challenge, hello, key);
}

void auth_sign_hello(const char *nonce, struct ctl_hello *hello)
{
	hello->proof[0] = '\0';
	if (!auth_have_key())
		return;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	auth_mac("", nonce, hello, mac);
	sodium_bin2hex(hello->proof, sizeof hello->proof, mac, sizeof mac);
}

bool auth_check_hello(const char *nonce, const struct ctl_hello *hello)
{
	if (!auth_have_key())
		return false;
	unsigned char want[crypto_auth_hmacsha256_BYTES], got[crypto_auth_hmacsha256_BYTES];
	auth_mac("", nonce, hello, want);
	size_t got_len = 0;
	if (sodium_hex2bin(got, sizeof got, hello->proof, strlen(hello->proof), NULL, &got_len,
			   NULL) != 0 || got_len != sizeof got)
		return false;
	return sodium_memcmp(want, got, sizeof want) == 0;
}

bool auth_hmac_hex(const void *msg, size_t len, char hex[AUTH_HMAC_HEX])
{
	hex[0] = '\0';
	if (!auth_have_key())
		return false;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, auth_key, auth_key_len);
	crypto_auth_hmacsha256_update(&st, msg, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof st);
	sodium_bin2hex(hex, AUTH_HMAC_HEX, mac, sizeof mac);
	return true;
}
