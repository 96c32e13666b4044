// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of profile type naming (lib/profile_type.c): hints and their Go endpoint aliases,
 * wall and CPU profiles, memory types, Go's mutex and block profiles told apart by their leaf
 * frames (and by a display name when one is given), the fallbacks, full type names with their
 * refusals, and which types are gauges.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/profile_type.h"

/* A profile with sample types "t1,u1;t2,u2..." and one sample whose stack is root;leaf. */
static strobe_profile *prof(const char *const *types, size_t n, const char *leaf)
{
	strobe_profile *p = strobe_profile_new();
	assert_non_null(p);
	for (size_t i = 0; i < n; i += 2)
		assert_int_equal(strobe_profile_add_type(p, types[i], types[i + 1]), 0);
	uint32_t st = strobe_stack_push(p, 0, strobe_location_for_name(p, "main", 4));
	st = strobe_stack_push(p, st, strobe_location_for_name(p, leaf, strlen(leaf)));
	int64_t v[4] = {1, 1, 1, 1};
	assert_int_equal(strobe_sample_add(p, st, 0, v), 0);
	return p;
}

static void test_hints(void **state)
{
	(void)state;
	const char *t[] = {"samples", "count"};
	strobe_profile *p = prof(t, 2, "f");
	assert_string_equal(strobe_profile_name(p, "heap", NULL), "memory");
	assert_string_equal(strobe_profile_name(p, "profile", NULL), "process_cpu");
	assert_string_equal(strobe_profile_name(p, "goroutines", NULL), "goroutine");
	assert_string_equal(strobe_profile_name(p, "custom", NULL), "custom");
	/* no hint, nothing that tells: the first sample type */
	assert_string_equal(strobe_profile_name(p, "", NULL), "samples");
	strobe_profile_free(p);
}

static void test_guesses(void **state)
{
	(void)state;
	const char *wall[] = {"samples", "count", "wall", "nanoseconds"};
	strobe_profile *p = prof(wall, 4, "f");
	assert_string_equal(strobe_profile_name(p, NULL, NULL), "wall");
	strobe_profile_free(p);
	const char *cpu[] = {"samples", "count", "cpu", "nanoseconds"};
	p = prof(cpu, 4, "f");
	assert_string_equal(strobe_profile_name(p, NULL, NULL), "process_cpu");
	strobe_profile_free(p);
	const char *mem[] = {"alloc_objects", "count", "alloc_space", "bytes"};
	p = prof(mem, 4, "f");
	assert_string_equal(strobe_profile_name(p, NULL, NULL), "memory");
	char full[STROBE_TYPE_MAX];
	assert_int_equal(strobe_profile_type_names(p, NULL, 1, full, NULL), 0);
	assert_string_equal(full, "memory:alloc_space:bytes:alloc_space:bytes");
	strobe_profile_free(p);
}

static void test_mutex_or_block(void **state)
{
	(void)state;
	const char *t[] = {"contentions", "count", "delay", "nanoseconds"};
	strobe_profile *p = prof(t, 4, "sync.(*Mutex).Unlock");
	assert_string_equal(strobe_profile_name(p, NULL, NULL), "mutex");
	strobe_profile_free(p);
	p = prof(t, 4, "sync.(*Mutex).Lock");
	assert_string_equal(strobe_profile_name(p, NULL, NULL), "block");
	/* a display name that tells wins over the leaves */
	const char *display[] = {"mutex_count", "mutex_duration"};
	assert_string_equal(strobe_profile_name(p, NULL, display), "mutex");
	strobe_profile_free(p);
}

static void test_type_names(void **state)
{
	(void)state;
	const char *t[] = {"samples", "", "cpu", "nanoseconds"};
	strobe_profile *p = prof(t, 4, "f");
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	char full[STROBE_TYPE_MAX];
	assert_int_equal(strobe_profile_type_names(p, NULL, 0, full, NULL), 0);
	assert_string_equal(full, "process_cpu:samples:count:cpu:nanoseconds");
	strobe_err err = {{0}};
	assert_int_equal(strobe_profile_type_names(p, "bad name", 0, full, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'bad name'"));
	assert_int_equal(strobe_profile_type_names(p, "a:b", 1, full, &err), -EINVAL);
	strobe_profile_free(p);
	assert_true(strobe_type_is_gauge("memory:inuse_space:bytes:space:bytes"));
	assert_true(strobe_type_is_gauge("goroutine:goroutine:count:goroutine:count"));
	assert_false(strobe_type_is_gauge("memory:alloc_space:bytes:space:bytes"));
	assert_false(strobe_type_is_gauge("inuse_space"));
	/* In-use heap snapshots whatever their names: @datadog/pprof (Node) writes objects/space. */
	assert_true(strobe_type_is_gauge("memory:space:bytes:space:bytes"));
	assert_true(strobe_type_is_gauge("memory:objects:count:space:bytes"));
	assert_true(strobe_type_is_gauge("memory:inuse_objects:count:space:bytes"));
	assert_false(strobe_type_is_gauge("memory:alloc_objects:count:space:bytes"));
	assert_false(strobe_type_is_gauge("memory:spaces:bytes:space:bytes"));
	assert_false(strobe_type_is_gauge("process_cpu:space:bytes:space:bytes"));
}

/* --type NAME:UNIT of folded input: the one value column and the period type renamed. */
static void test_set_value_type(void **state)
{
	(void)state;
	const char *t[] = {"samples", "count"};
	strobe_profile *p = prof(t, 2, "f");
	strobe_err err = {{0}};
	assert_int_equal(strobe_profile_set_value_type(p, "cpu:nanoseconds", &err), 0);
	assert_string_equal(strobe_str(p, p->types[0].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[0].unit), "nanoseconds");
	assert_string_equal(strobe_str(p, p->period_type.type), "cpu");
	assert_string_equal(strobe_str(p, p->period_type.unit), "nanoseconds");
	assert_int_equal(strobe_total(p, 0), 1);
	char full[STROBE_TYPE_MAX];
	assert_int_equal(strobe_profile_type_names(p, NULL, 0, full, NULL), 0);
	assert_string_equal(full, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
	/* Without a unit: count. */
	assert_int_equal(strobe_profile_set_value_type(p, "allocations", &err), 0);
	assert_string_equal(strobe_str(p, p->types[0].unit), "count");
	const char *bad[] = {"", ":ns", "cpu:", "cpu:nano:seconds", "cpu time:ns", "cpu:n{s}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err.msg[0] = 0;
		if (strobe_profile_set_value_type(p, bad[i], &err) != -EINVAL || !strstr(err.msg, "--type") )
			fail_msg("'%s': expected -EINVAL naming --type, got '%s'", bad[i], err.msg);
	}
	strobe_profile_free(p);
	const char *two[] = {"base", "count", "new", "count"};
	p = prof(two, 4, "f");
	assert_int_equal(strobe_profile_set_value_type(p, "cpu:nanoseconds", &err), -EINVAL);
	strobe_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hints),
		cmocka_unit_test(test_guesses),
		cmocka_unit_test(test_mutex_or_block),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_set_value_type),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
