#include "outq.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* A frame in its source's queue: where it is, and how many destinations
 * have yet to write it (1, or every open one for an END frame). */
struct outq_frame {
	uint64_t pos;
	uint32_t len;
	uint16_t refs;
	bool end;
};

struct outq_source {
	struct outq_frame *ring;     /* [source_cap] */
	uint64_t head, tail;         /* absolute indexes; head is the oldest */
	uint32_t unwritten;          /* frames with refs > 0, END aside */
};

/* A destination's queue points into the sources' queues. */
struct outq_ref {
	uint16_t source;
	uint64_t index;              /* absolute index in that source's ring */
};

struct outq_dest {
	struct outq_ref *ring;       /* [dest_cap] */
	uint64_t head, tail;
	uint32_t head_sent;          /* bytes of the head frame already written */
	uint64_t bytes;              /* unwritten */
	struct outq_view held;       /* against the limits: whole frames, END aside */
	bool closed;
};

struct outq {
	uint16_t sources;
	uint32_t dests;
	uint32_t dest_cap, source_cap;
	uint32_t limit_frames;
	uint64_t limit_bytes;
	struct outq_source *src;
	struct outq_dest *dst;
};

struct outq *outq_create(uint16_t sources, uint32_t dests, uint32_t dest_frames,
			 uint32_t source_frames)
{
	if (sources == 0 || dests == 0 || dest_frames == 0 || source_frames == 0)
		return NULL;
	struct outq *q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	q->sources = sources;
	q->dests = dests;
	q->dest_cap = dest_frames;
	q->source_cap = source_frames;
	q->limit_frames = UINT32_MAX;
	q->limit_bytes = UINT64_MAX;
	q->src = calloc(sources, sizeof *q->src);
	q->dst = calloc(dests, sizeof *q->dst);
	if (q->src == NULL || q->dst == NULL)
		goto fail;
	for (uint16_t s = 0; s < sources; s++)
		if ((q->src[s].ring = calloc(source_frames, sizeof *q->src[s].ring)) == NULL)
			goto fail;
	for (uint32_t d = 0; d < dests; d++)
		if ((q->dst[d].ring = calloc(dest_frames, sizeof *q->dst[d].ring)) == NULL)
			goto fail;
	return q;
fail:
	outq_destroy(q);
	return NULL;
}

void outq_destroy(struct outq *q)
{
	if (q == NULL)
		return;
	for (uint16_t s = 0; q->src != NULL && s < q->sources; s++)
		free(q->src[s].ring);
	for (uint32_t d = 0; q->dst != NULL && d < q->dests; d++)
		free(q->dst[d].ring);
	free(q->src);
	free(q->dst);
	free(q);
}

int outq_set_limits(struct outq *q, uint32_t limit_frames, uint64_t limit_bytes)
{
	if (limit_frames < 1 || limit_bytes < 1)
		return -EINVAL;
	q->limit_frames = limit_frames;
	q->limit_bytes = limit_bytes;
	return 0;
}

size_t outq_memory_bytes(const struct outq *q)
{
	return sizeof *q + q->sources * (sizeof *q->src + q->source_cap * sizeof(struct outq_frame)) +
	       q->dests * (sizeof *q->dst + q->dest_cap * sizeof(struct outq_ref));
}

static struct outq_frame *outq_at(const struct outq *q, uint16_t s, uint64_t index)
{
	return &q->src[s].ring[index % q->source_cap];
}

static bool outq_dest_full(const struct outq *q, const struct outq_dest *d)
{
	return d->tail - d->head >= q->dest_cap;
}

static bool outq_source_full(const struct outq *q, const struct outq_source *s)
{
	return s->tail - s->head >= q->source_cap;
}

/* Appends a frame to source s's queue; its absolute index. */
static uint64_t outq_append(struct outq *q, uint16_t s, uint64_t pos, uint32_t len,
			    uint16_t refs, bool end)
{
	struct outq_source *src = &q->src[s];
	uint64_t index = src->tail++;
	*outq_at(q, s, index) = (struct outq_frame){ pos, len, refs, end };
	if (!end && refs > 0)
		src->unwritten++;
	return index;
}

static void outq_enqueue(struct outq *q, uint32_t d, uint16_t s, uint64_t index, uint32_t len)
{
	struct outq_dest *dst = &q->dst[d];
	dst->ring[dst->tail++ % q->dest_cap] = (struct outq_ref){ s, index };
	dst->bytes += len;
}

bool outq_room(const struct outq *q, uint32_t d, uint32_t len)
{
	/* held.bytes may exceed the limit: an oversized frame alone. */
	const struct outq_view *h = &q->dst[d].held;
	return h->frames == 0 || (h->frames < q->limit_frames && h->bytes <= q->limit_bytes &&
				  len <= q->limit_bytes - h->bytes);
}

int outq_push(struct outq *q, uint16_t s, uint32_t d, uint64_t pos, uint32_t len)
{
	struct outq_dest *dst = &q->dst[d];
	if (dst->closed)
		return -EPIPE;
	if (!outq_room(q, d, len)) {
		dst->held.refused++;
		return -ENOBUFS;
	}
	if (outq_dest_full(q, dst) || outq_source_full(q, &q->src[s]))
		return -ENOSPC;
	outq_enqueue(q, d, s, outq_append(q, s, pos, len, 1, false), len);
	struct outq_view *h = &dst->held;
	h->frames++;
	h->bytes += len;
	h->pushed++;
	if (h->frames > h->peak_frames)
		h->peak_frames = h->frames;
	if (h->bytes > h->peak_bytes)
		h->peak_bytes = h->bytes;
	return 0;
}

int outq_push_end(struct outq *q, uint16_t s, uint64_t pos, uint32_t len)
{
	uint16_t open = 0;
	for (uint32_t d = 0; d < q->dests; d++) {
		if (q->dst[d].closed)
			continue;
		if (outq_dest_full(q, &q->dst[d]))
			return -ENOSPC;
		open++;
	}
	if (outq_source_full(q, &q->src[s]))
		return -ENOSPC;
	uint64_t index = outq_append(q, s, pos, len, open, true);
	for (uint32_t d = 0; d < q->dests; d++)
		if (!q->dst[d].closed)
			outq_enqueue(q, d, s, index, len);
	return 0;
}

size_t outq_gather(const struct outq *q, uint32_t d, struct outq_span *spans, size_t max,
		   size_t max_bytes)
{
	const struct outq_dest *dst = &q->dst[d];
	size_t n = 0, bytes = 0;
	for (uint64_t i = dst->head; i < dst->tail && bytes < max_bytes; i++) {
		const struct outq_ref *r = &dst->ring[i % q->dest_cap];
		const struct outq_frame *f = outq_at(q, r->source, r->index);
		uint32_t skip = i == dst->head ? dst->head_sent : 0;
		uint64_t pos = f->pos + skip;
		size_t len = f->len - skip;
		bytes += len;
		if (n > 0 && spans[n - 1].source == r->source && spans[n - 1].pos + spans[n - 1].len == pos) {
			spans[n - 1].len += len;
			continue;
		}
		if (n == max)
			break;
		spans[n++] = (struct outq_span){ r->source, pos, len };
	}
	return n;
}

/* d's head frame is written (or dropped). */
static void outq_pop(struct outq *q, uint32_t d, outq_done_fn done, void *arg)
{
	struct outq_dest *dst = &q->dst[d];
	const struct outq_ref *r = &dst->ring[dst->head % q->dest_cap];
	struct outq_frame *f = outq_at(q, r->source, r->index);
	dst->bytes -= f->len - dst->head_sent;
	dst->head_sent = 0;
	dst->head++;
	if (--f->refs == 0 && !f->end)
		q->src[r->source].unwritten--;
	if (!f->end) {
		dst->held.frames--;
		dst->held.bytes -= f->len;
	}
	done(arg, d, r->source, f->len, f->end);
}

void outq_written(struct outq *q, uint32_t d, size_t bytes, outq_done_fn done, void *arg)
{
	struct outq_dest *dst = &q->dst[d];
	while (bytes > 0 && dst->head < dst->tail) {
		const struct outq_ref *r = &dst->ring[dst->head % q->dest_cap];
		uint32_t left = outq_at(q, r->source, r->index)->len - dst->head_sent;
		if (bytes < left) {
			dst->head_sent += (uint32_t)bytes;
			dst->bytes -= bytes;
			return;
		}
		bytes -= left;
		outq_pop(q, d, done, arg);
	}
}

void outq_close(struct outq *q, uint32_t d, outq_done_fn done, void *arg)
{
	struct outq_dest *dst = &q->dst[d];
	while (dst->head < dst->tail)
		outq_pop(q, d, done, arg);
	dst->closed = true;
}

bool outq_closed(const struct outq *q, uint32_t d)
{
	return q->dst[d].closed;
}

bool outq_oldest(struct outq *q, uint16_t s, uint64_t *pos)
{
	struct outq_source *src = &q->src[s];
	while (src->head < src->tail && outq_at(q, s, src->head)->refs == 0)
		src->head++;
	if (src->head == src->tail)
		return false;
	*pos = outq_at(q, s, src->head)->pos;
	return true;
}

void outq_view(const struct outq *q, uint32_t d, struct outq_view *v)
{
	*v = q->dst[d].held;
}

uint32_t outq_frames(const struct outq *q, uint32_t d)
{
	return (uint32_t)(q->dst[d].tail - q->dst[d].head);
}

uint64_t outq_bytes(const struct outq *q, uint32_t d)
{
	return q->dst[d].bytes;
}

uint32_t outq_source_unwritten(const struct outq *q, uint16_t s)
{
	return q->src[s].unwritten;
}
