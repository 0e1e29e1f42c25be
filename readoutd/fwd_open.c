/* A data connection's forwarder: the transport its link names (shm:// or
 * tcp://), wrapped in the interface the reader sees: the one file that knows
 * both transports, so that they need only forward.c's shared parts. */
#include "forward.h"

#include "config.h"

struct fwd *fwd_create(struct event_base *base, const struct rdr_options *opt,
		       struct fwd_conn c, const struct fwd_feed *feed,
		       const struct fwd_events *ev, void *arg)
{
	if (opt->links[c.link].shm[0] != '\0')
		return fwd_wrap(&fwd_shm_impl, fwd_shm_dial(base, opt, c, feed, ev, arg), opt);
	return fwd_wrap(&fwd_tcp_impl, fwd_tcp_dial(base, opt, c, feed, ev, arg), opt);
}

struct fwd *fwd_tcp_open(struct event_base *base, const struct rdr_options *opt, uint32_t dest,
			 int fd, const struct fwd_feed *feed, const struct fwd_events *ev, void *arg)
{
	struct fwd_conn c = { .link = dest, .rail = 0, .dest = dest };
	return fwd_wrap(&fwd_tcp_impl, fwd_tcp_adopt(base, opt, c, fd, feed, ev, arg), opt);
}
