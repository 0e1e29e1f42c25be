#include "forward.h"

#include "config.h"
#include "sys/log.h"
#include "wire/control.h"
#include "io/handshake.h"
#include "io/net.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fwd {
	const struct fwd_impl *impl;
	void *self;
	uint32_t reader_id;
	uint64_t stall_bytes;       /* --forward-stall; 0 = off */
	bool stalled;
};

struct fwd *fwd_wrap(const struct fwd_impl *impl, void *self, const struct rdr_options *opt)
{
	if (self == NULL)
		return NULL;
	struct fwd *f = calloc(1, sizeof *f);
	if (f == NULL) {
		impl->destroy(self);
		return NULL;
	}
	f->impl = impl;
	f->self = self;
	f->reader_id = opt->id;
	f->stall_bytes = opt->forward_stall_bytes;
	return f;
}

const char *fwd_builder_name(const struct rdr_options *opt, struct fwd_conn c, char *buf,
			     size_t size)
{
	char rail[32] = "";
	uint32_t rails = rdr_link_rails(opt, c.link);
	if (rails > 1)
		snprintf(rail, sizeof rail, " (rail %u of %u)", c.rail, rails);
	if (opt->routing)
		snprintf(buf, size, "builder %u%s", c.link, rail);
	else
		snprintf(buf, size, "the builder%s", rail);
	return buf;
}

void fwd_flush(struct fwd *f)
{
	if (f->stall_bytes > 0) {
		struct fwd_stats st;
		f->impl->stats(f->self, &st);
		if (st.bytes_forwarded >= f->stall_bytes) {
			/* Test hook: a data path to the builder that stops
			 * delivering while the control link goes on. */
			if (!f->stalled)
				log_warn("Reader %u: forwarding stalls after %" PRIu64 " bytes (--forward-stall); the control link goes on",
					 f->reader_id, st.bytes_forwarded);
			f->stalled = true;
			return;
		}
	}
	f->impl->flush(f->self);
}

bool fwd_closed(const struct fwd *f)
{
	return f->impl->closed(f->self);
}

void fwd_finish(struct fwd *f)
{
	f->impl->finish(f->self);
}

void fwd_stats(const struct fwd *f, struct fwd_stats *st)
{
	memset(st, 0, sizeof *st);
	f->impl->stats(f->self, st);
}

void fwd_destroy(struct fwd *f)
{
	if (f == NULL)
		return;
	f->impl->destroy(f->self);
	free(f);
}

bool fwd_welcome_is_ours(struct fwd_conn c, const struct ctl_msg *reply)
{
	return reply->u.welcome.role == CTL_ROLE_BUILDER && reply->u.welcome.id == c.link;
}

void fwd_crossed(uint32_t reader_id, struct fwd_conn c, const struct ctl_msg *reply,
		 const char *peer, char *why, size_t size)
{
	snprintf(why, size, "builder link %u answered as %s %u: the links are crossed", c.link,
		 ctl_role_name(reply->u.welcome.role), reply->u.welcome.id);
	log_error("Reader %u: %s (at %s); nothing is forwarded", reader_id, why, peer);
}

bool fwd_refused_by_builder(const struct ctl_msg *reply)
{
	return reply != NULL && reply->type == CTL_ERROR &&
	       strcmp(reply->u.error.code, "unreachable") != 0 &&
	       strcmp(reply->u.error.code, "greeting_failed") != 0;
}

void fwd_data_hello(const struct rdr_options *opt, uint32_t rail, uint32_t rails,
		    struct ctl_hello *hello)
{
	greet_hello_init(hello, CTL_ROLE_READER, opt->id, CTL_CHANNEL_DATA, opt->run_id,
			 opt->sources, opt->source_count);
	hello->rail = rail;
	hello->rails = rails;
}
