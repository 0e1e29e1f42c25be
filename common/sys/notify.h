/* The service manager's readiness protocol (sd_notify(3) through
 * libsystemd): a daemon run as a Type=notify unit tells systemd when it is
 * ready, what it is doing and when it stops (docs/RUNCONTROL.md, "systemd").
 * Every call is one datagram to $NOTIFY_SOCKET; without that variable (not
 * under systemd, or another unit type) nothing is sent and nothing fails.
 * A datagram that cannot be sent is logged once, never fatal. */
#ifndef ES_SYS_NOTIFY_H
#define ES_SYS_NOTIFY_H

/* The longest STATUS= text sent; a longer one is cut. */
#define NOTIFY_STATUS_MAX 200

/* READY=1 with STATUS=status (NULL or "" for READY=1 alone): the daemon
 * serves, so systemd ends the unit's start and starts what waits on it. */
void notify_ready(const char *status);

/* STATUS=<printf of fmt>: one line systemctl status shows. A newline or
 * other control character in it is sent as a space, so the text stays one
 * assignment of the protocol. */
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* STOPPING=1: the daemon is shutting down of its own accord. */
void notify_stopping(void);

#endif
