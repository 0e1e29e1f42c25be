#include "peers.h"

#include <errno.h>
#include <stdlib.h>

int peer_table_init(struct peer_table *t, uint16_t sources, uint32_t readers)
{
	t->sources = sources;
	t->readers = readers;
	t->peers = calloc((size_t)sources + readers + 1, sizeof *t->peers);
	if (t->peers == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < (uint32_t)sources + readers; i++) {
		bool source = i < sources;
		t->peers[i] = (struct bd_peer){
			.role = source ? CTL_ROLE_SOURCE : CTL_ROLE_READER,
			.id = source ? i : i - sources,
		};
	}
	return 0;
}

void peer_table_free(struct peer_table *t)
{
	for (uint32_t i = 0; t->peers != NULL && i < peer_count(t); i++)
		free(t->peers[i].report);
	free(t->peers);
	t->peers = NULL;
}

uint32_t peer_count(const struct peer_table *t)
{
	return (uint32_t)t->sources + t->readers;
}

struct bd_peer *peer_at(const struct peer_table *t, uint32_t i)
{
	return &t->peers[i];
}

struct bd_peer *peer_find(const struct peer_table *t, enum ctl_role role, uint32_t id)
{
	if (role == CTL_ROLE_SOURCE && id < t->sources)
		return &t->peers[id];
	if (role == CTL_ROLE_READER && id < t->readers)
		return &t->peers[t->sources + id];
	return NULL;
}

struct bd_peer *peer_source(const struct peer_table *t, uint32_t source)
{
	return &t->peers[source];
}

struct bd_peer *peer_reader(const struct peer_table *t, uint32_t reader)
{
	return &t->peers[t->sources + reader];
}

uint32_t peer_index(const struct peer_table *t, const struct bd_peer *p)
{
	return (uint32_t)(p - t->peers);
}

const char *peer_how_gone(const struct bd_peer *p)
{
	return p->stalled ? "stalled" : p->stuck ? "stuck" : "died";
}
