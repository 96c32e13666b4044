/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The clocks, in nanoseconds as int64_t: the monotonic one for every duration, deadline and
 * reload check (it never jumps when the wall clock is set), and the wall clock for timestamps
 * that leave the process (a profile's time, a point in the store). Nothing to own or free.
 */
#ifndef STROBE_CLOCK_H
#define STROBE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC, ns. */
int64_t strobe_mono_ns(void);
/* CLOCK_REALTIME, ns since the Unix epoch. */
int64_t strobe_real_ns(void);

#endif
