/* The books of a builder that records the events' data
 * (docs/RECORDING.md): every accepted event's data is written, or counted
 * in a named bucket; and the files it closed hold, by their manifests,
 * exactly the events the writer counted written. Each side comes from
 * another part of the builder (the core's acceptance, the writer's count,
 * the files' trailers), so a difference names a fault of the recording. */
#include "core/acct.h"
#include "core/acct_internal.h"

void acct_recordings(struct acct *a, const struct acct_run *run)
{
	for (size_t i = 0; i < run->recording_count; i++) {
		const struct acct_recording *r = &run->recordings[i];
		uint64_t sum = r->written;
		bool fits = acct_sum(&sum, r->unwritten) && acct_sum(&sum, r->unrecorded);
		acct_add(a, r->accepted, sum, fits, ACCT_OVERFLOW_NOTE, ACCT_RECORD_ACCEPTED,
			 r->builder);
		acct_add(a, r->in_files, r->written, true, "", ACCT_RECORD_FILES, r->builder);
	}
}
