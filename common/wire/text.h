/* Peer strings on their way out: one escaping policy for every output a
 * peer's bytes can reach (JSON, log lines, Prometheus label values), and
 * the character sets the control codec admits for host and group names
 * (docs/PROTOCOL.md, Strings). The codec refuses a name outside its set;
 * these escapers make an output safe whatever the bytes, so one missed
 * check upstream can never break a file or forge a line. Pure: no
 * allocation, no I/O. */
#ifndef ES_WIRE_TEXT_H
#define ES_WIRE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest host name the codec admits (a DNS name's limit). */
#define TEXT_HOST_MAX 253u

/* A host name byte: letters, digits, '-', '.', '_' (found in real host
 * names though RFC 1123 leaves it out) and ':' (IPv6 literals). */
bool text_host_char(unsigned char c);

/* A group or counter name byte: letters, digits, '_', '.', '-'. */
bool text_name_char(unsigned char c);

/* A byte of a command line sent as text: '\n' between arguments, no
 * other control byte (a tab or an escape would reach a log unseen); any
 * byte of 0x20 and above but DEL, so UTF-8 passes. */
bool text_args_char(unsigned char c);

/* Whether the n bytes at s are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
bool text_utf8_valid(const char *s, size_t n);

/* The length of the well-formed UTF-8 sequence at s (at most n bytes), or 0
 * when the byte at s does not start one. */
size_t text_utf8_seq(const char *s, size_t n);

/* Copies NUL-terminated s into dst (capacity cap > 0, always terminated) as
 * valid UTF-8: every byte that is not part of a well-formed sequence becomes
 * U+FFFD. Truncates at a sequence boundary when dst is too small. Returns
 * the length written. For strings handed to a JSON library that requires
 * UTF-8. */
size_t text_to_utf8(char *dst, size_t cap, const char *s);

/* Writes s as the inside of a JSON string (no quotes) into dst (capacity
 * cap > 0, always terminated): '"' and '\' escaped, control bytes as
 * \u00XX, bytes that are not well-formed UTF-8 as \ufffd. Truncates at an
 * escape boundary when dst is too small. Returns the length written. */
size_t text_json_escape(char *dst, size_t cap, const char *s);

/* Writes the n bytes at s for a log line into dst (capacity cap > 0,
 * always terminated): control bytes (below 0x20, and 0x7f) and bytes that
 * are not well-formed UTF-8 as \xNN, so no peer byte can end a line or
 * start a forged one. Returns the length written. */
size_t text_log_escape(char *dst, size_t cap, const char *s, size_t n);

/* Writes s as a Prometheus label value (exposition format 0.0.4, no
 * quotes) into dst (capacity cap > 0, always terminated): '\' as \\, '"'
 * as \", newline as \n, other control bytes and bytes that are not
 * well-formed UTF-8 as U+FFFD. Returns the length written. */
size_t text_prom_label_escape(char *dst, size_t cap, const char *s);

/* A duration for people, in the unit that keeps three digits or so:
 * "850 ns", "12.3 us", "4.56 ms" (negative with a '-'). Returns buf. */
#define TEXT_DURATION_BYTES 32u
const char *text_duration(char buf[TEXT_DURATION_BYTES], int64_t ns);

#endif
