/* Running chronyc: this host's chrony state read from `chronyc -c tracking`
 * into a struct cks_chrony (core/chrony.h), with a deadline, the child
 * always reaped. Blocking, without an event loop: a few milliseconds at the
 * start and the end of a run, never on a hot path. */
#ifndef ES_IO_CHRONYC_H
#define ES_IO_CHRONYC_H

#include "core/chrony.h"

/* How long cks_chrony_read() waits for chronyc before killing it. */
#define CKS_CHRONYC_TIMEOUT_MS 2000

/* Runs `chronyc -c [-h socket] tracking` (socket NULL: chronyc's default)
 * and parses its answer, killing chronyc after CKS_CHRONYC_TIMEOUT_MS.
 * Returns 0 when a tracking line was parsed, else -errno with available =
 * false and c->reason set: -ENOENT chronyc missing, -ECONNREFUSED chronyd
 * not answering ("506 Cannot talk to daemon"), -ETIMEDOUT, -EBADMSG output
 * that does not parse. c->read_mono_ns is the CLOCK_MONOTONIC time just
 * before chronyc started, either way. */
int cks_chrony_read(struct cks_chrony *c, const char *socket);

/* cks_chrony_read() with the command given in full (argv[0] looked up in
 * PATH) and its own timeout; lets tests stand in for chronyc. */
int cks_chrony_run(struct cks_chrony *c, char *const argv[], int timeout_ms);

/* Environment variable naming the chronyd command socket every daemon's
 * chrony read uses (chronyc -h); unset or empty: chronyc's default. Lets
 * daemons sharing a file system each ask their own chronyd, as in a test
 * with one chronyd per network namespace. */
#define CKS_SOCKET_ENV "ES_CHRONY_SOCKET"

/* The socket named by CKS_SOCKET_ENV, NULL for chronyc's default. */
const char *cks_chrony_socket(void);

#endif
