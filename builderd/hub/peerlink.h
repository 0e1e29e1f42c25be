/* Each peer's control link once it is greeted: what arrives on it (END,
 * STATS, PONG, a reader's STOP giving up a source), its loss, and what a
 * lost peer costs the others: it is named as an error of the run, counted
 * as lost, and the peers that depend on it are told to stop or to drop it,
 * so the run can still end. The hub decides what follows (hooks). Private
 * to builderd. */
#ifndef ES_BD_PEERLINK_H
#define ES_BD_PEERLINK_H

#include "peers.h"

#include "io/msgseal.h"

#include <stdbool.h>
#include <stdint.h>

struct bdc;
struct ctl_msg;
struct event_base;
struct bd_data;

struct plink_hooks {
	void *ctx;
	/* An error of the run. */
	void (*error)(void *ctx, const char *text);
	/* A final report arrived: the run makes progress. */
	void (*progress)(void *ctx, uint64_t now);
	/* p's END arrived (in p->report unless out of memory), with the
	 * daemon's status: 0 clean. */
	void (*reported)(void *ctx, struct bd_peer *p, int32_t status);
	/* p was counted lost and its dependents told. */
	void (*lost)(void *ctx, struct bd_peer *p);
	/* A peer's connection ended after the run (it read BYE). */
	void (*closed)(void *ctx);
	/* false once the run has ended. */
	bool (*running)(void *ctx);
	/* Reader p found a fault that fails the run (it refused the hub's
	 * plan, or a builder link of its was answered by another builder)
	 * and was given up for it: the run ends now. */
	void (*fault)(void *ctx, struct bd_peer *p);
	/* A message this module does not handle (a builder's TOKEN): true
	 * when the hub took it. May be NULL. */
	bool (*message)(void *ctx, struct bd_peer *p, const struct ctl_msg *m);
};

struct plink_config {
	struct event_base *base;
	struct peer_table *peers;
	const struct bd_data *data; /* which reader serves which source; cutting a reader */
	struct bdc *clocks;         /* gets the PONGs and the reports' clock groups */
	struct plink_hooks hooks;
};

struct plink;

/* NULL when out of memory. */
struct plink *plink_create(const struct plink_config *cfg);

/* Frees every peer's connection too. */
void plink_destroy(struct plink *l);

/* fd (greeted, from address peer) becomes p's control link. */
void plink_attach(struct plink *l, struct bd_peer *p, int fd, const struct msgseal *seal,
		  const char *peer);

/* p died or stalled before its final report (why follows "Source N (...)"):
 * named, counted lost, its connection closed, its dependents told. Nothing
 * for a peer already lost or reported. */
void plink_gone(struct plink *l, struct bd_peer *p, const char *why);

#endif
