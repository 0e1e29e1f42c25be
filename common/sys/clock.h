/* Clocks of a daemon. Every wall-clock time the project records goes
 * through clk_realtime_ns() so --clock-offset-ns can emulate a host whose
 * clock is off. Intervals (timeouts, rates) use the monotonic clock. */
#ifndef ES_SYS_CLOCK_H
#define ES_SYS_CLOCK_H

#include <stdint.h>

/* Adds offset_ns to every later clk_realtime_ns(); for fault injection. */
void clk_set_offset_ns(int64_t offset_ns);
int64_t clk_offset_ns(void);

/* CLOCK_REALTIME in ns since the Unix epoch, plus the injected offset. */
uint64_t clk_realtime_ns(void);

/* CLOCK_REALTIME without the injected offset: the host's own clock, for
 * agreeing on moments with other processes rather than for timestamps. */
uint64_t clk_realtime_true_ns(void);

/* CLOCK_MONOTONIC in ns. */
uint64_t clk_monotonic_ns(void);

/* Spins for us microseconds of CPU: the builder's emulated filter cost. */
void clk_burn_us(uint32_t us);

#endif
