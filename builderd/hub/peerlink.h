/* Each peer's control link once it is greeted: what arrives on it (END,
 * STATS, PONG, a reader's STOP giving up a source), its loss, and what a
 * lost peer costs the others: it is named as an error of the run, counted
 * as lost, and the peers that depend on it are told to stop or to drop it,
 * so the run can still end. The hub decides what follows (hooks). Private
 * to builderd. */
#ifndef ES_BD_PEERLINK_H
#define ES_BD_PEERLINK_H

#include "peer.h"

#include "io/msgseal.h"

#include <stdbool.h>
#include <stdint.h>

struct clocks;
struct ctl_msg;
struct event_base;
struct dataview;

struct peerlink_hooks {
	void *ctx;
	/* An error of the run. */
	void (*error)(void *ctx, const char *text);
	/* A final report arrived: the run makes progress. */
	void (*progress)(void *ctx, uint64_t now);
	/* p's END arrived (in p->report unless out of memory), with the
	 * daemon's status: 0 clean. */
	void (*reported)(void *ctx, struct peer *p, int32_t status);
	/* p was counted lost and its dependents told. */
	void (*lost)(void *ctx, struct peer *p);
	/* A peer's connection ended after the run (it read BYE). */
	void (*closed)(void *ctx);
	/* false once the run has ended. */
	bool (*running)(void *ctx);
	/* Reader p found a fault that fails the run (it refused the hub's
	 * plan, or a builder link of its was answered by another builder)
	 * and was given up for it: the run ends now. */
	void (*fault)(void *ctx, struct peer *p);
	/* A message this module does not handle (a builder's TOKEN, a
	 * source's answer to the drained stop): true when the hub took it.
	 * May be NULL. */
	bool (*message)(void *ctx, struct peer *p, const struct ctl_msg *m);
};

struct peerlink_config {
	struct event_base *base;
	struct peer_table *peers;
	const struct dataview *data; /* which reader serves which source; cutting a reader */
	struct clocks *clocks;         /* gets the PONGs and the reports' clock groups */
	struct peerlink_hooks hooks;
};

struct peerlink;

/* NULL when out of memory. */
struct peerlink *peerlink_create(const struct peerlink_config *cfg);

/* Frees every peer's connection too. */
void peerlink_destroy(struct peerlink *l);

/* fd (greeted, from address peer) becomes p's control link. */
void peerlink_attach(struct peerlink *l, struct peer *p, int fd, const struct msgseal *seal,
		  const char *peer);

/* p died or stalled before its final report (why follows "Source N (...)"):
 * named, counted lost, its connection closed, its dependents told. Nothing
 * for a peer already lost or reported. */
void peerlink_gone(struct peerlink *l, struct peer *p, const char *why);

#endif
