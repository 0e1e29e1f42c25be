/* The ingest's face to its own files and to the links: its error report
 * and the accessors of its state. It calls none of the other ingest files,
 * so they all stand on it. */
#include "data/ingest.h"
#include "data/ingest_internal.h"

#include <stdarg.h>
#include <stdio.h>

void ing_error(struct ing *g, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	g->hooks.error(g->hooks.ctx, text);
}

void ing_refused(struct ing *g)
{
	g->refused++;
}

const struct bd_options *ing_options(const struct ing *g)
{
	return &g->opt;
}

struct event_base *ing_base(const struct ing *g)
{
	return g->base;
}

struct out *ing_output(const struct ing *g)
{
	return g->out;
}

bool ing_running(const struct ing *g)
{
	return !g->over;
}

struct bd_reader *ing_reader(const struct ing *g, uint32_t r)
{
	return &g->readers[r];
}
