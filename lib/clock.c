// SPDX-License-Identifier: Apache-2.0
/*
 * The one monotonic clock (and its wall-clock sibling) that the agent, the recorder, the
 * symbolizer's reload checks and the server's deadlines read, so that a duration measured in one
 * and compared in another means the same thing (include/strobe/clock.h).
 */
#include <time.h>

#include "strobe/clock.h"

static int64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t strobe_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

int64_t strobe_real_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}
