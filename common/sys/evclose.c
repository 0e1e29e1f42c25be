#include "sys/evclose.h"

#include "sys/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct evclose {
	const char *dir;
	int dir_fd;
	uint32_t run;
	uint16_t builder_id;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool busy;       /* a job handed over and not yet collected */
	bool done;       /* the thread finished it */
	bool quit;
	struct evclose_job job;
	struct evclose_result result;
};

/* The steps of docs/RECORDING.md's close after the trailer, in order. */
static struct evclose_result evclose_finish(const struct evclose *c, const struct evclose_job *j)
{
	struct evclose_result r = { .info = j->info };
	char open_name[80];
	uint64_t t0 = clk_monotonic_ns();

	snprintf(open_name, sizeof(open_name), "%s.writing", j->info.name);
	if (j->sync && fdatasync(j->fd) != 0) {
		r.err = errno;
		r.step = "fdatasync";
	}
	close(j->fd);
	if (r.err == 0 && renameat(c->dir_fd, open_name, c->dir_fd, j->info.name) != 0) {
		r.err = errno;
		r.step = "rename";
	}
	if (r.err == 0 && j->sync && fsync(c->dir_fd) != 0) {
		r.err = errno;
		r.step = "fsync";
	}
	r.sync_ns = clk_monotonic_ns() - t0;
	if (r.err == 0) {
		int rc = evp_manifest(c->dir, &j->info, c->run, c->builder_id);
		if (rc != 0) {
			r.err = -rc;
			r.step = "manifest";
		}
	}
	return r;
}

static void *evclose_main(void *arg)
{
	struct evclose *c = arg;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->quit && !(c->busy && !c->done))
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->busy && !c->done) {
			struct evclose_job job = c->job;
			pthread_mutex_unlock(&c->mu);
			struct evclose_result r = evclose_finish(c, &job);
			pthread_mutex_lock(&c->mu);
			c->result = r;
			c->done = true;
			pthread_cond_broadcast(&c->cv);
			continue;
		}
		break;   /* quit, nothing left */
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int evclose_start(struct evclose **out, const char *dir, int dir_fd, uint32_t run,
		  uint16_t builder_id)
{
	struct evclose *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (c == NULL)
		return -ENOMEM;
	*c = (struct evclose){ .dir = dir, .dir_fd = dir_fd, .run = run, .builder_id = builder_id };
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	rc = pthread_create(&c->thread, NULL, evclose_main, c);
	if (rc != 0) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		free(c);
		return -rc;
	}
	*out = c;
	return 0;
}

void evclose_submit(struct evclose *c, const struct evclose_job *job)
{
	pthread_mutex_lock(&c->mu);
	while (c->busy)
		pthread_cond_wait(&c->cv, &c->mu);
	c->job = *job;
	c->busy = true;
	c->done = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

bool evclose_collect(struct evclose *c, bool wait, struct evclose_result *out)
{
	bool got = false;

	pthread_mutex_lock(&c->mu);
	while (wait && c->busy && !c->done)
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->busy && c->done) {
		*out = c->result;
		c->busy = c->done = false;
		got = true;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return got;
}

void evclose_stop(struct evclose *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	while (c->busy && !c->done)
		pthread_cond_wait(&c->cv, &c->mu);
	c->busy = false;
	c->quit = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
