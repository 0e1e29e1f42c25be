/* The clock probe socket and its kernel stamps; see probesock.h. */
#include "io/probesock.h"

#include "sys/clock.h"
#include "sys/log.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Room for the stamps and an extended error with its offender address. */
#define PRB_CMSG_BYTES 512
/* A looped-back send carries the packet with its headers. */
#define PRB_ERRQ_BYTES 256

/* Hardware stamps are on the device's clock, which equals CLOCK_REALTIME
 * only where something (phc2sys) keeps it there: asked for only then. */
#define PRB_HARDWARE_ENV "ES_PROBE_HARDWARE"

const char *prb_stamp_name(enum prb_stamp s)
{
	return s == PRB_STAMP_HARDWARE ? "hardware" : s == PRB_STAMP_SOFTWARE ? "kernel software"
									       : "user space";
}

static bool ts_to_ns(const struct timespec *ts, int64_t *ns)
{
	if (ts->tv_sec == 0 && ts->tv_nsec == 0)
		return false;
	if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000 ||
	    ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return false;
	*ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
	return true;
}

bool prb_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			  enum prb_stamp *kind)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)mh); c != NULL;
	     c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		struct scm_timestamping st;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPING ||
		    c->cmsg_len < CMSG_LEN(sizeof st))
			continue;
		memcpy(&st, CMSG_DATA(c), sizeof st);
		/* ts[1] is deprecated and always zero. */
		if (hardware && ts_to_ns(&st.ts[2], ns)) {
			*kind = PRB_STAMP_HARDWARE;
			return true;
		}
		if (ts_to_ns(&st.ts[0], ns)) {
			*kind = PRB_STAMP_SOFTWARE;
			return true;
		}
		return false;
	}
	return false;
}

bool prb_tx_stamp_from_cmsgs(const struct msghdr *mh, bool hardware, int64_t *ns,
			     enum prb_stamp *kind)
{
	bool is_send_stamp = false;

	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)mh); c != NULL;
	     c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		struct sock_extended_err ee;

		if (!((c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
		      (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR)) ||
		    c->cmsg_len < CMSG_LEN(sizeof ee))
			continue;
		memcpy(&ee, CMSG_DATA(c), sizeof ee);
		is_send_stamp = ee.ee_errno == ENOMSG && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING &&
				ee.ee_info == SCM_TSTAMP_SND;
	}
	return is_send_stamp && prb_stamp_from_cmsgs(mh, hardware, ns, kind);
}

static bool prb_env_set(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && strcmp(v, "1") == 0;
}

int prb_sock_addresses(int ctl_fd, struct sockaddr_storage *local, socklen_t *local_len,
		       struct sockaddr_storage *peer)
{
	socklen_t plen = sizeof *peer;

	*local_len = sizeof *local;
	if (getsockname(ctl_fd, (struct sockaddr *)local, local_len) < 0 ||
	    getpeername(ctl_fd, (struct sockaddr *)peer, &plen) < 0)
		return -errno;
	if (local->ss_family != AF_INET && local->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	return 0;
}

/* Asks the kernel for stamps unless the environment says not to. */
static void prb_sock_stamps(struct prb_sock *s, const char *what)
{
	unsigned flags = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
			 SOF_TIMESTAMPING_TX_SOFTWARE;

	s->kernel = false;
	s->hardware = false;
	if (prb_env_set(PRB_USER_STAMPS_ENV))
		return;
	if (prb_env_set(PRB_HARDWARE_ENV))
		flags |= SOF_TIMESTAMPING_RAW_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE |
			 SOF_TIMESTAMPING_TX_HARDWARE;
	if (setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0) {
		s->kernel = true;
		s->hardware = (flags & SOF_TIMESTAMPING_RAW_HARDWARE) != 0;
	} else {
		log_info("%s: no kernel timestamps for clock probes (%s); user-space stamps instead",
			 what, strerror(errno));
	}
}

int prb_sock_open(struct prb_sock *s, const struct sockaddr_storage *local, socklen_t len,
		  const char *what)
{
	struct sockaddr_storage ss = *local;
	int rc;

	s->fd = -1;
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	else
		return -EAFNOSUPPORT;
	s->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		rc = -errno;
		log_warn("%s: cannot create the clock probe socket: %s", what, strerror(errno));
		return rc;
	}
	if (bind(s->fd, (struct sockaddr *)&ss, len) < 0) {
		rc = -errno;
		log_warn("%s: cannot bind the clock probe socket: %s", what, strerror(errno));
		prb_sock_close(s);
		return rc;
	}
	prb_sock_stamps(s, what);
	return 0;
}

uint16_t prb_sock_port(const struct prb_sock *s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(s->fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int prb_sock_recv(const struct prb_sock *s, uint8_t *buf, size_t cap, size_t *n,
		  struct sockaddr_storage *from, socklen_t *from_len, int64_t *rx_ns,
		  enum prb_stamp *kind)
{
	union {
		char buf[PRB_CMSG_BYTES];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_name = from, .msg_namelen = from ? *from_len : 0,
			     .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof control.buf };
	ssize_t got;

	do
		got = recvmsg(s->fd, &mh, MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	*n = (size_t)got;
	if (from)
		*from_len = mh.msg_namelen;
	/* The stamp of the message just received, else now from user space;
	 * plus the injected offset either way, as every clock read of the
	 * daemon. */
	if (s->kernel && prb_stamp_from_cmsgs(&mh, s->hardware, rx_ns, kind)) {
		*rx_ns += clk_offset_ns();
	} else {
		*kind = PRB_STAMP_USER;
		*rx_ns = (int64_t)clk_realtime_ns();
	}
	return 1;
}

bool prb_sock_tx_stamp(const struct prb_sock *s, struct prb_msg *m, int64_t *ns,
		       enum prb_stamp *kind, bool *ok)
{
	uint8_t data[PRB_ERRQ_BYTES];
	union {
		char buf[PRB_CMSG_BYTES];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = data, .iov_len = sizeof data };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof control.buf };
	ssize_t n = recvmsg(s->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);

	*ok = false;
	if (n < 0)
		return errno == EINTR;
	if ((mh.msg_flags & MSG_TRUNC) || (size_t)n < PRB_MSG_SIZE)
		return true;
	if (!prb_tx_stamp_from_cmsgs(&mh, s->hardware, ns, kind))
		return true;
	*ok = prb_decode(m, data + n - PRB_MSG_SIZE, PRB_MSG_SIZE);
	*ns += clk_offset_ns();
	return true;
}

bool prb_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return false;
}

void prb_sock_close(struct prb_sock *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}
