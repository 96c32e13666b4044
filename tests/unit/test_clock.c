// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the clocks (lib/clock.c): the monotonic clock never goes back and measures a
 * sleep as at least its length, and the wall clock is in nanoseconds since the epoch (it agrees
 * with time(2) to the second).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "strobe/clock.h"

static void test_monotonic(void **state)
{
	(void)state;
	int64_t prev = strobe_mono_ns();
	assert_true(prev > 0);
	for (int i = 0; i < 100000; i++) {
		int64_t now = strobe_mono_ns();
		assert_true(now >= prev);
		prev = now;
	}
	int64_t t0 = strobe_mono_ns();
	nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
	int64_t d = strobe_mono_ns() - t0;
	assert_true(d >= 20 * 1000 * 1000);
	assert_true(d < 5LL * 1000 * 1000 * 1000); /* nanoseconds, not some other unit */
}

static void test_realtime(void **state)
{
	(void)state;
	time_t before = time(NULL);
	int64_t ns = strobe_real_ns();
	time_t after = time(NULL);
	assert_true(ns / 1000000000 >= (int64_t)before - 1);
	assert_true(ns / 1000000000 <= (int64_t)after + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_monotonic),
		cmocka_unit_test(test_realtime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
