/* One escaping policy for peer strings (text.h). */
#include "wire/text.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char text_hex[] = "0123456789abcdef";
static const char text_replacement[] = "\xef\xbf\xbd";   /* U+FFFD */

static bool text_alnum(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool text_host_char(unsigned char c)
{
	return text_alnum(c) || c == '-' || c == '.' || c == '_' || c == ':';
}

bool text_name_char(unsigned char c)
{
	return text_alnum(c) || c == '_' || c == '.' || c == '-';
}

/* RFC 3629, table 3-7 of the Unicode standard: the second byte's range
 * depends on the first, which rules out overlong forms and surrogates. */
size_t text_utf8_seq(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	if (n == 0)
		return 0;
	unsigned char c = p[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

bool text_utf8_valid(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t k = text_utf8_seq(s + i, n - i);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

/* Appends n bytes when they fit whole, leaving room for the NUL. */
static bool text_put(char *dst, size_t cap, size_t *o, const char *src, size_t n)
{
	if (n >= cap - *o)
		return false;
	memcpy(dst + *o, src, n);
	*o += n;
	return true;
}

size_t text_to_utf8(char *dst, size_t cap, const char *s)
{
	size_t o = 0, n = strlen(s);
	for (size_t i = 0; i < n;) {
		size_t k = text_utf8_seq(s + i, n - i);
		bool ok = k ? text_put(dst, cap, &o, s + i, k)
			    : text_put(dst, cap, &o, text_replacement, 3);
		if (!ok)
			break;
		i += k ? k : 1;
	}
	dst[o] = '\0';
	return o;
}

size_t text_json_escape(char *dst, size_t cap, const char *s)
{
	size_t o = 0, n = strlen(s);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = text_utf8_seq(s + i, n - i);
		char esc[6];
		bool ok;
		if (k == 0) {
			ok = text_put(dst, cap, &o, "\\ufffd", 6);
			k = 1;
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			ok = text_put(dst, cap, &o, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(esc, "\\u00", 4);
			esc[4] = text_hex[c >> 4];
			esc[5] = text_hex[c & 15];
			ok = text_put(dst, cap, &o, esc, 6);
		} else {
			ok = text_put(dst, cap, &o, s + i, k);
		}
		if (!ok)
			break;
		i += k;
	}
	dst[o] = '\0';
	return o;
}

size_t text_log_escape(char *dst, size_t cap, const char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = text_utf8_seq(s + i, n - i);
		bool ok;
		if (k == 0 || c < 0x20 || c == 0x7f) {
			char esc[4] = { '\\', 'x', text_hex[c >> 4], text_hex[c & 15] };
			ok = text_put(dst, cap, &o, esc, 4);
			k = 1;
		} else {
			ok = text_put(dst, cap, &o, s + i, k);
		}
		if (!ok)
			break;
		i += k;
	}
	dst[o] = '\0';
	return o;
}

size_t text_prom_label_escape(char *dst, size_t cap, const char *s)
{
	size_t o = 0, n = strlen(s);
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = text_utf8_seq(s + i, n - i);
		bool ok;
		if (c == '\\' || c == '"') {
			char esc[2] = { '\\', (char)c };
			ok = text_put(dst, cap, &o, esc, 2);
		} else if (c == '\n') {
			ok = text_put(dst, cap, &o, "\\n", 2);
		} else if (k == 0 || c < 0x20 || c == 0x7f) {
			ok = text_put(dst, cap, &o, text_replacement, 3);
			k = 1;
		} else {
			ok = text_put(dst, cap, &o, s + i, k);
		}
		if (!ok)
			break;
		i += k;
	}
	dst[o] = '\0';
	return o;
}

const char *text_duration(char buf[TEXT_DURATION_BYTES], int64_t ns)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	const char *sign = ns < 0 ? "-" : "";
	if (a < 10000)
		snprintf(buf, TEXT_DURATION_BYTES, "%s%" PRIu64 " ns", sign, a);
	else if (a < 10000000)
		snprintf(buf, TEXT_DURATION_BYTES, "%s%.1f us", sign, (double)a / 1e3);
	else
		snprintf(buf, TEXT_DURATION_BYTES, "%s%.2f ms", sign, (double)a / 1e6);
	return buf;
}
