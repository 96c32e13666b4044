// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the per-process count of held side-band records (agent/pid_count.h), against a
 * plain array of counts as the truth: random adds and matching subtracts over a few thousand
 * pids (growing the table several times), the table emptied when the last count goes, pid 0,
 * and the "full" state past the size limit, where every pid reads as held until the counts
 * drain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../agent/pid_count.h"

static void test_against_array(void **state)
{
	enum { NPID = 5000 };
	static uint32_t truth[NPID];
	pid_count c = {0};
	uint64_t total = 0;
	srand(7);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 20000; i++) {
			int32_t pid = rand() % NPID;
			assert_int_equal(pid_count_add(&c, pid), 0);
			truth[pid]++;
			total++;
		}
		for (int32_t pid = 0; pid < NPID; pid++)
			assert_int_equal(pid_count_get(&c, pid), truth[pid]);
		assert_int_equal(pid_count_get(&c, NPID + 3), 0);
		/* take away about half, at random, never below zero */
		for (int i = 0; i < 20000; i++) {
			int32_t pid = rand() % NPID;
			if (!truth[pid]) {
				pid_count_sub(&c, pid); /* not held: nothing changes */
				continue;
			}
			pid_count_sub(&c, pid);
			truth[pid]--;
			total--;
		}
		for (int32_t pid = 0; pid < NPID; pid++)
			assert_int_equal(pid_count_get(&c, pid), truth[pid]);
		assert_int_equal(c.total, total);
	}
	/* all the rest away: the table is emptied */
	for (int32_t pid = 0; pid < NPID; pid++)
		while (truth[pid]) {
			pid_count_sub(&c, pid);
			truth[pid]--;
		}
	assert_int_equal(c.total, 0);
	assert_int_equal(c.used, 0);
	for (int32_t pid = 0; pid < NPID; pid += 97)
		assert_int_equal(pid_count_get(&c, pid), 0);
	pid_count_free(&c);
}

static void test_full(void **state)
{
	pid_count c = {0};
	uint32_t n = 0;
	int rc = 0;
	/* more distinct pids than the table may hold */
	for (; n < STROBE_PID_COUNT_MAX && rc == 0; n++)
		rc = pid_count_add(&c, (int32_t)(n + 100));
	assert_int_equal(rc, -12); /* -ENOMEM: full */
	assert_true(c.full);
	assert_int_equal(pid_count_get(&c, 1), UINT32_MAX); /* everyone held */
	/* draining every count (the sampler subtracts what it added) empties it */
	for (uint32_t i = 0; i < n; i++)
		pid_count_sub(&c, (int32_t)(i + 100));
	assert_false(c.full);
	assert_int_equal(c.total, 0);
	assert_int_equal(pid_count_get(&c, 1), 0);
	assert_int_equal(pid_count_add(&c, 1), 0);
	assert_int_equal(pid_count_get(&c, 1), 1);
	pid_count_clear(&c);
	assert_int_equal(pid_count_get(&c, 1), 0);
	pid_count_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_array),
		cmocka_unit_test(test_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
