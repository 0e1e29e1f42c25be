/* Shared by the unit tests that run a real libevent loop. */
#ifndef ES_TEST_LOOP_H
#define ES_TEST_LOOP_H

#include <stdbool.h>

struct event_base;

/* Runs base in 1 ms slices until *done or about timeout_ms have passed. */
void test_run_until(struct event_base *base, const bool *done, int timeout_ms);

#endif
