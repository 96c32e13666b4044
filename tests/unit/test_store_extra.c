// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the store's listing and housekeeping beyond ingest and query (test_store.c):
 * the series listing (several selectors, time bounds, tenant isolation, the listing cap), the
 * average aggregation of Pyroscope pushes and the schema migration it needed, symbol garbage
 * collection after retention, the query cost caps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "strobe/codec.h"
#include "strobe/server.h"

#define NOW (1795000000LL * STROBE_NS_PER_S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

#define UNIT_TMPDIR_NAME "store-extra"
#include "unit_tmpdir.h"
#include "store_fixture.h"

static strobe_store *open_capped(int64_t retention, uint64_t max_points, uint64_t max_bytes)
{
	strobe_store_opts o = {.dir = dir, .retention_ns = retention,
			       .max_query_points = max_points, .max_query_bytes = max_bytes};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	if (!s)
		fail_msg("open: %s", err.msg);
	return s;
}

static void push2(strobe_store *s, const char *tenant, const char *svc, const char *env,
		  const char *text, int64_t t)
{
	strobe_labelpair l[] = {{"env", env}, {"service_name", svc}};
	strobe_profile *p = fixture_cpu(text);
	strobe_push_item it = {.profile = p, .time_ns = t};
	strobe_push_req rq = {tenant, l, env ? 2 : 0, &it, 1, NOW};
	if (!env) {
		rq.labels = &l[1];
		rq.nlabels = 1;
	}
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
	strobe_profile_free(p);
}

static void sel(const char *text, strobe_selector *out)
{
	strobe_err err = {{0}};
	if (strobe_selector_parse(text, strlen(text), out, &err) < 0)
		fail_msg("%s: %s", text, err.msg);
}

/* "type|name=value,name=value" of entry i. */
static const char *show(const strobe_series_list *l, size_t i)
{
	static char buf[512];
	const strobe_series_info *e = &l->v[i];
	size_t o = (size_t)snprintf(buf, sizeof(buf), "%s|", e->type);
	for (size_t k = 0; k < e->nlabels && o < sizeof(buf); k++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s=%s", k ? "," : "",
				      e->labels[k].name, e->labels[k].value);
	return buf;
}

static void test_series_listing(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	push2(s, "a", "api", "prod", "x;y 3\n", NOW - 100 * STROBE_NS_PER_S);
	push2(s, "a", "web", NULL, "x;z 5\n", NOW - 10 * STROBE_NS_PER_S);
	push2(s, "b", "secret", "prod", "x 1\n", NOW - 10 * STROBE_NS_PER_S);
	strobe_selector ss[2];
	strobe_series_list l;
	strobe_err err = {{0}};

	/* No selector: all of tenant a, sorted; none of tenant b. */
	assert_int_equal(strobe_store_series(s, "a", NULL, 0, 0, NOW, 0, &l, &err), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(show(&l, 0), CPU "|env=prod,service_name=api");
	assert_string_equal(show(&l, 1), CPU "|service_name=web");
	strobe_series_list_free(&l);

	/* Two selectors are a union, each series once. */
	sel("{env=\"prod\"}", &ss[0]);
	sel(CPU "{service_name=~\"api|web\"}", &ss[1]);
	assert_int_equal(strobe_store_series(s, "a", ss, 2, 0, NOW, 0, &l, &err), 0);
	assert_int_equal(l.n, 2);
	strobe_series_list_free(&l);
	assert_int_equal(strobe_store_series(s, "a", ss, 1, 0, NOW, 0, &l, &err), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(show(&l, 0), CPU "|env=prod,service_name=api");
	strobe_series_list_free(&l);

	/* Time bounds: only web has a point in the last minute. */
	assert_int_equal(strobe_store_series(s, "a", NULL, 0, NOW - 60 * STROBE_NS_PER_S, NOW, 0,
					     &l, &err),
			 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(show(&l, 0), CPU "|service_name=web");
	strobe_series_list_free(&l);

	/* Tenant b sees only its own series, even with a selector that matches a's. */
	assert_int_equal(strobe_store_series(s, "b", ss, 2, 0, NOW, 0, &l, &err), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(show(&l, 0), CPU "|env=prod,service_name=secret");
	strobe_series_list_free(&l);

	/* The cap is an error naming the limit, not a silent truncation. */
	assert_int_equal(strobe_store_series(s, "a", NULL, 0, 0, NOW, 1, &l, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "max_series_listed"));
	assert_int_equal(l.n, 0);
	strobe_selector_free(&ss[0]);
	strobe_selector_free(&ss[1]);
	strobe_store_close(s);
}

static int64_t total(strobe_store *s, const char *tenant, const char *text, int64_t from,
		     int64_t to)
{
	strobe_selector se;
	sel(text, &se);
	strobe_query q = {tenant, &se, from, to};
	strobe_profile *p;
	strobe_err err = {{0}};
	if (strobe_store_query(s, &q, &p, &err) < 0)
		fail_msg("query: %s", err.msg);
	int64_t t = strobe_total(p, 0);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	return t;
}

static void push_avg(strobe_store *s, const char *svc, const char *text, int64_t t, bool avg)
{
	strobe_labelpair l[] = {{"service_name", svc}};
	strobe_profile *p = fixture_cpu(text);
	strobe_push_item it = {.profile = p, .time_ns = t, .average = avg};
	strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
	strobe_profile_free(p);
}

/* aggregationType=average: a series made by an averaged push merges over time by mean, like a
 * gauge, across roll-ups and a reopen; a counter series of the same type still sums. */
static void test_average_aggregation(void **state)
{
	(void)state;
	const int64_t S = STROBE_NS_PER_S;
	strobe_store *s = fixture_store(0);
	push_avg(s, "avg", "a;b 100\n", NOW - 200 * S, true);
	push_avg(s, "avg", "a;b 300\na;c 60\n", NOW - 100 * S, false); /* keeps average */
	push_avg(s, "sum", "a;b 100\n", NOW - 200 * S, false);
	push_avg(s, "sum", "a;b 300\na;c 60\n", NOW - 100 * S, false);
	assert_int_equal(total(s, "t", CPU "{service_name=\"avg\"}", 0, NOW), 230);
	assert_int_equal(total(s, "t", CPU "{service_name=\"sum\"}", 0, NOW), 460);
	assert_int_equal(total(s, "t", CPU, 0, NOW), 690);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW + 7200 * S, &err) > 0);
	assert_int_equal(total(s, "t", CPU "{service_name=\"avg\"}", 0, NOW), 230);
	strobe_store_close(s);
	s = fixture_store(0);
	assert_int_equal(total(s, "t", CPU "{service_name=\"avg\"}", 0, NOW), 230);
	assert_int_equal(total(s, "t", CPU "{service_name=\"sum\"}", 0, NOW), 460);
	strobe_store_close(s);
}

/* A database made before the series table had its `average` column opens and gains it. */
static void test_migrate_old_schema(void **state)
{
	(void)state;
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TABLE series(id INTEGER PRIMARY KEY, tenant TEXT NOT "
				      "NULL, type TEXT NOT NULL, labels BLOB NOT NULL, period INT);",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	strobe_store *s = fixture_store(0);
	push_avg(s, "avg", "a;b 100\n", NOW - 200 * STROBE_NS_PER_S, true);
	push_avg(s, "avg", "a;b 300\n", NOW - 100 * STROBE_NS_PER_S, true);
	assert_int_equal(total(s, "t", CPU, 0, NOW), 200);
	strobe_store_close(s);
}

static char *folded_of(strobe_store *s, const char *text, int64_t from, int64_t to)
{
	strobe_selector se;
	sel(text, &se);
	strobe_query q = {"t", &se, from, to};
	strobe_profile *p;
	strobe_err err = {{0}};
	if (strobe_store_query(s, &q, &p, &err) < 0)
		fail_msg("query: %s", err.msg);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_folded_write(f, p, 0, STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	return buf;
}

/* Retention deletes the old points; symbol gc then deletes the stacks, frames and strings only
 * they used, and what remains reads back the same, before and after a reopen. */
static void test_symbol_gc(void **state)
{
	(void)state;
	const int64_t H = 3600 * STROBE_NS_PER_S;
	strobe_store *s = fixture_store(2 * H);
	/* Old: 3 stacks only it has (old_a, old_b, old_c under main), one shared with new. */
	push_avg(s, "old", "main;old_a;old_deep 5\nmain;old_b 6\nmain;shared 1\n", NOW - H - 60 * STROBE_NS_PER_S, false);
	push_avg(s, "new", "main;shared 7\nmain;new_x;new_y 8\n", NOW - 10 * STROBE_NS_PER_S, false);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) >= 0); /* roll-ups reference stacks too */
	char *before = folded_of(s, CPU "{service_name=\"new\"}", 0, NOW);
	strobe_store_stats a, b;
	strobe_store_stats_get(s, &a);
	assert_int_equal(a.functions, 7);
	/* Nothing to collect while every point is there. */
	assert_int_equal(strobe_store_gc(s, NOW, &err), 0);
	/* 1h later the old profile is past retention: retain deletes it, then gc runs. */
	assert_true(strobe_store_retain(s, NOW + H, &err) > 0);
	strobe_store_stats_get(s, &b);
	/* Left: main, shared, new_x, new_y. */
	assert_int_equal(b.functions, 4);
	assert_int_equal(b.locations, 4);
	assert_int_equal(b.stacks, 4); /* main, main;shared, main;new_x, main;new_x;new_y */
	assert_true(b.strings < a.strings);
	char *after = folded_of(s, CPU "{service_name=\"new\"}", 0, NOW);
	assert_string_equal(after, before);
	assert_string_equal(after, "main;new_x;new_y 8\nmain;shared 7\n");
	free(after);
	/* Roll-ups and raw points agree after the rewrite. */
	strobe_store_use_rollups(s, false);
	after = folded_of(s, CPU "{service_name=\"new\"}", 0, NOW);
	assert_string_equal(after, before);
	free(after);
	strobe_store_close(s);
	/* The rewritten tables load (ids dense and consistent) and read the same. */
	s = fixture_store(2 * H);
	after = folded_of(s, CPU "{service_name=\"new\"}", 0, NOW);
	assert_string_equal(after, before);
	free(after);
	/* New pushes after a gc add their symbols as usual. */
	push_avg(s, "new", "main;old_a 2\n", NOW - 5 * STROBE_NS_PER_S, false);
	after = folded_of(s, CPU "{service_name=\"new\"}", 0, NOW);
	assert_string_equal(after, "main;new_x;new_y 8\nmain;old_a 2\nmain;shared 7\n");
	free(after);
	free(before);
	strobe_store_close(s);
}

static int query_rc(strobe_store *s, int64_t from, int64_t to, strobe_err *err)
{
	strobe_selector se;
	sel(CPU, &se);
	strobe_query q = {"t", &se, from, to};
	strobe_profile *p = NULL;
	int r = strobe_store_query(s, &q, &p, err);
	if (r == 0)
		assert_int_equal(strobe_total(p, 0), 8 * 5);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	return r;
}

/* A query may read at most max_query_points rows and max_query_bytes bytes; roll-ups that cover
 * the window make the same query cheap enough. */
static void test_query_caps(void **state)
{
	(void)state;
	const int64_t M = 60 * STROBE_NS_PER_S, H = 60 * M;
	const int64_t hour = (NOW / H - 2) * H; /* a whole, closed hour */
	strobe_store *s = open_capped(0, 4, 0);
	for (int i = 0; i < 8; i++)
		push_avg(s, "api", "a;b 5\n", hour + i * 7 * M, false);
	strobe_err err = {{0}};
	assert_int_equal(query_rc(s, hour, hour + H, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "limit max_query_profiles"));
	/* A range with a function decodes the profiles, through the same caps; one without sums
	 * the per-point totals, 16 rows of which count as one profile. */
	strobe_selector se;
	sel(CPU, &se);
	strobe_query q = {"t", &se, hour, hour + H};
	strobe_range_result rr;
	assert_int_equal(strobe_store_range(s, &q, 10 * M, NULL, "b", &rr, &err), -EDQUOT);
	assert_int_equal(strobe_store_range(s, &q, 10 * M, NULL, NULL, &rr, &err), 0);
	strobe_range_result_free(&rr);
	strobe_selector_free(&se);
	/* After compaction the hour is one roll-up row. */
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	assert_int_equal(query_rc(s, hour, hour + H, &err), 0);
	/* Without roll-ups it is 8 rows again. */
	strobe_store_use_rollups(s, false);
	assert_int_equal(query_rc(s, hour, hour + H, &err), -EDQUOT);
	strobe_store_close(s);
	/* The byte cap: 8 tiny blobs are more than 20 bytes. */
	s = open_capped(0, 0, 20);
	strobe_store_use_rollups(s, false);
	err.msg[0] = 0;
	assert_int_equal(query_rc(s, hour, hour + H, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "limit max_query_bytes"));
	strobe_store_close(s);
	s = open_capped(0, 8, 0); /* exactly the rows there are: fine */
	strobe_store_use_rollups(s, false);
	assert_int_equal(query_rc(s, hour, hour + H, &err), 0);
	strobe_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_series_listing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_average_aggregation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migrate_old_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbol_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query_caps, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
