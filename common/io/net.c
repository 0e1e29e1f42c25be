#include "io/net.h"
#include "io/net_internal.h"

#include "sys/clock.h"
#include "sys/afile.h"
#include "sys/log.h"
#include "wire/text.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int net_resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char service[8];
	snprintf(service, sizeof service, "%u", (unsigned)port);
	int rc = getaddrinfo(host, service, &hints, &res);
	if (rc != 0) {
		log_error("Cannot resolve host '%s': %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int net_listen_fresh(const char *host, uint16_t port, uint16_t *bound_port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = net_resolve(host, port, &ss, &len);
	if (rc < 0)
		return rc;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		log_error("Cannot create a socket for %s:%u: %s", host, port, strerror(errno));
		return rc;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		log_error("Cannot listen on %s:%u: %s", host, port, strerror(errno));
		close(fd);
		return rc;
	}
	struct sockaddr_storage bound;
	socklen_t blen = sizeof bound;
	getsockname(fd, (struct sockaddr *)&bound, &blen);
	*bound_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
							: ((struct sockaddr_in *)&bound)->sin_port);
	return fd;
}

/* The address of abstract socket "\0name": the length, not a NUL, ends it. */
static int net_unix_addr(const char *name, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_un *un = (struct sockaddr_un *)ss;
	size_t n = strlen(name);
	if (n == 0 || n > NET_UNIX_NAME_MAX || n + 1 > sizeof un->sun_path)
		return -ENAMETOOLONG;
	memset(un, 0, sizeof *un);
	un->sun_family = AF_UNIX;
	memcpy(un->sun_path + 1, name, n);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	return 0;
}

int net_listen_unix(const char *name)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = net_unix_addr(name, &ss, &len);
	if (rc < 0) {
		log_error("Cannot listen on Unix socket @%s: name empty or longer than %u bytes", name,
			  NET_UNIX_NAME_MAX);
		return rc;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		log_error("Cannot create a Unix socket for @%s: %s", name, strerror(errno));
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		log_error("Cannot listen on Unix socket @%s: %s%s", name, strerror(errno),
			  rc == -EADDRINUSE ? " (another process on this host uses that name)" : "");
		close(fd);
		return rc;
	}
	return fd;
}

static void net_format_addr(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		port = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%u", host, port);
}

int net_accept(int listen_fd, char *peer, size_t peer_len)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int fd = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX) {
		/* A client of an abstract socket has no address: its pid is what
		 * names it in a log line. */
		struct ucred cred;
		socklen_t clen = sizeof cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
			snprintf(peer, peer_len, "unix:pid %d", (int)cred.pid);
		else
			snprintf(peer, peer_len, "unix:?");
		return fd;
	}
	net_format_addr(&ss, peer, peer_len);
	return fd;
}

static bool net_addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

bool net_fd_is_loopback(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	return net_addr_is_loopback((const struct sockaddr *)&ss);
}

/* The IPv4 address inside a v4-mapped IPv6 one, so both spellings compare. */
static void net_unmap(struct sockaddr_storage *ss)
{
	if (ss->ss_family != AF_INET6)
		return;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
	if (!IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
		return;
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	memcpy(&a4.sin_addr, &a6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof *ss);
	memcpy(ss, &a4, sizeof a4);
}

static bool net_same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
	return false;
}

bool net_fd_is_local(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (net_addr_is_loopback((const struct sockaddr *)&ss))
		return true;
	net_unmap(&ss);
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0)
		return false;
	bool local = false;
	for (struct ifaddrs *i = ifs; i != NULL && !local; i = i->ifa_next)
		local = i->ifa_addr != NULL && net_same_ip(i->ifa_addr, (const struct sockaddr *)&ss);
	freeifaddrs(ifs);
	return local;
}

bool net_host_is_loopback(const char *host)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return false;
	bool all = res != NULL;
	for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
		all = all && net_addr_is_loopback(ai->ai_addr);
	freeaddrinfo(res);
	return all;
}

void net_peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0) {
		snprintf(buf, len, "?");
		return;
	}
	net_format_addr(&ss, buf, len);
}

void net_host_name(char *buf, size_t len)
{
	if (gethostname(buf, len) < 0)
		snprintf(buf, len, "unknown");
	buf[len - 1] = '\0';
	/* The HELLO admits host name characters only (docs/PROTOCOL.md): a
	 * machine named otherwise still greets, under a recognisable name. */
	if (strlen(buf) > TEXT_HOST_MAX)
		buf[TEXT_HOST_MAX] = '\0';
	for (char *p = buf; *p; p++)
		if (!text_host_char((unsigned char)*p))
			*p = '-';
}

int net_write_port_file(const char *path, const char *text)
{
	int rc = afile_write_all(path, text, strlen(text));
	if (rc < 0)
		log_error("Cannot write port file %s: %s", path, strerror(-rc));
	return rc;
}

int net_write_ports(const char *path, const struct net_port *ports, size_t count)
{
	char text[512];
	size_t used = 0;
	text[0] = '\0';
	for (size_t i = 0; i < count; i++) {
		if (ports[i].port == 0)
			continue;
		int n = snprintf(text + used, sizeof text - used, "%s %u\n", ports[i].name,
				 (unsigned)ports[i].port);
		if (n < 0 || (size_t)n >= sizeof text - used) {
			log_error("Cannot write port file %s: %zu ports do not fit", path, count);
			return -ENAMETOOLONG;
		}
		used += (size_t)n;
	}
	return net_write_port_file(path, text);
}

void net_tune(int fd, int buffer_bytes)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (buffer_bytes > 0) {
		/* The FORCE variants are refused (EPERM) without CAP_NET_ADMIN:
		 * then the size is capped by the sysctls, and the read back says so. */
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
	}
}

static uint64_t net_buffer(int fd, int option)
{
	int bytes = 0;
	socklen_t len = sizeof bytes;
	if (getsockopt(fd, SOL_SOCKET, option, &bytes, &len) != 0 || bytes < 0)
		return 0;
	return (uint64_t)bytes;
}

uint64_t net_send_buffer(int fd)
{
	return net_buffer(fd, SO_SNDBUF);
}

uint64_t net_receive_buffer(int fd)
{
	return net_buffer(fd, SO_RCVBUF);
}

struct net_dial {
	struct event_base *base;
	struct event *ev;
	struct net_target t;
	uint64_t deadline_ns;
	uint64_t backoff_ms;
	unsigned attempts;
	int fd;
	net_dial_cb cb;
	void *arg;
};

static void net_dial_attempt(struct net_dial *d);
static void net_dial_on_timer(evutil_socket_t fd, short what, void *arg);

static void net_dial_retry(struct net_dial *d, int err)
{
	if (d->fd >= 0) {
		close(d->fd);
		d->fd = -1;
	}
	if (d->attempts == 1)
		log_info("Waiting for %s at %s (%s); retrying", d->t.what, d->t.name, strerror(-err));
	if (clk_monotonic_ns() >= d->deadline_ns) {
		log_error("Gave up connecting to %s at %s after %u attempts: %s", d->t.what,
			  d->t.name, d->attempts, strerror(-err));
		net_dial_cb cb = d->cb;
		void *arg = d->arg;
		net_dial_cancel(d);
		cb(err, arg);
		return;
	}
	struct timeval tv = { .tv_sec = (time_t)(d->backoff_ms / 1000),
			      .tv_usec = (suseconds_t)(d->backoff_ms % 1000) * 1000 };
	if (d->backoff_ms < 500)
		d->backoff_ms *= 2;
	event_free(d->ev);
	d->ev = evtimer_new(d->base, net_dial_on_timer, d);
	evtimer_add(d->ev, &tv);
}

static void net_dial_on_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct net_dial *d = arg;
	int err = 0;
	socklen_t len = sizeof err;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err != 0) {
		net_dial_retry(d, -err);
		return;
	}
	int connected = d->fd;
	d->fd = -1;
	net_dial_cb cb = d->cb;
	void *cb_arg = d->arg;
	net_dial_cancel(d);
	cb(connected, cb_arg);
}

static void net_dial_attempt(struct net_dial *d)
{
	struct sockaddr_storage ss;
	socklen_t len;
	d->attempts++;
	int rc = d->t.unix_socket ? net_unix_addr(d->t.host, &ss, &len)
				  : net_resolve(d->t.host, d->t.port, &ss, &len);
	if (rc < 0) {
		net_dial_retry(d, rc);
		return;
	}
	d->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0) {
		net_dial_retry(d, -errno);
		return;
	}
	if (connect(d->fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		net_dial_retry(d, -errno);
		return;
	}
	event_free(d->ev);
	d->ev = event_new(d->base, d->fd, EV_WRITE, net_dial_on_writable, d);
	event_add(d->ev, NULL);
}

static void net_dial_on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	net_dial_attempt(arg);
}

void net_target_init(struct net_target *t, const char *what, const char *host, uint16_t port,
		     bool unix_socket)
{
	snprintf(t->what, sizeof t->what, "%s", what);
	snprintf(t->host, sizeof t->host, "%s", host);
	t->port = port;
	t->unix_socket = unix_socket;
	if (unix_socket)
		snprintf(t->name, sizeof t->name, "@%s", host);
	else
		snprintf(t->name, sizeof t->name, "%s:%u", host, (unsigned)port);
}

struct net_dial *net_dial_target(struct event_base *base, const struct net_target *t,
				 uint64_t timeout_ms, net_dial_cb cb, void *arg)
{
	struct net_dial *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->base = base;
	d->t = *t;
	d->deadline_ns = clk_monotonic_ns() + timeout_ms * 1000000u;
	d->backoff_ms = 10;
	d->fd = -1;
	d->cb = cb;
	d->arg = arg;
	/* The first attempt runs from the loop so the callback never fires
	 * before net_dial_target() has returned. */
	d->ev = evtimer_new(base, net_dial_on_timer, d);
	struct timeval zero = { 0, 0 };
	evtimer_add(d->ev, &zero);
	return d;
}

struct net_dial *net_dial_start(struct event_base *base, const char *what, const char *host,
				uint16_t port, uint64_t timeout_ms, net_dial_cb cb, void *arg)
{
	struct net_target t;
	net_target_init(&t, what, host, port, false);
	return net_dial_target(base, &t, timeout_ms, cb, arg);
}

struct net_dial *net_dial_unix_start(struct event_base *base, const char *what, const char *name,
				     uint64_t timeout_ms, net_dial_cb cb, void *arg)
{
	struct net_target t;
	net_target_init(&t, what, name, 0, true);
	return net_dial_target(base, &t, timeout_ms, cb, arg);
}

void net_dial_cancel(struct net_dial *d)
{
	if (d == NULL)
		return;
	if (d->ev != NULL)
		event_free(d->ev);
	if (d->fd >= 0)
		close(d->fd);
	free(d);
}

bool net_peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool net_sent_acked(int fd, uint64_t timeout_ns)
{
	uint64_t until = clk_monotonic_ns() + timeout_ns;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLRDHUP };
		int unacked = 0;
		if (net_peer_closed(fd))
			return false;
		if (ioctl(fd, SIOCOUTQ, &unacked) != 0)
			return false;
		/* A reset empties the send queue too: the connection must still
		 * be established, both ways, once nothing is unacknowledged. */
		if (unacked == 0) {
			struct tcp_info ti;
			socklen_t len = sizeof ti;
			return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
			       ti.tcpi_state == TCP_ESTABLISHED;
		}
		if (clk_monotonic_ns() >= until)
			return false;
		/* A round trip is microseconds on a LAN: look again in 1 ms at most. */
		(void)poll(&p, 1, 1);
	}
}
