/* libFuzzer target: the frame decoder (common/wire/frame.c).
 * The body is fuzz_frame_input() in harness_frame.c, shared with the regression
 * test; `make fuzz` builds and runs it (docs/FUZZING.md). */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_frame_input(data, size);
	return 0;
}
