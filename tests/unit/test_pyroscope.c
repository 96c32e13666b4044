// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the Pyroscope /ingest parser (server/pyroscope.c): name{labels} parsing and its
 * refusals, from/until syntax, folded and lines bodies with sampleRate and name suffixes, pprof
 * bodies raw and gzipped, multipart bodies with profile, prev_profile and sample_type_config as
 * the Pyroscope Go SDK sends them, the HTTP status of every refusal, and the profile type names
 * of the real Go profiles (tests/fixtures/goservice.go) (Pyroscope's and Parca's names for them).
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

#include "fixtures.h"

#include "strobe/codec.h"

#include "../../server/pyroscope.h"
#include "strobe/store.h"

/* Every column's type by the store's one naming rule, as the parsers and the scraper name them. */
static int type_names(const strobe_profile *p, const char *hint, char (*names)[STROBE_TYPE_MAX],
		      strobe_err *err)
{
	const char *name = strobe_profile_name(p, hint, NULL);
	for (uint32_t t = 0; t < p->ntypes; t++) {
		int r = strobe_profile_type_names(p, name, t, names[t], err);
		if (r < 0)
			return r;
	}
	return 0;
}


#define NOW ((int64_t)1700000000 * 1000000000) /* 2023-11-14T22:13:20Z */

/* ---- helpers ----------------------------------------------------------------------------------- */

typedef struct result {
	srv_pyro_batch b;
	int r, status;
	strobe_err err;
} result;

/* params: "key=value" strings, NULL-terminated. */
static result ingest(const char *const *params, const char *ct, const void *body, size_t len,
		     const srv_pyro_limits *lim)
{
	srv_kv kv[16];
	char store[16][512];
	size_t n = 0;
	for (; params[n]; n++) {
		snprintf(store[n], sizeof(store[n]), "%s", params[n]);
		char *eq = strchr(store[n], '=');
		*eq = 0;
		kv[n] = (srv_kv){store[n], eq + 1};
	}
	srv_pyro_request req = {kv, n, ct, body, len, NOW, lim};
	result res;
	memset(&res, 0, sizeof(res));
	res.r = srv_pyro_parse(&req, &res.b, &res.status, &res.err);
	return res;
}

static const srv_pyro_item *item(const result *r, const char *type)
{
	for (size_t i = 0; i < r->b.nitems; i++)
		if (strcmp(r->b.items[i].type, type) == 0)
			return &r->b.items[i];
	return NULL;
}

static const char *label(const srv_pyro_item *it, const char *name)
{
	for (uint32_t i = 0; i < it->nlabels; i++)
		if (strcmp(it->labels[i].name, name) == 0)
			return it->labels[i].value;
	return NULL;
}

/* Value of the single-type profile at the stack "a;b;c" (names of the innermost lines). */
static int64_t stack_value(const strobe_profile *p, const char *want)
{
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		uint32_t fr[64], n = 0;
		for (uint32_t st = strobe_sample(p, s)->stack; st && n < 64;
		     st = strobe_stack_get(p, st)->parent)
			fr[n++] = strobe_stack_get(p, st)->location;
		char buf[512];
		size_t o = 0;
		buf[0] = 0;
		while (n-- > 0) {
			const strobe_location *l = strobe_location_get(p, fr[n]);
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? ";" : "",
					      strobe_str(p, strobe_function_get(p, l->line[0].function)->name));
		}
		if (strcmp(buf, want) == 0)
			return strobe_sample_values(p, s)[0];
	}
	return -1;
}

static void expect_error(const result *r, int status, const char *needle)
{
	if (r->r >= 0 || r->status != status || !strstr(r->err.msg, needle))
		fail_msg("expected %d with '%s', got r=%d status=%d msg='%s'", status, needle, r->r,
			 r->status, r->err.msg);
	assert_int_equal(r->b.nitems, 0);
}

static uint8_t *slurp_raw(const char *name, size_t *len)
{
	FILE *f = fopen(go_fixture(name), "rb");
	if (!f)
		return NULL;
	uint8_t *buf = malloc(1 << 20);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static strobe_profile *decode_file(const char *name)
{
	strobe_profile *p = NULL;
	return strobe_read_profile(go_fixture(name), &p, NULL) < 0 ? NULL : p;
}

/* A multipart/form-data body as Go's mime/multipart writes it. */
typedef struct mp {
	uint8_t *b;
	size_t n, cap;
} mp;

static void mp_put(mp *m, const void *d, size_t n)
{
	if (m->n + n > m->cap) {
		m->cap = (m->n + n) * 2 + 1024;
		m->b = realloc(m->b, m->cap);
	}
	memcpy(m->b + m->n, d, n);
	m->n += n;
}

static void mp_part(mp *m, const char *boundary, const char *name, const void *d, size_t n)
{
	char h[512];
	int l = snprintf(h, sizeof(h),
			 "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s.bin\"\r\n"
			 "Content-Type: application/octet-stream\r\n\r\n",
			 boundary, name, name);
	mp_put(m, h, (size_t)l);
	mp_put(m, d, n);
	mp_put(m, "\r\n", 2);
}

static void mp_end(mp *m, const char *boundary)
{
	char h[128];
	int l = snprintf(h, sizeof(h), "--%s--\r\n", boundary);
	mp_put(m, h, (size_t)l);
}

#define BOUNDARY "f0a8e1c2b3d4"
#define MP_CT "multipart/form-data; boundary=" BOUNDARY

/* ---- name{labels} ------------------------------------------------------------------------------ */

static void test_parse_name(void **state)
{
	char *app;
	srv_pyro_label *l;
	uint32_t n;
	strobe_err err = {{0}};
	assert_int_equal(srv_pyro_parse_name("my.awesome.app.cpu{env=staging, region = us-west-1 }",
					       NULL, &app, &l, &n, &err),
			 0);
	assert_string_equal(app, "my.awesome.app.cpu");
	assert_int_equal(n, 2);
	assert_string_equal(l[0].name, "env");
	assert_string_equal(l[0].value, "staging");
	assert_string_equal(l[1].name, "region");
	assert_string_equal(l[1].value, "us-west-1");
	free(app);
	for (uint32_t i = 0; i < n; i++) {
		free(l[i].name);
		free(l[i].value);
	}
	free(l);
	/* No braces, empty braces, trailing comma, repeated key (last wins), empty value (no
	 * label), values with spaces, '=' and UTF-8. */
	const char *ok[] = {"app", " app{} ", "app{a=1,}", "app{a=1,a=2}", "app{a=}",
			    "app{v=x y=z é}", "svc/x-y_z.1{__session_id__=abc}"};
	const uint32_t counts[] = {0, 0, 1, 1, 0, 1, 1};
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		if (srv_pyro_parse_name(ok[i], NULL, &app, &l, &n, &err) < 0)
			fail_msg("'%s' refused: %s", ok[i], err.msg);
		assert_int_equal(n, counts[i]);
		if (i == 3)
			assert_string_equal(l[0].value, "2");
		if (i == 5)
			assert_string_equal(l[0].value, "x y=z é");
		free(app);
		for (uint32_t j = 0; j < n; j++) {
			free(l[j].name);
			free(l[j].value);
		}
		free(l);
	}
	struct {
		const char *name, *msg;
	} bad[] = {
		{"", "empty"},
		{"{a=b}", "empty"},
		{"my app", "not allowed in the application name"},
		{"app{a-b=c}", "not allowed in label name"},
		{"app{a=b", "not closed"},
		{"app{a=b,c}", "has no '=value'"},
		{"app{a}", "has no '=value'"},
		{"app{a=b}x", "after '}'"},
		{"app{__name__=x}", "reserved"},
		{"app{=x}", "empty name"},
		/* /api/v1/push refuses these too: the read APIs could not show the value. */
		{"app{a=\xff}", "label 'a' has a value that is not UTF-8"},
		{"app{a=x\xc3(y}", "label 'a' has a value that is not UTF-8"},
		{"app{a=\xed\xa0\x80}", "not UTF-8"}, /* a surrogate */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err.msg[0] = 0;
		if (srv_pyro_parse_name(bad[i].name, NULL, &app, &l, &n, &err) != -EINVAL ||
		    !strstr(err.msg, bad[i].msg))
			fail_msg("'%s': expected -EINVAL with '%s', got '%s'", bad[i].name, bad[i].msg,
				 err.msg);
		assert_null(app);
		assert_null(l);
	}
	/* Caps. */
	srv_pyro_limits lim = {.max_labels = 2, .max_label_value = 4};
	assert_int_equal(srv_pyro_parse_name("a{x=1,y=2,z=3}", &lim, &app, &l, &n, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "more than 2 labels"));
	assert_int_equal(srv_pyro_parse_name("a{x=12345}", &lim, &app, &l, &n, &err), -EINVAL);
	assert_int_equal(srv_pyro_parse_name("abcde", &lim, &app, &l, &n, &err), -EINVAL);
}

/* ---- from/until -------------------------------------------------------------------------------- */

static void test_parse_time(void **state)
{
	const int64_t s = 1600000000;
	assert_int_equal(srv_pyro_parse_time("1600000000", NOW), s * 1000000000);
	assert_int_equal(srv_pyro_parse_time("1600000000123", NOW), s * 1000000000 + 123000000);
	assert_int_equal(srv_pyro_parse_time("1600000000123456", NOW), s * 1000000000 + 123456000);
	assert_int_equal(srv_pyro_parse_time("1600000000123456789", NOW), s * 1000000000 + 123456789);
	assert_int_equal(srv_pyro_parse_time(" 1_600_000_000 ", NOW), s * 1000000000);
	assert_int_equal(srv_pyro_parse_time("20200913", NOW), (int64_t)1599955200 * 1000000000);
	assert_int_equal(srv_pyro_parse_time("now-1h", NOW), NOW - (int64_t)3600 * 1000000000);
	assert_int_equal(srv_pyro_parse_time("now-30min", NOW), NOW - (int64_t)1800 * 1000000000);
	assert_int_equal(srv_pyro_parse_time("now+2d", NOW), NOW + (int64_t)172800 * 1000000000);
	assert_int_equal(srv_pyro_parse_time("now-1h30m", NOW), NOW - (int64_t)5400 * 1000000000);
	assert_int_equal(srv_pyro_parse_time("garbage", NOW), NOW);
	assert_int_equal(srv_pyro_parse_time("99999999999999999999999", NOW), INT64_MAX);
}

/* ---- folded and lines -------------------------------------------------------------------------- */

static void test_folded_cpu(void **state)
{
	const char body[] = "main;work;hash 30\nmain;idle 5\r\nno-count-line\nmain;work;hash 2\n"
			    "main;zero 0\n";
	const char *p[] = {"name=shop.api.cpu{env=prod,region=eu}", "from=1700000000",
			   "until=1700000010", "sampleRate=100", "spyName=ebpfspy", NULL};
	result r = ingest(p, "text/plain", body, sizeof(body) - 1, NULL);
	if (r.r < 0)
		fail_msg("%s", r.err.msg);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.b.nitems, 1);
	const srv_pyro_item *it = item(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
	assert_non_null(it);
	/* 100 Hz: each sample is 10 ms. */
	assert_int_equal(stack_value(it->profile, "main;work;hash"), 32 * 10000000LL);
	assert_int_equal(stack_value(it->profile, "main;idle"), 5 * 10000000LL);
	assert_int_equal(stack_value(it->profile, "main;zero"), -1);
	assert_int_equal(it->profile->period, 10000000);
	assert_int_equal(it->from_ns, 1700000000LL * 1000000000);
	assert_int_equal(it->until_ns, 1700000010LL * 1000000000);
	assert_int_equal(it->aggregation, STROBE_AGG_SUM);
	assert_string_equal(label(it, "service_name"), "shop.api");
	assert_string_equal(label(it, "env"), "prod");
	assert_string_equal(label(it, "region"), "eu");
	assert_string_equal(label(it, "pyroscope_spy"), "ebpfspy");
	for (uint32_t i = 1; i < it->nlabels; i++)
		assert_true(strcmp(it->labels[i - 1].name, it->labels[i].name) < 0);
	srv_pyro_batch_free(&r.b);

	/* sampleRate=0: counts stay samples. No suffix: cpu. No spyName: "unknown". */
	const char *p2[] = {"name=shop", "sampleRate=0", "aggregationType=average", NULL};
	r = ingest(p2, NULL, body, sizeof(body) - 1, NULL);
	assert_int_equal(r.r, 0);
	it = item(&r, "process_cpu:samples:count:samples:count");
	assert_non_null(it);
	assert_int_equal(stack_value(it->profile, "main;work;hash"), 32);
	assert_int_equal(it->aggregation, STROBE_AGG_AVERAGE);
	assert_int_equal(it->from_ns, NOW); /* missing from/until are now */
	assert_string_equal(label(it, "service_name"), "shop");
	assert_string_equal(label(it, "pyroscope_spy"), "unknown");
	srv_pyro_batch_free(&r.b);

	/* spyName becomes the label pyroscope_spy: its value obeys the labels' rules. */
	const char *p3[] = {"name=shop", "spyName=go\xffspy", NULL};
	r = ingest(p3, NULL, body, sizeof(body) - 1, NULL);
	assert_int_equal(r.r, -EINVAL);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.err.msg, "spyName: label 'pyroscope_spy' has a value that is not UTF-8"));
	assert_int_equal(r.b.nitems, 0);
	srv_pyro_batch_free(&r.b);
}

static void test_folded_types(void **state)
{
	const char body[] = "a;b 7\n";
	struct {
		const char *name, *type;
		int64_t v;
	} cases[] = {
		{"name=x.alloc_objects", "memory:alloc_objects:count:alloc_objects:count", 7},
		{"name=x.inuse_space", "memory:inuse_space:bytes:inuse_space:bytes", 7},
		{"name=x.mutex_duration", "mutex:delay:nanoseconds:delay:nanoseconds", 7},
		{"name=x.block_count", "block:contentions:count:contentions:count", 7},
		{"name=x.goroutines", "goroutine:goroutines:count:goroutines:count", 7},
		{"name=x.wall", "wall:wall:nanoseconds:cpu:nanoseconds", 7 * 10000000LL},
		{"name=x.itimer", "process_cpu:cpu:nanoseconds:cpu:nanoseconds", 7 * 10000000LL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *p[] = {cases[i].name, "sampleRate=100", NULL};
		result r = ingest(p, NULL, body, sizeof(body) - 1, NULL);
		if (r.r < 0 || r.b.nitems != 1 || strcmp(r.b.items[0].type, cases[i].type) != 0)
			fail_msg("%s: got r=%d '%s' (%s)", cases[i].name, r.r,
				 r.b.nitems ? r.b.items[0].type : "", r.err.msg);
		assert_int_equal(stack_value(r.b.items[0].profile, "a;b"), cases[i].v);
		assert_string_equal(label(&r.b.items[0], "service_name"), "x");
		srv_pyro_batch_free(&r.b);
	}
	const char *bad[] = {"name=x.nonsense", NULL};
	result r = ingest(bad, NULL, body, sizeof(body) - 1, NULL);
	expect_error(&r, 400, "unknown profile type '.nonsense'");
}

static void test_lines_and_gzip(void **state)
{
	const char body[] = "main;a\nmain;b\nmain;a\n\nmain;a\r\nfoo bar;baz 3\n";
	const char *p[] = {"name=app.cpu", "format=lines", "sampleRate=0", NULL};
	result r = ingest(p, NULL, body, sizeof(body) - 1, NULL);
	assert_int_equal(r.r, 0);
	const srv_pyro_item *it = item(&r, "process_cpu:samples:count:samples:count");
	assert_non_null(it);
	assert_int_equal(stack_value(it->profile, "main;a"), 3);
	assert_int_equal(stack_value(it->profile, "main;b"), 1);
	assert_int_equal(stack_value(it->profile, "foo bar;baz 3"), 1); /* the whole line */
	srv_pyro_batch_free(&r.b);

	/* A gzipped folded body reads the same. */
	const char folded[] = "main;a 4\nmain;b 1\n";
	uint8_t *gz;
	size_t gzlen;
	assert_int_equal(strobe_gzip((const uint8_t *)folded, sizeof(folded) - 1, &gz, &gzlen), 0);
	const char *p2[] = {"name=app.cpu", "sampleRate=0", NULL};
	r = ingest(p2, NULL, gz, gzlen, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(stack_value(r.b.items[0].profile, "main;a"), 4);
	srv_pyro_batch_free(&r.b);
	/* Corrupt gzip is a 422. */
	gz[gzlen / 2] ^= 0xff;
	gz[gzlen / 2 + 1] ^= 0xff;
	r = ingest(p2, NULL, gz, gzlen, NULL);
	assert_true(r.r < 0);
	assert_int_equal(r.status, 422);
	free(gz);
	/* A body that inflates past the cap is a 413. */
	char *big = calloc(1, 1 << 20);
	memset(big, 'a', (1 << 20) - 3);
	memcpy(big + (1 << 20) - 3, " 1", 2);
	assert_int_equal(strobe_gzip((const uint8_t *)big, (1 << 20) - 1, &gz, &gzlen), 0);
	srv_pyro_limits lim = {.max_decompressed = 1000};
	r = ingest(p2, NULL, gz, gzlen, &lim);
	expect_error(&r, 413, "after gunzip");
	free(gz);
	free(big);
}

static void test_request_errors(void **state)
{
	const char body[] = "a;b 1\n";
	const char *noname[] = {"from=1", NULL};
	result r = ingest(noname, NULL, body, sizeof(body) - 1, NULL);
	expect_error(&r, 400, "name");
	const char *badname[] = {"name=app{a=b", NULL};
	r = ingest(badname, NULL, body, sizeof(body) - 1, NULL);
	expect_error(&r, 400, "not closed");
	const char *badagg[] = {"name=app.cpu", "aggregationType=max", NULL};
	r = ingest(badagg, NULL, body, sizeof(body) - 1, NULL);
	expect_error(&r, 400, "aggregationType");
	const char *jfr[] = {"name=app.cpu", "format=jfr", NULL};
	r = ingest(jfr, NULL, body, sizeof(body) - 1, NULL);
	expect_error(&r, 422, "jfr: byte 0: not a JFR file");
	const char *trie[] = {"name=app.cpu", NULL};
	r = ingest(trie, "binary/octet-stream+trie", body, sizeof(body) - 1, NULL);
	expect_error(&r, 415, "not supported");
	srv_pyro_limits lim = {.max_body = 4};
	r = ingest(trie, NULL, body, sizeof(body) - 1, &lim);
	expect_error(&r, 413, "larger than 4 bytes");
	const char badcount[] = "a;b 1\na;c x12\n";
	r = ingest(trie, NULL, badcount, sizeof(badcount) - 1, NULL);
	expect_error(&r, 422, "body:2:");
	const char neg[] = "a;b -4\n";
	r = ingest(trie, NULL, neg, sizeof(neg) - 1, NULL);
	expect_error(&r, 422, "negative");
	/* Deeper than the cap. */
	size_t deep_len = (STROBE_MAX_DEPTH + 1) * 2 + 3;
	char *deep = malloc(deep_len + 1);
	size_t o = 0;
	for (unsigned i = 0; i <= STROBE_MAX_DEPTH; i++) {
		deep[o++] = 'f';
		deep[o++] = i < STROBE_MAX_DEPTH ? ';' : ' ';
	}
	deep[o++] = '1';
	r = ingest(trie, NULL, deep, o, NULL);
	expect_error(&r, 422, "deeper");
	free(deep);
	/* An empty body is nothing to store, and a success. */
	r = ingest(trie, NULL, "", 0, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.b.nitems, 0);
	/* An unreadable sampleRate is the default (100 Hz), as in Pyroscope. */
	const char *badrate[] = {"name=app.cpu", "sampleRate=fast", NULL};
	r = ingest(badrate, NULL, body, sizeof(body) - 1, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(stack_value(r.b.items[0].profile, "a;b"), 10000000);
	srv_pyro_batch_free(&r.b);
}

/* ---- pprof ------------------------------------------------------------------------------------- */

static void test_type_names_go(void **state)
{
	struct {
		const char *file, *names[4];
	} cases[] = {
		{"go_cpu.pb.gz",
		 {"process_cpu:samples:count:cpu:nanoseconds",
		  "process_cpu:cpu:nanoseconds:cpu:nanoseconds"}},
		{"go_heap.pb.gz",
		 {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes",
		  "memory:inuse_objects:count:space:bytes", "memory:inuse_space:bytes:space:bytes"}},
		{"go_allocs.pb.gz",
		 {"memory:alloc_objects:count:space:bytes", "memory:alloc_space:bytes:space:bytes",
		  "memory:inuse_objects:count:space:bytes", "memory:inuse_space:bytes:space:bytes"}},
		{"go_mutex.pb.gz",
		 {"mutex:contentions:count:contentions:count",
		  "mutex:delay:nanoseconds:contentions:count"}},
		{"go_block.pb.gz",
		 {"block:contentions:count:contentions:count",
		  "block:delay:nanoseconds:contentions:count"}},
		{"go_goroutine.pb.gz", {"goroutine:goroutine:count:goroutine:count"}},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		strobe_profile *p = decode_file(cases[i].file);
		if (!p)
			SKIP_CASE(GO_FIXTURE_MISSING);
		char names[4][STROBE_PTYPE_MAX];
		strobe_err err = {{0}};
		assert_int_equal(type_names(p, NULL, names, &err), 0);
		for (uint32_t t = 0; t < p->ntypes; t++)
			if (strcmp(names[t], cases[i].names[t]) != 0)
				fail_msg("%s column %u: %s, expected %s", cases[i].file, t, names[t],
					 cases[i].names[t]);
		/* The endpoint as a hint decides: a block profile scraped from /mutex is mutex. */
		assert_int_equal(type_names(p, "mutex", names, &err), 0);
		assert_true(strncmp(names[0], "mutex:", 6) == 0);
		assert_int_equal(type_names(p, "heap", names, &err), 0);
		assert_true(strncmp(names[0], "memory:", 7) == 0);
		assert_int_equal(type_names(p, "profile", names, &err), 0);
		assert_true(strncmp(names[0], "process_cpu:", 12) == 0);
		strobe_profile_free(p);
	}
	/* Colons or control bytes in a sample type cannot break the five-part name: refused. */
	strobe_profile *q = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(q, "a:b", "c"), 0);
	char one[1][STROBE_PTYPE_MAX];
	strobe_err err = {{0}};
	assert_int_equal(type_names(q, "custom", one, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "'a:b'"));
	assert_int_equal(strobe_profile_add_type(q, "x", "c\nd"), 0);
	assert_int_equal(strobe_profile_type_names(q, "custom", 1, one[0], &err), -EINVAL);
	/* Empty units are counts, an empty period type is the sample type's. */
	assert_int_equal(strobe_profile_add_type(q, "y", ""), 0);
	assert_int_equal(strobe_profile_type_names(q, "custom", 2, one[0], &err), 0);
	assert_string_equal(one[0], "custom:y:count:y:count");
	strobe_profile_free(q);
}

static void test_pprof_raw_and_gzip(void **state)
{
	size_t len;
	uint8_t *gz = slurp_raw("go_cpu.pb.gz", &len);
	strobe_profile *ref = decode_file("go_cpu.pb.gz");
	if (!gz || !ref)
		SKIP_CASE(GO_FIXTURE_MISSING);
	const char *p[] = {"name=checkout{env=prod}", "format=pprof", "spyName=gospy",
			   "from=1700000000", "until=1700000010", NULL};
	result r = ingest(p, "application/octet-stream", gz, len, NULL);
	if (r.r < 0)
		fail_msg("%s", r.err.msg);
	assert_int_equal(r.b.nitems, 2);
	const srv_pyro_item *cpu = item(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
	const srv_pyro_item *smp = item(&r, "process_cpu:samples:count:cpu:nanoseconds");
	assert_non_null(cpu);
	assert_non_null(smp);
	assert_int_equal(strobe_total(cpu->profile, 0), strobe_total(ref, 1));
	assert_int_equal(strobe_total(smp->profile, 0), strobe_total(ref, 0));
	assert_int_equal(cpu->profile->time_nanos, ref->time_nanos); /* a real clock is kept */
	assert_string_equal(label(cpu, "service_name"), "checkout");
	assert_string_equal(label(cpu, "env"), "prod");
	assert_string_equal(label(cpu, "pyroscope_spy"), "gospy");
	/* pprof sample labels (pprof.Do) stay on the samples. */
	bool has_endpoint = false;
	for (uint32_t s = 1; s <= strobe_nsamples(cpu->profile); s++) {
		uint32_t n;
		const strobe_label *l =
			strobe_labelset_get(cpu->profile, strobe_sample(cpu->profile, s)->labels, &n);
		for (uint32_t i = 0; i < n; i++)
			has_endpoint |= !strcmp(strobe_str(cpu->profile, l[i].key), "endpoint");
	}
	assert_true(has_endpoint);
	srv_pyro_batch_free(&r.b);

	/* The same profile uncompressed. */
	uint8_t *raw;
	size_t rawlen;
	assert_int_equal(strobe_gunzip(gz, len, &raw, &rawlen, NULL), 0);
	r = ingest(p, NULL, raw, rawlen, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(r.b.nitems, 2);
	assert_int_equal(strobe_total(item(&r, "process_cpu:cpu:nanoseconds:cpu:nanoseconds")->profile, 0),
			 strobe_total(ref, 1));
	srv_pyro_batch_free(&r.b);
	/* Truncated: 422 naming the profile. */
	r = ingest(p, NULL, raw, rawlen / 2, NULL);
	expect_error(&r, 422, "profile");
	/* A service_name label moves the app name to app_name. */
	const char *p2[] = {"name=checkout{service_name=shop}", "format=pprof", NULL};
	r = ingest(p2, NULL, raw, rawlen, NULL);
	assert_int_equal(r.r, 0);
	assert_string_equal(label(&r.b.items[0], "service_name"), "shop");
	assert_string_equal(label(&r.b.items[0], "app_name"), "checkout");
	srv_pyro_batch_free(&r.b);
	free(raw);
	free(gz);
	strobe_profile_free(ref);
}

static void test_multipart_prev_profile(void **state)
{
	strobe_profile *cur = decode_file("go_allocs.pb.gz");
	if (!cur)
		SKIP_CASE(GO_FIXTURE_MISSING);
	/* prev: the same counters halved, as an older cumulative snapshot would be. */
	strobe_profile *prev = strobe_profile_clone(cur);
	strobe_profile_scale(prev, 0.5);
	uint8_t *curb, *prevb;
	size_t curn, prevn;
	assert_int_equal(strobe_pprof_encode(cur, &curb, &curn), 0);
	assert_int_equal(strobe_pprof_encode(prev, &prevb, &prevn), 0);
	const char stc[] = "{\"alloc_objects\":{\"units\":\"objects\",\"cumulative\":true},"
			   "\"alloc_space\":{\"units\":\"bytes\",\"cumulative\":true},"
			   "\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"},"
			   "\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}";
	mp m = {0};
	mp_part(&m, BOUNDARY, "profile", curb, curn);
	mp_part(&m, BOUNDARY, "prev_profile", prevb, prevn);
	mp_part(&m, BOUNDARY, "sample_type_config", stc, sizeof(stc) - 1);
	mp_end(&m, BOUNDARY);
	const char *p[] = {"name=shop{env=prod}", "spyName=gospy", NULL};
	result r = ingest(p, MP_CT, m.b, m.n, NULL);
	if (r.r < 0)
		fail_msg("%s", r.err.msg);
	assert_int_equal(r.b.nitems, 4);
	const char *types[] = {"memory:alloc_objects:count:space:bytes",
			       "memory:alloc_space:bytes:space:bytes",
			       "memory:inuse_objects:count:space:bytes",
			       "memory:inuse_space:bytes:space:bytes"};
	for (int t = 0; t < 4; t++) {
		const srv_pyro_item *it = item(&r, types[t]);
		if (!it)
			fail_msg("no item %s", types[t]);
		int64_t want = t < 2 ? strobe_total(cur, t) - strobe_total(prev, t) : strobe_total(cur, t);
		assert_int_equal(strobe_total(it->profile, 0), want);
		assert_int_equal(it->aggregation, t < 2 ? STROBE_AGG_SUM : STROBE_AGG_AVERAGE);
		assert_string_equal(label(it, "service_name"), "shop");
	}
	srv_pyro_batch_free(&r.b);
	free(m.b);

	/* Cumulative types with no prev_profile have nothing to diff against: left out. */
	memset(&m, 0, sizeof(m));
	mp_part(&m, BOUNDARY, "profile", curb, curn);
	mp_part(&m, BOUNDARY, "sample_type_config", stc, sizeof(stc) - 1);
	mp_end(&m, BOUNDARY);
	r = ingest(p, MP_CT, m.b, m.n, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(r.b.nitems, 2);
	assert_null(item(&r, types[0]));
	assert_non_null(item(&r, types[3]));
	srv_pyro_batch_free(&r.b);
	free(m.b);

	/* A prev_profile of other sample types is refused, naming it. */
	strobe_profile *other = decode_file("go_mutex.pb.gz");
	uint8_t *ob;
	size_t on;
	assert_int_equal(strobe_pprof_encode(other, &ob, &on), 0);
	memset(&m, 0, sizeof(m));
	mp_part(&m, BOUNDARY, "profile", curb, curn);
	mp_part(&m, BOUNDARY, "prev_profile", ob, on);
	mp_end(&m, BOUNDARY);
	r = ingest(p, MP_CT, m.b, m.n, NULL);
	expect_error(&r, 422, "prev_profile");
	free(m.b);
	free(ob);
	strobe_profile_free(other);
	free(curb);
	free(prevb);
	strobe_profile_free(cur);
	strobe_profile_free(prev);
}

/* The Go SDK's mutex and block uploads differ only by the display names in their config. */
static void test_multipart_sdk_configs(void **state)
{
	const char mutex_stc[] =
		"{\"contentions\":{\"display-name\":\"mutex_count\",\"units\":\"lock_samples\"},"
		"\"delay\":{\"display-name\":\"mutex_duration\",\"units\":\"lock_nanoseconds\"}}";
	const char block_stc[] =
		"{\"contentions\":{\"display-name\":\"block_count\",\"units\":\"lock_samples\"},"
		"\"delay\":{\"display-name\":\"block_duration\",\"units\":\"lock_nanoseconds\"}}";
	size_t len;
	uint8_t *mutex = slurp_raw("go_mutex.pb.gz", &len);
	if (!mutex)
		SKIP_CASE(GO_FIXTURE_MISSING);
	for (int k = 0; k < 2; k++) {
		mp m = {0};
		/* quoted boundary, LF-only line ends, a preamble: all as Go's reader accepts */
		mp_put(&m, "preamble\n", 9);
		char h[256];
		int l = snprintf(h, sizeof(h),
				 "--%s\nContent-Disposition: form-data; name=\"profile\"\n\n", BOUNDARY);
		mp_put(&m, h, (size_t)l);
		mp_put(&m, mutex, len);
		l = snprintf(h, sizeof(h),
			     "\n--%s\ncontent-disposition: form-data; name=sample_type_config\n\n",
			     BOUNDARY);
		mp_put(&m, h, (size_t)l);
		const char *stc = k ? block_stc : mutex_stc;
		mp_put(&m, stc, strlen(stc));
		l = snprintf(h, sizeof(h), "\n--%s--", BOUNDARY);
		mp_put(&m, h, (size_t)l);
		const char *p[] = {"name=svc", NULL};
		result r = ingest(p, "multipart/form-data; boundary=\"" BOUNDARY "\"", m.b, m.n, NULL);
		if (r.r < 0)
			fail_msg("%s", r.err.msg);
		assert_int_equal(r.b.nitems, 2);
		const char *want = k ? "block:delay:nanoseconds:contentions:count"
				     : "mutex:delay:nanoseconds:contentions:count";
		if (!item(&r, want))
			fail_msg("no %s (got %s)", want, r.b.items[0].type);
		srv_pyro_batch_free(&r.b);
		free(m.b);
	}
	free(mutex);
}

static void test_multipart_errors(void **state)
{
	const char *p[] = {"name=svc", NULL};
	const char body[] = "--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\nxx";
	result r = ingest(p, "multipart/form-data", body, sizeof(body) - 1, NULL);
	expect_error(&r, 422, "boundary");
	r = ingest(p, MP_CT, body, sizeof(body) - 1, NULL);
	expect_error(&r, 422, "no closing boundary");
	r = ingest(p, MP_CT, "nothing here", 12, NULL);
	expect_error(&r, 422, "no boundary line");
	/* No profile part: nothing to store. */
	mp m = {0};
	mp_part(&m, BOUNDARY, "other", "x", 1);
	mp_end(&m, BOUNDARY);
	r = ingest(p, MP_CT, m.b, m.n, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.b.nitems, 0);
	free(m.b);
	/* A bad sample_type_config. */
	size_t len;
	uint8_t *prof = slurp_raw("go_goroutine.pb.gz", &len);
	if (!prof)
		SKIP_CASE(GO_FIXTURE_MISSING);
	const char *bad[] = {"[1,2]", "{\"goroutine\":{\"cumulative\":\"yes\"}}", "{\"a\":",
			     "{\"goroutine\":{\"aggregation\":\"max\"}}"};
	for (size_t i = 0; i < 4; i++) {
		memset(&m, 0, sizeof(m));
		mp_part(&m, BOUNDARY, "profile", prof, len);
		mp_part(&m, BOUNDARY, "sample_type_config", bad[i], strlen(bad[i]));
		mp_end(&m, BOUNDARY);
		r = ingest(p, MP_CT, m.b, m.n, NULL);
		expect_error(&r, 422, "sample_type_config");
		free(m.b);
	}
	/* Goroutines: the default config averages them. */
	memset(&m, 0, sizeof(m));
	mp_part(&m, BOUNDARY, "profile", prof, len);
	mp_end(&m, BOUNDARY);
	r = ingest(p, MP_CT, m.b, m.n, NULL);
	assert_int_equal(r.r, 0);
	assert_int_equal(r.b.nitems, 1);
	assert_string_equal(r.b.items[0].type, "goroutine:goroutine:count:goroutine:count");
	assert_int_equal(r.b.items[0].aggregation, STROBE_AGG_AVERAGE);
	srv_pyro_batch_free(&r.b);
	free(m.b);
	free(prof);
}

static void test_stc_parse(void **state)
{
	const char doc[] = "{\"samples\":{\"display-name\":\"cpu\",\"units\":\"samples\","
			   "\"sampled\":true},\"inuse_space\":{\"aggregation\":\"average\"},"
			   "\"x\":null,\"alloc_space\":{\"cumulative\":true,\"unknown\":[1]}}";
	srv_pyro_stc *v;
	size_t n;
	strobe_err err = {{0}};
	assert_int_equal(srv_pyro_stc_parse(doc, sizeof(doc) - 1, &v, &n, &err), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].type, "samples")) {
			assert_string_equal(v[i].display, "cpu");
			assert_true(v[i].sampled);
			assert_int_equal(v[i].aggregation, -1);
		} else if (!strcmp(v[i].type, "inuse_space")) {
			assert_int_equal(v[i].aggregation, STROBE_AGG_AVERAGE);
			assert_false(v[i].cumulative);
		} else {
			assert_string_equal(v[i].type, "alloc_space");
			assert_true(v[i].cumulative);
		}
	}
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_name),
		cmocka_unit_test(test_parse_time),
		cmocka_unit_test(test_folded_cpu),
		cmocka_unit_test(test_folded_types),
		cmocka_unit_test(test_lines_and_gzip),
		cmocka_unit_test(test_request_errors),
		cmocka_unit_test(test_type_names_go),
		cmocka_unit_test(test_pprof_raw_and_gzip),
		cmocka_unit_test(test_multipart_prev_profile),
		cmocka_unit_test(test_multipart_sdk_configs),
		cmocka_unit_test(test_multipart_errors),
		cmocka_unit_test(test_stc_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
