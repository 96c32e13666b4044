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
			for (size_t k = 0; k < sizeof(bys) / sizeof(*bys); k++)
				same(s, w % 3 ? "t" : "u", sels[i], from, to, step, bys[k]);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
