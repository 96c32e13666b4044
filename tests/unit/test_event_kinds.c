// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the map from the kernel's event ids to the sampler's kinds of event
 * (agent/event_kinds.c): every id found with its kind among thousands (a per-task sampler opens
 * one event per thread and CPU), an unknown id of kind 0, and an id mapped twice keeping its
 * first kind, as the linear scan it replaced did.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../agent/event_kinds.h"

static void test_many_ids(void **state)
{
	event_kinds m;
	event_kinds_init(&m);
	assert_int_equal(event_kinds_get(&m, 7), 0); /* empty */
	/* ids as the kernel hands them out, from one counter, three kinds interleaved */
	for (uint64_t i = 0; i < 5000; i++)
		assert_int_equal(event_kinds_add(&m, 1000 + 3 * i, EVK_CLOCK + (int)(i % 3)), 0);
	assert_int_equal(event_kinds_count(&m), 5000);
	for (uint64_t i = 0; i < 5000; i++) {
		assert_int_equal(event_kinds_get(&m, 1000 + 3 * i), EVK_CLOCK + (int)(i % 3));
		assert_int_equal(event_kinds_get(&m, 1000 + 3 * i + 1), 0); /* none of ours */
	}
	assert_int_equal(event_kinds_get(&m, 0), 0);
	assert_int_equal(event_kinds_get(&m, UINT64_MAX), 0);
	event_kinds_free(&m);
}

static void test_first_kind_kept(void **state)
{
	event_kinds m;
	event_kinds_init(&m);
	assert_int_equal(event_kinds_add(&m, 42, EVK_SWITCH), 0);
	assert_int_equal(event_kinds_add(&m, 42, EVK_WAKEUP), 0);
	assert_int_equal(event_kinds_count(&m), 1);
	assert_int_equal(event_kinds_get(&m, 42), EVK_SWITCH);
	/* id 0 is an id like any other (an offline layout may use it) */
	assert_int_equal(event_kinds_add(&m, 0, EVK_CLOCK), 0);
	assert_int_equal(event_kinds_get(&m, 0), EVK_CLOCK);
	event_kinds_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_ids),
		cmocka_unit_test(test_first_kind_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
