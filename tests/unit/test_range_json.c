// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of /api/v1/range's body writer (server/range_json.c): byte for byte what building
 * the answer as jansson values and dumping it compact gives (how the server wrote it before),
 * for values at the ends of int64, negative times, no group-by, no groups, no steps, group
 * values jansson must escape (quotes, backslashes, control bytes, non-ASCII UTF-8) or cannot
 * encode (not UTF-8: its key left out, as jansson left it), exemplars, and a buffer cap that
 * the answer passes (-E2BIG, nothing half-written handed back).
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
#include <jansson.h>

#include "../../server/range_json.h"

/* The body as srv_range built it before range_json.c (its code, kept here as the reference). */
static char *reference(const char *type, int64_t from, int64_t to, int64_t step, const char *gb,
		       const strobe_range_result *res, json_t *ex)
{
	json_t *series = json_array();
	for (size_t i = 0; series && i < res->n; i++) {
		json_t *pts = json_array(), *grp = json_object();
		for (size_t k = 0; pts && k < res->nsteps; k++)
			json_array_append_new(pts, json_pack("[I, I]",
						     (json_int_t)((from + (int64_t)k * step) / 1000000),
						     (json_int_t)res->g[i].values[k]));
		if (gb && grp)
			json_object_set_new(grp, gb, json_string(res->g[i].value));
		json_array_append_new(series, json_pack("{s:o?, s:o?}", "group", grp, "points", pts));
	}
	json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:o?}", "type", type, "from_ms",
			      (json_int_t)(from / 1000000), "to_ms", (json_int_t)(to / 1000000),
			      "step_ms", (json_int_t)(step / 1000000), "series", series);
	if (j && ex)
		json_object_set_new(j, "exemplars", json_incref(ex));
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

static void same(const char *type, int64_t from, int64_t to, int64_t step, const char *gb,
		 const strobe_range_result *res, json_t *ex)
{
	char *want = reference(type, from, to, step, gb, res, ex);
	assert_non_null(want);
	strobe_buf b;
	strobe_buf_init(&b, 1 << 24);
	assert_int_equal(srv_range_json(&b, type, from, to, step, gb, res, ex), 0);
	if (strcmp(b.p, want) != 0)
		fail_msg("written:\n%s\njansson:\n%s", b.p, want);
	assert_int_equal(b.len, strlen(want));
	strobe_buf_free(&b);
	free(want);
}

static void test_like_jansson(void **state)
{
	(void)state;
	static const char *const vals[] = {"proc-000", "", "a\"b\\c/d", "tab\there\nnl\x01\x1f",
					   "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"};
	enum { NG = sizeof(vals) / sizeof(*vals), NS = 7 };
	int64_t v[NG][NS];
	strobe_range_group g[NG];
	const int64_t ext[] = {0, 1, -1, 9, 10, -10, 12820000000, INT64_MAX, INT64_MIN,
			       INT64_MIN + 1, 999999999999999999, -1000000000000000000};
	for (size_t i = 0; i < NG; i++) {
		for (size_t k = 0; k < NS; k++)
			v[i][k] = ext[(i * NS + k) % (sizeof(ext) / sizeof(*ext))];
		g[i] = (strobe_range_group){.value = (char *)vals[i], .values = v[i]};
	}
	strobe_range_result res = {.g = g, .n = NG, .nsteps = NS};
	const int64_t from = 1795586657123456789, step = 360000000000;
	same("process_cpu:cpu:nanoseconds:cpu:nanoseconds", from, from + NS * step, step,
	     "service_name", &res, NULL);
	same("process_cpu:cpu:nanoseconds:cpu:nanoseconds", from, from + NS * step, step, NULL,
	     &res, NULL);
	/* Before 1970 (negative milliseconds), steps under a millisecond. */
	same("t\"y", -5000000123, -4000000000, 1234567, "a\"b", &res, NULL);
	/* No steps; no groups. */
	strobe_range_result none = {.g = g, .n = NG, .nsteps = 0};
	same("x", 0, 1, 1, "service_name", &none, NULL);
	strobe_range_result empty = {0};
	same("x", 0, 1, 1, "service_name", &empty, NULL);
	/* Exemplars, as an object of whatever shape. */
	json_t *ex = json_pack("[{s:I, s:s, s:[s]}]", "t", (json_int_t)-3, "id", "\"q\"", "l",
			       "\xc3\xa9");
	same("x", from, from + NS * step, step, "service_name", &res, ex);
	json_decref(ex);
}

/* A group value that is not UTF-8: jansson could not make the string, so the group object was
 * left empty; the same here. A type that is not UTF-8 failed the whole dump: an error here. */
static void test_not_utf8(void **state)
{
	(void)state;
	int64_t v[2] = {5, -6};
	strobe_range_group g[2] = {{.value = "ok", .values = v}, {.value = "bad\xff", .values = v}};
	strobe_range_result res = {.g = g, .n = 2, .nsteps = 2};
	same("x", 0, 2000000, 1000000, "service_name", &res, NULL);
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	assert_null(reference("bad\xfe", 0, 2000000, 1000000, NULL, &res, NULL));
	assert_int_equal(srv_range_json(&b, "bad\xfe", 0, 2000000, 1000000, NULL, &res, NULL),
			 -EINVAL);
	strobe_buf_free(&b);
}

/* Past the buffer's cap: -E2BIG and the buffer emptied, never a truncated body. */
static void test_cap(void **state)
{
	(void)state;
	enum { NS = 1000 };
	int64_t *v = calloc(NS, sizeof(*v));
	assert_non_null(v);
	strobe_range_group g = {.value = "a", .values = v};
	strobe_range_result res = {.g = &g, .n = 1, .nsteps = NS};
	strobe_buf b;
	strobe_buf_init(&b, 4096);
	assert_int_equal(srv_range_json(&b, "x", 0, NS * 1000000000LL, 1000000000, NULL, &res, NULL),
			 -E2BIG);
	assert_int_equal(b.len, 0);
	strobe_buf_free(&b);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_like_jansson),
		cmocka_unit_test(test_not_utf8),
		cmocka_unit_test(test_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
