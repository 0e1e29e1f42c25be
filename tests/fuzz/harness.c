/* Failure reporting shared by the three harnesses. */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *fuzz_input_name;
static void (*fuzz_cleanup)(void);

void fuzz_set_input_name(const char *name)
{
	fuzz_input_name = name;
}

void fuzz_set_cleanup(void (*cleanup)(void))
{
	fuzz_cleanup = cleanup;
}

void fuzz_fail(const char *target, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz %s: %s:%d: ", target, file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s%s\n", fuzz_input_name ? "; input " : "",
		fuzz_input_name ? fuzz_input_name : "");
	fflush(stderr);
	if (fuzz_cleanup)
		fuzz_cleanup();
	abort();
}
