/* The clock probe datagram; see probemsg.h. */
#include "wire/probemsg.h"

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

void prb_encode(const struct prb_msg *m, uint8_t buf[PRB_MSG_SIZE])
{
	buf[0] = (uint8_t)(PRB_MAGIC >> 24);
	buf[1] = (uint8_t)(PRB_MAGIC >> 16);
	buf[2] = (uint8_t)(PRB_MAGIC >> 8);
	buf[3] = (uint8_t)PRB_MAGIC;
	buf[4] = PRB_VERSION;
	buf[5] = m->type;
	buf[6] = 0;
	buf[7] = m->flags;
	put_u64(buf + 8, m->token);
	put_u64(buf + 16, m->sequence);
	put_u64(buf + 24, m->t2_ns);
	put_u64(buf + 32, m->t3_ns);
}

bool prb_decode(struct prb_msg *m, const uint8_t *buf, size_t len)
{
	uint32_t magic;

	if (len != PRB_MSG_SIZE)
		return false;
	magic = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
	if (magic != PRB_MAGIC || buf[4] != PRB_VERSION || buf[6] != 0)
		return false;
	if (buf[5] < PRB_PROBE || buf[5] > PRB_FOLLOWUP)
		return false;
	m->type = buf[5];
	m->flags = buf[7];
	m->token = get_u64(buf + 8);
	m->sequence = get_u64(buf + 16);
	m->t2_ns = get_u64(buf + 24);
	m->t3_ns = get_u64(buf + 32);
	return true;
}
