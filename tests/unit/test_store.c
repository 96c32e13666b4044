// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the embedded store: ingest and query with deduplication (the same profile twice
 * adds no stack and doubles totals), persistence across reopen, profile type naming, gauge
 * averaging, atomic rejection, retention that deletes, roll-ups that give the same totals as raw
 * points, per-step ranges, and tenant isolation.
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

#include "fixtures.h"

#include "strobe/codec.h"
#include "strobe/server.h"

#define NOW (1795000000LL * STROBE_NS_PER_S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

#define UNIT_TMPDIR_NAME "store"
#include "unit_tmpdir.h"

static strobe_store *open_store(int64_t retention, uint32_t max_series)
{
	strobe_store_opts o = {.dir = dir, .retention_ns = retention, .max_series = max_series};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	if (!s)
		fail_msg("open: %s", err.msg);
	return s;
}

/* A folded profile whose one type is renamed (e.g. cpu/nanoseconds with period cpu). */
static strobe_profile *mk(const char *text, const char *type, const char *unit)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0)
		fail_msg("%s", err.msg);
	p->types[0].type = strobe_str_intern0(p, type);
	p->types[0].unit = strobe_str_intern0(p, unit);
	p->period_type.type = strobe_str_intern0(p, strcmp(type, "cpu") ? "space" : "cpu");
	p->period_type.unit = strobe_str_intern0(p, strcmp(type, "cpu") ? "bytes" : "nanoseconds");
	return p;
}

static int push(strobe_store *s, const char *tenant, const char *svc, strobe_profile *p,
		int64_t t, strobe_err *err)
{
	strobe_labelpair l[] = {{"service_name", svc}};
	strobe_push_item it = {.profile = p, .time_ns = t};
	strobe_push_req rq = {tenant, l, 1, &it, 1, NOW};
	strobe_push_result res;
	int r = strobe_store_push(s, &rq, &res, err);
	if (r == 0)
		strobe_push_result_free(&res);
	return r;
}

static int64_t total(strobe_store *s, const char *tenant, const char *sel, int64_t from,
		     int64_t to)
{
	strobe_selector se;
	strobe_err err = {{0}};
	if (strobe_selector_parse(sel, strlen(sel), &se, &err) < 0)
		fail_msg("%s", err.msg);
	strobe_query q = {tenant, &se, from, to};
	strobe_profile *p;
	if (strobe_store_query(s, &q, &p, &err) < 0)
		fail_msg("query: %s", err.msg);
	int64_t t = strobe_total(p, 0);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	return t;
}

static void test_ingest_dedup_and_reopen(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 0);
	strobe_profile *p = mk("main;work;hash 60\nmain;work;sort 30\nmain;idle 10\n", "cpu",
			       "nanoseconds");
	strobe_err err = {{0}};
	assert_int_equal(push(s, "t", "api", p, NOW - 10, &err), 0);
	strobe_store_stats a, b;
	assert_int_equal(strobe_store_stats_get(s, &a), 0);
	assert_int_equal(a.stacks, 5); /* main, main;work, ..;hash, ..;sort, main;idle */
	assert_int_equal(a.functions, 5);
	assert_int_equal(a.points, 1);
	assert_int_equal(push(s, "t", "api", p, NOW - 5, &err), 0);
	assert_int_equal(strobe_store_stats_get(s, &b), 0);
	assert_int_equal(b.stacks, a.stacks);
	assert_int_equal(b.strings, a.strings);
	assert_int_equal(b.points, 2);
	assert_int_equal(b.series, 1);
	assert_int_equal(total(s, "t", CPU "{service_name=\"api\"}", NOW - 100, NOW), 200);
	assert_int_equal(total(s, "t", CPU "{service_name=\"api\"}", NOW - 7, NOW), 100);
	assert_int_equal(total(s, "t", CPU "{service_name=\"web\"}", NOW - 100, NOW), 0);
	assert_int_equal(total(s, "t", CPU "{service_name=~\"a.*\"}", NOW - 100, NOW), 200);
	assert_int_equal(total(s, "t", CPU "{service_name!=\"api\"}", NOW - 100, NOW), 0);
	strobe_store_close(s);
	/* Everything is back after reopening, and the dedup maps with it. */
	s = open_store(0, 0);
	assert_int_equal(total(s, "t", CPU "{service_name=\"api\"}", NOW - 100, NOW), 200);
	assert_int_equal(push(s, "t", "api", p, NOW - 1, &err), 0);
	assert_int_equal(strobe_store_stats_get(s, &b), 0);
	assert_int_equal(b.stacks, a.stacks);
	assert_int_equal(total(s, "t", CPU, NOW - 100, NOW), 300);
	/* The merged profile has the stacks: main;work;hash = 3 * 60. */
	strobe_selector se;
	strobe_selector_parse(CPU, strlen(CPU), &se, &err);
	strobe_query q = {"t", &se, NOW - 100, NOW};
	strobe_profile *out;
	assert_int_equal(strobe_store_query(s, &q, &out, &err), 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	strobe_folded_write(f, out, 0, STROBE_GRAN_FUNCTIONS);
	fclose(f);
	assert_string_equal(buf, "main;idle 30\nmain;work;hash 180\nmain;work;sort 90\n");
	free(buf);
	strobe_profile_free(out);
	strobe_selector_free(&se);
	strobe_profile_free(p);
	strobe_store_close(s);
}

static void test_types_and_gauges(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 0);
	strobe_err err = {{0}};
	strobe_profile *h1 = mk("main;alloc 100\n", "inuse_space", "bytes");
	strobe_profile *h2 = mk("main;alloc 300\n", "inuse_space", "bytes");
	char type[STROBE_TYPE_MAX];
	assert_int_equal(strobe_profile_type_names(h1, NULL, 0, type, &err), 0);
	assert_string_equal(type, "memory:inuse_space:bytes:space:bytes");
	assert_true(strobe_type_is_gauge(type));
	assert_false(strobe_type_is_gauge("memory:alloc_space:bytes:space:bytes"));
	assert_int_equal(push(s, "t", "api", h1, NOW - 20, &err), 0);
	assert_int_equal(push(s, "t", "api", h2, NOW - 10, &err), 0);
	assert_int_equal(push(s, "t", "web", h2, NOW - 10, &err), 0);
	/* Average per series (200 for api, 300 for web), summed across series. */
	const char *sel = "memory:inuse_space:bytes:space:bytes";
	assert_int_equal(total(s, "t", sel, NOW - 100, NOW), 500);
	/* A bad type name rejects the whole push: nothing is stored. */
	strobe_store_stats a, b;
	strobe_store_stats_get(s, &a);
	strobe_labelpair l[] = {{"service_name", "api"}};
	strobe_push_item it[2] = {{.profile = h1, .time_ns = NOW - 5},
				  {.profile = h1, .name = "bad:name", .time_ns = NOW - 5}};
	strobe_push_req rq = {"t", l, 1, it, 2, NOW};
	strobe_push_result res;
	assert_int_equal(strobe_store_push(s, &rq, &res, &err), -EINVAL);
	strobe_store_stats_get(s, &b);
	assert_int_equal(a.points, b.points);
	assert_int_equal(total(s, "t", sel, NOW - 100, NOW), 500);
	strobe_profile_free(h1);
	strobe_profile_free(h2);
	strobe_store_close(s);
}

static void test_tenants_and_limits(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 2);
	strobe_err err = {{0}};
	strobe_profile *p = mk("a;b 7\n", "cpu", "nanoseconds");
	assert_int_equal(push(s, "team-a", "api", p, NOW - 1, &err), 0);
	assert_int_equal(push(s, "team-b", "api", p, NOW - 1, &err), 0);
	assert_int_equal(total(s, "team-a", CPU, NOW - 10, NOW), 7);
	assert_int_equal(total(s, "team-c", CPU, NOW - 10, NOW), 0);
	strobe_selector none = {0};
	strobe_query q = {"team-b", &none, NOW - 10, NOW};
	char **v;
	size_t n;
	assert_int_equal(strobe_store_label_values(s, &q, "service_name", &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0], "api");
	strobe_strv_free(v, n);
	/* max_series per tenant: team-a may have 2 series. */
	assert_int_equal(push(s, "team-a", "web", p, NOW - 1, &err), 0);
	assert_int_equal(push(s, "team-a", "db", p, NOW - 1, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "max_series_per_tenant"));
	assert_int_equal(push(s, "team-b", "db", p, NOW - 1, &err), 0);
	assert_int_equal(total(s, "team-a", CPU, NOW - 10, NOW), 14);
	strobe_profile_free(p);
	strobe_store_close(s);
}

/* One push of service api with sample labels pid=PID, comm=COMM on its point. */
static int push_proc(strobe_store *s, const char *pid, const char *comm, strobe_profile *p,
		     int64_t t, strobe_err *err)
{
	strobe_labelpair l[] = {{"service_name", "api"}};
	strobe_labelpair sl[] = {{"comm", comm}, {"pid", pid}};
	strobe_push_item it = {.profile = p, .time_ns = t, .slabels = sl, .nslabels = 2};
	strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
	strobe_push_result res;
	int r = strobe_store_push(s, &rq, &res, err);
	if (r == 0)
		strobe_push_result_free(&res);
	return r;
}

/* Sample labels ride on the points: one series for three processes, a selector on pid or comm
 * keeps their points, raw and rolled up alike (roll-ups are kept per sample label set). */
static void test_sample_labels_on_points(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 0);
	strobe_err err = {{0}};
	strobe_profile *p = mk("main;a 3\n", "cpu", "nanoseconds");
	const int64_t start = NOW - 3 * 3600 * STROBE_NS_PER_S;
	int n = 0;
	for (int64_t t = start; t < NOW - 60 * STROBE_NS_PER_S; t += 60 * STROBE_NS_PER_S, n++) {
		assert_int_equal(push_proc(s, "1", "web", p, t, &err), 0);
		assert_int_equal(push_proc(s, "2", "web", p, t, &err), 0);
		assert_int_equal(push_proc(s, "3", "db", p, t, &err), 0);
	}
	strobe_store_stats st;
	strobe_store_stats_get(s, &st);
	assert_int_equal(st.series, 1);
	for (int pass = 0; pass < 2; pass++) { /* raw, then rolled up */
		assert_int_equal(total(s, "t", CPU, start - 1, NOW), 9 * n);
		assert_int_equal(total(s, "t", CPU "{pid=\"2\"}", start - 1, NOW), 3 * n);
		assert_int_equal(total(s, "t", CPU "{comm=\"web\"}", start - 1, NOW), 6 * n);
		assert_int_equal(total(s, "t", CPU "{comm=\"web\",pid!=\"1\"}", start - 1, NOW),
				 3 * n);
		assert_int_equal(total(s, "t", CPU "{pid=~\"[13]\"}", start - 1, NOW), 6 * n);
		assert_int_equal(total(s, "t", CPU "{pid=\"4\"}", start - 1, NOW), 0);
		if (pass == 0) {
			assert_true(strobe_store_compact(s, NOW, &err) > 0);
			strobe_store_stats_get(s, &st);
			assert_true(st.rollups > 0);
		}
	}
	strobe_profile_free(p);
	strobe_store_close(s);
}

/* max_label_values: a series whose label value would be one too many is refused, known values
 * and other names go on, and nothing of the refused push is stored. */
static void test_label_values_cap(void **state)
{
	(void)state;
	strobe_store_opts o = {.dir = dir, .max_label_values = 2};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	assert_non_null(s);
	strobe_profile *p = mk("a;b 7\n", "cpu", "nanoseconds");
	assert_int_equal(push(s, "t", "api", p, NOW - 1, &err), 0);
	assert_int_equal(push(s, "t", "web", p, NOW - 1, &err), 0);
	assert_int_equal(push(s, "t", "db", p, NOW - 1, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "limit max_label_values_per_name: label service_name has "
					"2 values in tenant 't'"));
	assert_int_equal(push(s, "t", "api", p, NOW - 2, &err), 0);
	assert_int_equal(push(s, "u", "db", p, NOW - 1, &err), 0); /* per tenant */
	assert_int_equal(total(s, "t", CPU, NOW - 10, NOW), 21);
	assert_int_equal(total(s, "t", CPU "{service_name=\"db\"}", NOW - 10, NOW), 0);
	strobe_profile_free(p);
	strobe_store_close(s);
}

/* A point whose sample labels are damaged on disk is an error, not a silent match. */
static void test_sample_labels_corrupt(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 0);
	strobe_err err = {{0}};
	strobe_profile *p = mk("a;b 7\n", "cpu", "nanoseconds");
	assert_int_equal(push_proc(s, "1", "web", p, NOW - 1, &err), 0);
	strobe_store_close(s);
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE points SET slabels=X'706964'", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	s = open_store(0, 0);
	assert_int_equal(total(s, "t", CPU, NOW - 10, NOW), 7); /* no filter: not read */
	strobe_selector se;
	assert_int_equal(strobe_selector_parse(CPU "{pid=\"1\"}", strlen(CPU) + 9, &se, &err), 0);
	strobe_query q = {"t", &se, NOW - 10, NOW};
	strobe_profile *out;
	assert_int_equal(strobe_store_query(s, &q, &out, &err), -EIO);
	assert_non_null(strstr(err.msg, "sample labels"));
	strobe_selector_free(&se);
	strobe_profile_free(p);
	strobe_store_close(s);
}

static void test_retention(void **state)
{
	(void)state;
	const int64_t H = 3600 * STROBE_NS_PER_S;
	strobe_store *s = open_store(H, 0);
	strobe_err err = {{0}};
	strobe_profile *p = mk("a;b 7\n", "cpu", "nanoseconds");
	assert_int_equal(push(s, "t", "old", p, NOW - 2 * H, &err), -EDQUOT);
	assert_int_equal(push(s, "t", "old", p, NOW - H / 2, &err), 0);
	assert_int_equal(push(s, "t", "new", p, NOW - 1, &err), 0);
	assert_int_equal(strobe_store_compact(s, NOW, &err) >= 0, 1);
	assert_true(strobe_store_retain(s, NOW, &err) >= 0); /* the straddling hour roll-up */
	assert_int_equal(total(s, "t", CPU, NOW - H, NOW), 14);
	/* 40 minutes later the first point (and its 1-minute roll-up) is past retention. */
	assert_true(strobe_store_retain(s, NOW + 40 * 60 * STROBE_NS_PER_S, &err) >= 1);
	assert_int_equal(total(s, "t", CPU, NOW - H, NOW), 7);
	strobe_store_use_rollups(s, false);
	assert_int_equal(total(s, "t", CPU, NOW - H, NOW), 7);
	strobe_selector none = {0};
	strobe_query q = {"t", &none, 0, NOW + H};
	char **v;
	size_t n;
	assert_int_equal(strobe_store_label_values(s, &q, "service_name", &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0], "new");
	strobe_strv_free(v, n);
	strobe_store_stats st;
	strobe_store_stats_get(s, &st);
	assert_int_equal(st.series, 1);
	strobe_profile_free(p);
	strobe_store_close(s);
}

static void test_rollups_match_raw(void **state)
{
	(void)state;
	strobe_store *s = open_store(0, 0);
	strobe_err err = {{0}};
	strobe_profile *c = mk("main;a 3\nmain;b 5\n", "cpu", "nanoseconds");
	strobe_profile *g1 = mk("main;x 100\n", "inuse_space", "bytes");
	strobe_profile *g2 = mk("main;x 301\nmain;y 7\n", "inuse_space", "bytes");
	const int64_t start = NOW - 3 * 3600 * STROBE_NS_PER_S - 17 * STROBE_NS_PER_S;
	int i = 0;
	for (int64_t t = start; t < NOW - 60 * STROBE_NS_PER_S; t += 50 * STROBE_NS_PER_S, i++) {
		assert_int_equal(push(s, "t", "api", c, t, &err), 0);
		assert_int_equal(push(s, "t", "api", i % 3 ? g1 : g2, t, &err), 0);
	}
	const char *gs = "memory:inuse_space:bytes:space:bytes";
	static const int64_t win[][2] = {{0, 0}, {3600, 0}, {5400, 1800}, {600, 300}, {7300, 10}};
	int64_t raw[5][2];
	strobe_store_use_rollups(s, false);
	for (int k = 0; k < 5; k++) {
		int64_t from = k ? NOW - win[k][0] * STROBE_NS_PER_S : start - 1;
		int64_t to = NOW - win[k][1] * STROBE_NS_PER_S;
		raw[k][0] = total(s, "t", CPU, from, to);
		raw[k][1] = total(s, "t", gs, from, to);
	}
	assert_true(raw[0][0] == (int64_t)i * 8);
	strobe_store_use_rollups(s, true);
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	/* A late point into an already compacted bucket is read beside the roll-up. */
	assert_int_equal(push(s, "t", "api", c, start + 125 * STROBE_NS_PER_S, &err), 0);
	raw[0][0] += 8;
	strobe_store_stats st;
	strobe_store_stats_get(s, &st);
	assert_true(st.rollups > 0);
	for (int k = 0; k < 5; k++) {
		int64_t from = k ? NOW - win[k][0] * STROBE_NS_PER_S : start - 1;
		int64_t to = NOW - win[k][1] * STROBE_NS_PER_S;
		if (k == 0) {
			strobe_store_use_rollups(s, false);
			assert_true(total(s, "t", CPU, from, to) == raw[0][0]);
			strobe_store_use_rollups(s, true);
		}
		if (total(s, "t", CPU, from, to) != raw[k][0] || total(s, "t", gs, from, to) != raw[k][1])
			fail_msg("window %d: rollups %lld/%lld, raw %lld/%lld", k,
				 (long long)total(s, "t", CPU, from, to),
				 (long long)total(s, "t", gs, from, to), (long long)raw[k][0],
				 (long long)raw[k][1]);
	}
	/* Compacting again (the late point) keeps the totals. */
	assert_true(strobe_store_compact(s, NOW, &err) >= 1);
	assert_true(total(s, "t", CPU, start - 1, NOW) == raw[0][0]);
	assert_true(total(s, "t", gs, start - 1, NOW) == raw[0][1]);

	/* Ranges: per-hour totals add up to the whole; the function filter counts stacks with
	 * it. */
	strobe_selector se;
	strobe_selector_parse(CPU, strlen(CPU), &se, &err);
	strobe_query q = {"t", &se, start - 1, NOW};
	strobe_range_result rr;
	assert_int_equal(strobe_store_range(s, &q, 3600 * STROBE_NS_PER_S, "service_name", "b", &rr,
					    &err),
			 0);
	assert_int_equal(rr.n, 1);
	assert_string_equal(rr.g[0].value, "api");
	int64_t sum = 0;
	for (size_t k = 0; k < rr.nsteps; k++)
		sum += rr.g[0].values[k];
	assert_true(sum * 8 == raw[0][0] * 5);
	strobe_range_result_free(&rr);
	strobe_selector_free(&se);
	strobe_profile_free(c);
	strobe_profile_free(g1);
	strobe_profile_free(g2);
	strobe_store_close(s);
}

static void test_go_cpu(void **state)
{
	(void)state;
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_read_profile(go_fixture("go_cpu.pb.gz"), &p, &err) < 0)
		SKIP_CASE(err.msg);
	strobe_store *s = open_store(0, 0);
	assert_int_equal(push(s, "t", "api", p, NOW - 1, &err), 0);
	strobe_store_stats a, b;
	strobe_store_stats_get(s, &a);
	assert_int_equal(push(s, "t", "api", p, NOW - 1, &err), 0);
	strobe_store_stats_get(s, &b);
	assert_int_equal(a.stacks, b.stacks);
	assert_int_equal(a.locations, b.locations);
	assert_int_equal(b.points, 4); /* two pushes x (samples, cpu) */
	int ci = strobe_type_index(p, "cpu"), si = strobe_type_index(p, "samples");
	assert_true(total(s, "t", CPU, NOW - 10, NOW) == 2 * strobe_total(p, ci));
	assert_true(total(s, "t", "process_cpu:samples:count:cpu:nanoseconds", NOW - 10, NOW) ==
		    2 * strobe_total(p, si));
	strobe_profile_free(p);
	strobe_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ingest_dedup_and_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_types_and_gauges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tenants_and_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_labels_on_points, setup, teardown),
		cmocka_unit_test_setup_teardown(test_label_values_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_labels_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollups_match_raw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_go_cpu, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
