/* Socket plumbing shared by the daemons: listeners, connecting with retry,
 * port files, peer names. Sockets are non-blocking throughout. */
#ifndef ES_IO_NET_H
#define ES_IO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;

/* Listens on host:port (port 0 picks a free one, reported in *bound_port).
 * Returns the fd or -errno; the error is logged with the address. In a
 * process that keeps its listeners (net_keep_listeners), a host:port asked
 * for before returns that same listening socket again (a new descriptor of
 * it, which the caller closes as usual) and the port it got then: a daemon
 * serving many runs binds each port once and every run object listens on
 * it (docs/RUNCONTROL.md). A caller must remove its events from the loop
 * before it closes the descriptor, since epoll watches the socket and not
 * the descriptor. */
int net_listen(const char *host, uint16_t port, uint16_t *bound_port);

/* From now on net_listen() keeps what it opens, at most NET_KEPT_MAX
 * listeners (past that it opens and does not keep, with a warning). Each
 * kept listener goes to one caller per run: two listeners asked for on
 * host:0 in one run are two sockets, and the next run (after
 * net_kept_rewind) gets them again in the order it asks. */
#define NET_KEPT_MAX 16u
void net_keep_listeners(void);
void net_kept_rewind(void);

/* The listeners kept: how many, and closes them all (at exit; tests). */
unsigned net_kept_count(void);
void net_close_kept(void);

/* Accepts one connection as a non-blocking fd, or -errno (-EAGAIN when none
 * waits). peer receives "host:port" of the other side. */
int net_accept(int listen_fd, char *peer, size_t peer_len);

/* Writes text to path atomically (sys/afile), so a reader polling for the
 * file never sees half of it. */
int net_write_port_file(const char *path, const char *text);

/* A daemon's port file: one line "NAME PORT" per port it listens on, in
 * order (what tests and deploy/daqrun read, docs/DEPLOY.md); an entry with
 * port 0 (not listening) has no line. Written with net_write_port_file. */
struct net_port {
	const char *name;
	uint16_t port;
};
int net_write_ports(const char *path, const struct net_port *ports, size_t count);

/* Whether the peer of fd is on this host: a Unix socket, 127.0.0.0/8 or
 * ::1 (also as a v4-mapped address). */
bool net_fd_is_loopback(int fd);

/* Whether the peer of fd is in this network stack, from the connection's
 * addresses alone (nothing the peer says): a Unix socket, a loopback
 * address, or an address of one of this host's interfaces (getifaddrs; in
 * a network namespace, the namespace's). A remote host cannot complete a
 * TCP handshake from one of our own addresses: the answer to its SYN is
 * delivered here, not to it, and Linux drops arriving packets whose source
 * is a local address. */
bool net_fd_is_local(int fd);

/* Whether every address host resolves to is a loopback one. */
bool net_host_is_loopback(const char *host);

/* Sets TCP_NODELAY and, when bytes > 0, both kernel buffer sizes: past
 * net.core.wmem_max/rmem_max where the process may (CAP_NET_ADMIN,
 * SO_SNDBUFFORCE), within them otherwise. What the kernel granted is what
 * net_send_buffer()/net_receive_buffer() read back. */
void net_tune(int fd, int buffer_bytes);

/* The kernel's send and receive buffer sizes of fd (SO_SNDBUF, SO_RCVBUF
 * read back: what it granted, doubled for its bookkeeping as Linux does);
 * 0 when it cannot say. */
uint64_t net_send_buffer(int fd);
/* Whether the peer's kernel acknowledged every byte written to the TCP
 * socket fd, waiting at most timeout_ns: true when it did; false when the
 * connection was reset or closed, or on timeout. A peer that has closed
 * its socket answers new bytes with a reset even when its FIN cannot reach
 * us (our receive window full), so bytes written just before this call
 * tell a live peer from a gone one within a round trip. Blocks: for rare
 * checks only. */
bool net_sent_acked(int fd, uint64_t timeout_ns);
/* Whether the peer of socket fd has closed or reset it: a FIN or a reset
 * waiting in the kernel, even behind bytes not read yet. */
bool net_peer_closed(int fd);
uint64_t net_receive_buffer(int fd);

/* "host:port" of the remote end of fd. */
void net_peer_name(int fd, char *buf, size_t len);

/* Host name of this machine for HELLO messages: bytes outside the HELLO's
 * host name set become '-', and it is cut at TEXT_HOST_MAX bytes. */
void net_host_name(char *buf, size_t len);

/* Called once with a connected fd (>= 0), or with -errno when no
 * connection could be made before the deadline. */
typedef void (*net_dial_cb)(int fd, void *arg);

struct net_dial;

/* Where a client dials: host:port over TCP, or the abstract Unix-domain
 * socket "\0host"; what names the listener in log lines ("the builder's
 * control port"). */
struct net_target {
	char what[64];
	char host[256];
	uint16_t port;
	bool unix_socket;
	char name[300];                /* "host:port" or "@host", for log lines */
};

void net_target_init(struct net_target *t, const char *what, const char *host, uint16_t port,
		     bool unix_socket);

/* net_dial_start() or net_dial_unix_start() as t says. */
struct net_dial *net_dial_target(struct event_base *base, const struct net_target *t,
				 uint64_t timeout_ms, net_dial_cb cb, void *arg);

/* Connects to host:port, retrying refused or unreachable attempts with
 * backoff (10 ms doubling to 500 ms) until timeout_ms has passed, so daemons
 * may start in any order. Logs the first failure and the final give-up. */
struct net_dial *net_dial_start(struct event_base *base, const char *what, const char *host,
				uint16_t port, uint64_t timeout_ms, net_dial_cb cb, void *arg);

/* Stops a dial in progress (no callback); NULL is allowed. */
void net_dial_cancel(struct net_dial *d);

/* Listens on the abstract Unix-domain socket "\0name" (Linux): nothing in
 * the file system to clean up after a crash, and gone with the process.
 * Returns the fd or -errno (-EADDRINUSE: another process has the name); the
 * error is logged with the name. name: at most NET_UNIX_NAME_MAX bytes. */
#define NET_UNIX_NAME_MAX 100u
int net_listen_unix(const char *name);

/* As net_dial_start(), to the abstract Unix-domain socket "\0name": a
 * refused attempt (nobody listening yet) is retried with the same backoff. */
struct net_dial *net_dial_unix_start(struct event_base *base, const char *what, const char *name,
				     uint64_t timeout_ms, net_dial_cb cb, void *arg);

#endif
