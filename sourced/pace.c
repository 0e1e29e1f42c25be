#include "pace.h"

uint64_t pace_due(const struct pace *p, uint64_t now_ns)
{
	if (p->rate == 0)
		return p->events;
	/* The pace timer is in whole microseconds and may fire a little
	 * before start: that is no time elapsed, not 2^64 ns. */
	unsigned __int128 elapsed = now_ns > p->start_ns ? now_ns - p->start_ns : 0;
	unsigned __int128 due = elapsed * p->rate / 1000000000u + 1;
	return due < p->events ? (uint64_t)due : p->events;
}

uint64_t pace_wait(const struct pace *p, uint64_t now_ns, uint64_t next_index,
		   uint64_t delayed_due_ns)
{
	uint64_t wake = UINT64_MAX;
	if (p->rate > 0 && next_index < p->events)
		wake = p->start_ns + (uint64_t)((unsigned __int128)next_index * 1000000000u / p->rate);
	if (delayed_due_ns < wake)
		wake = delayed_due_ns;
	/* The first grid point at or after that, and after now. Clamping to
	 * now + tick before rounding up, as this once did, skipped a grid
	 * point whenever the source woke a little after one: sources then
	 * woke every other tick, some on even ticks and some on odd ones, and
	 * an event's fragments left a tick apart. */
	if (wake <= now_ns)
		wake = now_ns + 1;
	if (wake != UINT64_MAX && wake > p->start_ns && p->tick_ns > 0)
		wake = p->start_ns + (wake - p->start_ns + p->tick_ns - 1) / p->tick_ns * p->tick_ns;
	return wake > now_ns ? wake - now_ns : 0;
}
