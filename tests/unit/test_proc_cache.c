// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the agent's per-process identities by pid (agent/proc_cache.c): every pid of a
 * busy host found at its own entry, an absent one not; pruning keeps the recent entries in their
 * order and each is still found at its (moved) slot, the pruned ones are not; a pid added again
 * after its entry was pruned gets a fresh entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/proc_cache.h"

enum { N = 500 };

/* pid i's entry is marked with seen_interval i % 10 and its pid in read_ns */
static void fill(proc_cache *c)
{
	for (int i = 0; i < N; i++) {
		pid_t pid = 1000 + 7 * i;
		proc_entry *e = proc_cache_add(c, pid);
		assert_non_null(e);
		assert_int_equal(e->pid, pid);
		assert_false(e->gone);
		e->seen_interval = i % 10;
		e->read_ns = pid;
	}
}

static void test_find(void **state)
{
	proc_cache c = {0};
	assert_null(proc_cache_find(&c, 1000)); /* empty */
	fill(&c);
	assert_int_equal(c.n, N);
	for (int i = N - 1; i >= 0; i--) {
		proc_entry *e = proc_cache_find(&c, 1000 + 7 * i);
		assert_non_null(e);
		assert_int_equal(e->pid, 1000 + 7 * i);
		assert_int_equal(e->read_ns, 1000 + 7 * i);
	}
	assert_null(proc_cache_find(&c, 1001));
	assert_null(proc_cache_find(&c, 999));
	proc_cache_free(&c);
}

static void test_prune(void **state)
{
	proc_cache c = {0};
	fill(&c);
	proc_cache_prune(&c, 7); /* keeps seen_interval 7, 8, 9: 150 entries */
	assert_int_equal(c.n, 150);
	int64_t last = -1;
	for (size_t i = 0; i < c.n; i++) { /* in their order */
		assert_true(c.v[i].seen_interval >= 7);
		assert_true(c.v[i].pid > last);
		last = c.v[i].pid;
	}
	for (int i = 0; i < N; i++) {
		proc_entry *e = proc_cache_find(&c, 1000 + 7 * i);
		if (i % 10 >= 7) {
			assert_non_null(e);
			assert_int_equal(e->pid, 1000 + 7 * i);
			assert_int_equal(e->read_ns, 1000 + 7 * i);
		} else {
			assert_null(e);
		}
	}
	/* a pruned pid comes back: a fresh entry, found, the others unchanged */
	proc_entry *e = proc_cache_add(&c, 1000);
	assert_non_null(e);
	assert_int_equal(e->read_ns, 0);
	assert_ptr_equal(proc_cache_find(&c, 1000), e);
	assert_int_equal(proc_cache_find(&c, 1000 + 7 * 9)->read_ns, 1000 + 7 * 9);
	proc_cache_prune(&c, 0); /* nothing to prune */
	assert_int_equal(c.n, 151);
	assert_ptr_equal(proc_cache_find(&c, 1000), &c.v[150]);
	proc_cache_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_prune),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
