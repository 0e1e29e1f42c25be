#include "io/httplisten.h"

#include "io/net.h"

#include <errno.h>
#include <event2/http.h>
#include <unistd.h>

int httplisten_open(struct event_base *base, const char *host, uint16_t port,
		    struct evhttp **http, uint16_t *bound_port)
{
	int fd = net_listen(host, port, bound_port);
	if (fd < 0)
		return fd;
	/* With the socket given, evhttp neither binds nor listens again (a
	 * backlog of 0): it fails only when it cannot allocate. */
	struct evhttp *h = evhttp_new(base);
	if (h == NULL || evhttp_accept_socket_with_handle(h, fd) == NULL) {
		close(fd);
		if (h != NULL)
			evhttp_free(h);
		return -ENOMEM;
	}
	*http = h;
	return 0;
}
