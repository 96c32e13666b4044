// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the per-point totals that ranges read instead of decoding profiles
 * (store/query.c range_totals): every window, step and grouping gives what decoding the
 * profiles gives (counters and gauges, aligned and unaligned windows, steps shorter than a
 * minute, of whole minutes and hours, a last step cut short), before and after compaction and
 * retention; a point exactly on a step boundary belongs to the step it starts; random
 * unaligned windows and steps against a brute-force sum over the pushed points (a cut minute is
 * split from its row's list of points, a minute too busy for a list or written before the lists
 * existed from its points' rows); and a store written before the totals, or before the minutes'
 * lists, existed gets them when it is opened.
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

#define S STROBE_NS_PER_S
#define NOW (1795000000LL * S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define GAUGE "memory:inuse_space:bytes:space:bytes"

#define UNIT_TMPDIR_NAME "totals"
#include "unit_tmpdir.h"
#include "store_fixture.h"

static void push(strobe_store *s, const char *svc, strobe_profile *p, int64_t t)
{
	strobe_labelpair l[] = {{"service_name", svc}};
	strobe_push_item it = {.profile = p, .time_ns = t};
	strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
}

/* The range of sel over [from, to) by step, grouped or not, through the totals and by decoding
 * every profile: the two must be equal, group by group and step by step. Returns the sum of
 * every value, for the callers' own checks. */
static int64_t same_range(strobe_store *s, const char *sel, int64_t from, int64_t to, int64_t step,
			  const char *group)
{
	return fixture_same_range(s, strobe_store_use_totals, "t", sel, from, to, step, group);
}

/* Windows and steps chosen to hit every case of the plan: steps under a minute, of whole
 * minutes (aligned or not), of an hour and more, one that does not divide the window (the last
 * step cut short, down to a few seconds), and windows past the data's ends. */
static void check_all(strobe_store *s, int64_t start, int64_t end)
{
	static const int64_t steps[] = {1, 10, 45, 60, 61, 360, 600, 3599, 3600, 5400, 7200, 86400};
	static const int64_t off[][2] = {{0, 0}, {-1, 1}, {17, -23}, {3600, -3600}, {-600, 600},
					 {120, -7}};
	for (size_t w = 0; w < sizeof(off) / sizeof(*off); w++)
		for (size_t k = 0; k < sizeof(steps) / sizeof(*steps); k++) {
			int64_t from = start + off[w][0] * S, to = end + off[w][1] * S;
			if ((to - from) / (steps[k] * S) > 5000)
				continue;
			same_range(s, CPU, from, to, steps[k] * S, "service_name");
			same_range(s, CPU, from, to, steps[k] * S, NULL);
			same_range(s, GAUGE, from, to, steps[k] * S, "service_name");
		}
}

static void fill(strobe_store *s, int64_t start, int64_t end, strobe_profile *c1,
		 strobe_profile *c2, strobe_profile *g)
{
	int i = 0;
	for (int64_t t = start; t < end; t += 37 * S, i++) {
		push(s, i % 2 ? "api" : "db", i % 3 ? c1 : c2, t);
		push(s, "api", g, t + 3 * S);
		if (i % 11 == 0) /* two points of one series at one time */
			push(s, "api", c1, t);
	}
}

static void test_totals_match_decoding(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	strobe_profile *c1 = fixture_profile("main;a 3\nmain;b 5\n", "cpu", "nanoseconds");
	strobe_profile *c2 = fixture_profile("main;c 11\n", "cpu", "nanoseconds");
	strobe_profile *g = fixture_profile("main;x 101\nmain;y 7\n", "inuse_space", "bytes");
	const int64_t start = NOW - 3 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, c1, c2, g);
	check_all(s, start, end);
	/* Compaction leaves the totals as they are (roll-ups are another table's business). */
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	check_all(s, start, end);
	/* The whole window in one step is the sum of everything pushed. */
	int64_t all = same_range(s, CPU, start, end, 24 * 3600 * S, NULL);
	int n = 0, n2 = 0, dup = 0;
	for (int64_t t = start; t < end; t += 37 * S, n++) {
		n2 += n % 3 == 0;
		dup += n % 11 == 0;
	}
	assert_true(all == (int64_t)(n - n2) * 8 + (int64_t)n2 * 11 + (int64_t)dup * 8);
	strobe_profile_free(c1);
	strobe_profile_free(c2);
	strobe_profile_free(g);
	strobe_store_close(s);
}

static void test_step_boundaries(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	strobe_profile *c = fixture_profile("main;a 1\n", "cpu", "nanoseconds");
	/* A point exactly at each step's start, one just before it, and one at the window's end
	 * (outside: windows are [from, to)). Steps of 90 s from an unaligned start, so that some
	 * boundaries cut minutes and hours and others do not. */
	const int64_t from = NOW - 2 * 3600 * S - 30 * S, step = 90 * S;
	const int64_t to = from + 80 * step;
	for (int k = 0; k <= 80; k++) {
		push(s, "api", c, from + k * step);
		if (k % 2)
			push(s, "api", c, from + k * step - 1);
	}
	strobe_err err = {{0}};
	strobe_selector se;
	strobe_selector_parse(CPU, strlen(CPU), &se, &err);
	strobe_query q = {"t", &se, from, to};
	strobe_range_result rr;
	assert_int_equal(strobe_store_range(s, &q, step, NULL, NULL, &rr, &err), 0);
	assert_int_equal(rr.nsteps, 80);
	for (int k = 0; k < 80; k++) /* its start's point, and the one just before the next */
		assert_int_equal(rr.g[0].values[k], 1 + ((k + 1) % 2 ? 1 : 0));
	strobe_range_result_free(&rr);
	same_range(s, CPU, from, to, step, NULL);
	same_range(s, CPU, from, to, 60 * S, NULL);
	same_range(s, CPU, from, to, 3600 * S, NULL);
	strobe_selector_free(&se);
	strobe_profile_free(c);
	strobe_store_close(s);
}

static void test_retention(void **state)
{
	(void)state;
	/* A cutoff in the middle of a minute and of an hour: the buckets it cuts keep the totals
	 * of the points they keep. */
	strobe_store *s = fixture_store(3 * 3600 * S);
	strobe_profile *c1 = fixture_profile("main;a 3\nmain;b 5\n", "cpu", "nanoseconds");
	strobe_profile *c2 = fixture_profile("main;c 11\n", "cpu", "nanoseconds");
	strobe_profile *g = fixture_profile("main;x 101\nmain;y 7\n", "inuse_space", "bytes");
	const int64_t start = NOW - 3 * 3600 * S + 17 * S, end = NOW - 45 * S;
	fill(s, start, end, c1, c2, g);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	assert_true(strobe_store_retain(s, NOW + 2017 * S, &err) > 0);
	check_all(s, start, end);
	strobe_profile_free(c1);
	strobe_profile_free(c2);
	strobe_profile_free(g);
	strobe_store_close(s);
}

static void test_migration(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	strobe_profile *c1 = fixture_profile("main;a 3\nmain;b 5\n", "cpu", "nanoseconds");
	strobe_profile *c2 = fixture_profile("main;c 11\n", "cpu", "nanoseconds");
	strobe_profile *g = fixture_profile("main;x 101\nmain;y 7\n", "inuse_space", "bytes");
	const int64_t start = NOW - 3 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, c1, c2, g);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	strobe_store_close(s);
	/* A store as the server wrote it before the totals existed: no table. */
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP TABLE totals", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	s = fixture_store(0);
	check_all(s, start, end);
	/* and new pushes add to the computed totals */
	push(s, "api", c1, end + 5 * S);
	same_range(s, CPU, start, NOW, 600 * S, "service_name");
	strobe_store_close(s);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM totals WHERE level=0", -1,
					    &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_true(sqlite3_column_int64(st, 0) > 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	strobe_profile_free(c1);
	strobe_profile_free(c2);
	strobe_profile_free(g);
}

/* pid, comm... ride on the points: a series' totals sum every process's point, and a selector
 * on them reads the points instead (the totals cannot tell the processes apart). */
static void test_sample_labels(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	strobe_profile *c1 = fixture_profile("main;a 3\nmain;b 5\n", "cpu", "nanoseconds");
	strobe_profile *c2 = fixture_profile("main;c 11\n", "cpu", "nanoseconds");
	const int64_t start = NOW - 2 * 3600 * S - 17 * S, end = NOW - 45 * S;
	int n = 0;
	for (int64_t t = start; t < end; t += 37 * S, n++) {
		static const char *const pid[] = {"1", "2", "3"};
		for (int k = 0; k < 3; k++) {
			strobe_labelpair l[] = {{"service_name", "api"}};
			strobe_labelpair sl[] = {{"comm", k ? "web" : "db"}, {"pid", pid[k]}};
			strobe_push_item it = {.profile = k == 1 ? c2 : c1, .time_ns = t, .slabels = sl,
					       .nslabels = 2};
			strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
			strobe_push_result res;
			strobe_err err = {{0}};
			if (strobe_store_push(s, &rq, &res, &err) < 0)
				fail_msg("push: %s", err.msg);
			strobe_push_result_free(&res);
		}
	}
	static const int64_t steps[] = {10, 60, 360, 3600};
	for (size_t k = 0; k < sizeof(steps) / sizeof(*steps); k++) {
		assert_true(same_range(s, CPU, start, end, steps[k] * S, "service_name") ==
			    (int64_t)n * 27);
		assert_true(same_range(s, CPU "{pid=\"2\"}", start, end, steps[k] * S, NULL) ==
			    (int64_t)n * 11);
		assert_true(same_range(s, CPU "{comm=\"web\",pid!=\"3\"}", start + 7 * S, end,
				       steps[k] * S, NULL) <= (int64_t)n * 11);
		assert_true(same_range(s, CPU "{pid=~\"[13]\"}", start, end, steps[k] * S,
				       "service_name") == (int64_t)n * 16);
	}
	strobe_profile_free(c1);
	strobe_profile_free(c2);
	strobe_store_close(s);
}


/* ---- random windows against a brute-force sum ------------------------------------------------ */

typedef struct bf_point {
	int svc;
	int64_t t, total;
} bf_point;

static uint64_t bf_rng;
static uint64_t bf_rnd(void) /* xorshift64* */
{
	bf_rng ^= bf_rng >> 12;
	bf_rng ^= bf_rng << 25;
	bf_rng ^= bf_rng >> 27;
	return bf_rng * 2685821657736338717ull;
}

/* For random windows (edges anywhere, to the nanosecond) and steps (a nanosecond-odd second
 * up to two hours), each step's sum per service against the sum of the pushed points that fall
 * in it: an edge or cut minute counted twice or dropped shows as a difference. */
static void check_random(strobe_store *s, const bf_point *pt, size_t npt, int64_t start,
			 int64_t end, int nwin)
{
	static const char *const svc[] = {"api", "db"};
	for (int w = 0; w < nwin; w++) {
		int64_t from = start - 120 * S + (int64_t)(bf_rnd() % (uint64_t)(end - start));
		int64_t to = from + 1 + (int64_t)(bf_rnd() % (uint64_t)(end + 120 * S - from));
		static const int64_t base[] = {1, 7, 59, 60, 61, 90, 360, 600, 3600, 7200};
		int64_t step = base[bf_rnd() % 10] * S + (int64_t)(bf_rnd() % 3) * 999999999;
		if ((to - from) / step > 5000)
			step = (to - from) / 5000 + 1;
		size_t nsteps = (size_t)((to - from + step - 1) / step);
		int64_t *want = calloc(2 * nsteps, sizeof(*want));
		assert_non_null(want);
		for (size_t i = 0; i < npt; i++)
			if (pt[i].t >= from && pt[i].t < to)
				want[(size_t)pt[i].svc * nsteps + (size_t)((pt[i].t - from) / step)] +=
					pt[i].total;
		strobe_err err = {{0}};
		strobe_selector se;
		assert_int_equal(strobe_selector_parse(CPU, strlen(CPU), &se, &err), 0);
		strobe_query q = {"t", &se, from, to};
		strobe_range_result rr;
		if (strobe_store_range(s, &q, step, "service_name", NULL, &rr, &err) < 0)
			fail_msg("range: %s", err.msg);
		assert_int_equal(rr.nsteps, nsteps);
		for (int k = 0; k < 2; k++) {
			const int64_t *got = NULL;
			for (size_t g = 0; g < rr.n; g++)
				if (strcmp(rr.g[g].value, svc[k]) == 0)
					got = rr.g[g].values;
			for (size_t i = 0; i < nsteps; i++)
				if ((got ? got[i] : 0) != want[(size_t)k * nsteps + i])
					fail_msg("%s from %lld.%09lld to %lld.%09lld step %lld ns, step "
						 "%zu: range %lld, points %lld",
						 svc[k], (long long)(from / S), (long long)(from % S),
						 (long long)(to / S), (long long)(to % S),
						 (long long)step, i, (long long)(got ? got[i] : 0),
						 (long long)want[(size_t)k * nsteps + i]);
		}
		strobe_range_result_free(&rr);
		strobe_selector_free(&se);
		free(want);
	}
}

static void test_random_windows(void **state)
{
	(void)state;
	bf_rng = 0x5eed0f5eedull;
	strobe_store *s = fixture_store(0);
	static const char *const svc[] = {"api", "db"};
	strobe_profile *p[4] = {fixture_profile("main;a 1\n", "cpu", "nanoseconds"),
				fixture_profile("main;b 2\n", "cpu", "nanoseconds"),
				fixture_profile("main;a 4\nmain;c 16\n", "cpu", "nanoseconds"),
				fixture_profile("main;d 64\n", "cpu", "nanoseconds")};
	static const int64_t ptotal[4] = {1, 2, 20, 64};
	const int64_t start = NOW - 3 * 3600 * S - 17 * S, end = NOW - 45 * S;
	size_t cap = 4096, npt = 0;
	bf_point *pt = calloc(cap, sizeof(*pt));
	assert_non_null(pt);
	/* Points at random times to the nanosecond, some on whole seconds and minutes (step
	 * edges), some two at one time; then a minute with 200 points of one series, whose list
	 * outgrows STORE_PTS_MAX and is given up. */
	for (int i = 0; i < 1500; i++) {
		int64_t t = start + (int64_t)(bf_rnd() % (uint64_t)(end - start));
		if (i % 5 == 0)
			t -= t % (i % 2 ? S : 60 * S);
		int k = (int)(bf_rnd() % 2), v = (int)(bf_rnd() % 4);
		int reps = i % 13 == 0 ? 2 : 1;
		for (int r = 0; r < reps; r++) {
			push(s, svc[k], p[v], t);
			pt[npt++] = (bf_point){k, t, ptotal[v]};
		}
	}
	const int64_t busy = start + 3600 * S - (start % (60 * S)) + 120 * S;
	for (int i = 0; i < 200; i++) {
		push(s, "db", p[i % 4], busy + i * (S / 4));
		pt[npt++] = (bf_point){1, busy + i * (S / 4), ptotal[i % 4]};
	}
	check_random(s, pt, npt, start, end, 60);
	/* Compaction does not change the totals; a few late points after it. */
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	for (int i = 0; i < 40; i++) {
		int64_t t = start + (int64_t)(bf_rnd() % (uint64_t)(end - start));
		push(s, "api", p[3], t);
		pt[npt++] = (bf_point){0, t, ptotal[3]};
	}
	check_random(s, pt, npt, start, end, 60);
	/* A store whose totals have no lists (written before they existed): the column is
	 * added at open, NULL, and every cut minute is read from its points' rows. */
	strobe_store_close(s);
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "ALTER TABLE totals DROP COLUMN pts", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	s = fixture_store(0);
	check_random(s, pt, npt, start, end, 40);
	/* New points into those minutes keep their lists NULL (a list of only the new points
	 * would drop the old ones); new minutes get lists again. */
	for (int i = 0; i < 40; i++) {
		int64_t t = start + (int64_t)(bf_rnd() % (uint64_t)(end + 600 * S - start));
		push(s, "db", p[1], t);
		pt[npt++] = (bf_point){1, t, ptotal[1]};
	}
	check_random(s, pt, npt, start, end + 600 * S, 40);
	strobe_store_close(s);
	/* A minute row that an older server added a point to without appending to its list
	 * (the list no longer adds up to the row) is read from its points' rows too. */
	int64_t late = 0;
	for (size_t i = 0; i < npt; i++)
		if (pt[i].t > end + 60 * S && pt[i].t > late)
			late = pt[i].t;
	assert_true(late > 0);
	late += 1234;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT series FROM series_labels WHERE name='service_name' "
					    "AND value='db'",
					    -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t dbid = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "INSERT INTO totals(series, level, time, n, total) "
					    "VALUES(?1,?2,?3,1,64) ON CONFLICT(series, level, time) DO "
					    "UPDATE SET n = n + excluded.n, total = total + "
					    "excluded.total",
					    -1, &st, NULL),
			 SQLITE_OK);
	for (int level = 0; level < 3; level++) {
		int64_t w = level == 0 ? 1 : level == 1 ? 60 * S : 3600 * S;
		sqlite3_bind_int64(st, 1, dbid);
		sqlite3_bind_int(st, 2, level);
		sqlite3_bind_int64(st, 3, late - late % w);
		assert_int_equal(sqlite3_step(st), SQLITE_DONE);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	pt[npt++] = (bf_point){1, late, 64};
	s = fixture_store(0);
	check_random(s, pt, npt, end - 1800 * S, end + 600 * S, 40);
	strobe_store_close(s);
	free(pt);
	for (int i = 0; i < 4; i++)
		strobe_profile_free(p[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_totals_match_decoding, setup, teardown),
		cmocka_unit_test_setup_teardown(test_step_boundaries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_labels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_windows, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
