/* The run's books at its end, from the peers' final reports (the hub's
 * peer table) and what the builders received (dataview.h): the events the
 * run generated, the checks that turn peers' error counters into named
 * errors, and the conservation equations (core/acct). Private to builderd. */
#ifndef ES_BD_BOOKS_H
#define ES_BD_BOOKS_H

#include "options.h"
#include "peer.h"

#include <stdint.h>

struct acct;
struct dataview;
struct manager;

struct books {
	const struct options *opt;
	const struct peer_table *peers;
	const struct dataview *data;     /* what the builders received */
	const struct manager *manager;      /* --role hub: what each builder was assigned; else NULL */
	bool stopped_at_fault;          /* a peer stopped the run for a fault (acct_run's) */
	void (*error)(void *ctx, const char *text);   /* an error of the run */
	void *ctx;
};

/* --events, or else the most any source said it generated (its report, or
 * its END frame). */
uint64_t books_events_generated(const struct books *bk);

/* Errors of the run: a source's END frame and its report disagree, a
 * reader rejected frames of a source (by kind), a peer ended with errors. */
void books_check(const struct books *bk);

/* The equations over every final counter into *a (acct_free() it); an
 * impossible counter is an error of the run by name. */
void books_account(const struct books *bk, struct acct *a);

#endif
