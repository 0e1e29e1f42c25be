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

bool text_args_char(unsigned char c)
{
	return c == '\n' || (c >= 0x20 && c != 0x7f);
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

/* What an escaper writes for one character: the UTF-8 sequence of k bytes
 * starting with byte c (k = 0: c begins no valid sequence and is taken
 * alone). Returns the length of the replacement written to esc, or 0 to
 * copy the sequence as it is. */
#define TEXT_ESC_MAX 6
typedef size_t (*text_rule)(unsigned char c, size_t k, char esc[TEXT_ESC_MAX]);

/* The one loop every escaper is: a character whole or not at all, so the
 * output never ends in half a sequence or half an escape. */
static size_t text_escape(char *dst, size_t cap, const char *s, size_t n, text_rule rule)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t k = text_utf8_seq(s + i, n - i);
		char esc[TEXT_ESC_MAX];
		size_t e = rule(c, k, esc);
		if (!(e ? text_put(dst, cap, &o, esc, e) : text_put(dst, cap, &o, s + i, k)))
			break;
		i += k ? k : 1;
	}
	dst[o] = '\0';
	return o;
}

static size_t text_put_replacement(char esc[TEXT_ESC_MAX])
{
	memcpy(esc, text_replacement, 3);
	return 3;
}

static size_t text_rule_utf8(unsigned char c, size_t k, char esc[TEXT_ESC_MAX])
{
	(void)c;
	return k == 0 ? text_put_replacement(esc) : 0;
}

static size_t text_rule_json(unsigned char c, size_t k, char esc[TEXT_ESC_MAX])
{
	if (k == 0) {
		memcpy(esc, "\\ufffd", 6);
		return 6;
	}
	if (c == '"' || c == '\\') {
		esc[0] = '\\';
		esc[1] = (char)c;
		return 2;
	}
	if (c < 0x20 || c == 0x7f) {
		memcpy(esc, "\\u00", 4);
		esc[4] = text_hex[c >> 4];
		esc[5] = text_hex[c & 15];
		return 6;
	}
	return 0;
}

static size_t text_rule_log(unsigned char c, size_t k, char esc[TEXT_ESC_MAX])
{
	if (k != 0 && c >= 0x20 && c != 0x7f)
		return 0;
	esc[0] = '\\';
	esc[1] = 'x';
	esc[2] = text_hex[c >> 4];
	esc[3] = text_hex[c & 15];
	return 4;
}

static size_t text_rule_prom(unsigned char c, size_t k, char esc[TEXT_ESC_MAX])
{
	if (c == '\\' || c == '"' || c == '\n') {
		esc[0] = '\\';
		esc[1] = c == '\n' ? 'n' : (char)c;
		return 2;
	}
	if (k == 0 || c < 0x20 || c == 0x7f)
		return text_put_replacement(esc);
	return 0;
}

size_t text_to_utf8(char *dst, size_t cap, const char *s)
{
	return text_escape(dst, cap, s, strlen(s), text_rule_utf8);
}

size_t text_json_escape(char *dst, size_t cap, const char *s)
{
	return text_escape(dst, cap, s, strlen(s), text_rule_json);
}

size_t text_log_escape(char *dst, size_t cap, const char *s, size_t n)
{
	return text_escape(dst, cap, s, n, text_rule_log);
}

size_t text_prom_label_escape(char *dst, size_t cap, const char *s)
{
	return text_escape(dst, cap, s, strlen(s), text_rule_prom);
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
