// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the web UI's flat flame graph JSON (strobe_json_flat_write): pre-order with
 * depths, children in name order, self and total per node, the names table, base columns in a
 * diff tree, escaping of odd names, and a chain deeper than recursion would allow.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/codec.h"
#include "strobe/render.h"

static void add(strobe_tree *t, const char *stack, int col, int64_t v)
{
	const char *names[64];
	size_t lens[64], n = 0;
	const char *p = stack;
	while (*p && n < 64) {
		const char *s = strchr(p, ';');
		names[n] = p;
		lens[n++] = s ? (size_t)(s - p) : strlen(p);
		if (!s)
			break;
		p = s + 1;
	}
	assert_int_equal(strobe_tree_add_stack(t, names, lens, n, col, v), 0);
}

static json_t *flat(strobe_tree *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_tree_sort(t), 0);
	assert_int_equal(strobe_json_flat_write(f, t, "cpu", "nanoseconds"), 0);
	fclose(f);
	json_error_t e;
	json_t *j = json_loadb(buf, len, 0, &e);
	if (!j)
		fail_msg("not JSON: %s: %s", e.text, buf);
	free(buf);
	return j;
}

/* "name:depth:self:total" of each node, joined by spaces (names looked up in the table). */
static char *describe(json_t *j)
{
	json_t *names = json_object_get(j, "names"), *nodes = json_object_get(j, "nodes");
	size_t stride = (size_t)json_integer_value(json_object_get(j, "stride"));
	assert_true(stride == 4 || stride == 6);
	assert_int_equal(json_array_size(nodes) % stride, 0);
	static char out[4096];
	size_t o = 0;
	for (size_t i = 0; i < json_array_size(nodes); i += stride) {
		size_t ni = (size_t)json_integer_value(json_array_get(nodes, i));
		assert_true(ni < json_array_size(names));
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s:%lld", o ? " " : "",
				      json_string_value(json_array_get(names, ni)),
				      (long long)json_integer_value(json_array_get(nodes, i + 1)));
		for (size_t k = 2; k < stride; k++)
			o += (size_t)snprintf(out + o, sizeof(out) - o, ":%lld",
					      (long long)json_integer_value(json_array_get(nodes, i + k)));
	}
	return out;
}

static void test_preorder(void **state)
{
	strobe_tree *t = strobe_tree_new();
	add(t, "main;work;hot", 0, 50);
	add(t, "main;work", 0, 5);
	add(t, "main;idle", 0, 30);
	add(t, "gc", 0, 15);
	json_t *j = flat(t);
	assert_string_equal(json_string_value(json_object_get(j, "type")), "cpu");
	assert_string_equal(json_string_value(json_object_get(j, "unit")), "nanoseconds");
	assert_false(json_is_true(json_object_get(j, "diff")));
	/* children by name: gc before main, idle before work */
	assert_string_equal(describe(j),
			    ":0:0:100 gc:1:15:15 main:1:0:85 idle:2:30:30 work:2:5:55 hot:3:50:50");
	json_decref(j);
	strobe_tree_free(t);
}

static void test_diff_columns(void **state)
{
	strobe_tree *t = strobe_tree_new();
	add(t, "main;hot", 0, 60);
	add(t, "main;hot", 1, 20);
	add(t, "main;gone", 1, 40);
	t->diff = true;
	json_t *j = flat(t);
	assert_true(json_is_true(json_object_get(j, "diff")));
	assert_int_equal(json_integer_value(json_object_get(j, "stride")), 6);
	assert_string_equal(describe(j),
			    ":0:0:60:0:60 main:1:0:60:0:60 gone:2:0:0:40:40 hot:2:60:60:20:20");
	json_decref(j);
	strobe_tree_free(t);
}

static void test_odd_names(void **state)
{
	strobe_tree *t = strobe_tree_new();
	add(t, "say \"hi\"\\;tab\there;\xff\xfe", 0, 7);
	json_t *j = flat(t);
	assert_string_equal(describe(j), ":0:0:7 say \"hi\"\\:1:0:7 tab\there:2:0:7 ??:3:7:7");
	json_decref(j);
	strobe_tree_free(t);
}

static void test_deep_chain(void **state)
{
	/* 100000 levels: a recursive writer would overflow the stack (ASan's is small). */
	strobe_tree *t = strobe_tree_new();
	enum { DEPTH = 100000 };
	const char **names = malloc(DEPTH * sizeof(*names));
	size_t *lens = malloc(DEPTH * sizeof(*lens));
	for (size_t i = 0; i < DEPTH; i++) {
		names[i] = i % 2 ? "b" : "a";
		lens[i] = 1;
	}
	assert_int_equal(strobe_tree_add_stack(t, names, lens, DEPTH, 0, 3), 0);
	add(t, "z", 0, 1);
	json_t *j = flat(t);
	json_t *nodes = json_object_get(j, "nodes");
	assert_int_equal(json_array_size(nodes), 4 * (DEPTH + 2));
	/* the last node is z at depth 1, after the whole chain */
	size_t last = json_array_size(nodes) - 4;
	assert_int_equal(json_integer_value(json_array_get(nodes, last + 1)), 1);
	assert_int_equal(json_integer_value(json_array_get(nodes, last + 3)), 1);
	assert_int_equal(json_integer_value(json_array_get(nodes, 4 * DEPTH + 1)), DEPTH);
	json_decref(j);
	free(names);
	free(lens);
	strobe_tree_free(t);
}

static void test_extremes(void **state)
{
	/* negative and 64-bit values survive the hand-written number formatting */
	strobe_tree *t = strobe_tree_new();
	add(t, "big", 0, INT64_MAX / 2);
	add(t, "neg", 1, -1234567890123LL);
	t->diff = true;
	json_t *j = flat(t);
	assert_string_equal(describe(j), ":0:0:4611686018427387903:0:-1234567890123 "
					 "big:1:4611686018427387903:4611686018427387903:0:0 "
					 "neg:1:0:0:-1234567890123:-1234567890123");
	json_decref(j);
	strobe_tree_free(t);
}

static void test_empty(void **state)
{
	strobe_tree *t = strobe_tree_new();
	json_t *j = flat(t);
	assert_string_equal(describe(j), ":0:0:0");
	json_decref(j);
	strobe_tree_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preorder),    cmocka_unit_test(test_diff_columns),
		cmocka_unit_test(test_odd_names),   cmocka_unit_test(test_deep_chain),
		cmocka_unit_test(test_extremes),    cmocka_unit_test(test_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
