#include "sys/clock.h"

#include <time.h>

static int64_t clk_injected_offset_ns;

void clk_set_offset_ns(int64_t offset_ns)
{
	clk_injected_offset_ns = offset_ns;
}

int64_t clk_offset_ns(void)
{
	return clk_injected_offset_ns;
}

uint64_t clk_realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
	       (uint64_t)clk_injected_offset_ns;
}

uint64_t clk_realtime_true_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t clk_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void clk_burn_us(uint32_t us)
{
	if (us == 0)
		return;
	uint64_t until = clk_monotonic_ns() + (uint64_t)us * 1000u;
	while (clk_monotonic_ns() < until)
		;
}
