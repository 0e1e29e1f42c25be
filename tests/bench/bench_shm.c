/* make bench-shm: the reader -> builder hop over a shared-memory ring and
 * over loopback TCP, with the same fragments, in one run.
 *
 * For each payload size a pool of real frames (generated payloads, valid
 * CRCs) is made once; a forked producer (readoutd's side) sends N of them
 * and the consumer (builderd's side, the parent) takes them. Both sides do
 * what the daemons do on that hop:
 *   shm: producer copies each frame into the ring (reserve, memcpy, commit),
 *        wakes the consumer once per 256 KiB batch, sleeps on the space
 *        eventfd when full; consumer peeks, releases every 64 KiB, sleeps on
 *        the data eventfd when empty (docs/SHM.md).
 *   tcp: producer writes 256 KiB batches of frames; consumer reads 256 KiB
 *        at a time and cuts frames out of its buffer.
 * The consumer decodes and verifies every frame (magic, run, length, CRC)
 * and takes the payload CRC the decoder summed, as builderd does ("builder" mode), or only
 * walks the frame lengths ("transport" mode: the hop alone).
 *
 * Reported per (mode, size, transport), median of --repeat runs: frames/s,
 * MB/s (frame bytes, 10^6), and CPU microseconds per fragment of producer,
 * consumer and both (getrusage of each process over its transfer). Writes
 * DIR/results.md and DIR/results.json. */
#include "wire/crc.h"
#include "wire/frame.h"
#include "core/gen.h"
#include "io/net.h"
#include "io/shmring.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_RUN 1u
#define BENCH_BATCH_BYTES (256u << 10)
#define BENCH_RELEASE_BYTES (64u << 10)
#define BENCH_POOL_BYTES (8u << 20)
#define BENCH_MAX_REPEAT 15

enum bench_transport { BT_SHM, BT_TCP };
enum bench_mode { BM_BUILDER, BM_TRANSPORT };

struct bench_cfg {
	uint64_t ring_bytes;
	uint64_t target_bytes;      /* frame bytes moved per measurement */
	unsigned repeat;
	uint32_t sizes[8];
	size_t size_count;
	char out_dir[1024];
};

/* What one side measured over its transfer. */
struct bench_side {
	uint64_t frames;
	uint64_t bytes;
	uint64_t cpu_us;
	uint64_t wall_ns;
	uint64_t sleeps;            /* waits on an eventfd or a blocking call */
	uint64_t errors;
};

struct bench_result {
	enum bench_mode mode;
	enum bench_transport transport;
	uint32_t payload;
	uint64_t frames;
	double frames_per_s;
	double mb_per_s;
	double producer_us;         /* CPU per fragment */
	double consumer_us;
	double total_us;
	uint64_t producer_sleeps, consumer_sleeps;
};

/* Frames to send: the pool, repeated. */
struct bench_pool {
	uint8_t *buf;
	size_t bytes;
	size_t frame_bytes;
	size_t frames;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
	       (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_shm: %s: %s\n", what, strerror(err));
	exit(1);
}

static int pool_make(struct bench_pool *p, uint32_t payload)
{
	p->frame_bytes = FRM_HEADER_BYTES + payload;
	/* Whole frames per batch, so a batch never splits one. */
	size_t per_batch = BENCH_BATCH_BYTES / p->frame_bytes;
	if (per_batch == 0)
		per_batch = 1;
	size_t batches = BENCH_POOL_BYTES / (per_batch * p->frame_bytes);
	if (batches == 0)
		batches = 1;
	p->frames = per_batch * batches;
	p->bytes = p->frames * p->frame_bytes;
	p->buf = malloc(p->bytes);
	if (p->buf == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < p->frames; i++) {
		uint8_t *f = p->buf + i * p->frame_bytes;
		struct frm_header h = {
			.source_id = (uint16_t)(i % 4),
			.run_id = BENCH_RUN,
			.event_id = i / 4,
			.sequence = i / 4,
			.timestamp_ns = 1700000000000000000ULL + i,
			.payload_len = payload,
		};
		gen_payload(f + FRM_HEADER_BYTES, payload, 1, BENCH_RUN, h.event_id, h.source_id);
		frm_encode_in_place(f, &h);
	}
	return 0;
}

/* Bytes of the next batch starting at frame index i (whole frames). */
static size_t batch_frames(const struct bench_pool *p, uint64_t sent, uint64_t total)
{
	size_t per_batch = BENCH_BATCH_BYTES / p->frame_bytes;
	if (per_batch == 0)
		per_batch = 1;
	uint64_t left = total - sent;
	return left < per_batch ? (size_t)left : per_batch;
}

/* The consumer's per-frame work. Returns false for a frame that fails. */
static bool take_frame(enum bench_mode mode, struct frm_decoder *d, const uint8_t *buf,
		       size_t avail, size_t *frame_bytes, uint64_t *sink)
{
	if (mode == BM_TRANSPORT) {
		if (avail < FRM_HEADER_BYTES)
			return false;
		*frame_bytes = frm_frame_bytes(buf);
		*sink += buf[FRM_HEADER_BYTES - 1];
		return *frame_bytes <= avail;
	}
	struct frm_header h;
	size_t need;
	if (frm_decoder_next(d, buf, avail, &h, frame_bytes, &need) != FRM_OK)
		return false;
	*sink += h.payload_crc + h.event_id;
	return true;
}

static void wait_fd(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
}

/* ---- shared memory -------------------------------------------------------- */

static void shm_produce(const struct bench_pool *p, uint64_t total, int sock, const char *name,
			struct bench_side *out)
{
	struct shr_ring r;
	int data_efd, space_efd;
	int rc = shr_recv_fds(sock, &data_efd, &space_efd);
	if (rc < 0)
		die("receiving eventfds", -rc);
	rc = shr_attach(&r, name, BENCH_RUN);
	if (rc < 0)
		die("attaching", -rc);
	char go;
	if (write(sock, "A", 1) != 1 || read(sock, &go, 1) != 1)
		die("handshake", errno);
	uint64_t t0 = now_ns(), c0 = cpu_us(), sent = 0;
	size_t idx = 0;
	while (sent < total) {
		size_t n = batch_frames(p, sent, total);
		for (size_t k = 0; k < n; k++) {
			const uint8_t *f = p->buf + idx * p->frame_bytes;
			void *dst;
			uint32_t len = (uint32_t)p->frame_bytes;
			while ((rc = shr_reserve(&r, len, &dst)) == -EAGAIN) {
				shr_notify_consumer(&r, data_efd);
				if (shr_wait_space(&r, len)) {
					out->sleeps++;
					wait_fd(space_efd);
					shr_clear_wakeup(space_efd);
				}
			}
			if (rc < 0)
				die("reserving", -rc);
			memcpy(dst, f, len);
			shr_commit(&r, len);
			idx = idx + 1 == p->frames ? 0 : idx + 1;
		}
		sent += n;
		shr_notify_consumer(&r, data_efd);
	}
	shr_close(&r, data_efd);
	out->cpu_us = cpu_us() - c0;
	out->wall_ns = now_ns() - t0;
	out->frames = sent;
	out->bytes = sent * p->frame_bytes;
	close(data_efd);
	close(space_efd);
}

static void shm_consume(enum bench_mode mode, struct shr_ring *r, int data_efd, int space_efd,
			int sock, struct bench_side *out)
{
	struct frm_decoder d;
	frm_decoder_init(&d, BENCH_RUN, FRM_MAX_PAYLOAD_BYTES);
	uint64_t sink = 0, unreleased = 0;
	shr_wait_data(r);
	if (write(sock, "G", 1) != 1)
		die("starting the producer", errno);
	uint64_t t0 = now_ns(), c0 = cpu_us();
	for (;;) {
		const void *rec;
		uint32_t len;
		int rc = shr_peek(r, &rec, &len);
		if (rc == 0) {
			size_t fb;
			if (!take_frame(mode, &d, rec, len, &fb, &sink) || fb != len)
				out->errors++;
			out->frames++;
			out->bytes += len;
			unreleased += len;
			if (unreleased >= BENCH_RELEASE_BYTES) {
				shr_release(r);
				shr_notify_producer(r, space_efd);
				unreleased = 0;
			}
			continue;
		}
		shr_release(r);
		shr_notify_producer(r, space_efd);
		unreleased = 0;
		if (rc == -EAGAIN) {
			if (shr_wait_data(r)) {
				out->sleeps++;
				wait_fd(data_efd);
				shr_clear_wakeup(data_efd);
			}
			continue;
		}
		if (rc != -EPIPE)
			die("peeking", -rc);
		break;
	}
	out->cpu_us = cpu_us() - c0;
	out->wall_ns = now_ns() - t0;
	if (sink == 42)
		fputc(' ', stderr);   /* keeps the work from being optimised away */
}

/* ---- loopback TCP ----------------------------------------------------------- */

static void tcp_produce(const struct bench_pool *p, uint64_t total, int fd,
			struct bench_side *out)
{
	char go;
	if (read(fd, &go, 1) != 1)
		die("waiting for go", errno);
	uint64_t t0 = now_ns(), c0 = cpu_us(), sent = 0;
	size_t idx = 0;
	while (sent < total) {
		size_t n = batch_frames(p, sent, total);
		if (idx + n > p->frames)
			idx = 0;     /* the pool holds whole batches */
		const uint8_t *src = p->buf + idx * p->frame_bytes;
		size_t left = n * p->frame_bytes;
		while (left > 0) {
			ssize_t w = write(fd, src, left);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				die("writing", errno);
			}
			out->sleeps++;
			src += w;
			left -= (size_t)w;
		}
		idx += n;
		sent += n;
	}
	shutdown(fd, SHUT_WR);
	out->cpu_us = cpu_us() - c0;
	out->wall_ns = now_ns() - t0;
	out->frames = sent;
	out->bytes = sent * p->frame_bytes;
}

static void tcp_consume(enum bench_mode mode, int fd, uint32_t payload, struct bench_side *out)
{
	struct frm_decoder d;
	frm_decoder_init(&d, BENCH_RUN, FRM_MAX_PAYLOAD_BYTES);
	size_t cap = BENCH_BATCH_BYTES + FRM_HEADER_BYTES + payload;
	uint8_t *buf = malloc(cap);
	if (buf == NULL)
		die("buffer", ENOMEM);
	memset(buf, 0, cap);
	size_t start = 0, end = 0;
	uint64_t sink = 0;
	if (write(fd, "G", 1) != 1)
		die("starting the producer", errno);
	uint64_t t0 = now_ns(), c0 = cpu_us();
	for (;;) {
		if (start > 0) {
			memmove(buf, buf + start, end - start);
			end -= start;
			start = 0;
		}
		size_t room = cap - end < BENCH_BATCH_BYTES ? cap - end : BENCH_BATCH_BYTES;
		ssize_t n = read(fd, buf + end, room);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("reading", errno);
		}
		out->sleeps++;
		if (n == 0)
			break;
		end += (size_t)n;
		while (end - start >= FRM_HEADER_BYTES) {
			size_t fb = frm_frame_bytes(buf + start);
			if (end - start < fb)
				break;
			size_t got;
			if (!take_frame(mode, &d, buf + start, end - start, &got, &sink))
				out->errors++;
			out->frames++;
			out->bytes += fb;
			start += fb;
		}
	}
	if (start != end)
		out->errors++;
	out->cpu_us = cpu_us() - c0;
	out->wall_ns = now_ns() - t0;
	free(buf);
	if (sink == 42)
		fputc(' ', stderr);
}

/* ---- one measurement ------------------------------------------------------- */

static int tcp_pair(int *server_side, int *client_side)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) < 0)
		return -errno;
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) < 0)
		return -errno;
	int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (s < 0)
		return -errno;
	/* As the daemons set them: no Nagle, kernel buffer autotuning. */
	int one = 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	*server_side = s;
	*client_side = c;
	return 0;
}

static void measure(const struct bench_cfg *cfg, const struct bench_pool *p, uint32_t payload,
		    enum bench_mode mode, enum bench_transport t, struct bench_side *prod,
		    struct bench_side *cons)
{
	uint64_t total = cfg->target_bytes / p->frame_bytes;
	int report[2];
	if (pipe(report) < 0)
		die("pipe", errno);
	memset(prod, 0, sizeof *prod);
	memset(cons, 0, sizeof *cons);
	char name[64];
	snprintf(name, sizeof name, "/es-bench-%d", (int)getpid());
	struct shr_ring r;
	int data_efd = -1, space_efd = -1, mine = -1, theirs = -1;
	if (t == BT_SHM) {
		int sv[2];
		int rc = shr_create(&r, name, BENCH_RUN, cfg->ring_bytes);
		if (rc < 0)
			die("creating the ring", -rc);
		rc = shr_eventfds(&data_efd, &space_efd);
		if (rc < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			die("eventfds or socketpair", rc < 0 ? -rc : errno);
		mine = sv[0];
		theirs = sv[1];
	} else {
		int rc = tcp_pair(&mine, &theirs);
		if (rc < 0)
			die("loopback TCP", -rc);
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		close(report[0]);
		close(mine);
		struct bench_side side = { 0 };
		if (t == BT_SHM)
			shm_produce(p, total, theirs, name, &side);
		else
			tcp_produce(p, total, theirs, &side);
		if (write(report[1], &side, sizeof side) != sizeof side)
			_exit(1);
		_exit(0);
	}
	close(report[1]);
	close(theirs);
	if (t == BT_SHM) {
		int rc = shr_send_fds(mine, data_efd, space_efd);
		char ack;
		if (rc < 0 || read(mine, &ack, 1) != 1)
			die("handing the ring over", rc < 0 ? -rc : EPIPE);
		shr_unlink(name);
		shm_consume(mode, &r, data_efd, space_efd, mine, cons);
		shr_close(&r, space_efd);
		close(data_efd);
		close(space_efd);
	} else {
		tcp_consume(mode, mine, payload, cons);
	}
	close(mine);
	if (read(report[0], prod, sizeof *prod) != sizeof *prod)
		die("producer report", EPIPE);
	close(report[0]);
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || cons->frames != total ||
	    cons->errors != 0) {
		fprintf(stderr, "bench_shm: %s %u B: %" PRIu64 " of %" PRIu64 " frames, %" PRIu64
			" bad\n", t == BT_SHM ? "shm" : "tcp", payload, cons->frames, total,
			cons->errors);
		exit(1);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void run_one(const struct bench_cfg *cfg, const struct bench_pool *p, uint32_t payload,
		    enum bench_mode mode, enum bench_transport t, struct bench_result *res)
{
	double fps[BENCH_MAX_REPEAT], pu[BENCH_MAX_REPEAT], cu[BENCH_MAX_REPEAT];
	double tu[BENCH_MAX_REPEAT];
	struct bench_side prod = { 0 }, cons = { 0 };
	for (unsigned i = 0; i < cfg->repeat; i++) {
		measure(cfg, p, payload, mode, t, &prod, &cons);
		double f = (double)cons.frames;
		fps[i] = f / ((double)cons.wall_ns / 1e9);
		pu[i] = (double)prod.cpu_us / f;
		cu[i] = (double)cons.cpu_us / f;
		tu[i] = pu[i] + cu[i];
	}
	memset(res, 0, sizeof *res);
	res->mode = mode;
	res->transport = t;
	res->payload = payload;
	res->frames = cons.frames;
	res->frames_per_s = median(fps, cfg->repeat);
	res->mb_per_s = res->frames_per_s * (double)p->frame_bytes / 1e6;
	res->producer_us = median(pu, cfg->repeat);
	res->consumer_us = median(cu, cfg->repeat);
	res->total_us = median(tu, cfg->repeat);
	res->producer_sleeps = prod.sleeps;
	res->consumer_sleeps = cons.sleeps;
	fprintf(stderr, "  %-9s %6u B %s: %10.0f frames/s %8.1f MB/s, CPU %.3f + %.3f us/fragment\n",
		mode == BM_BUILDER ? "builder" : "transport", payload, t == BT_SHM ? "shm" : "tcp",
		res->frames_per_s, res->mb_per_s, res->producer_us, res->consumer_us);
}

static void size_text(char *buf, size_t len, uint32_t bytes)
{
	if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(buf, len, "%u KiB", bytes / 1024);
	else
		snprintf(buf, len, "%u B", bytes);
}

static int write_reports(const struct bench_cfg *cfg, const struct bench_result *res, size_t n)
{
	char path[1200], host[256], date[64];
	struct utsname u;
	uname(&u);
	net_host_name(host, sizeof host);
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char model[256] = "unknown";
	FILE *ci = fopen("/proc/cpuinfo", "r");
	if (ci != NULL) {
		char line[512];
		while (fgets(line, sizeof line, ci)) {
			char *c = strchr(line, ':');
			if (strncmp(line, "model name", 10) == 0 && c != NULL) {
				snprintf(model, sizeof model, "%s", c + 2);
				model[strcspn(model, "\n")] = '\0';
				break;
			}
		}
		fclose(ci);
	}

	snprintf(path, sizeof path, "%s/results.json", cfg->out_dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "{\n  \"format\": \"bench-shm/1\",\n  \"date\": \"%s\",\n  \"host\": \"%s\",\n"
		   "  \"kernel\": \"%s %s\",\n  \"cpus\": %ld,\n  \"cpu_model\": \"%s\",\n"
		   "  \"ring_bytes\": %" PRIu64 ",\n  \"bytes_per_measurement\": %" PRIu64
		   ",\n  \"repeat\": %u,\n  \"batch_bytes\": %u,\n  \"results\": [",
		date, host, u.sysname, u.release, cpus, model, cfg->ring_bytes, cfg->target_bytes,
		cfg->repeat, BENCH_BATCH_BYTES);
	for (size_t i = 0; i < n; i++) {
		const struct bench_result *r = &res[i];
		fprintf(f, "%s\n    {\"mode\": \"%s\", \"transport\": \"%s\", \"payload_bytes\": %u, "
			   "\"frame_bytes\": %u, \"frames\": %" PRIu64 ", \"frames_per_s\": %.0f, "
			   "\"mb_per_s\": %.1f, \"cpu_us_per_fragment\": %.4f, "
			   "\"producer_cpu_us_per_fragment\": %.4f, "
			   "\"consumer_cpu_us_per_fragment\": %.4f, \"producer_waits\": %" PRIu64
			   ", \"consumer_waits\": %" PRIu64 "}",
			i ? "," : "", r->mode == BM_BUILDER ? "builder" : "transport",
			r->transport == BT_SHM ? "shm" : "tcp", r->payload,
			r->payload + FRM_HEADER_BYTES, r->frames, r->frames_per_s, r->mb_per_s,
			r->total_us, r->producer_us, r->consumer_us, r->producer_sleeps,
			r->consumer_sleeps);
	}
	fputs("\n  ]\n}\n", f);
	if (fclose(f) != 0)
		return -errno;

	snprintf(path, sizeof path, "%s/results.md", cfg->out_dir);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "# bench-shm: reader -> builder over shared memory and loopback TCP\n\n"
		   "%s on %s (%s %s, %ld CPUs, %s). The same fragments over both transports, %"
		   PRIu64 " MB of frames per measurement, median of %u; ring %" PRIu64
		   " bytes, batches of %u KiB. CPU is user + system time of the producer "
		   "(readoutd's side) and the consumer (builderd's side) per fragment. "
		   "Produced by `make bench-shm` (tests/bench/bench_shm.c).\n",
		date, host, u.sysname, u.release, cpus, model, cfg->target_bytes / 1000000,
		cfg->repeat, cfg->ring_bytes, BENCH_BATCH_BYTES >> 10);
	for (int mode = BM_BUILDER; mode <= BM_TRANSPORT; mode++) {
		fprintf(f, "\n## %s\n\n%s\n\n", mode == BM_BUILDER ? "As builderd consumes: decode and verify every frame (CRC)" : "Transport alone: the consumer only walks frame lengths",
			mode == BM_BUILDER ? "The consumer checks header and CRC and takes the payload CRC the decoder summed, as `ingest_take` in builderd does." : "No CRC: what the hop itself costs.");
		fputs("| payload | transport | frames/s | MB/s | CPU µs/fragment (reader + builder) | shm/tcp frames/s | shm/tcp CPU |\n"
		      "|---:|---|---:|---:|---:|---:|---:|\n", f);
		for (size_t i = 0; i < n; i++) {
			const struct bench_result *r = &res[i];
			if ((int)r->mode != mode)
				continue;
			const struct bench_result *other = NULL;
			for (size_t k = 0; k < n; k++)
				if ((int)res[k].mode == mode && res[k].payload == r->payload &&
				    res[k].transport != r->transport)
					other = &res[k];
			char sz[32];
			size_text(sz, sizeof sz, r->payload);
			fprintf(f, "| %s | %s | %.0f | %.1f | %.3f (%.3f + %.3f) |", sz,
				r->transport == BT_SHM ? "shm" : "tcp", r->frames_per_s, r->mb_per_s,
				r->total_us, r->producer_us, r->consumer_us);
			if (r->transport == BT_SHM && other != NULL)
				fprintf(f, " %.2f× | %.2f× |\n", r->frames_per_s / other->frames_per_s,
					r->total_us / other->total_us);
			else
				fputs(" | |\n", f);
		}
	}
	return fclose(f) != 0 ? -errno : 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bench_shm --out DIR [--sizes 64,1024,16384] [--mb N] [--repeat N] [--ring BYTES]\n"
"Moves the same fragments reader -> builder over a shared-memory ring and over\n"
"loopback TCP and writes DIR/results.md and DIR/results.json.\n"
"  --sizes LIST   payload sizes in bytes (default 64,1024,16384)\n"
"  --mb N         MB of frames per measurement (default 2000)\n"
"  --repeat N     measurements per case, the median is reported (default 5)\n"
"  --ring BYTES   ring capacity, a power of two (default 4194304)\n");
}

int main(int argc, char **argv)
{
	struct bench_cfg cfg = {
		.ring_bytes = 4u << 20,
		.target_bytes = 2000000000u,
		.repeat = 5,
		.sizes = { 64, 1024, 16384 },
		.size_count = 3,
	};
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' }, { "sizes", required_argument, NULL, 's' },
		{ "mb", required_argument, NULL, 'm' }, { "repeat", required_argument, NULL, 'r' },
		{ "ring", required_argument, NULL, 'g' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'o': snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s", optarg); break;
		case 's': {
			cfg.size_count = 0;
			for (char *tok = strtok(optarg, ","); tok && cfg.size_count < 8; tok = strtok(NULL, ","))
				cfg.sizes[cfg.size_count++] = (uint32_t)strtoul(tok, NULL, 10);
			break;
		}
		case 'm': cfg.target_bytes = strtoull(optarg, NULL, 10) * 1000000u; break;
		case 'r': cfg.repeat = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'g': cfg.ring_bytes = strtoull(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (cfg.out_dir[0] == '\0' || cfg.repeat == 0 || cfg.repeat > BENCH_MAX_REPEAT ||
	    cfg.size_count == 0 || cfg.target_bytes == 0) {
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < cfg.size_count; i++) {
		if (cfg.sizes[i] > FRM_MAX_PAYLOAD_BYTES ||
		    2 * (SHR_RECORD_PREFIX_BYTES + FRM_HEADER_BYTES + (uint64_t)cfg.sizes[i] + 8) >
			    cfg.ring_bytes) {
			fprintf(stderr, "bench_shm: payload %u does not fit twice in a ring of %" PRIu64
				" bytes\n", cfg.sizes[i], cfg.ring_bytes);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (mkdir(cfg.out_dir, 0755) < 0 && errno != EEXIST)
		die(cfg.out_dir, errno);
	struct bench_result res[2 * 2 * 8];
	size_t n = 0;
	for (int mode = BM_BUILDER; mode <= BM_TRANSPORT; mode++) {
		for (size_t i = 0; i < cfg.size_count; i++) {
			struct bench_pool pool;
			if (pool_make(&pool, cfg.sizes[i]) < 0)
				die("frame pool", ENOMEM);
			/* Interleaved, so drift of the machine hits both alike. */
			run_one(&cfg, &pool, cfg.sizes[i], mode, BT_SHM, &res[n++]);
			run_one(&cfg, &pool, cfg.sizes[i], mode, BT_TCP, &res[n++]);
			free(pool.buf);
		}
	}
	int rc = write_reports(&cfg, res, n);
	if (rc < 0)
		die("writing the results", -rc);
	printf("bench-shm: results in %s/results.md and results.json\n", cfg.out_dir);
	return 0;
}
