/* libFuzzer target: the control-message codec (common/wire/control_*.c).
 * The body is fuzz_ctl_input() in harness_ctl.c, shared with the regression
 * test; `make fuzz` builds and runs it (docs/FUZZING.md). */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_ctl_input(data, size);
	return 0;
}
