// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the merged profile (the flame graph) read through the stack roll-ups: for random
 * windows, edges anywhere, the merge that reads each bucket's roll-up plus the raw points no
 * roll-up covers yet (found through the partial index points_unrolled) gives, stack by stack,
 * what the merge of every raw point gives, with buckets in every state: never compacted,
 * compacted to minutes with their hour still open, compacted to hours, and late points into
 * compacted buckets. A store from before the index existed gets it at open; retention deletes
 * roll-ups with their points.
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

#define UNIT_TMPDIR_NAME "flame"
#include "unit_tmpdir.h"
#include "store_fixture.h"

static void push(strobe_store *s, const char *svc, strobe_profile *p, int64_t t)
{
	strobe_labelpair l[] = {{"service_name", svc}, {"host", "h1"}};
	strobe_push_item it = {.profile = p, .time_ns = t};
	strobe_push_req rq = {"t", l, 2, &it, 1, NOW};
	strobe_push_result res;
	strobe_err err = {{0}};
	if (strobe_store_push(s, &rq, &res, &err) < 0)
		fail_msg("push: %s", err.msg);
	strobe_push_result_free(&res);
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The merged profile of the window as sorted folded lines in one string (malloc'd). */
static char *folded(strobe_store *s, int64_t from, int64_t to)
{
	strobe_selector se;
	strobe_err err = {{0}};
	if (strobe_selector_parse(CPU "{host=\"h1\"}", strlen(CPU "{host=\"h1\"}"), &se, &err) < 0)
		fail_msg("%s", err.msg);
	strobe_query q = {"t", &se, from, to};
	strobe_profile *p;
	if (strobe_store_query(s, &q, &p, &err) < 0)
		fail_msg("query: %s", err.msg);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_folded_write(f, p, 0, STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	char *lines[4096];
	size_t n = 0;
	for (char *sv = NULL, *l = strtok_r(buf, "\n", &sv); l && n < 4096;
	     l = strtok_r(NULL, "\n", &sv))
		lines[n++] = l;
	qsort(lines, n, sizeof(*lines), cmp_line);
	char *out = calloc(len + 2, 1);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		strcat(out, lines[i]);
		strcat(out, "\n");
	}
	free(buf);
	return out;
}

static uint64_t rng = 0xf1a3e5eedull;
static uint64_t rnd(void) /* xorshift64* */
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

/* Random windows: through the roll-ups against every raw point; returns how many windows had
 * anything in them. */
static int check_windows(strobe_store *s, int64_t start, int64_t end, int n)
{
	int nonempty = 0;
	for (int w = 0; w < n; w++) {
		int64_t from = start - 90 * S + (int64_t)(rnd() % (uint64_t)(end - start));
		int64_t to = from + 1 + (int64_t)(rnd() % (uint64_t)(end + 90 * S - from));
		if (w == 0) { /* the whole of it */
			from = start - 1;
			to = end + 1;
		}
		strobe_store_use_rollups(s, false);
		char *raw = folded(s, from, to);
		strobe_store_use_rollups(s, true);
		char *rolled = folded(s, from, to);
		if (strcmp(raw, rolled) != 0)
			fail_msg("window %lld.%09lld to %lld.%09lld: roll-ups\n%s\nraw points\n%s",
				 (long long)(from / S), (long long)(from % S), (long long)(to / S),
				 (long long)(to % S), rolled, raw);
		nonempty += raw[0] != 0;
		free(raw);
		free(rolled);
	}
	return nonempty;
}

static int64_t count(const char *sql)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void test_rollups_equal_raw_merge(void **state)
{
	(void)state;
	strobe_store *s = fixture_store(0);
	strobe_profile *p[4] = {fixture_cpu("main;a 1\n"), fixture_cpu("main;a;b 2\nmain;c 4\n"),
				fixture_cpu("main;c;d 16\n"), fixture_cpu("main;a;b;e 64\nmain;f 128\n")};
	static const char *const svc[] = {"api", "db", "web"};
	/* Three hours before NOW - 2 h (compacted to hours), two hours up to NOW (compacted at
	 * NOW - 30 min: the last hour's minutes are folded, not the hour), points to the
	 * nanosecond, some two at one time. */
	const int64_t start = NOW - 5 * 3600 * S - 17 * S, end = NOW - 45 * S;
	for (int i = 0; i < 1200; i++) {
		int64_t t = start + (int64_t)(rnd() % (uint64_t)(end - start));
		push(s, svc[rnd() % 3], p[rnd() % 4], t);
		if (i % 17 == 0)
			push(s, svc[0], p[0], t);
	}
	assert_true(check_windows(s, start, end, 20) > 10);
	strobe_err err = {{0}};
	assert_true(strobe_store_compact(s, NOW - 1800 * S, &err) > 0);
	/* Both kinds of partly rolled points are there: folded into their minute and not their
	 * hour (rolled=1), and folded into both (3, outside the partial index). */
	assert_true(count("SELECT count(*) FROM points WHERE level=0 AND rolled=1") > 0);
	assert_true(count("SELECT count(*) FROM points WHERE level=0 AND rolled=3") > 0);
	assert_true(check_windows(s, start, end, 40) > 20);
	/* Late points into compacted buckets, read beside their roll-ups. */
	for (int i = 0; i < 30; i++)
		push(s, svc[1], p[3], start + (int64_t)(rnd() % (uint64_t)(end - start)));
	assert_true(check_windows(s, start, end, 40) > 20);
	/* The compaction pass finds the late points alone (through the partial index) and
	 * folds them in; then nothing is left to fold. */
	assert_true(strobe_store_compact(s, NOW + 3600 * S, &err) > 0);
	assert_int_equal(count("SELECT count(*) FROM points INDEXED BY points_unrolled WHERE "
			       "level=0 AND rolled<>3"),
			 0);
	assert_int_equal(strobe_store_compact(s, NOW + 3600 * S, &err), 0);
	assert_true(check_windows(s, start, end, 40) > 20);
	strobe_store_close(s);

	/* A store from before the partial index: it is built at open, with the raw points
	 * that are not in every roll-up, and the answers stay the same. */
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP INDEX points_unrolled", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	s = fixture_store(0);
	for (int i = 0; i < 30; i++)
		push(s, svc[2], p[1], start + (int64_t)(rnd() % (uint64_t)(end - start)));
	assert_int_equal(count("SELECT count(*) FROM points INDEXED BY points_unrolled WHERE "
			       "level=0 AND rolled<>3"),
			 30);
	assert_true(check_windows(s, start, end, 30) > 15);
	strobe_store_close(s);

	/* Retention deletes roll-ups with their points: after it, nothing before the cutoff is
	 * left at any level, and the windows still agree. */
	s = fixture_store(3 * 3600 * S);
	assert_true(strobe_store_retain(s, NOW + 1017 * S, &err) > 0);
	char q[200];
	snprintf(q, sizeof(q), "SELECT count(*) FROM points WHERE time < %lld",
		 (long long)(NOW + 1017 * S - 3 * 3600 * S));
	assert_int_equal(count(q), 0);
	assert_true(count("SELECT count(*) FROM points WHERE level=2") > 0);
	assert_true(check_windows(s, NOW - 3 * 3600 * S, end, 30) > 15);
	strobe_store_close(s);
	for (int i = 0; i < 4; i++)
		strobe_profile_free(p[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rollups_equal_raw_merge, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
