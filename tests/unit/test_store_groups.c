// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the group totals (store/groups.c): a range whose selector and group-by name only
 * service_name (or nothing) reads totals summed per service at ingest instead of each series'
 * totals, and must give exactly what the series' totals give (test_store_totals checks those
 * against decoding every profile). Compared on random windows (edges to the nanosecond) and
 * steps, for selectors and group-bys the groups answer and ones they must leave to the series
 * (other labels, gauges), two tenants, pushes of many series at once (summed per row before
 * the upsert), late points before and after compaction, retention at an unaligned cutoff, a
 * store from before the groups (built at open), and one an older build wrote points into after
 * they were built (found at open and built again).
 *
 * The hours' lists of points (store/hour_lists.c), which both the series' and the groups' hour
 * rows keep, are checked the same ways (against the minutes, with the lists off), and shown to
 * be what a range reads: with every minute row that an hour's list covers made wrong, ranges
 * whose steps cut hours still give what decoding the profiles gives. Also: an hour too busy for
 * its list (given up, read from its minutes), lists filled at open for a store without them and
 * after an older build wrote into their hours, a list that no longer adds up to its row (not
 * used), and retention's cut hour (its list made again).
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

#define UNIT_TMPDIR_NAME "groups"
#include "unit_tmpdir.h"
#include "store_fixture.h"

static uint64_t rng = 0x6a09e667f3bcc909ull;
static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

/* Series: 3 services x 2 hosts, and a series of each host without service_name. */
enum { NSVC = 4, NHOST = 2, NSER = NSVC * NHOST, NPROF = 4 };
static const char *const svc[NSVC] = {"a", "b", "c", NULL};
static const char *const hosts[NHOST] = {"h1", "h2"};
static strobe_profile *cpu[NPROF], *gauge;

/* One push of n random series' points (one transaction: several points of one group at one
 * time are summed before their upsert), for tenant ten, around time t. */
static void push_round(strobe_store *s, const char *ten, int64_t t, int n)
{
	strobe_push_item it[2 * NSER];
	strobe_labelpair l[2 * NSER][2];
	size_t ni = 0;
	for (int i = 0; i < n && ni < 2 * NSER - 1; i++) {
		int k = (int)(rnd() % NSER), sv = k % NSVC, h = k / NSVC;
		size_t nl = 0;
		l[ni][nl++] = (strobe_labelpair){"host", hosts[h]};
		if (svc[sv])
			l[ni][nl++] = (strobe_labelpair){"service_name", svc[sv]};
		/* Offsets: the same time as another item (a shared level-0 row), or apart to
		 * the nanosecond. */
		int64_t tt = rnd() % 3 == 0 ? t : t + (int64_t)(rnd() % (20 * S));
		it[ni] = (strobe_push_item){.name = "process_cpu", .labels = l[ni], .nlabels = nl,
					    .profile = cpu[rnd() % NPROF], .time_ns = tt};
		ni++;
		if (sv == 0 && rnd() % 4 == 0) { /* a gauge of service a: never in the groups */
			memcpy(l[ni], l[ni - 1], sizeof(l[ni]));
			it[ni] = (strobe_push_item){.name = "memory", .labels = l[ni], .nlabels = nl,
						    .profile = gauge, .time_ns = tt};
			ni++;
		}
	}
	strobe_push_req rq = {ten, NULL, 0, it, ni, NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
}

/* The range through the group totals and through the series' totals: equal group by group
 * (names and order too) and step by step. The sum of every value. */
static int64_t same(strobe_store *s, const char *ten, const char *sel, int64_t from, int64_t to,
		    int64_t step, const char *group)
{
	return fixture_same_range(s, strobe_store_use_group_totals, ten, sel, from, to, step, group);
}

/* The same with the hours' lists on and off (then the minutes). */
static void same_hours(strobe_store *s, const char *ten, const char *sel, int64_t from,
		       int64_t to, int64_t step, const char *group)
{
	fixture_same_range(s, strobe_store_use_hour_lists, ten, sel, from, to, step, group);
}

/* The store's database through a connection of the test's own (the store may be open: WAL). */
static sqlite3 *db_open(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	return db;
}

static int64_t db_int(const char *sql)
{
	sqlite3 *db = db_open();
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void db_exec(const char *sql)
{
	sqlite3 *db = db_open();
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* Hour rows of both tables without a list (NULL): none once the store has filled them. */
static int64_t hours_without_list(void)
{
	return db_int("SELECT (SELECT count(*) FROM totals WHERE level=2 AND pts IS NULL) + "
		      "(SELECT count(*) FROM gtotals WHERE level=2 AND pts IS NULL)");
}

/* Random windows and steps, every selector and group-by, both tenants; returns the sum of the
 * whole-window answers of CPU grouped by service, so the callers can see data was there. */
static int64_t check(strobe_store *s, int64_t start, int64_t end, int nwin)
{
	static const char *const sels[] = {
		CPU, CPU "{service_name=\"a\"}", CPU "{service_name=~\"a|b\"}",
		CPU "{service_name!=\"a\"}", CPU "{service_name=\"\"}",
		CPU "{service_name=\"zzz\"}", CPU "{host=\"h1\"}", GAUGE};
	static const char *const bys[] = {NULL, "service_name", "host", "service_name,host"};
	static const int64_t base[] = {1, 7, 59, 60, 61, 90, 360, 600, 3600, 7200};
	int64_t seen = 0;
	for (int w = 0; w < nwin; w++) {
		int64_t from = start - 120 * S + (int64_t)(rnd() % (uint64_t)(end - start));
		int64_t to = from + 1 + (int64_t)(rnd() % (uint64_t)(end + 120 * S - from));
		if (w % 4 == 0) { /* on whole minutes: whole-minute and hour rows */
			from -= from % (60 * S);
			to = from + (1 + (int64_t)(rnd() % 300)) * 60 * S;
		}
		int64_t step = base[rnd() % 10] * S + (int64_t)(rnd() % 3) * 999999999;
		if ((to - from) / step > 2000)
			step = (to - from) / 2000 + 1;
		for (size_t i = 0; i < sizeof(sels) / sizeof(*sels); i++)
			for (size_t k = 0; k < sizeof(bys) / sizeof(*bys); k++) {
				same(s, w % 3 ? "t" : "u", sels[i], from, to, step, bys[k]);
				if ((i + k + (size_t)w) % 3 == 0)
					same_hours(s, w % 3 ? "t" : "u", sels[i], from, to, step,
						   bys[k]);
			}
	}
	seen += same(s, "t", CPU, start - 3600 * S, end + 3600 * S, 86400 * S, "service_name");
	seen += same(s, "u", CPU, start - 3600 * S, end + 3600 * S, 86400 * S, NULL);
	return seen;
}

static void fill(strobe_store *s, int64_t start, int64_t end, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		int64_t t = start + (int64_t)(rnd() % (uint64_t)(end - start));
		if (i % 7 == 0)
			t -= t % (60 * S); /* on a minute's edge */
		push_round(s, i % 3 ? "t" : "u", t, 1 + (int)(rnd() % 12));
	}
	/* A busy minute: one group's list outgrows its cap, read from its level-0 rows. */
	int64_t busy = start + 3600 * S - start % (60 * S) + 300 * S;
	for (int i = 0; i < 60; i++)
		push_round(s, "t", busy + i * (S / 2), 8);
}

static void test_groups_equal_series(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(4 * 3600 * S);
	const int64_t start = NOW - 3 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, 700);
	assert_true(check(s, start, end, 40) > 0);
	/* Compaction leaves the totals; late points (after it) into compacted buckets. */
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	fill(s, start, end, 80);
	int64_t before = check(s, start, end, 30);
	/* Retention at a cutoff inside a minute and an hour: the straddling buckets are summed
	 * again from what they keep. */
	int64_t now = start + 4 * 3600 * S + 3600 * S / 2 + 17 * S + 123456;
	assert_true(strobe_store_retain(s, now, &err) > 0);
	assert_int_equal(hours_without_list(), 0); /* the cut hour's made again */
	int64_t after = check(s, start, end, 30);
	assert_true(after > 0 && after < before);
	fill(s, now - 4 * 3600 * S, end, 40); /* new points into the straddling buckets */
	check(s, start, end, 30);
	strobe_store_close(s);
}

/* A store written before the group totals: built at open from the series' totals. */
static void test_groups_built_at_open(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	const int64_t start = NOW - 2 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, 400);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	int64_t want = check(s, start, end, 5);
	strobe_store_close(s);
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP TABLE gtotals; DROP TABLE rgroups", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	s = fixture_store(0);
	assert_int_equal(check(s, start, end, 30), want);
	fill(s, start, end, 60); /* and kept up to date after */
	check(s, start, end, 20);
	strobe_store_close(s);
	/* An older build (without groups) stores a point: its series' totals gain it, the
	 * groups do not; the next open finds the hours disagree and builds them again. */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT series, time FROM totals WHERE level=0 AND series "
					    "IN (SELECT id FROM series WHERE type LIKE 'process_cpu%') "
					    "LIMIT 1",
					    -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t ser = sqlite3_column_int64(st, 0), t = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	char sql[400];
	for (int level = 0; level < 3; level++) {
		int64_t w = level == 0 ? 1 : level == 1 ? 60 * S : 3600 * S;
		snprintf(sql, sizeof(sql),
			 "UPDATE totals SET n = n + 1, total = total + 1000, pts = NULL WHERE "
			 "series=%lld AND level=%d AND time=%lld",
			 (long long)ser, level, (long long)(t - t % w));
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_changes(db), 1);
	}
	sqlite3_close(db);
	s = fixture_store(0);
	check(s, start, end, 20);
	strobe_store_close(s);
}

/* n points of one series (service a on h1) in one push, from t every dt: a busy hour. */
static void push_busy(strobe_store *s, int64_t t, int64_t dt, int n)
{
	strobe_push_item *it = calloc((size_t)n, sizeof(*it));
	strobe_labelpair l[2] = {{"host", "h1"}, {"service_name", "a"}};
	assert_non_null(it);
	for (int i = 0; i < n; i++)
		it[i] = (strobe_push_item){.name = "process_cpu", .labels = l, .nlabels = 2,
					   .profile = cpu[i % NPROF], .time_ns = t + i * dt};
	strobe_push_req rq = {"t", NULL, 0, it, (size_t)n, NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
	free(it);
}

/* The range's answer through the totals against decoding every profile (strobe_store_use_totals
 * off), for a few selectors the groups answer and a few they leave to the series, on random
 * windows whose steps cut hours. */
static void check_decoded(strobe_store *s, int64_t start, int64_t end, int nwin)
{
	static const char *const sels[] = {CPU, CPU "{service_name=\"a\"}", CPU "{host=\"h1\"}"};
	static const char *const bys[] = {NULL, "service_name"};
	for (int w = 0; w < nwin; w++) {
		int64_t from = start - 600 * S + (int64_t)(rnd() % (uint64_t)(end - start));
		int64_t to = from + 60 * S + (int64_t)(rnd() % (uint64_t)(end + 600 * S - from));
		int64_t step = (1 + (int64_t)(rnd() % 40)) * 90 * S + (int64_t)(rnd() % S);
		if ((to - from) / step > 500)
			step = (to - from) / 500 + 1;
		for (size_t i = 0; i < sizeof(sels) / sizeof(*sels); i++)
			for (size_t k = 0; k < sizeof(bys) / sizeof(*bys); k++)
				fixture_same_range(s, strobe_store_use_totals, w % 3 ? "t" : "u",
						   sels[i], from, to, step, bys[k]);
	}
}

/* The sum of a range's every value (tenant t, CPU grouped by service). */
static int64_t range_sum(strobe_store *s, const char *sel, int64_t from, int64_t to, int64_t step)
{
	strobe_err err = {{0}};
	strobe_selector se;
	if (strobe_selector_parse(sel, strlen(sel), &se, &err) < 0)
		fail_msg("%s: %s", sel, err.msg);
	strobe_query q = {"t", &se, from, to};
	strobe_range_result r;
	if (strobe_store_range(s, &q, step, "service_name", NULL, &r, &err) < 0)
		fail_msg("range: %s", err.msg);
	int64_t sum = 0;
	for (size_t g = 0; g < r.n; g++)
		for (size_t k = 0; k < r.nsteps; k++)
			sum += r.g[g].values[k];
	strobe_range_result_free(&r);
	strobe_selector_free(&se);
	return sum;
}

/* What a range reads when its steps cut hours: the hours' lists, not their minutes. Every
 * minute row of an hour with a list is made wrong (7 added to its total, which its own list
 * then no longer matches); ranges still equal decoding, and with the lists off they do not. An
 * hour too busy for its list (given up) is read from its minutes, left right. */
static void test_hour_lists_read(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	const int64_t start = NOW - 5 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, 500);
	const int64_t busy = start - start % (3600 * S) + 2 * 3600 * S;
	push_busy(s, busy + 3 * S, 3 * S + 1234567, 1100); /* ~8 bytes an entry: past 8 KiB */
	assert_int_equal(hours_without_list(), 0);
	assert_true(db_int("SELECT count(*) FROM totals WHERE level=2 AND length(pts)=0") >= 1);
	assert_true(db_int("SELECT count(*) FROM gtotals WHERE level=2 AND length(pts)=0") >= 2);
	check(s, start, end, 8);
	strobe_store_close(s);
	db_exec("UPDATE totals SET total = total + 7 WHERE level=1 AND EXISTS (SELECT 1 FROM "
		"totals h WHERE h.series=totals.series AND h.level=2 AND h.time = totals.time - "
		"totals.time % 3600000000000 AND length(h.pts) > 0);"
		"UPDATE gtotals SET total = total + 7 WHERE level=1 AND EXISTS (SELECT 1 FROM "
		"gtotals h WHERE h.grp=gtotals.grp AND h.level=2 AND h.time = gtotals.time - "
		"gtotals.time % 3600000000000 AND length(h.pts) > 0);");
	s = fixture_store(0);
	check_decoded(s, start, end, 25);
	/* The UI's 24 h at 240 steps, scaled to the data: 6-minute steps from an odd second. */
	const int64_t from = start + 7 * S, to = end + 7 * S, step = 360 * S;
	for (int g = 0; g < 2; g++) {
		const char *sel = g ? CPU "{host=\"h1\"}" : CPU;
		strobe_store_use_totals(s, false);
		int64_t want = range_sum(s, sel, from, to, step);
		strobe_store_use_totals(s, true);
		assert_int_equal(range_sum(s, sel, from, to, step), want);
		/* The corruption is there to be read: the minutes give more. */
		strobe_store_use_hour_lists(s, false);
		assert_true(range_sum(s, sel, from, to, step) > want);
		strobe_store_use_hour_lists(s, true);
	}
	strobe_store_close(s);
}

/* A store whose hours have no lists (written before them) gets them at open; a list that no
 * longer adds up to its row (an older server added a point without appending, as older
 * builds of the list's column do) is not used. */
static void test_hour_lists_open(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	const int64_t start = NOW - 3 * 3600 * S - 17 * S, end = NOW - 45 * S;
	fill(s, start, end, 300);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW, &err) > 0);
	check_decoded(s, start, end, 5);
	strobe_store_close(s);
	db_exec("UPDATE totals SET pts = NULL WHERE level=2; UPDATE gtotals SET pts = NULL WHERE "
		"level=2");
	assert_true(hours_without_list() > 0);
	s = fixture_store(0);
	assert_int_equal(hours_without_list(), 0);
	check_decoded(s, start, end, 15);
	check(s, start, end, 10);
	strobe_store_close(s);
	/* A point added to every level of one series' rows (and its groups') without a list
	 * entry: the hour's list misses it and must not be read. */
	int64_t ser = db_int("SELECT series FROM totals WHERE level=2 AND length(pts) > 0 AND series "
			     "IN (SELECT series FROM series_labels WHERE name='service_name' AND "
			     "value='b') LIMIT 1");
	char sql[600];
	snprintf(sql, sizeof(sql),
		 "SELECT p.time FROM totals p JOIN totals h ON h.series=p.series AND h.level=2 AND "
		 "h.time = p.time - p.time %% 3600000000000 WHERE p.series=%lld AND p.level=0 AND "
		 "length(h.pts) > 0 LIMIT 1",
		 (long long)ser);
	int64_t t = db_int(sql);
	snprintf(sql, sizeof(sql), "SELECT tenant='t' FROM series WHERE id=%lld", (long long)ser);
	const char *ten = db_int(sql) ? "t" : "u";
	for (int level = 0; level < 3; level++) {
		int64_t w = level == 0 ? 1 : level == 1 ? 60 * S : 3600 * S;
		snprintf(sql, sizeof(sql),
			 "UPDATE totals SET n = n + 1, total = total + 1000 WHERE series=%lld AND "
			 "level=%d AND time=%lld;"
			 "UPDATE gtotals SET n = n + 1, total = total + 1000 WHERE level=%d AND "
			 "time=%lld AND grp IN (SELECT id FROM rgroups WHERE type LIKE "
			 "'process_cpu%%' AND tenant=(SELECT tenant FROM series WHERE id=%lld) AND "
			 "(label='' OR value='b'))",
			 (long long)ser, level, (long long)(t - t % w), level, (long long)(t - t % w),
			 (long long)ser);
		db_exec(sql);
	}
	s = fixture_store(0);
	for (int i = 0; i < 6; i++) { /* windows around the point, its hour cut by steps */
		int64_t from = t - 3600 * S + (int64_t)(rnd() % (3000 * S)), to = from + 2 * 3600 * S;
		int64_t step = 300 * S + (int64_t)(rnd() % (600 * S));
		for (int k = 0; k < 2; k++)
			same_hours(s, ten, k ? CPU "{host=~\"h.*\"}" : CPU, from, to, step,
				   "service_name");
	}
	check(s, start, end, 10);
	strobe_store_close(s);
}

static int gsetup(void **state)
{
	if (setup(state) < 0)
		return -1;
	rng = 0x6a09e667f3bcc909ull;
	for (int i = 0; i < NPROF; i++) {
		char text[64];
		snprintf(text, sizeof(text), "main;f%d %d\nmain;g %d\n", i, 1 + i * 3, 1 << i);
		cpu[i] = fixture_cpu(text);
	}
	gauge = fixture_profile("main;x 101\nmain;y 7\n", "inuse_space", "bytes");
	return 0;
}

static int gteardown(void **state)
{
	for (int i = 0; i < NPROF; i++)
		strobe_profile_free(cpu[i]);
	strobe_profile_free(gauge);
	return teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_groups_equal_series, gsetup, gteardown),
		cmocka_unit_test_setup_teardown(test_groups_built_at_open, gsetup, gteardown),
		cmocka_unit_test_setup_teardown(test_hour_lists_read, gsetup, gteardown),
		cmocka_unit_test_setup_teardown(test_hour_lists_open, gsetup, gteardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
