/* libFuzzer target: the shared-memory ring (common/io/shmring*.c).
 * The body is fuzz_ring_input() in harness_ring.c, shared with the regression
 * test; `make fuzz` builds and runs it (docs/FUZZING.md). */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_ring_input(data, size);
	return 0;
}
