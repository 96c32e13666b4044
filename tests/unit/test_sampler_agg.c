// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the sampler's aggregate (agent/sampler_agg.c): entries summed by key, each
 * process's entries chained in the order they were added and nothing else in its chain, the
 * processes listed in the order of their first entry (and, for locks, only those with waits),
 * sums that saturate, a stack over the cap refused, and a reset that empties the index too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/sampler_agg.h"

static int add(sampler_agg *a, int32_t pid, uint32_t frame, int64_t samples, int64_t waits)
{
	int64_t v[NV] = {0};
	v[V_SAMPLES] = samples;
	v[V_WAITS] = waits;
	return agg_add(a, pid, pid, waits ? 0x7000 : 0, 0, &frame, 1, v);
}

/* The entries of pid, in chain order, as their frame ids; returns the count. */
static unsigned chain(const sampler_agg *a, int32_t pid, uint32_t *out, unsigned cap)
{
	unsigned n = 0;
	for (uint32_t id = agg_first(a, pid); id != AGG_END && n < cap; id = agg_next(a, pid, id)) {
		const sampler_agg_key *k = agg_key(a, id);
		if (pid)
			assert_int_equal(k->pid, pid);
		out[n++] = k->frame[0];
	}
	return n;
}

static void test_per_process_chains(void **state)
{
	sampler_agg a;
	agg_init(&a);
	/* interleaved, as samples of several processes arrive */
	assert_int_equal(add(&a, 10, 1, 1, 0), 0);
	assert_int_equal(add(&a, 20, 2, 1, 0), 0);
	assert_int_equal(add(&a, 10, 3, 1, 0), 0);
	assert_int_equal(add(&a, 30, 4, 1, 0), 0);
	assert_int_equal(add(&a, 10, 1, 5, 0), 0); /* the same key: summed, not chained again */
	assert_int_equal(add(&a, 20, 5, 1, 0), 0);
	assert_int_equal(add(&a, 10, 6, 1, 0), 0);
	assert_int_equal(agg_count(&a), 6);
	uint32_t f[8];
	assert_int_equal(chain(&a, 10, f, 8), 3);
	assert_int_equal(f[0], 1);
	assert_int_equal(f[1], 3);
	assert_int_equal(f[2], 6);
	assert_int_equal(chain(&a, 20, f, 8), 2);
	assert_int_equal(f[0], 2);
	assert_int_equal(f[1], 5);
	assert_int_equal(chain(&a, 30, f, 8), 1);
	assert_int_equal(chain(&a, 99, f, 8), 0); /* none */
	assert_int_equal(chain(&a, 0, f, 8), 6);  /* pid 0: every entry, in order */
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(f[i], i + 1);
	uint32_t id = agg_first(&a, 10);
	assert_int_equal(agg_vals(&a, id)[V_SAMPLES], 6);
	pid_t p[4];
	assert_int_equal(agg_pids(&a, p, 4, false), 3);
	assert_int_equal(p[0], 10);
	assert_int_equal(p[1], 20);
	assert_int_equal(p[2], 30);
	assert_int_equal(agg_pids(&a, p, 2, false), 2); /* capped */
	agg_free(&a);
}

static void test_lock_pids(void **state)
{
	sampler_agg a;
	agg_init(&a);
	assert_int_equal(add(&a, 10, 1, 1, 0), 0);
	assert_int_equal(add(&a, 20, 1, 1, 0), 0);
	assert_int_equal(add(&a, 30, 2, 0, 3), 0);
	assert_int_equal(add(&a, 10, 2, 0, 1), 0); /* 10's first lock entry, after 30's */
	pid_t p[4];
	assert_int_equal(agg_pids(&a, p, 4, true), 2);
	assert_int_equal(p[0], 10); /* in the order of their first entry of any kind */
	assert_int_equal(p[1], 30);
	agg_free(&a);
}

static void test_saturate_cap_reset(void **state)
{
	sampler_agg a;
	agg_init(&a);
	assert_int_equal(add(&a, 10, 1, INT64_MAX - 1, 0), 0);
	assert_int_equal(add(&a, 10, 1, 5, 0), 0);
	assert_int_equal(agg_vals(&a, agg_first(&a, 10))[V_SAMPLES], INT64_MAX);
	uint32_t frames[STROBE_STACK_FRAMES + 1] = {0};
	int64_t v[NV] = {1};
	assert_int_equal(agg_add(&a, 10, 10, 0, 0, frames, STROBE_STACK_FRAMES, v), 0);
	assert_int_equal(agg_add(&a, 10, 10, 0, 0, frames, STROBE_STACK_FRAMES + 1, v), -E2BIG);
	assert_int_equal(agg_count(&a), 2);
	/* many processes and entries: the index grows with them */
	for (int32_t pid = 100; pid < 1100; pid++)
		for (uint32_t fr = 0; fr < 5; fr++)
			assert_int_equal(add(&a, pid, fr, 1, 0), 0);
	uint32_t f[8];
	assert_int_equal(chain(&a, 777, f, 8), 5);
	pid_t p[2000];
	assert_int_equal(agg_pids(&a, p, 2000, false), 1001);
	agg_reset(&a);
	assert_int_equal(agg_count(&a), 0);
	assert_int_equal(agg_first(&a, 10), AGG_END);
	assert_int_equal(agg_first(&a, 0), AGG_END);
	assert_int_equal(agg_pids(&a, p, 2000, false), 0);
	/* after a reset: new entries start from zero, in new chains */
	assert_int_equal(add(&a, 20, 1, 2, 0), 0);
	assert_int_equal(chain(&a, 20, f, 8), 1);
	assert_int_equal(agg_vals(&a, agg_first(&a, 20))[V_SAMPLES], 2);
	assert_int_equal(chain(&a, 10, f, 8), 0);
	agg_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_process_chains),
		cmocka_unit_test(test_lock_pids),
		cmocka_unit_test(test_saturate_cap_reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
