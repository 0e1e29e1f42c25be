/* The listeners a serving daemon keeps across its runs (net.h,
 * net_keep_listeners): each host:port asked for is bound once and handed
 * out again as a new descriptor of the same socket, so every run listens
 * on the same ports and the port files never change. */
#include "io/net.h"
#include "io/net_internal.h"

#include "sys/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct kept_listener {
	char host[256];
	uint16_t asked;                 /* the port asked for, 0 included */
	uint16_t bound;
	int fd;
	bool handed;                    /* to the current run already */
};

static struct kept_listener kept[NET_KEPT_MAX];
static unsigned kept_count;
static bool keeping;

void net_keep_listeners(void)
{
	keeping = true;
}

void net_kept_rewind(void)
{
	for (unsigned i = 0; i < kept_count; i++)
		kept[i].handed = false;
}

unsigned net_kept_count(void)
{
	return kept_count;
}

void net_close_kept(void)
{
	for (unsigned i = 0; i < kept_count; i++)
		close(kept[i].fd);
	kept_count = 0;
	keeping = false;
}

/* A second descriptor of a kept socket, close-on-exec like the first. */
static int kept_handout(const struct kept_listener *k, uint16_t *bound_port)
{
	int fd = fcntl(k->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		int rc = -errno;
		log_error("Cannot hand out the listener on %s:%u again: %s", k->host,
			  (unsigned)k->bound, strerror(errno));
		return rc;
	}
	*bound_port = k->bound;
	return fd;
}

int net_listen(const char *host, uint16_t port, uint16_t *bound_port)
{
	if (!keeping)
		return net_listen_fresh(host, port, bound_port);
	for (unsigned i = 0; i < kept_count; i++) {
		/* A port asked for by number is also found by the number it got:
		 * a rail's second address asks for the first one's port. */
		if (!kept[i].handed && strcmp(kept[i].host, host) == 0 &&
		    (kept[i].asked == port || (port != 0 && kept[i].bound == port))) {
			kept[i].handed = true;
			return kept_handout(&kept[i], bound_port);
		}
	}
	if (kept_count == NET_KEPT_MAX || strlen(host) >= sizeof kept[0].host) {
		log_warn("Listening on %s:%u without keeping it for the next run: %u listeners "
			 "kept already", host, (unsigned)port, kept_count);
		return net_listen_fresh(host, port, bound_port);
	}
	struct kept_listener *k = &kept[kept_count];
	int fd = net_listen_fresh(host, port, &k->bound);
	if (fd < 0)
		return fd;
	snprintf(k->host, sizeof k->host, "%s", host);
	k->asked = port;
	k->fd = fd;
	k->handed = true;
	kept_count++;
	return kept_handout(k, bound_port);
}
