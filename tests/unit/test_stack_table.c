// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/stack_table.c, the stacks of one on-CPU drain by id: every one of
 * thousands of stacks (ids chosen to collide in the low bits, depths 0 to 127) comes back with
 * its own addresses after the table grew many times; an id never added is not found; an id added
 * twice keeps its first stack; id 0 is refused; a reset forgets every stack and the table works
 * again after it, also after a burst large enough to be given back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/stack_table.h"

enum { N = 5000, DEPTH = 127 };

/* stack i: id with the same low 16 bits for every i (the worst case for a table indexed by
 * them), i % 128 frames, frame j = i * 1000 + j */
static uint64_t id_of(unsigned i) { return ((uint64_t)(i + 1) << 16) | 0x4321; }

static void fill(stack_table *t, unsigned n)
{
	uint64_t ips[DEPTH];
	for (unsigned i = 0; i < n; i++) {
		uint32_t d = i % (DEPTH + 1);
		for (uint32_t j = 0; j < d; j++)
			ips[j] = (uint64_t)i * 1000 + j;
		assert_int_equal(stack_table_add(t, id_of(i), ips, d), 0);
	}
}

static void check(const stack_table *t, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t d = 99;
		const uint64_t *v = stack_table_get(t, id_of(i), &d);
		assert_non_null(v);
		assert_int_equal(d, i % (DEPTH + 1));
		for (uint32_t j = 0; j < d; j++)
			assert_int_equal(v[j], (uint64_t)i * 1000 + j);
	}
}

static void test_all_found(void **state)
{
	stack_table t = {0};
	uint32_t d = 7;
	assert_null(stack_table_get(&t, id_of(0), &d)); /* empty, never allocated */
	assert_int_equal(d, 0);
	fill(&t, N);
	assert_int_equal(t.n, N);
	check(&t, N);
	assert_null(stack_table_get(&t, id_of(N), &d)); /* never added */
	assert_int_equal(d, 0);
	assert_null(stack_table_get(&t, 0x4321, &d));
	stack_table_free(&t);
}

static void test_first_kept(void **state)
{
	stack_table t = {0};
	uint64_t a[2] = {1, 2}, b[3] = {7, 8, 9};
	assert_int_equal(stack_table_add(&t, 42, a, 2), 0);
	assert_int_equal(stack_table_add(&t, 42, b, 3), 0);
	assert_int_equal(t.n, 1);
	uint32_t d;
	const uint64_t *v = stack_table_get(&t, 42, &d);
	assert_non_null(v);
	assert_int_equal(d, 2);
	assert_int_equal(v[1], 2);
	assert_int_equal(stack_table_add(&t, 0, a, 2), -EINVAL);
	stack_table_free(&t);
}

static void test_reset(void **state)
{
	stack_table t = {0};
	uint32_t d;
	for (int round = 0; round < 3; round++) {
		/* round 1 is a burst (over the slots and addresses kept across resets) */
		unsigned n = round == 1 ? 20000 : 300;
		fill(&t, n);
		check(&t, n);
		stack_table_reset(&t);
		assert_int_equal(t.n, 0);
		for (unsigned i = 0; i < n; i++)
			assert_null(stack_table_get(&t, id_of(i), &d));
	}
	stack_table_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_found),
		cmocka_unit_test(test_first_kept),
		cmocka_unit_test(test_reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
