#include "hub/credits.h"

#include "io/msgstream.h"
#include "wire/control.h"

bool credits_due(const struct peer *p, uint64_t limit, uint32_t window, bool tick,
		 uint64_t now)
{
	uint64_t step = window / 8 ? window / 8 : 1;
	if (p->conn == NULL || limit <= p->credit_sent)
		return false;
	if (now - p->credit_sent_ns < CREDITS_MIN_INTERVAL_NS)
		return false;
	return tick || limit - p->credit_sent >= step;
}

bool credits_send(struct peer *p, uint64_t limit, uint64_t now)
{
	struct ctl_msg m = { .type = CTL_CREDIT };
	m.u.credit.limit = limit;
	m.u.credit.sequence = ++p->credits;
	if (msgconn_send(p->conn, &m) != 0)
		return false;
	p->credit_sent = limit;
	p->credit_sent_ns = now;
	return true;
}

uint64_t credits_publish(struct peer_table *t, uint64_t limit, uint32_t window, bool tick,
			 uint64_t now)
{
	uint64_t sent = 0;
	for (uint32_t r = 0; r < t->readers; r++) {
		struct peer *p = peer_reader(t, r);
		if (credits_due(p, limit, window, tick, now) && credits_send(p, limit, now))
			sent++;
	}
	return sent;
}
