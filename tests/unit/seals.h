/* For unit tests that join two message streams without a greeting (a
 * socketpair, a TCP pair): the two ends' seals under one made-up session
 * key, as a greeting would hand them to its dialer and its listener. */
#ifndef ES_TEST_SEALS_H
#define ES_TEST_SEALS_H

#include "io/msgseal.h"

static inline void test_seal_pair(struct msgseal *dialer, struct msgseal *listener)
{
	unsigned char key[AUTH_SESSION_KEY_BYTES];
	for (unsigned i = 0; i < sizeof key; i++)
		key[i] = (unsigned char)(7u * i + 1u);
	msgseal_init(dialer, key, true);
	msgseal_init(listener, key, false);
}

#endif
