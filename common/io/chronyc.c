/* Running chronyc and reading its tracking line; see chronyc.h. */
#include "io/chronyc.h"

#include "sys/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Room for chronyc's answer: a tracking line is under 200 bytes, an error a
 * line or two. */
#define CHRONYC_OUTPUT_BYTES 2048

/* Copies the first non-empty line of out into c->reason, for the error
 * message: it is chronyc's own explanation ("506 Cannot talk to daemon"). */
static void reason_from_output(struct cks_chrony *c, const char *prefix, const char *out)
{
	const char *start = out, *end;
	size_t n;
	char *p;

	while (*start == '\n' || *start == '\r')
		start++;
	end = strpbrk(start, "\r\n");
	n = end ? (size_t)(end - start) : strlen(start);
	snprintf(c->reason, sizeof(c->reason), "%s%.*s", prefix, (int)n, start);
	for (p = c->reason; *p; p++)
		if ((unsigned char)*p < ' ' || (unsigned char)*p > '~')
			*p = '?';
}

/* Starts argv with stdin from /dev/null and stdout and stderr into a pipe
 * whose read end is *out_fd. stderr too: chronyc reports some failures
 * there ("Could not open connection to daemon"), and the caller wants its
 * words. 0, or -errno with c->reason set and nothing left open. */
static int chronyc_spawn(struct cks_chrony *c, char *const argv[], pid_t *pid, int *out_fd)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2];
	int ret;

	*pid = -1;
	*out_fd = -1;
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		ret = -errno;
		cks_chrony_set_reason(c, "Cannot create pipe for %s: %s", argv[0], strerror(-ret));
		return ret;
	}
	ret = posix_spawn_file_actions_init(&fa);
	if (ret) {
		cks_chrony_set_reason(c, "Cannot prepare %s: %s", argv[0], strerror(ret));
		close(pipefd[0]);
		close(pipefd[1]);
		return -ret;
	}
	ret = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!ret)
		ret = posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	if (!ret)
		ret = posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	if (ret) {
		cks_chrony_set_reason(c, "Cannot prepare %s: %s", argv[0], strerror(ret));
	} else {
		ret = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
		if (ret) {
			*pid = -1;
			if (ret == ENOENT)
				cks_chrony_set_reason(c, "%s not found", argv[0]);
			else
				cks_chrony_set_reason(c, "Cannot run %s: %s", argv[0], strerror(ret));
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (ret) {
		close(pipefd[0]);
		return -ret;
	}
	*out_fd = pipefd[0];
	return 0;
}

/* Reads what the child writes until it closes the pipe, at most
 * timeout_ms: out[0 .. *len) and a NUL. Past a full buffer it keeps
 * draining, so chronyc never blocks on a pipe we stopped reading. */
static int chronyc_collect(struct cks_chrony *c, const char *cmd, int fd, int timeout_ms,
			   char out[CHRONYC_OUTPUT_BYTES], size_t *len)
{
	uint64_t deadline = clk_monotonic_ns() + (uint64_t)timeout_ms * 1000000u;

	*len = 0;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = clk_monotonic_ns();
		char scratch[256];
		ssize_t r;

		if (now >= deadline) {
			cks_chrony_set_reason(c, "%s did not answer within %d ms", cmd, timeout_ms);
			return -ETIMEDOUT;
		}
		r = poll(&pfd, 1, (int)((deadline - now + 999999u) / 1000000u));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			cks_chrony_set_reason(c, "Cannot wait for %s: %s", cmd, strerror(err));
			return -err;
		}
		if (r == 0)
			continue;
		if (*len < CHRONYC_OUTPUT_BYTES - 1)
			r = read(fd, out + *len, CHRONYC_OUTPUT_BYTES - 1 - *len);
		else
			r = read(fd, scratch, sizeof(scratch));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			cks_chrony_set_reason(c, "Cannot read from %s: %s", cmd, strerror(err));
			return -err;
		}
		if (r == 0)
			break;
		if (*len < CHRONYC_OUTPUT_BYTES - 1)
			*len += (size_t)r;
	}
	out[*len] = '\0';
	return 0;
}

/* What the child's whole output (len bytes) and exit status mean: 0 when
 * a line of it parses, else why not. */
static int chronyc_judge(struct cks_chrony *c, const char *cmd, char *out, size_t len, int status)
{
	char *line, *next;

	for (line = out; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (cks_chrony_parse(c, line))
			return 0;
	}
	/* Nothing parsed: restore the lines for the message. */
	for (size_t i = 0; i < len; i++)
		if (out[i] == '\0')
			out[i] = '\n';

	if (strncmp(out, "506 ", 4) == 0 || strstr(out, "Could not open connection")) {
		reason_from_output(c, "", out);
		return -ECONNREFUSED;
	}
	if (len == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		/* Where posix_spawn cannot report a failed exec (it forks
		 * instead of vforking, as under valgrind) the child exits 127,
		 * the shell's "command not found". */
		cks_chrony_set_reason(c, "%s not found (exit status 127)", cmd);
		return -ENOENT;
	}
	if (len == 0) {
		if (WIFEXITED(status))
			cks_chrony_set_reason(c, "%s exited with status %d and no output", cmd,
					      WEXITSTATUS(status));
		else
			cks_chrony_set_reason(c, "%s died without output", cmd);
		return -EBADMSG;
	}
	/* The parse reason of the last line is the informative one when
	 * chronyc said something tracking-like; its first line otherwise. */
	char what[sizeof(c->reason)];
	memcpy(what, c->reason, sizeof(what));
	if (strchr(out, ',') && what[0])
		cks_chrony_set_reason(c, "Unexpected chronyc output: %s", what);
	else
		reason_from_output(c, "Unexpected chronyc output: ", out);
	return -EBADMSG;
}

int cks_chrony_run(struct cks_chrony *c, char *const argv[], int timeout_ms)
{
	/* Before chronyc runs, so before chronyd writes its report: an age
	 * counted from here is never too small. */
	uint64_t started = clk_monotonic_ns();
	char out[CHRONYC_OUTPUT_BYTES];
	size_t len = 0;
	bool reaped = false;
	int fd = -1, status = 0;
	pid_t pid;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = chronyc_spawn(c, argv, &pid, &fd);
	if (ret == 0)
		ret = chronyc_collect(c, argv[0], fd, timeout_ms, out, &len);
	if (ret == 0) {
		while (waitpid(pid, &status, 0) < 0) {
			/* ECHILD: the daemon ignores SIGCHLD and the kernel
			 * reaped chronyc; its output is all we need. */
			if (errno != EINTR) {
				status = 0;
				break;
			}
		}
		reaped = true;
		ret = chronyc_judge(c, argv[0], out, len, status);
	}
	if (ret)
		c->available = c->synchronised = false;
	c->read_mono_ns = started;

	if (pid > 0 && !reaped) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

const char *cks_chrony_socket(void)
{
	const char *s = getenv(CKS_SOCKET_ENV);

	return s && *s ? s : NULL;
}

int cks_chrony_read(struct cks_chrony *c, const char *socket)
{
	char *argv_default[] = { "chronyc", "-c", "tracking", NULL };
	char *argv_socket[] = { "chronyc", "-c", "-h", (char *)socket, "tracking", NULL };

	return cks_chrony_run(c, socket ? argv_socket : argv_default, CKS_CHRONYC_TIMEOUT_MS);
}
