#include "loop.h"

#include <event2/event.h>

void test_run_until(struct event_base *base, const bool *done, int timeout_ms)
{
	for (int i = 0; i < timeout_ms && !*done; i++) {
		struct timeval tv = { 0, 1000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}
