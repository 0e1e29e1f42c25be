/* The record formats a builder knows (data/recsink.h): the one file that
 * names them all, so each sink depends on the seam and not on the others. */
#include "data/recsink.h"

#include "sys/log.h"

#include <string.h>

bool recsink_open(struct recsink *out, const char *format, const char *dir, uint32_t batch_events,
	      uint16_t sources)
{
	if (format == NULL || strcmp(format, "jsonl") == 0)
		return recsink_jsonl_open(out, dir, batch_events, sources);
	log_error("No record format %s (there is jsonl)", format);
	return false;
}
