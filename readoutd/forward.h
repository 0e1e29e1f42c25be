/* A forwarder: the data path from the reader to the builder, over TCP
 * (fwd_tcp.c: many frames per system call, straight from each source's
 * receive buffer) or, on the builder's host, a shared-memory ring
 * (fwd_shm.c: each frame copied once, no system call while both sides are
 * busy). The reader sees only this interface: it calls fwd_flush() when
 * frames were verified, and the forwarder calls back when room appeared or
 * the path failed. */
#ifndef ES_READOUTD_FORWARD_H
#define ES_READOUTD_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct ctl_msg;
struct event_base;
struct rdr_options;

/* Where a forwarder takes verified frames from: per destination, the
 * frames routed to it and not yet written, as runs of bytes in the
 * sources' receive buffers (never copied to be queued). */
struct fwd_feed {
	/* Up to max runs of destination d's unwritten bytes, in order, the
	 * first from where the last write to d stopped; the count. */
	int (*gather)(void *arg, uint32_t d, struct iovec *iov, int max);
	/* bytes of what gather gave (possibly ending inside a frame) left for d. */
	void (*consumed)(void *arg, uint32_t d, size_t bytes);
	/* After frames left: reclaim their room and read again. */
	void (*moved)(void *arg);
	void *arg;
};

enum fwd_failure {
	FWD_REFUSED,   /* the path could not be set up: the reader cannot run */
	FWD_BROKEN,    /* the path broke: what is unsent stays unsent */
	FWD_LOST,      /* nothing more can reach the builder: stop the sources now */
};

struct fwd_events {
	/* The path opened or has room again: flush, and see whether the run is over. */
	void (*on_progress)(void *arg);
	/* Already logged. */
	void (*on_failed)(void *arg, enum fwd_failure why);
	/* The builder refused the greeting (an ERROR of its own), or the one
	 * that answered is not the builder this link names (links given
	 * crossed): nothing was forwarded, the connection is closed, and why
	 * is a sentence naming the link (already logged). */
	void (*on_refused)(void *arg, const char *why);
};

/* What a forwarder did, for the END report and /metrics. */
struct fwd_stats {
	bool shm;
	uint64_t writev_calls;
	uint64_t bytes_forwarded;
	uint64_t ring_records;
	uint64_t ring_full_waits;
	uint64_t ring_capacity_bytes;  /* 0 once the ring is closed */
	uint64_t ring_fill_bytes;      /* written, not yet released by the builder */
	const char *ring_name;         /* the segment, while the forwarder lives */
	uint64_t socket_buffer_bytes;  /* TCP: the send buffer granted (SO_SNDBUF), once connected */
};

/* Which data connection a forwarder is: rail rail of the link to builder
 * link (opt->links[link]), writing destination dest of the feed. */
struct fwd_conn {
	uint32_t link;
	uint32_t rail;
	uint32_t dest;
};

struct fwd;

/* Dials the data port of c's builder on c's rail (opt->links[c.link]), or
 * its shared-memory socket when the link names one, and greets it with a
 * HELLO of c's rail and the link's rails; it forwards destination c.dest of
 * the feed. */
struct fwd *fwd_create(struct event_base *base, const struct rdr_options *opt,
		       struct fwd_conn c, const struct fwd_feed *feed,
		       const struct fwd_events *ev, void *arg);

/* A TCP forwarder of destination dest (link dest, rail 0) on fd, a data
 * connection the builder already welcomed (tests: one end of a socketpair).
 * Takes fd. */
struct fwd *fwd_tcp_open(struct event_base *base, const struct rdr_options *opt, uint32_t dest,
			 int fd, const struct fwd_feed *feed, const struct fwd_events *ev, void *arg);

/* Forwards what the feed holds, as far as the path takes it now. */
void fwd_flush(struct fwd *f);
/* The path broke or was lost: unsent frames will stay unsent. */
bool fwd_closed(const struct fwd *f);
/* The stream is over: closes it so the builder sees its end. */
void fwd_finish(struct fwd *f);
void fwd_stats(const struct fwd *f, struct fwd_stats *st);
void fwd_destroy(struct fwd *f);

/* The operations behind the interface, one set per transport. */
struct fwd_impl {
	void (*flush)(void *self);
	bool (*closed)(const void *self);
	void (*finish)(void *self);
	void (*stats)(const void *self, struct fwd_stats *st);
	void (*destroy)(void *self);
};

/* For the transports: wraps self; NULL (and self destroyed) without memory. */
struct fwd *fwd_wrap(const struct fwd_impl *impl, void *self, const struct rdr_options *opt);
/* Each transport's constructor. */
void *fwd_tcp_dial(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		   const struct fwd_feed *feed, const struct fwd_events *ev, void *arg);
void *fwd_tcp_adopt(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		    int fd, const struct fwd_feed *feed, const struct fwd_events *ev, void *arg);
void *fwd_shm_dial(struct event_base *base, const struct rdr_options *opt, struct fwd_conn c,
		   const struct fwd_feed *feed, const struct fwd_events *ev, void *arg);
extern const struct fwd_impl fwd_tcp_impl, fwd_shm_impl;

/* The data path's HELLO, the same over TCP and shared memory: rail rail of
 * a link of rails connections. */
struct ctl_hello;
void fwd_data_hello(const struct rdr_options *opt, uint32_t rail, uint32_t rails,
		    struct ctl_hello *hello);

/* Whether a data connection's WELCOME comes from the builder its link
 * names: role builder, id c.link (0, the one builder, without routing). */
bool fwd_welcome_is_ours(struct fwd_conn c, const struct ctl_msg *reply);

/* A WELCOME not ours (at peer): logs it and puts the sentence in why,
 * "builder link 0 answered as builder 1: the links are crossed". */
void fwd_crossed(uint32_t reader_id, struct fwd_conn c, const struct ctl_msg *reply,
		 const char *peer, char *why, size_t size);

/* Whether a refused greeting's ERROR came from the builder itself (not
 * the dial's own "unreachable" or "greeting_failed"). */
bool fwd_refused_by_builder(const struct ctl_msg *reply);

/* "the builder" (one builder, CREDIT) or "builder 3" (routing), and with
 * rails " (rail 1 of 2)", for logs. */
const char *fwd_builder_name(const struct rdr_options *opt, struct fwd_conn c, char *buf,
			     size_t size);

#endif
