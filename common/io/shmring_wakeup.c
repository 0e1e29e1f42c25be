/* The ring's wake-up descriptors: the two eventfds, passing them to the
 * producer over the Unix socket (SCM_RIGHTS), and clearing one that woke
 * us. See shmring.h. */
#include "io/shmring.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int shr_clear_wakeup(int efd)
{
	uint64_t count;
	ssize_t n;
	do
		n = read(efd, &count, sizeof count);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

int shr_eventfds(int *data_efd, int *space_efd)
{
	int rc = 0;
	*data_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	*space_efd = -1;
	if (*data_efd < 0) {
		rc = -errno;
		goto out;
	}
	*space_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (*space_efd < 0)
		rc = -errno;
out:
	if (rc < 0 && *data_efd >= 0) {
		close(*data_efd);
		*data_efd = -1;
	}
	return rc;
}

#define SHR_FDS_BYTE 'E'

int shr_send_fds(int sock, int data_efd, int space_efd)
{
	int fds[2] = { data_efd, space_efd };
	char byte = SHR_FDS_BYTE;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof fds)];
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof u.buf,
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

int shr_recv_fds(int sock, int *data_efd, int *space_efd)
{
	int got[2] = { -1, -1 }, count = 0, rc = 0;
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	/* Room for a few more than two, so a wrong sender is seen and its
	 * descriptors closed rather than silently dropped by the kernel. */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} u;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = u.buf,
		.msg_controllen = sizeof u.buf,
	};
	ssize_t n;
	*data_efd = *space_efd = -1;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (count < 2)
				got[count] = fd;
			else
				close(fd);
			count++;
		}
	}
	if (count != 2 || byte != SHR_FDS_BYTE || (msg.msg_flags & MSG_CTRUNC)) {
		rc = -EBADMSG;
		goto out;
	}
	*data_efd = got[0];
	*space_efd = got[1];
out:
	if (rc < 0) {
		for (int i = 0; i < 2; i++)
			if (got[i] >= 0)
				close(got[i]);
	}
	return rc;
}
