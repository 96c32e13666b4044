// SPDX-License-Identifier: Apache-2.0
/*
 * server/flamegraph.c: call trees into Grafana's flame graph rows (4 numbers per node, 7 for a
 * comparison), the max_nodes cut, and the folding of fine buckets into SelectSeries steps (sum
 * and average). The expected rows are worked out by hand from the stacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/server_impl.h"

static void add(strobe_tree *t, const char *stack, int col, int64_t v)
{
	const char *names[16];
	size_t lens[16], n = 0;
	for (const char *p = stack; *p && n < 16;) {
		size_t l = strcspn(p, ";");
		names[n] = p;
		lens[n++] = l;
		p += l + (p[l] == ';');
	}
	assert_int_equal(strobe_tree_add_stack(t, names, lens, n, col, v), 0);
}

static strobe_tree *sample_tree(void)
{
	strobe_tree *t = strobe_tree_new();
	assert_non_null(t);
	add(t, "main;handle;parse", 0, 10);
	add(t, "main;handle;render", 0, 5);
	add(t, "main;idle", 0, 3);
	assert_int_equal(strobe_tree_sort(t), 0);
	return t;
}

static void row_eq(const srv_flame *f, size_t d, const int64_t *want, size_t n)
{
	assert_true(d < f->depth);
	assert_int_equal(f->rows[d].n, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(f->rows[d].v[i], want[i]);
}

static const char *name_at(const srv_flame *f, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < f->nnames);
	return f->names[i];
}

static void test_levels(void **state)
{
	(void)state;
	strobe_tree *t = sample_tree();
	srv_flame f;
	assert_int_equal(srv_flame_build(t, 1, 0, &f), 0);
	assert_int_equal(f.depth, 4);
	assert_int_equal(f.total[0], 18);
	assert_int_equal(f.max_self, 10);
	assert_string_equal(f.names[0], "total");
	row_eq(&f, 0, (int64_t[]){0, 18, 0, 0}, 4);
	row_eq(&f, 1, (int64_t[]){0, 18, 0, 1}, 4);
	/* handle [0,15), idle [15,18): idle's offset from handle's end is 0 */
	assert_int_equal(f.rows[2].n, 8);
	assert_string_equal(name_at(&f, f.rows[2].v[3]), "handle");
	assert_string_equal(name_at(&f, f.rows[2].v[7]), "idle");
	row_eq(&f, 2, (int64_t[]){0, 15, 0, f.rows[2].v[3], 0, 3, 3, f.rows[2].v[7]}, 8);
	/* parse [0,10), render [10,15) */
	assert_string_equal(name_at(&f, f.rows[3].v[3]), "parse");
	assert_string_equal(name_at(&f, f.rows[3].v[7]), "render");
	row_eq(&f, 3, (int64_t[]){0, 10, 10, f.rows[3].v[3], 0, 5, 5, f.rows[3].v[7]}, 8);
	srv_flame_free(&f);
	strobe_tree_free(t);
}

/* A node under a later sibling starts where that sibling starts: the offset is the gap from the
 * previous node on its row. */
static void test_offsets_gap(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "a", 0, 4);         /* a [0,4), leaf */
	add(t, "b;c", 0, 6);       /* b [4,10), c [4,10) */
	assert_int_equal(strobe_tree_sort(t), 0);
	srv_flame f;
	assert_int_equal(srv_flame_build(t, 1, 0, &f), 0);
	assert_int_equal(f.depth, 3);
	row_eq(&f, 2, (int64_t[]){4, 6, 6, f.rows[2].v[3]}, 4);
	assert_string_equal(name_at(&f, f.rows[2].v[3]), "c");
	srv_flame_free(&f);
	strobe_tree_free(t);
}

static void test_max_nodes(void **state)
{
	(void)state;
	strobe_tree *t = sample_tree();
	srv_flame f;
	/* the 2 heaviest below the root: main 18, handle 15 */
	assert_int_equal(srv_flame_build(t, 1, 2, &f), 0);
	assert_int_equal(f.depth, 3);
	assert_int_equal(f.rows[2].n, 4);
	assert_string_equal(name_at(&f, f.rows[2].v[3]), "handle");
	assert_int_equal(f.total[0], 18);
	srv_flame_free(&f);
	/* 3: parse (10) joins; idle (3) and render (5) stay out */
	assert_int_equal(srv_flame_build(t, 1, 3, &f), 0);
	assert_int_equal(f.depth, 4);
	assert_int_equal(f.rows[3].n, 4);
	assert_string_equal(name_at(&f, f.rows[3].v[3]), "parse");
	srv_flame_free(&f);
	strobe_tree_free(t);
}

static void test_diff(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;a", 0, 10);
	add(t, "main;b", 0, 5);
	add(t, "main;a", 1, 2);
	add(t, "main;c", 1, 7);
	assert_int_equal(strobe_tree_sort(t), 0);
	srv_flame f;
	assert_int_equal(srv_flame_build(t, 2, 0, &f), 0);
	assert_int_equal(f.total[0], 15);
	assert_int_equal(f.total[1], 9);
	row_eq(&f, 1, (int64_t[]){0, 15, 0, 0, 9, 0, 1}, 7);
	/* a: left [0,10) right [0,2); b: left [10,15) right [2,2); c: left [15,15) right [2,9) */
	assert_int_equal(f.rows[2].n, 21);
	int64_t *v = f.rows[2].v;
	int64_t want[21] = {0, 10, 10, 0, 2, 2, v[6], 0, 5, 5, 0, 0, 0, v[13], 0, 0, 0, 0, 7, 7, v[20]};
	row_eq(&f, 2, want, 21);
	assert_string_equal(name_at(&f, v[6]), "a");
	assert_string_equal(name_at(&f, v[13]), "b");
	assert_string_equal(name_at(&f, v[20]), "c");
	srv_flame_free(&f);
	strobe_tree_free(t);
}

static void test_fold_steps(void **state)
{
	(void)state;
	/* 3 steps of 4 buckets: points 10 and 20 in step 0, none in step 1, 6 in step 2 */
	int64_t fine[12] = {10, 0, 20, 0, 0, 0, 0, 0, 0, 6, 0, 0};
	double out[3];
	bool has[3];
	srv_fold_steps(fine, 12, 4, false, out, has, 3);
	assert_true(has[0] && !has[1] && has[2]);
	assert_true(out[0] == 30 && out[1] == 0 && out[2] == 6);
	srv_fold_steps(fine, 12, 4, true, out, has, 3);
	assert_true(out[0] == 15 && out[2] == 6);
	/* fewer fine buckets than steps need: the missing ones are empty */
	srv_fold_steps(fine, 5, 4, false, out, has, 3);
	assert_true(out[0] == 30 && !has[1] && !has[2]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_offsets_gap),
		cmocka_unit_test(test_max_nodes),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_fold_steps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
