// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the span index (store/spans.c): a query by span_id or trace_id through the index
 * gives exactly what the scan gives (equality, alternations, IDs asked twice, a span in two
 * series, gauges averaged, a selector that also names another sample label), before and after
 * compaction (roll-ups are never read for a span, nor counted twice) and symbol gc; retention
 * deletes the index rows with the points; the profile of one stored point by its id, and the
 * exemplars of a range, heaviest first, with their span IDs.
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
#include <sqlite3.h>

#include "strobe/codec.h"
#include "strobe/server.h"

#define S STROBE_NS_PER_S
#define NOW (1795000000LL * S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

#define UNIT_TMPDIR_NAME "spans"
#include "unit_tmpdir.h"
#include "store_fixture.h"

static void push(strobe_store *s, const char *svc, const char *text, int64_t t, const char *span,
		 const char *trace)
{
	strobe_profile *p = fixture_cpu(text);
	strobe_labelpair l[] = {{"service_name", svc}};
	strobe_labelpair sl[3];
	size_t n = 0;
	sl[n++] = (strobe_labelpair){"pid", "7"};
	if (span)
		sl[n++] = (strobe_labelpair){"span_id", span};
	if (trace)
		sl[n++] = (strobe_labelpair){"trace_id", trace};
	strobe_push_item it = {.profile = p, .time_ns = t, .slabels = sl, .nslabels = n};
	strobe_push_req rq = {.tenant = "t", .labels = l, .nlabels = 1, .items = &it, .nitems = 1,
			      .now_ns = NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
	strobe_profile_free(p);
}

/* The total of sel over [from, to), through the index and by the scan: equal, or the test
 * fails. */
static int64_t both(strobe_store *s, const char *sel, int64_t from, int64_t to)
{
	strobe_err err = {{0}};
	strobe_selector se;
	if (strobe_selector_parse(sel, strlen(sel), &se, &err) < 0)
		fail_msg("%s", err.msg);
	strobe_query q = {.tenant = "t", .sel = &se, .from_ns = from, .to_ns = to};
	int64_t v[2];
	for (int k = 0; k < 2; k++) {
		strobe_store_use_span_index(s, k == 0);
		strobe_profile *p = NULL;
		if (strobe_store_query(s, &q, &p, &err) < 0)
			fail_msg("query %s: %s", sel, err.msg);
		v[k] = strobe_total(p, 0);
		strobe_profile_free(p);
	}
	strobe_store_use_span_index(s, true);
	strobe_selector_free(&se);
	if (v[0] != v[1])
		fail_msg("%s: index %lld, scan %lld", sel, (long long)v[0], (long long)v[1]);
	return v[0];
}

static int64_t index_rows(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t n = -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM span_index", -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return n;
}

#define A "aaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbb"
#define TR "0123456789abcdef0123456789abcdef"

static void test_index_equals_scan(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	int64_t t0 = NOW - 3 * 3600 * S;
	for (int i = 0; i < 120; i++) { /* 2 hours, a point a minute; A every 7th, B every 11th */
		const char *span = i % 7 == 0 ? A : i % 11 == 0 ? B : NULL;
		push(s, i % 2 ? "api" : "web", i % 3 ? "main;a 10\nmain;b 5\n" : "main;c 3\n",
		     t0 + i * 60 * S + 5 * S, span, span ? TR : NULL);
	}
	int64_t all = NOW - 4 * 3600 * S, end = NOW;
	int64_t a = both(s, CPU "{span_id=\"" A "\"}", all, end);
	int64_t b = both(s, CPU "{span_id=\"" B "\"}", all, end);
	assert_true(a > 0 && b > 0);
	assert_int_equal(both(s, CPU "{span_id=~\"(" A "|" B ")\"}", all, end), a + b);
	assert_int_equal(both(s, CPU "{span_id=~\"" A "|" B "|" A "\"}", all, end), a + b);
	assert_int_equal(both(s, CPU "{trace_id=\"" TR "\"}", all, end), a + b);
	assert_int_equal(both(s, CPU "{service_name=\"api\",span_id=\"" A "\",pid=\"7\"}", all, end) +
				 both(s, CPU "{service_name=\"web\",span_id=\"" A "\"}", all, end),
			 a);
	assert_int_equal(both(s, CPU "{span_id=\"" A "\",pid=\"8\"}", all, end), 0);
	assert_int_equal(both(s, CPU "{span_id=\"nosuchspan\"}", all, end), 0);
	/* a window that cuts: only the points inside */
	int64_t half = both(s, CPU "{span_id=\"" A "\"}", t0, t0 + 3600 * S);
	assert_true(half > 0 && half < a);
	/* compaction makes roll-ups: the index still reads the raw points, once each */
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) >= 0);
	assert_int_equal(both(s, CPU "{span_id=\"" A "\"}", all, end), a);
	assert_int_equal(both(s, CPU "{span_id=\"" A "\"}", t0, t0 + 3600 * S), half);
	assert_true(strobe_store_gc(s, NOW, &err) >= 0);
	assert_int_equal(both(s, CPU "{trace_id=\"" TR "\"}", all, end), a + b);
	strobe_store_close(s);
	/* reopened: the same */
	s = fixture_store(0);
	assert_int_equal(both(s, CPU "{span_id=\"" B "\"}", all, end), b);
	strobe_store_close(s);
}

static void test_retention(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(3600 * S);
	push(s, "api", "main;a 10\n", NOW - 30 * 60 * S, A, TR);
	push(s, "api", "main;a 20\n", NOW - 60 * S, A, NULL);
	assert_int_equal(index_rows(), 3);
	strobe_err err = {{0}};
	/* 40 minutes later, the first point is past the hour's retention */
	assert_true(strobe_store_retain(s, NOW + 40 * 60 * S, &err) >= 0);
	assert_int_equal(index_rows(), 1);
	assert_int_equal(both(s, CPU "{span_id=\"" A "\"}", NOW - 3 * 3600 * S, NOW), 20);
	strobe_store_close(s);
}

static void test_exemplars_and_by_id(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	int64_t t = NOW - 600 * S;
	push(s, "api", "main;a 10\n", t, A, NULL);
	push(s, "api", "main;b 30\n", t + S, B, NULL);
	push(s, "api", "main;c 20\n", t + 2 * S, NULL, NULL);
	push(s, "api", "main;d 5\n", t + 90 * S, NULL, NULL);
	strobe_err err = {{0}};
	strobe_selector se;
	const char *sel = CPU "{service_name=\"api\"}";
	assert_int_equal(strobe_selector_parse(sel, strlen(sel), &se, &err), 0);
	strobe_query q = {.tenant = "t", .sel = &se, .from_ns = t, .to_ns = t + 120 * S};
	strobe_exemplars ex;
	assert_int_equal(strobe_store_exemplars(s, &q, 60 * S, 2, &ex, &err), 0);
	assert_int_equal(ex.nsteps, 2);
	assert_int_equal(ex.v[0].value, 30);
	assert_string_equal(ex.v[0].span_id, B);
	assert_int_equal(ex.v[1].value, 20);
	assert_string_equal(ex.v[1].span_id, "");
	assert_int_equal(ex.v[2].value, 5);
	assert_int_equal(ex.v[3].id, 0); /* an empty slot */
	strobe_profile *p = NULL;
	assert_int_equal(strobe_store_profile_by_id(s, &q, ex.v[0].id, &p, &err), 0);
	assert_int_equal(strobe_total(p, 0), 30);
	strobe_profile_free(p);
	/* another tenant's view of the same id: absent */
	strobe_query other = q;
	other.tenant = "u";
	assert_int_equal(strobe_store_profile_by_id(s, &other, ex.v[0].id, &p, &err), -ENOENT);
	assert_int_equal(strobe_store_profile_by_id(s, &q, 999999, &p, &err), -ENOENT);
	strobe_exemplars_free(&ex);
	assert_int_equal(strobe_store_exemplars(s, &q, 60 * S, 0, &ex, &err), -EINVAL);
	strobe_selector_free(&se);
	strobe_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_index_equals_scan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exemplars_and_by_id, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
