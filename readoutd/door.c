#include "door.h"

#include "intake.h"
#include "config.h"

#include "sys/log.h"
#include "wire/control.h"
#include "io/handshake.h"
#include "io/net.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct door {
	const struct rdr_options *opt;
	struct intake *in;
	int listen_fd;
	struct event *ev_accept;
	struct greet_door greet;         /* the sources' greetings on listen_fd */
	uint64_t refused_connections;
};

/* Why source hello may not stream now, answered to it; false when it may. */
static bool door_refuse(struct door *d, int fd, const struct ctl_hello *hello, const char *peer)
{
	const struct rdr_options *opt = d->opt;
	struct intake_view v;
	if (hello->role != CTL_ROLE_SOURCE || hello->channel != CTL_CHANNEL_DATA) {
		greet_reply_error(fd, peer, "wrong_role",
				  "reader %u takes data connections from sources, got a %s on its %s channel",
				  opt->id, ctl_role_name(hello->role),
				  ctl_channel_name(hello->channel));
	} else if (hello->run_id != opt->run_id) {
		greet_reply_error(fd, peer, "wrong_run",
				  "source %u is in run %u but reader %u is in run %u", hello->id,
				  hello->run_id, opt->id, opt->run_id);
	} else if (hello->id > UINT16_MAX || !intake_lookup(d->in, (uint16_t)hello->id, &v)) {
		greet_reply_error(fd, peer, "unknown_source",
				  "reader %u does not serve source %u; check the topology",
				  opt->id, hello->id);
	} else if (v.state == INTAKE_STREAMING) {
		greet_reply_error(fd, peer, "duplicate_id",
				  "source %u is already connected to reader %u from %s", hello->id,
				  opt->id, v.peer);
	} else if (v.state != INTAKE_WAITING) {
		/* What it sent is in the books: a second stream would be
		 * counted twice. */
		greet_reply_error(fd, peer, "stream_over",
				  "source %u's connection to reader %u from %s has %s after %" PRIu64
				  " verified frames; a source streams once per run",
				  hello->id, opt->id, v.peer,
				  v.state == INTAKE_ENDED ? "ended" : "failed", v.c.frames_verified);
	} else {
		return false;
	}
	return true;
}

static void door_on_greeted(int fd, const struct ctl_hello *hello, const struct msgseal *seal,
                            const char *peer, void *arg)
{
	(void)seal;   /* a data connection: no control messages follow */
	struct door *d = arg;
	const struct rdr_options *opt = d->opt;
	if (fd < 0) {
		d->refused_connections++;
		return;
	}
	if (door_refuse(d, fd, hello, peer)) {
		d->refused_connections++;
		return;
	}
	if (greet_reply_welcome(fd, opt->run_id, CTL_ROLE_READER, opt->id) < 0) {
		log_warn("Reader %u: source %u (%s) left during the greeting", opt->id, hello->id,
			 peer);
		close(fd);
		d->refused_connections++;
		return;
	}
	net_tune(fd, 0);
	if (intake_adopt(d->in, (uint16_t)hello->id, fd, peer) < 0) {
		d->refused_connections++;
		return;
	}
	if (!opt->quiet)
		log_info("Reader %u: source %u connected from %s (pid %u on %s)", opt->id,
			 hello->id, peer, hello->pid, hello->host);
}

static void door_on_accept(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct door *d = arg;
	greet_accept_all(&d->greet, fd, door_on_greeted, d);
}

struct door *door_open(struct event_base *base, const struct rdr_options *opt,
		       struct intake *in, uint16_t *port)
{
	struct door *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->opt = opt;
	d->in = in;
	char name[64], self[32];
	snprintf(name, sizeof name, "reader %u's data port", opt->id);
	snprintf(self, sizeof self, "reader %u", opt->id);
	greet_door_init(&d->greet, base, name, self, opt->handshake_timeout_ms,
			&d->refused_connections);
	d->listen_fd = net_listen(opt->listen_host, opt->listen_port, port);
	if (d->listen_fd < 0)
		goto fail;
	d->ev_accept = event_new(base, d->listen_fd, EV_READ | EV_PERSIST, door_on_accept, d);
	if (d->ev_accept == NULL || event_add(d->ev_accept, NULL) < 0)
		goto fail;
	return d;
fail:
	door_destroy(d);
	return NULL;
}

void door_close(struct door *d)
{
	if (d->listen_fd >= 0) {
		event_del(d->ev_accept);
		close(d->listen_fd);
		d->listen_fd = -1;
	}
}

void door_counts(const struct door *d, uint64_t *refused, uint64_t *busy, uint64_t *evicted,
		 uint64_t *timed_out)
{
	*refused = d->refused_connections;
	*busy = d->greet.busy;
	*evicted = d->greet.evicted;
	*timed_out = d->greet.timed_out;
}

void door_destroy(struct door *d)
{
	if (d == NULL)
		return;
	if (d->ev_accept)
		event_free(d->ev_accept);
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	greet_door_close(&d->greet);
	free(d);
}
