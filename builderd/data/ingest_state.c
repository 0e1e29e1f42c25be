/* The ingest's face to its own files and to the links: its error report
 * and the accessors of its state. It calls none of the other ingest files,
 * so they all stand on it. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include <stdarg.h>
#include <stdio.h>

void ingest_error(struct ingest *g, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	g->hooks.error(g->hooks.ctx, text);
}

void ingest_refused(struct ingest *g)
{
	g->refused++;
}

const struct options *ingest_options(const struct ingest *g)
{
	return &g->opt;
}

struct event_base *ingest_base(const struct ingest *g)
{
	return g->base;
}

struct output *ingest_output(const struct ingest *g)
{
	return g->out;
}

bool ingest_running(const struct ingest *g)
{
	return !g->over;
}

struct ingest_reader *ingest_reader_at(const struct ingest *g, uint32_t r)
{
	return &g->readers[r];
}
