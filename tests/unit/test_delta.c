// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of cumulative-to-delta conversion (lib/delta.c): samples matched by content (frame
 * names, addresses, labels) across profiles whose ids differ, negative differences clamped,
 * counter resets detected, gauge columns left alone, and the column helpers (select_type,
 * drop_zero). Real Go allocs/heap/mutex profiles (tests/fixtures/goservice.go) check the arithmetic on
 * the data the scraper will see.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixtures.h"

#include "strobe/codec.h"
#include "strobe/delta.h"

static strobe_profile *folded(const char *text)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	int r = strobe_folded_decode(text, strlen(text), "test", &p, &err);
	if (r < 0)
		fail_msg("folded: %s", err.msg);
	return p;
}

/* The stack of sample s as "root;...;leaf" (innermost line of each location). */
static void stack_text(const strobe_profile *p, uint32_t s, char *buf, size_t cap)
{
	uint32_t frames[256], n = 0;
	for (uint32_t st = strobe_sample(p, s)->stack; st && n < 256;
	     st = strobe_stack_get(p, st)->parent)
		frames[n++] = strobe_stack_get(p, st)->location;
	size_t o = 0;
	buf[0] = 0;
	while (n-- > 0 && o < cap) {
		const strobe_location *l = strobe_location_get(p, frames[n]);
		const char *name =
			l->nline ? strobe_str(p, strobe_function_get(p, l->line[0].function)->name) : "?";
		o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ";" : "", name);
	}
}

/* Value of column t for stack text (summed over label sets), -1 when absent. */
static int64_t value_of(const strobe_profile *p, const char *stack, uint32_t t)
{
	int64_t v = -1;
	char buf[1024];
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		stack_text(p, s, buf, sizeof(buf));
		if (strcmp(buf, stack) == 0)
			v = (v < 0 ? 0 : v) + strobe_sample_values(p, s)[t];
	}
	return v;
}

static void test_basic_by_content(void **state)
{
	/* Different line orders give different ids for the same stacks. */
	strobe_profile *prev = folded("main;a 10\nmain;b 5\nmain;c 7\n");
	strobe_profile *cur = folded("main;d 3\nmain;c 9\nmain;b 5\nmain;a 15\n");
	strobe_profile *d = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_profile_delta(prev, cur, &d, &err), 0);
	assert_int_equal(value_of(d, "main;a", 0), 5);
	assert_int_equal(value_of(d, "main;c", 0), 2);
	assert_int_equal(value_of(d, "main;d", 0), 3); /* new stack counts from zero */
	assert_int_equal(value_of(d, "main;b", 0), -1); /* unchanged: left out */
	assert_int_equal(strobe_nsamples(d), 3);
	assert_int_equal(strobe_total(d, 0), strobe_total(cur, 0) - strobe_total(prev, 0));
	strobe_profile_free(prev);
	strobe_profile_free(cur);
	strobe_profile_free(d);
}

static void test_negative_clamped(void **state)
{
	/* One stack went down while the total went up: that stack is 0, not negative. */
	strobe_profile *prev = folded("x;a 10\nx;b 1\n");
	strobe_profile *cur = folded("x;a 8\nx;b 20\n");
	strobe_profile *d = NULL;
	bool reset = true;
	assert_int_equal(strobe_profile_delta_cols(prev, cur, NULL, &d, &reset, NULL), 0);
	assert_false(reset);
	assert_int_equal(value_of(d, "x;a", 0), -1);
	assert_int_equal(value_of(d, "x;b", 0), 19);
	strobe_profile_free(prev);
	strobe_profile_free(cur);
	strobe_profile_free(d);
}

static void test_reset(void **state)
{
	/* The process restarted: its counters start again below the previous totals. */
	strobe_profile *prev = folded("x;a 100\nx;b 50\n");
	strobe_profile *cur = folded("x;a 7\nx;c 2\n");
	strobe_profile *d = NULL;
	bool reset = false;
	assert_int_equal(strobe_profile_delta_cols(prev, cur, NULL, &d, &reset, NULL), 0);
	assert_true(reset);
	assert_int_equal(value_of(d, "x;a", 0), 7);
	assert_int_equal(value_of(d, "x;c", 0), 2);
	assert_int_equal(strobe_total(d, 0), 9);
	strobe_profile_free(prev);
	strobe_profile_free(cur);
	strobe_profile_free(d);
}

static void test_type_mismatch(void **state)
{
	strobe_profile *prev = folded("x;a 1\n");
	strobe_profile *cur = folded("x;a 1 2\n"); /* two-count form: types base, new */
	strobe_profile *d = (strobe_profile *)1;
	strobe_err err = {{0}};
	assert_int_equal(strobe_profile_delta(prev, cur, &d, &err), -EINVAL);
	assert_null(d);
	assert_non_null(strstr(err.msg, "sample types"));
	strobe_profile_free(prev);
	strobe_profile_free(cur);
}

/* Builds a one-frame sample f@addr with labels k=v (k may be NULL). */
static void add(strobe_profile *p, const char *fn, uint64_t addr, const char *k, const char *v,
		int64_t val0, int64_t val1)
{
	strobe_function f = {0};
	f.name = strobe_str_intern0(p, fn);
	strobe_line ln = {0};
	ln.function = strobe_function_intern(p, &f);
	strobe_mapping m = {0};
	m.start = 0x1000;
	m.limit = 0x9000;
	m.filename = strobe_str_intern0(p, "/bin/app");
	uint32_t map = strobe_mapping_intern(p, &m);
	uint32_t loc = strobe_location_intern(p, map, addr, &ln, 1, false);
	uint32_t st = strobe_stack_push(p, 0, loc);
	uint32_t ls = 0;
	if (k) {
		strobe_label l = {0};
		l.key = strobe_str_intern0(p, k);
		l.str = strobe_str_intern0(p, v);
		ls = strobe_labelset_intern(p, &l, 1);
	}
	int64_t vals[2] = {val0, val1};
	assert_int_equal(strobe_sample_add(p, st, ls, vals), 0);
}

static strobe_profile *two_types(void)
{
	strobe_profile *p = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(p, "alloc_space", "bytes"), 0);
	assert_int_equal(strobe_profile_add_type(p, "inuse_space", "bytes"), 0);
	return p;
}

static void test_labels_addresses_and_gauges(void **state)
{
	strobe_profile *prev = two_types(), *cur = two_types();
	/* Interned in different orders, with an unrelated string first, so ids differ. */
	strobe_str_intern0(cur, "padding string");
	add(prev, "f", 0x2000, "ep", "/a", 100, 40);
	add(prev, "f", 0x2000, "ep", "/b", 10, 4);
	add(prev, "f", 0x3000, NULL, NULL, 50, 5);
	add(cur, "f", 0x3004, NULL, NULL, 60, 6);    /* same name, other address: new */
	add(cur, "f", 0x2000, "ep", "/b", 30, 1);
	add(cur, "f", 0x2000, "ep", "/a", 100, 30);  /* unchanged counter, gauge 30 */
	add(cur, "f", 0x3000, NULL, NULL, 55, 7);
	bool cumulative[2] = {true, false};
	strobe_profile *d = NULL;
	assert_int_equal(strobe_profile_delta_cols(prev, cur, cumulative, &d, NULL, NULL), 0);
	int64_t a = -1, b = -1, x3000 = -1, x3004 = -1, ga = -1;
	for (uint32_t s = 1; s <= strobe_nsamples(d); s++) {
		const strobe_sample_key *k = strobe_sample(d, s);
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(d, k->labels, &n);
		const strobe_location *loc =
			strobe_location_get(d, strobe_stack_get(d, k->stack)->location);
		int64_t *v = strobe_sample_values(d, s);
		if (n && strcmp(strobe_str(d, l[0].str), "/a") == 0) {
			a = v[0];
			ga = v[1];
		} else if (n) {
			b = v[0];
		} else if (loc->address == 0x3000) {
			x3000 = v[0];
		} else if (loc->address == 0x3004) {
			x3004 = v[0];
		}
	}
	assert_int_equal(a, 0);    /* counter unchanged, kept for its gauge */
	assert_int_equal(ga, 30);  /* gauges are copied, not diffed */
	assert_int_equal(b, 20);
	assert_int_equal(x3000, 5);
	assert_int_equal(x3004, 60);
	/* A gauge going down is no reset; only counters decide. */
	bool reset = true;
	strobe_profile_free(d);
	assert_int_equal(strobe_profile_delta_cols(prev, cur, cumulative, &d, &reset, NULL), 0);
	assert_false(reset);
	strobe_profile_free(prev);
	strobe_profile_free(cur);
	strobe_profile_free(d);
}

static void test_time_window(void **state)
{
	strobe_profile *prev = folded("a 1\n"), *cur = folded("a 3\n"), *d = NULL;
	prev->time_nanos = 1000;
	cur->time_nanos = 61000;
	assert_int_equal(strobe_profile_delta(prev, cur, &d, NULL), 0);
	assert_int_equal(d->time_nanos, 1000);
	assert_int_equal(d->duration_nanos, 60000);
	strobe_profile_free(prev);
	strobe_profile_free(cur);
	strobe_profile_free(d);
}

static strobe_profile *read_testdata(const char *name)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_read_profile(go_fixture(name), &p, &err) < 0)
		return NULL;
	return p;
}

static void test_go_profiles(void **state)
{
	const char *files[] = {"go_allocs.pb.gz", "go_mutex.pb.gz", "go_block.pb.gz"};
	for (size_t i = 0; i < 3; i++) {
		strobe_profile *cur = read_testdata(files[i]);
		if (!cur)
			SKIP_CASE(GO_FIXTURE_MISSING);
		/* prev = half of every count: the delta is exactly the other half, per column. */
		strobe_profile *prev = strobe_profile_clone(cur), *d = NULL, *same = NULL;
		strobe_profile_scale(prev, 0.5);
		strobe_err err = {{0}};
		assert_int_equal(strobe_profile_delta(prev, cur, &d, &err), 0);
		for (uint32_t t = 0; t < cur->ntypes; t++)
			assert_int_equal(strobe_total(d, (int)t),
					 strobe_total(cur, (int)t) - strobe_total(prev, (int)t));
		/* A profile minus itself is empty. */
		assert_int_equal(strobe_profile_delta(cur, cur, &same, &err), 0);
		assert_int_equal(strobe_nsamples(same), 0);
		strobe_profile_free(cur);
		strobe_profile_free(prev);
		strobe_profile_free(d);
		strobe_profile_free(same);
	}
	/* heap and allocs hold the same counters (they differ in the default type only), but were
	 * written at different moments: the allocs delta is never negative. */
	strobe_profile *heap = read_testdata("go_heap.pb.gz"), *allocs = read_testdata("go_allocs.pb.gz");
	if (!heap || !allocs)
		SKIP_CASE(GO_FIXTURE_MISSING);
	strobe_profile *d = NULL;
	bool cum[4] = {true, true, false, false};
	assert_int_equal(strobe_profile_delta_cols(heap, allocs, cum, &d, NULL, NULL), 0);
	for (uint32_t s = 1; s <= strobe_nsamples(d); s++)
		assert_true(strobe_sample_values(d, s)[0] >= 0 && strobe_sample_values(d, s)[1] >= 0);
	assert_int_equal(strobe_total(d, 3), strobe_total(allocs, 3)); /* gauges as they are */
	strobe_profile_free(heap);
	strobe_profile_free(allocs);
	strobe_profile_free(d);
}

static void test_select_and_drop(void **state)
{
	strobe_profile *p = read_testdata("go_heap.pb.gz");
	if (!p)
		SKIP_CASE(GO_FIXTURE_MISSING);
	uint32_t zero_inuse = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		zero_inuse += strobe_sample_values(p, s)[3] == 0;
	assert_true(zero_inuse > 0); /* the test means something only then */
	strobe_profile *one = NULL;
	assert_int_equal(strobe_profile_select_type(p, 3, &one), 0);
	assert_int_equal(one->ntypes, 1);
	assert_string_equal(strobe_str(one, one->types[0].type), "inuse_space");
	assert_int_equal(strobe_total(one, 0), strobe_total(p, 3));
	assert_int_equal(strobe_nsamples(one), strobe_nsamples(p) - zero_inuse);
	assert_int_equal(one->period, p->period);
	strobe_profile_free(one);
	assert_int_equal(strobe_profile_select_type(p, 4, &one), -EINVAL);
	assert_null(one);
	strobe_profile_free(p);
	/* drop_zero keeps samples with any non-zero column. */
	strobe_profile *q = folded("a 0\nb 2\nc 0\n");
	assert_int_equal(strobe_nsamples(q), 3);
	assert_int_equal(strobe_profile_drop_zero(q), 0);
	assert_int_equal(strobe_nsamples(q), 1);
	assert_int_equal(value_of(q, "b", 0), 2);
	strobe_profile_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic_by_content),
		cmocka_unit_test(test_negative_clamped),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_type_mismatch),
		cmocka_unit_test(test_labels_addresses_and_gauges),
		cmocka_unit_test(test_time_window),
		cmocka_unit_test(test_go_profiles),
		cmocka_unit_test(test_select_and_drop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
