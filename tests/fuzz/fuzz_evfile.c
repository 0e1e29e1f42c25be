/* libFuzzer target: the event file scan and recovery (common/wire/evfile.c).
 * The body is fuzz_evfile_input() in harness_evfile.c, shared with the
 * regression test; `make fuzz` builds and runs it (docs/FUZZING.md). */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_evfile_input(data, size);
	return 0;
}
