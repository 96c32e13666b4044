// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the store's write path under concurrency and of its point encoding: many
 * threads pushing at once through the group committer (store/commit.c) lose nothing, count
 * nothing twice, create each series once and keep every symbol, before and after a reopen, also
 * while retention and symbol gc renumber the symbol ids under them; the stack table stops at
 * max_stacks; the point blob (store/blob.c) round-trips values exactly, divisor and negative values
 * included, still reads the version-1 layout, and refuses truncated or out-of-range input.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zstd.h>

#include "../../store/store_impl.h"
#include "strobe/codec.h"
#include "strobe/server.h"

#define NOW (1795000000LL * STROBE_NS_PER_S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define THREADS 8
#define PUSHES 25

#define UNIT_TMPDIR_NAME "commit"
#include "unit_tmpdir.h"

static strobe_store *open_store(void)
{
	strobe_store_opts o = {.dir = dir};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	if (!s)
		fail_msg("open: %s", err.msg);
	return s;
}

typedef struct job {
	strobe_store *s;
	int id, failures;
} job;

/* Thread k pushes PUSHES profiles of service svc<k%2>: stacks shared by all threads
 * (main;work;*) and one stack of its own (main;own<k>), each with value k+1 per push. */
static void *pusher(void *arg)
{
	job *j = arg;
	char text[256], svc[16];
	snprintf(text, sizeof(text), "main;work;hash %d\nmain;work;sort %d\nmain;own%d %d\n",
		 j->id + 1, j->id + 1, j->id, j->id + 1);
	snprintf(svc, sizeof(svc), "svc%d", j->id % 2);
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0) {
		j->failures++;
		return NULL;
	}
	p->types[0].type = strobe_str_intern0(p, "cpu");
	p->types[0].unit = strobe_str_intern0(p, "nanoseconds");
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	strobe_labelpair l[] = {{"service_name", svc}};
	for (int i = 0; i < PUSHES; i++) {
		strobe_push_item it = {.profile = p,
				       .time_ns = NOW - 1000 * STROBE_NS_PER_S + i * STROBE_NS_PER_S};
		strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
		strobe_push_result res;
		if (strobe_store_push(j->s, &rq, &res, &err) < 0)
			j->failures++;
		else
			strobe_push_result_free(&res);
	}
	strobe_profile_free(p);
	return NULL;
}

static int64_t total(strobe_store *s, const char *sel)
{
	strobe_selector se;
	strobe_err err = {{0}};
	if (strobe_selector_parse(sel, strlen(sel), &se, &err) < 0)
		fail_msg("%s", err.msg);
	strobe_query q = {"t", &se, NOW - 2000 * STROBE_NS_PER_S, NOW};
	strobe_profile *p;
	if (strobe_store_query(s, &q, &p, &err) < 0)
		fail_msg("query: %s", err.msg);
	int64_t t = strobe_total(p, 0);
	strobe_profile_free(p);
	strobe_selector_free(&se);
	return t;
}

static void check_contents(strobe_store *s)
{
	/* svc0 gets threads 0,2,4,6 (values 1,3,5,7), svc1 threads 1,3,5,7 (2,4,6,8); three
	 * stacks each, PUSHES times. */
	assert_int_equal(total(s, CPU "{service_name=\"svc0\"}"), 3 * PUSHES * (1 + 3 + 5 + 7));
	assert_int_equal(total(s, CPU "{service_name=\"svc1\"}"), 3 * PUSHES * (2 + 4 + 6 + 8));
	strobe_store_stats st;
	assert_int_equal(strobe_store_stats_get(s, &st), 0);
	assert_int_equal(st.points, THREADS * PUSHES);
	assert_int_equal(st.series, 2);
	/* main, main;work, ;hash, ;sort, and main;own<k> for each thread */
	assert_int_equal(st.stacks, 4 + THREADS);
}

static void test_concurrent_pushes(void **state)
{
	(void)state;
	strobe_store *s = open_store();
	pthread_t th[THREADS];
	job jobs[THREADS];
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (job){s, i, 0};
		assert_int_equal(pthread_create(&th[i], NULL, pusher, &jobs[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].failures, 0);
	}
	check_contents(s);
	uint64_t commits, pushes;
	strobe_store_commit_stats(s, &commits, &pushes);
	assert_int_equal(pushes, THREADS * PUSHES);
	assert_true(commits >= 1 && commits <= pushes);
	strobe_store_close(s);
	/* Everything acknowledged is on disk: a fresh open sees the same. */
	s = open_store();
	check_contents(s);
	strobe_store_close(s);
}

#define GC_ROUNDS 20
#define DAY (86400 * STROBE_NS_PER_S)

/* Meanwhile: GC_ROUNDS times a profile of stacks of its own just inside retention, then
 * retention a few seconds later (which deletes it) and a symbol gc, which renumbers every id
 * interned after its stacks, those of pushes in flight included (they must wait: ids_lock). */
static void *collector(void *arg)
{
	job *j = arg;
	strobe_err err = {{0}};
	strobe_labelpair l[] = {{"service_name", "old"}};
	for (int k = 0; k < GC_ROUNDS; k++) {
		char text[64];
		snprintf(text, sizeof(text), "old;g%d;x%d 5\nold;g%d 1\n", k, k, k);
		strobe_profile *p = NULL;
		if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0) {
			j->failures++;
			return NULL;
		}
		p->types[0].type = strobe_str_intern0(p, "cpu");
		p->types[0].unit = strobe_str_intern0(p, "nanoseconds");
		strobe_push_item it = {.profile = p, .time_ns = NOW - DAY + STROBE_NS_PER_S};
		strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
		strobe_push_result res;
		if (strobe_store_push(j->s, &rq, &res, &err) < 0)
			j->failures++;
		else
			strobe_push_result_free(&res);
		strobe_profile_free(p);
		if (strobe_store_retain(j->s, NOW + 2 * STROBE_NS_PER_S, &err) != 1 ||
		    strobe_store_gc(j->s, NOW + 2 * STROBE_NS_PER_S, &err) < 0)
			j->failures++;
	}
	return NULL;
}

static void test_pushes_during_gc(void **state)
{
	(void)state;
	strobe_store_opts o = {.dir = dir, .retention_ns = DAY};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	assert_non_null(s);
	pthread_t th[THREADS + 1];
	job jobs[THREADS + 1];
	for (int i = 0; i <= THREADS; i++) {
		jobs[i] = (job){s, i, 0};
		assert_int_equal(
			pthread_create(&th[i], NULL, i < THREADS ? pusher : collector, &jobs[i]), 0);
	}
	for (int i = 0; i <= THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].failures, 0);
	}
	/* The last gc ran after the last old profile was deleted: only the pushers' symbols
	 * are left, and their points still name the right stacks. */
	check_contents(s);
	strobe_store_close(s);
	s = strobe_store_open(&o, &err);
	assert_non_null(s);
	check_contents(s);
	strobe_store_close(s);
}

static strobe_profile *folded(const char *text)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0)
		fail_msg("%s", err.msg);
	return p;
}

static int push1(strobe_store *s, strobe_profile *p, strobe_err *err)
{
	strobe_labelpair l[] = {{"service_name", "api"}};
	strobe_push_item it = {.profile = p, .time_ns = NOW - STROBE_NS_PER_S};
	strobe_push_req rq = {"t", l, 1, &it, 1, NOW};
	strobe_push_result res;
	int r = strobe_store_push(s, &rq, &res, err);
	if (r == 0)
		strobe_push_result_free(&res);
	return r;
}

/* The stack table (held in memory) is capped: a push that takes it past max_stacks is refused
 * and stores nothing; pushes of stacks already held still go in. */
static void test_max_stacks(void **state)
{
	(void)state;
	strobe_store_opts o = {.dir = dir, .max_stacks = 4};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	assert_non_null(s);
	strobe_profile *a = folded("main;a 1\nmain;b 2\n"), *b = folded("main;c;d 1\n");
	assert_int_equal(push1(s, a, &err), 0); /* main, main;a, main;b: 3 */
	err.msg[0] = 0;
	assert_int_equal(push1(s, b, &err), -EDQUOT); /* +main;c, main;c;d: 5 > 4 */
	assert_non_null(strstr(err.msg, "limit max_stacks"));
	assert_int_equal(push1(s, a, &err), 0);
	strobe_store_stats st;
	assert_int_equal(strobe_store_stats_get(s, &st), 0);
	assert_int_equal(st.points, 2);
	strobe_profile_free(a);
	strobe_profile_free(b);
	strobe_store_close(s);
}

static void roundtrip(const store_pair *in, size_t n)
{
	uint8_t *blob;
	size_t len, cap = 0, got;
	store_pair *out = NULL;
	assert_int_equal(store_blob_encode(in, n, &blob, &len), 0);
	assert_int_equal(store_blob_decode(blob, len, 1000, &out, &cap, &got), 0);
	assert_int_equal(got, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(out[i].stack, in[i].stack);
		assert_int_equal(out[i].value, in[i].value);
	}
	/* Every truncation is refused, never read past. */
	for (size_t l = 0; l < len; l++)
		assert_int_not_equal(store_blob_decode(blob, l, 1000, &out, &cap, &got), 0);
	/* A stack id beyond the table is refused. */
	if (n)
		assert_int_equal(store_blob_decode(blob, len, in[n - 1].stack, &out, &cap, &got),
				 -EINVAL);
	free(blob);
	free(out);
}

static void test_blob(void **state)
{
	(void)state;
	const store_pair cpu[] = {{1, 10000000}, {2, 30000000}, {7, 10000000}, {900, 250000000}};
	roundtrip(cpu, 4);
	const store_pair mixed[] = {{3, -6}, {4, 9}, {5, INT64_MAX}, {6, INT64_MIN}, {8, 0}};
	roundtrip(mixed, 5);
	const store_pair neg[] = {{0, -4}, {1, -8}};
	roundtrip(neg, 2);
	roundtrip(NULL, 0);

	/* Version 1 (interleaved, no divisor), as older stores hold it, still reads. */
	uint8_t raw[] = {1, 2, 5, 20, 3, 3}; /* 2 pairs: (5, +10), (8, -2) */
	uint8_t z[64];
	size_t zl = ZSTD_compress(z, sizeof(z), raw, sizeof(raw), 1);
	assert_false(ZSTD_isError(zl));
	store_pair *out = NULL;
	size_t cap = 0, got;
	assert_int_equal(store_blob_decode(z, zl, 100, &out, &cap, &got), 0);
	assert_int_equal(got, 2);
	assert_int_equal(out[0].stack, 5);
	assert_int_equal(out[0].value, 10);
	assert_int_equal(out[1].stack, 8);
	assert_int_equal(out[1].value, -2);
	/* An unknown version and a zero divisor are refused. */
	raw[0] = 3;
	zl = ZSTD_compress(z, sizeof(z), raw, sizeof(raw), 1);
	assert_int_equal(store_blob_decode(z, zl, 100, &out, &cap, &got), -EINVAL);
	uint8_t v2[] = {2, 1, 0, 5, 2};
	zl = ZSTD_compress(z, sizeof(z), v2, sizeof(v2), 1);
	assert_int_equal(store_blob_decode(z, zl, 100, &out, &cap, &got), -EINVAL);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_concurrent_pushes, setup, teardown),
		cmocka_unit_test(test_blob),
		cmocka_unit_test_setup_teardown(test_max_stacks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pushes_during_gc, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
