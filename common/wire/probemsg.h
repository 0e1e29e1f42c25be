/* The clock probe datagram (io/probe.h tells the exchange, docs/CLOCKS.md
 * why). Every datagram is PRB_MSG_SIZE bytes, big-endian:
 *   magic u32 "ESPB" | version u8 | type u8 | flags u16 |
 *   token u64 | sequence u64 | t2_ns u64 | t3_ns u64
 * The token is chosen at random by the peer and told to the builder over the
 * authenticated control connection; the peer answers only PROBEs carrying
 * it, from the builder's address. */
#ifndef ES_WIRE_PROBEMSG_H
#define ES_WIRE_PROBEMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRB_MAGIC UINT32_C(0x45535042) /* "ESPB" */
#define PRB_VERSION 1u
#define PRB_MSG_SIZE 40u

enum prb_type { PRB_PROBE = 1, PRB_REPLY = 2, PRB_FOLLOWUP = 3 };

/* REPLY: t2 is the kernel's receive stamp (else a user-space read). */
#define PRB_F_T2_KERNEL 0x01u
/* REPLY: a FOLLOWUP with the kernel's send stamp of this REPLY will come
 * (the peer's socket has send stamps on). FOLLOWUP: t3 is that stamp. */
#define PRB_F_FOLLOWUP 0x02u
/* t2 (REPLY) or t3 (FOLLOWUP) is a hardware stamp. */
#define PRB_F_HARDWARE 0x04u

struct prb_msg {
	uint8_t type;        /* enum prb_type */
	uint8_t flags;       /* PRB_F_* */
	uint64_t token;
	uint64_t sequence;
	uint64_t t2_ns;      /* REPLY */
	uint64_t t3_ns;      /* REPLY: user-space read; FOLLOWUP: kernel stamp */
};

/* Writes m into buf. */
void prb_encode(const struct prb_msg *m, uint8_t buf[PRB_MSG_SIZE]);

/* Reads one datagram: false unless it is exactly PRB_MSG_SIZE bytes with the
 * magic, the version and a known type. */
bool prb_decode(struct prb_msg *m, const uint8_t *buf, size_t len);

#endif
