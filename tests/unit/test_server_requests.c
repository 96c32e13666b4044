// SPDX-License-Identifier: Apache-2.0
/*
 * The server's endpoints driven in process (srv_handle, no sockets) against a store in a temp
 * directory: per-sample pprof labels (pprof.Do) becoming series labels on the push API and on
 * Pyroscope's /ingest, with the label rules and limits applied to them; numeric and span labels
 * kept off the series; totals unchanged by the split. The labels of a process (pid, comm, exe)
 * ride on the points: one series per service, selectors still pick a pid, old data with pid on
 * its series still answers, and a label with too many values refuses the push whole.
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

#include "../../server/server_impl.h"
#include "strobe/codec.h"

#define NOW (1795000000LL * STROBE_NS_PER_S)
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define SAMPLES "samples:samples:count:samples:count" /* a folded profile's type */

static char dir[256];
static strobe_server srv;

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/strobe-test-server-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	memset(&srv, 0, sizeof(srv));
	strobe_server_config_init(&srv.cfg);
	strobe_store_opts o = {.dir = dir, .max_series = 50, .sync_normal = true};
	strobe_err err = {{0}};
	srv.store = strobe_store_open(&o, &err);
	return srv.store ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	strobe_store_close(srv.store);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

typedef struct reply {
	unsigned status;
	char *body;
} reply;

/* One request: args as "key=value" strings (NULL-terminated), a body, a Content-Type. */
static reply call(const char *method, const char *url, const char *const *args,
		  const uint8_t *body, size_t len, const char *ctype)
{
	srv_kv kv[16], hd[2];
	size_t na = 0, nh = 0;
	char *copies[16];
	for (; args && args[na]; na++) {
		copies[na] = strdup(args[na]);
		char *eq = strchr(copies[na], '=');
		*eq = 0;
		kv[na] = (srv_kv){copies[na], eq + 1};
	}
	if (ctype)
		hd[nh++] = (srv_kv){"Content-Type", ctype};
	srv_req r = {.srv = &srv, .url = url, .method = method, .args = kv, .nargs = na,
		     .hdrs = hd, .nhdrs = nh, .body = body, .len = len, .now_ns = NOW};
	srv_handle(&r);
	for (size_t i = 0; i < na; i++)
		free(copies[i]);
	char *s = malloc(r.outlen + 1);
	memcpy(s, r.out, r.outlen);
	s[r.outlen] = 0;
	free(r.out);
	return (reply){r.status, s};
}

/* A Go-like CPU profile: main;handler;work with endpoint=/a (3 samples), endpoint=/b (5),
 * endpoint=/a plus a numeric bytes= label (2: same series as /a), span_id=1 with /b (7: same
 * series as /b), and no labels (11). */
static strobe_profile *labelled(const char *extra_key)
{
	strobe_profile *p = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	assert_int_equal(strobe_profile_add_type(p, "cpu", "nanoseconds"), 0);
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	p->period = 10000000;
	p->time_nanos = NOW - 5 * STROBE_NS_PER_S;
	uint32_t st = 0;
	const char *frames[] = {"main", "handler", "work"};
	for (int i = 0; i < 3; i++)
		st = strobe_stack_push(p, st, strobe_location_for_name(p, frames[i], strlen(frames[i])));
	uint32_t k_ep = strobe_str_intern0(p, "endpoint"), a = strobe_str_intern0(p, "/a"),
		 b = strobe_str_intern0(p, "/b"), k_bytes = strobe_str_intern0(p, "bytes"),
		 k_span = strobe_str_intern0(p, "span_id"), one = strobe_str_intern0(p, "1");
	strobe_label la[] = {{k_ep, a, 0, 0, 0}};
	strobe_label lb[] = {{k_ep, b, 0, 0, 0}};
	strobe_label lan[] = {{k_ep, a, 0, 0, 0}, {k_bytes, 0, 4096, 0, 0}};
	strobe_label lbs[] = {{k_ep, b, 0, 0, 0}, {k_span, one, 0, 0, 0}};
	uint32_t sets[] = {strobe_labelset_intern(p, la, 1), strobe_labelset_intern(p, lb, 1),
			   strobe_labelset_intern(p, lan, 2), strobe_labelset_intern(p, lbs, 2), 0};
	int64_t n[] = {3, 5, 2, 7, 11};
	for (int i = 0; i < 5; i++) {
		int64_t v[2] = {n[i], n[i] * 10000000};
		assert_int_equal(strobe_sample_add(p, st, sets[i], v), 0);
	}
	if (extra_key) { /* one more sample with a label of that name */
		strobe_label lx[] = {{strobe_str_intern0(p, extra_key), a, 0, 0, 0}};
		int64_t v[2] = {1, 10000000};
		assert_int_equal(strobe_sample_add(p, st, strobe_labelset_intern(p, lx, 1), v), 0);
	}
	return p;
}

static uint8_t *encode(strobe_profile *p, size_t *len)
{
	uint8_t *buf;
	assert_int_equal(strobe_pprof_encode(p, &buf, len), 0);
	strobe_profile_free(p);
	return buf;
}

static int64_t query_total(const char *sel)
{
	char q[512];
	snprintf(q, sizeof(q), "query=%s", sel);
	const char *args[] = {q, "format=folded", "from=now-1h", NULL};
	reply r = call("GET", "/api/v1/query", args, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	int64_t t = 0;
	for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n"))
		t += strtoll(strrchr(line, ' ') + 1, NULL, 10);
	free(r.body);
	return t;
}

static void check_split(const char *spy)
{
	/* /a: 3 + 2 (the numeric label is ignored); /b: 5 + 7 (span_id stays off); none: 11. */
	assert_int_equal(query_total(CPU "{endpoint=\"/a\"}"), 5 * 10000000LL);
	assert_int_equal(query_total(CPU "{endpoint=\"/b\"}"), 12 * 10000000LL);
	assert_int_equal(query_total(CPU "{endpoint=\"\"}"), 11 * 10000000LL);
	assert_int_equal(query_total(CPU), 28 * 10000000LL);
	const char *args[] = {"match=" CPU, "from=now-1h", NULL};
	reply r = call("GET", "/api/v1/series", args, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	char want[1024];
	const char *e = "{\"__name__\":\"process_cpu\",\"__profile_type__\":\"" CPU "\",";
	snprintf(want, sizeof(want),
		 "{\"data\":[%s\"endpoint\":\"/a\",%s\"service_name\":\"api\"},"
		 "%s\"endpoint\":\"/b\",%s\"service_name\":\"api\"},"
		 "%s%s\"service_name\":\"api\"}]}",
		 e, spy, e, spy, e, spy);
	if (strcmp(r.body, want) != 0)
		fail_msg("series: %s\nwant:   %s", r.body, want);
	free(r.body);
}

static void test_push_sample_labels(void **state)
{
	(void)state;
	size_t len;
	uint8_t *pb = encode(labelled(NULL), &len);
	const char *args[] = {"service_name=api", NULL};
	reply r = call("POST", "/api/v1/push", args, pb, len, NULL);
	if (r.status != 200)
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
	free(pb);
	check_split("");
}

static void test_ingest_sample_labels(void **state)
{
	(void)state;
	size_t len;
	uint8_t *pb = encode(labelled(NULL), &len);
	const char *args[] = {"name=api", "format=pprof", "from=now-10s", "until=now", NULL};
	reply r = call("POST", "/ingest", args, pb, len, NULL);
	if (r.status != 200)
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
	free(pb);
	check_split("\"pyroscope_spy\":\"unknown\",");
}

/* A sample label breaking a rule refuses the push with the rule named; nothing is stored. */
static void test_sample_label_rules(void **state)
{
	(void)state;
	struct {
		const char *key, *want;
		unsigned status;
	} cases[] = {
		{"__reserved", "sample label '__reserved'", 400},
		{"bad name", "sample label 'bad name'", 400},
		{"service_name", NULL, 200}, /* the request's label wins, silently */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		size_t len;
		uint8_t *pb = encode(labelled(cases[i].key), &len);
		const char *args[] = {"service_name=rules", NULL};
		reply r = call("POST", "/api/v1/push", args, pb, len, NULL);
		if (r.status != cases[i].status || (cases[i].want && !strstr(r.body, cases[i].want)))
			fail_msg("%s: %u %s", cases[i].key, r.status, r.body);
		free(r.body);
		free(pb);
	}
	/* Only the accepted push is there: 28 + 1 samples. */
	assert_int_equal(query_total(CPU "{service_name=\"rules\"}"), 29 * 10000000LL);
	/* max_labels counts the sample labels too. */
	srv.cfg.max_labels = 1;
	size_t len;
	uint8_t *pb = encode(labelled(NULL), &len);
	const char *args[] = {"service_name=lim", NULL};
	reply r = call("POST", "/api/v1/push", args, pb, len, NULL);
	if (r.status != 400 || !strstr(r.body, "limit max_labels"))
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
	free(pb);
	assert_int_equal(query_total(CPU "{service_name=\"lim\"}"), 0);
}


/* A profile of two processes of one service: main;work with pid=1 process=a (3 samples) and
 * pid=2 process=b (5), and endpoint=/x on the pid=2 ones (a series label still). */
static strobe_profile *two_procs(void)
{
	strobe_profile *p = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	assert_int_equal(strobe_profile_add_type(p, "cpu", "nanoseconds"), 0);
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	p->period = 10000000;
	p->time_nanos = NOW - 5 * STROBE_NS_PER_S;
	uint32_t st = strobe_stack_push(p, 0, strobe_location_for_name(p, "main", 4));
	st = strobe_stack_push(p, st, strobe_location_for_name(p, "work", 4));
	uint32_t kp = strobe_str_intern0(p, "pid"), kc = strobe_str_intern0(p, "process"),
		 ke = strobe_str_intern0(p, "endpoint");
	strobe_label l1[] = {{kp, strobe_str_intern0(p, "1"), 0, 0, 0},
			     {kc, strobe_str_intern0(p, "a"), 0, 0, 0}};
	strobe_label l2[] = {{kp, strobe_str_intern0(p, "2"), 0, 0, 0},
			     {kc, strobe_str_intern0(p, "b"), 0, 0, 0},
			     {ke, strobe_str_intern0(p, "/x"), 0, 0, 0}};
	int64_t v1[2] = {3, 30000000}, v2[2] = {5, 50000000};
	assert_int_equal(strobe_sample_add(p, st, strobe_labelset_intern(p, l1, 2), v1), 0);
	assert_int_equal(strobe_sample_add(p, st, strobe_labelset_intern(p, l2, 3), v2), 0);
	return p;
}

static reply get(const char *url, const char *a1, const char *a2)
{
	const char *args[] = {a1, a2, "from=now-1h", NULL};
	if (!a2) {
		args[1] = "from=now-1h";
		args[2] = NULL;
	}
	reply r = call("GET", url, args, NULL, 0, NULL);
	assert_int_equal(r.status, 200);
	return r;
}

static void expect_body(reply r, const char *want)
{
	if (strcmp(r.body, want) != 0)
		fail_msg("got  %s\nwant %s", r.body, want);
	free(r.body);
}

static void push_ok(const char *const *args, const uint8_t *body, size_t len)
{
	reply r = call("POST", "/api/v1/push", args, body, len, NULL);
	if (r.status != 200)
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
}

static void test_process_labels_on_samples(void **state)
{
	(void)state;
	size_t len;
	uint8_t *pb = encode(two_procs(), &len);
	const char *args[] = {"service_name=svc", NULL};
	push_ok(args, pb, len);
	free(pb);
	/* an old agent's push (pid in labels=) and a new one's (sample_labels=) */
	const uint8_t folded[] = "main;work 7\n";
	const char *old_args[] = {"service_name=svc", "labels={pid=\"7\",comm=\"c\"}",
				  "time=now-1m", NULL};
	push_ok(old_args, folded, sizeof(folded) - 1);
	const char *new_args[] = {"service_name=svc", "sample_labels={pid=\"9\",exe=\"/bin/e\"}",
				  "time=now-1m", NULL};
	push_ok(new_args, folded, sizeof(folded) - 1);
	/* One series per service (endpoint, a pprof.Do label, still makes its own). */
	const char *e = "{\"__name__\":\"process_cpu\",\"__profile_type__\":\"" CPU "\",";
	char want[512];
	snprintf(want, sizeof(want),
		 "{\"data\":[%s\"endpoint\":\"/x\",\"service_name\":\"svc\"},"
		 "%s\"service_name\":\"svc\"}]}",
		 e, e);
	expect_body(get("/api/v1/series", "match=" CPU, NULL), want);
	/* The selectors still pick a process. */
	assert_int_equal(query_total(CPU "{service_name=\"svc\"}"), 80000000LL);
	assert_int_equal(query_total(CPU "{pid=\"1\"}"), 30000000LL);
	assert_int_equal(query_total(CPU "{service_name=\"svc\",pid=\"2\"}"), 50000000LL);
	assert_int_equal(query_total(CPU "{process=~\"a|b\"}"), 80000000LL);
	assert_int_equal(query_total(CPU "{pid!=\"1\"}"), 50000000LL);
	assert_int_equal(query_total(SAMPLES "{service_name=\"svc\"}"), 14);
	assert_int_equal(query_total(SAMPLES "{pid=\"7\",comm=\"c\"}"), 7);
	assert_int_equal(query_total(SAMPLES "{exe=\"/bin/e\"}"), 7);
	assert_int_equal(query_total(SAMPLES "{pid=\"7\",comm=\"x\"}"), 0);
	assert_int_equal(query_total(CPU "{pid=\"3\"}"), 0);
	/* The label APIs answer from the samples. */
	expect_body(get("/api/v1/label/pid/values", NULL, NULL), "{\"data\":[\"1\",\"2\",\"7\",\"9\"]}");
	expect_body(get("/api/v1/label/pid/values", "query={process=\"b\"}", NULL),
		    "{\"data\":[\"2\"]}");
	expect_body(get("/api/v1/label/service_name/values", "query={pid=\"9\"}", NULL),
		    "{\"data\":[\"svc\"]}");
	expect_body(get("/api/v1/label/service_name/values", "query={pid=\"3\"}", NULL),
		    "{\"data\":[]}");
	expect_body(get("/api/v1/series", "match=" CPU "{pid=\"3\"}", NULL), "{\"data\":[]}");
	snprintf(want, sizeof(want), "{\"data\":[%s\"service_name\":\"svc\"}]}", e);
	expect_body(get("/api/v1/series", "match=" CPU "{pid=\"1\"}", NULL), want);
	/* Roll-ups keep the processes apart. */
	strobe_err err = {{0}};
	reply r;
	assert_true(strobe_store_compact(srv.store, NOW + 7200 * STROBE_NS_PER_S, &err) > 0);
	assert_int_equal(query_total(CPU "{pid=\"2\"}"), 50000000LL);
	assert_int_equal(query_total(CPU "{service_name=\"svc\"}"), 80000000LL);
	assert_int_equal(query_total(SAMPLES "{pid=\"9\"}"), 7);
	/* Pyroscope's /ingest: pid in the application name's labels goes on the samples too. */
	const uint8_t pyro[] = "main;work 4\n";
	const char *ing_args[] = {"name=ing{pid=5,env=e}", "from=now-70s", "until=now-60s",
				  NULL};
	r = call("POST", "/ingest", ing_args, pyro, sizeof(pyro) - 1, NULL);
	if (r.status != 200)
		fail_msg("ingest: %u %s", r.status, r.body);
	free(r.body);
	r = get("/api/v1/series", "match={service_name=\"ing\"}", NULL);
	if (strstr(r.body, "\"pid\"") || !strstr(r.body, "\"env\":\"e\""))
		fail_msg("ingest series: %s", r.body);
	free(r.body);
	expect_body(get("/api/v1/label/pid/values", "query={service_name=\"ing\"}", NULL),
		    "{\"data\":[\"5\"]}");
	/* sample_labels takes only the labels of a process or a request. */
	const char *bad_args[] = {"service_name=svc", "sample_labels={env=\"prod\"}", NULL};
	r = call("POST", "/api/v1/push", bad_args, folded, sizeof(folded) - 1, NULL);
	if (r.status != 400 || !strstr(r.body, "sample label 'env'"))
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
}

/* Data stored before pid moved to the samples: a store file without points.slabels, its
 * series labelled with pid. Reopened, it migrates; old and new data answer the same selectors. */
static void test_old_series_labels_migrate(void **state)
{
	(void)state;
	strobe_labelpair old_labels[] = {{"pid", "1"}, {"service_name", "svc"}};
	size_t len;
	uint8_t *pb;
	strobe_profile *p = labelled(NULL);
	strobe_err err = {{0}};
	strobe_push_item it = {.profile = p};
	strobe_push_req rq = {"anonymous", old_labels, 2, &it, 1, NOW};
	strobe_push_result res;
	assert_int_equal(strobe_store_push(srv.store, &rq, &res, &err), 0);
	strobe_push_result_free(&res);
	strobe_profile_free(p);
	strobe_store_close(srv.store);
	char path[300];
	snprintf(path, sizeof(path), "%s/strobe.db", dir);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "ALTER TABLE points DROP COLUMN slabels", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	strobe_store_opts o = {.dir = dir, .max_series = 50, .sync_normal = true};
	srv.store = strobe_store_open(&o, &err);
	if (!srv.store)
		fail_msg("reopen: %s", err.msg);
	/* the new way: the same service, pid 2 on the samples */
	pb = encode(two_procs(), &len);
	const char *args[] = {"service_name=svc", NULL};
	push_ok(args, pb, len);
	free(pb);
	int64_t old_total = 28 * 10000000LL, new2 = 50000000LL;
	assert_int_equal(query_total(CPU "{service_name=\"svc\"}"), old_total + 80000000LL);
	assert_int_equal(query_total(CPU "{service_name=\"svc\",pid=\"1\"}"),
			 old_total + 30000000LL);
	assert_int_equal(query_total(CPU "{pid=\"2\"}"), new2);
	assert_int_equal(query_total(CPU "{pid!=\"1\"}"), new2);
	expect_body(get("/api/v1/label/pid/values", "query={service_name=\"svc\"}", NULL),
		    "{\"data\":[\"1\",\"2\"]}");
}

/* limits.max_label_values_per_name: the push that would give a label one value too many is
 * refused whole (429, the label named), the others go on; pids on the samples never count. */
static void test_label_values_limit(void **state)
{
	(void)state;
	strobe_store_close(srv.store);
	strobe_store_opts o = {.dir = dir, .max_series = 50, .max_label_values = 2,
			       .sync_normal = true};
	strobe_err err = {{0}};
	assert_non_null(srv.store = strobe_store_open(&o, &err));
	const uint8_t folded[] = "main;work 5\n";
	for (int i = 0; i < 6; i++) { /* six processes of h1 and h2: two values of host */
		char l[64], sl[64];
		snprintf(l, sizeof(l), "labels={host=\"h%d\"}", 1 + i % 2);
		snprintf(sl, sizeof(sl), "sample_labels={pid=\"%d\"}", 100 + i);
		const char *args[] = {"service_name=s", l, sl, "time=now-1m", NULL};
		push_ok(args, folded, sizeof(folded) - 1);
	}
	const char *args[] = {"service_name=s", "labels={host=\"h3\"}", "time=now-1m", NULL};
	reply r = call("POST", "/api/v1/push", args, folded, sizeof(folded) - 1, NULL);
	if (r.status != 429 || !strstr(r.body, "limit max_label_values_per_name: label host has 2 "
					       "values in tenant 'anonymous'"))
		fail_msg("%u %s", r.status, r.body);
	free(r.body);
	assert_int_equal(query_total(SAMPLES "{host=\"h3\"}"), 0);
	assert_int_equal(query_total(SAMPLES), 30);
	/* a known value still goes in */
	const char *again[] = {"service_name=s", "labels={host=\"h1\"}", "time=now-1m", NULL};
	push_ok(again, folded, sizeof(folded) - 1);
	assert_int_equal(query_total(SAMPLES "{pid=\"100\"}"), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_push_sample_labels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ingest_sample_labels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sample_label_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_process_labels_on_samples, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_series_labels_migrate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_label_values_limit, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
