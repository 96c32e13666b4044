// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the JFR reader (lib/jfr.c) on recordings built here byte by byte, so every
 * encoding is known: a chunk header, a metadata event (string table, class and field elements),
 * a checkpoint with constant pools, and events.
 *   leb128     integers of 1 to 9 bytes (a stack-trace key of 2^62 + 5 takes all nine), event
 *              sizes padded to 4 bytes as the JDK writes them
 *   strings    method names in UTF-8, Latin-1 (é -> UTF-8), UTF-16 chars, and a reference into
 *              the java.lang.String pool
 *   pools      a stack trace resolved through frames -> methods -> classes -> symbols, leaf
 *              first in the file, root first in the profile; names "pkg/Main.method"
 *   columns    cpu from jdk.ExecutionSample, lock_count/lock_duration from jdk.JavaMonitorEnter
 *              (ticks to ns), events found by name whatever their ids
 *   labels     an event's contextId picks its labels from the contexts given
 *   ingest     /ingest?format=jfr with a multipart form: Pyroscope's type names, 1e9/sampleRate
 *              ns per cpu sample, the app name without .cpu, the labels part on the samples
 *   bounds     every truncation and every byte set to 0x00, 0x7f, 0x80 or 0xff is decoded or
 *              refused with a message naming the input and a byte offset (never a crash: this
 *              binary runs under ASan and UBSan); a tiny memory cap is -E2BIG
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

#include "../../server/pyroscope.h"
#include "strobe/codec.h"
#include "strobe/jfr.h"

typedef struct wb {
	uint8_t b[8192];
	size_t n;
} wb;

static void put(wb *w, const void *p, size_t n)
{
	assert_true(w->n + n <= sizeof(w->b));
	memcpy(w->b + w->n, p, n);
	w->n += n;
}
static void u8(wb *w, uint8_t v) { put(w, &v, 1); }
static void leb(wb *w, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		if (v < 0x80) {
			u8(w, (uint8_t)v);
			return;
		}
		u8(w, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	u8(w, (uint8_t)v); /* the ninth byte: all 8 bits */
}
static void be(wb *w, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--)
		u8(w, (uint8_t)(v >> (8 * i)));
}
static void utf8(wb *w, const char *s)
{
	u8(w, 3);
	leb(w, strlen(s));
	put(w, s, strlen(s));
}
/* An event: its size as a 4-byte padded LEB128 (as the JDK writes it), then the body. */
static void event(wb *w, const wb *body)
{
	uint32_t size = (uint32_t)body->n + 4;
	for (int i = 0; i < 3; i++)
		u8(w, (uint8_t)((size >> (7 * i)) & 0x7f) | 0x80);
	u8(w, (uint8_t)(size >> 21));
	put(w, body->b, body->n);
}

/* metadata strings, by index */
static const char *const S[] = {"root", "metadata", "class", "field", "id", "name", "class",
				"constantPool", "true", "dimension", "1",
				/* 11.. */ "long", "int", "boolean", "java.lang.String",
				"jdk.types.Symbol", "java.lang.Class", "jdk.types.Method",
				"jdk.types.StackFrame", "jdk.types.StackTrace",
				"jdk.ExecutionSample", "jdk.JavaMonitorEnter",
				/* 22.. */ "string", "type", "method", "lineNumber", "truncated",
				"frames", "startTime", "stackTrace", "contextId", "duration",
				/* 32.. ids */ "4", "5", "6", "7", "20", "21", "22", "23", "24", "300",
				"301", "region"};
enum { S_ROOT, S_META, S_CLASS, S_FIELD, S_ID, S_NAME, S_FCLASS, S_CP, S_TRUE, S_DIM, S_ONE };
#define NS (sizeof(S) / sizeof(*S))

static int sidx(const char *s)
{
	for (size_t i = 0; i < NS; i++)
		if (!strcmp(S[i], s))
			return (int)i;
	fail_msg("no string %s", s);
	return -1;
}

typedef struct fdesc {
	const char *name, *type_id;
	bool cp, array;
} fdesc;

static void field(wb *w, fdesc f)
{
	leb(w, S_FIELD);
	leb(w, 2 + f.cp + f.array);
	leb(w, S_NAME), leb(w, (uint64_t)sidx(f.name));
	leb(w, S_FCLASS), leb(w, (uint64_t)sidx(f.type_id));
	if (f.cp)
		leb(w, S_CP), leb(w, S_TRUE);
	if (f.array)
		leb(w, S_DIM), leb(w, S_ONE);
	leb(w, 0); /* no children */
}

static void klass(wb *w, const char *id, const char *name, const fdesc *f, int nf)
{
	leb(w, S_CLASS);
	leb(w, 2);
	leb(w, S_ID), leb(w, (uint64_t)sidx(id));
	leb(w, S_NAME), leb(w, (uint64_t)sidx(name));
	leb(w, (uint64_t)nf);
	for (int i = 0; i < nf; i++)
		field(w, f[i]);
}

#define STK_KEY ((1ull << 62) + 5)

/* Builds the recording into out; returns its size. */
static size_t build(uint8_t *out, size_t cap)
{
	static wb f, body, meta, cp;
	memset(&f, 0, sizeof(f));
	memset(&meta, 0, sizeof(meta));
	memset(&cp, 0, sizeof(cp));
	/* the metadata event */
	leb(&meta, 0); /* type */
	leb(&meta, 0), leb(&meta, 0), leb(&meta, 1);
	leb(&meta, NS);
	for (size_t i = 0; i < NS; i++)
		utf8(&meta, S[i]);
	leb(&meta, S_ROOT), leb(&meta, 0), leb(&meta, 2); /* root: 2 children */
	leb(&meta, S_META), leb(&meta, 0), leb(&meta, 11);
	klass(&meta, "4", "long", NULL, 0);
	klass(&meta, "5", "int", NULL, 0);
	klass(&meta, "6", "boolean", NULL, 0);
	klass(&meta, "7", "java.lang.String", NULL, 0);
	klass(&meta, "20", "jdk.types.Symbol", (fdesc[]){{"string", "7", 0, 0}}, 1);
	klass(&meta, "21", "java.lang.Class", (fdesc[]){{"name", "20", 1, 0}}, 1);
	klass(&meta, "22", "jdk.types.Method",
	      (fdesc[]){{"type", "21", 1, 0}, {"name", "20", 1, 0}}, 2);
	klass(&meta, "23", "jdk.types.StackFrame",
	      (fdesc[]){{"method", "22", 1, 0}, {"lineNumber", "5", 0, 0}}, 2);
	klass(&meta, "24", "jdk.types.StackTrace",
	      (fdesc[]){{"truncated", "6", 0, 0}, {"frames", "23", 0, 1}}, 2);
	/* event ids far from the JDK's: found by name */
	klass(&meta, "300", "jdk.ExecutionSample",
	      (fdesc[]){{"startTime", "4", 0, 0}, {"stackTrace", "24", 1, 0},
			{"contextId", "4", 0, 0}},
	      3);
	klass(&meta, "301", "jdk.JavaMonitorEnter",
	      (fdesc[]){{"startTime", "4", 0, 0}, {"duration", "4", 0, 0},
			{"stackTrace", "24", 1, 0}},
	      3);
	leb(&meta, (uint64_t)sidx("region")), leb(&meta, 0), leb(&meta, 0);

	/* the checkpoint */
	leb(&cp, 1), leb(&cp, 0), leb(&cp, 0), leb(&cp, 0), u8(&cp, 1);
	leb(&cp, 5); /* pools */
	leb(&cp, 7), leb(&cp, 1), leb(&cp, 9), utf8(&cp, "leaf"); /* String pool */
	leb(&cp, 20), leb(&cp, 4);                                /* Symbols */
	leb(&cp, 1), utf8(&cp, "pkg/Main");
	leb(&cp, 2), u8(&cp, 5), leb(&cp, 4), put(&cp, "caf\xe9", 4); /* Latin-1 */
	leb(&cp, 3), u8(&cp, 4), leb(&cp, 3), leb(&cp, 'r'), leb(&cp, 'u'), leb(&cp, 0x2192);
	leb(&cp, 4), u8(&cp, 2), leb(&cp, 9); /* a reference into the String pool */
	leb(&cp, 21), leb(&cp, 1), leb(&cp, 1), leb(&cp, 1); /* Class 1 named symbol 1 */
	leb(&cp, 22), leb(&cp, 3);                           /* Methods */
	leb(&cp, 1), leb(&cp, 1), leb(&cp, 2);
	leb(&cp, 2), leb(&cp, 1), leb(&cp, 3);
	leb(&cp, 3), leb(&cp, 1), leb(&cp, 4);
	leb(&cp, 24), leb(&cp, 1), leb(&cp, STK_KEY), u8(&cp, 0), leb(&cp, 3);
	leb(&cp, 3), leb(&cp, 10); /* leaf first */
	leb(&cp, 1), leb(&cp, 20);
	leb(&cp, 2), leb(&cp, 30);

	f.n = 68; /* the header, filled below */
	size_t cpoff = f.n;
	event(&f, &cp);
	for (int i = 0; i < 2; i++) {
		memset(&body, 0, sizeof(body));
		leb(&body, 300), leb(&body, 1000 + i), leb(&body, STK_KEY), leb(&body, 7);
		event(&f, &body);
	}
	memset(&body, 0, sizeof(body));
	leb(&body, 301), leb(&body, 2000), leb(&body, 5000000), leb(&body, STK_KEY);
	event(&f, &body);
	size_t moff = f.n;
	event(&f, &meta);
	wb h = {0};
	put(&h, "FLR\0", 4);
	be(&h, 2, 2), be(&h, 1, 2);
	be(&h, f.n, 8), be(&h, cpoff, 8), be(&h, moff, 8);
	be(&h, 1700000000000000000ull, 8), be(&h, 2000000000, 8), be(&h, 0, 8),
		be(&h, 1000000000, 8);
	be(&h, 1, 4); /* compressed integers */
	memcpy(f.b, h.b, 68);
	assert_true(f.n <= cap);
	memcpy(out, f.b, f.n);
	return f.n;
}

static char *folded(strobe_profile *p, int type)
{
	char *s = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&s, &n);
	assert_non_null(m);
	assert_int_equal(strobe_folded_write(m, p, type, STROBE_GRAN_FUNCTIONS), 0);
	fclose(m);
	return s;
}

static void test_decode(void **state)
{
	(void)state;
	uint8_t buf[8192];
	size_t n = build(buf, sizeof(buf));
	assert_int_equal(strobe_detect(buf, n), STROBE_FMT_JFR);
	/* JFR_SEED_OUT=FILE keeps the recording: tests/fuzz/corpus/fuzz_jfr/built-by-test_jfr. */
	const char *seed = getenv("JFR_SEED_OUT");
	FILE *sf = seed ? fopen(seed, "wb") : NULL;
	if (sf) {
		fwrite(buf, 1, n, sf);
		fclose(sf);
	}
	strobe_profile *p;
	strobe_err err = {{0}};
	assert_int_equal(strobe_jfr_decode(buf, n, "t.jfr", NULL, &p, &err), 0);
	assert_int_equal(p->ntypes, 3);
	assert_string_equal(strobe_str(p, p->types[0].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[0].unit), "count");
	assert_string_equal(strobe_str(p, p->types[1].type), "lock_count");
	assert_string_equal(strobe_str(p, p->types[2].type), "lock_duration");
	assert_string_equal(strobe_str(p, p->types[2].unit), "nanoseconds");
	char *s = folded(p, 0);
	/* root first: method 2 (UTF-16 "ru→"), 1 (Latin-1 "café"), 3 (pooled "leaf") */
	assert_string_equal(s, "pkg/Main.ru\xe2\x86\x92;pkg/Main.caf\xc3\xa9;pkg/Main.leaf 2\n");
	free(s);
	assert_int_equal(strobe_total(p, 1), 1);
	assert_int_equal(strobe_total(p, 2), 5000000); /* 5e6 ticks at 1e9/s */
	assert_int_equal(p->time_nanos, 1700000000000000000ll);
	assert_int_equal(p->duration_nanos, 2000000000);
	strobe_profile_free(p);
}

static void test_labels_and_period(void **state)
{
	(void)state;
	uint8_t buf[8192];
	size_t n = build(buf, sizeof(buf));
	static const strobe_jfr_label l[] = {{"endpoint", "/checkout"}};
	static const strobe_jfr_context c[] = {{3, NULL, 0}, {7, l, 1}};
	strobe_jfr_options o = {.period_ns = 10000000, .contexts = c, .ncontexts = 2};
	strobe_profile *p;
	strobe_err err = {{0}};
	assert_int_equal(strobe_jfr_decode(buf, n, "t.jfr", &o, &p, &err), 0);
	assert_string_equal(strobe_str(p, p->types[0].unit), "nanoseconds");
	assert_int_equal(strobe_total(p, 0), 20000000);
	bool found = false;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		uint32_t nl;
		const strobe_label *lb = strobe_labelset_get(p, strobe_sample(p, s)->labels, &nl);
		if (strobe_sample_values(p, s)[0]) {
			assert_int_equal(nl, 1);
			assert_string_equal(strobe_str(p, lb[0].key), "endpoint");
			assert_string_equal(strobe_str(p, lb[0].str), "/checkout");
			found = true;
		}
	}
	assert_true(found);
	strobe_profile_free(p);
}

static void test_bounds(void **state)
{
	(void)state;
	uint8_t buf[8192], m[8192];
	size_t n = build(buf, sizeof(buf));
	strobe_err err;
	strobe_profile *p;
	for (size_t cut = 0; cut < n; cut++) {
		memset(&err, 0, sizeof(err));
		assert_int_equal(strobe_jfr_decode(buf, cut, "cut.jfr", NULL, &p, &err), -EINVAL);
		assert_null(p);
		assert_non_null(strstr(err.msg, "cut.jfr"));
		assert_non_null(strstr(err.msg, "byte "));
	}
	static const uint8_t vals[] = {0x00, 0x7f, 0x80, 0xff};
	int ok = 0, refused = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(m, buf, n);
			m[i] = vals[v];
			memset(&err, 0, sizeof(err));
			int r = strobe_jfr_decode(m, n, "m.jfr", NULL, &p, &err);
			if (r == 0) {
				ok++;
				strobe_profile_free(p);
			} else {
				refused++;
				assert_null(p);
				assert_true(err.msg[0] != 0);
			}
		}
	assert_true(ok > 0 && refused > 0);
	/* A memory cap far below what the metadata needs. */
	strobe_jfr_options o = {.max_memory = 64};
	memset(&err, 0, sizeof(err));
	assert_int_equal(strobe_jfr_decode(buf, n, "t.jfr", &o, &p, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "MiB"));
}

static void test_labels_decode(void **state)
{
	(void)state;
	/* LabelsSnapshot{contexts{1: {labels{1: 2}}}, strings{1: "endpoint", 2: "/checkout"}} */
	static const uint8_t pb[] = "\x0a\x0a\x08\x01\x12\x06\x0a\x04\x08\x01\x10\x02"
				    "\x12\x0c\x08\x01\x12\x08" "endpoint"
				    "\x12\x0d\x08\x02\x12\x09" "/checkout";
	strobe_jfr_labels ls;
	strobe_err err = {{0}};
	assert_int_equal(strobe_jfr_labels_decode(pb, sizeof(pb) - 1, &ls, &err), 0);
	assert_int_equal(ls.n, 1);
	assert_int_equal(ls.contexts[0].id, 1);
	assert_int_equal(ls.contexts[0].nlabels, 1);
	assert_string_equal(ls.contexts[0].labels[0].name, "endpoint");
	assert_string_equal(ls.contexts[0].labels[0].value, "/checkout");
	strobe_jfr_labels_free(&ls);
	/* a label naming string 3, which the table lacks */
	static const uint8_t bad[] = "\x0a\x0a\x08\x01\x12\x06\x0a\x04\x08\x01\x10\x03"
				     "\x12\x0c\x08\x01\x12\x08" "endpoint";
	assert_int_equal(strobe_jfr_labels_decode(bad, sizeof(bad) - 1, &ls, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "string 3"));
}

/* POST /ingest?format=jfr as pyroscope-java sends it: a form with the recording and a
 * LabelsSnapshot giving context 7 (the samples' contextId) endpoint=/checkout. */
static void test_ingest_form(void **state)
{
	(void)state;
	static uint8_t body[16384];
	uint8_t rec[8192];
	size_t n = build(rec, sizeof(rec));
	static const uint8_t pb[] = "\x0a\x0a\x08\x07\x12\x06\x0a\x04\x08\x01\x10\x02"
				    "\x12\x0c\x08\x01\x12\x08" "endpoint"
				    "\x12\x0d\x08\x02\x12\x09" "/checkout";
	size_t len = 0;
	len += (size_t)sprintf((char *)body + len, "--B\r\nContent-Disposition: form-data; "
						    "name=\"jfr\"; filename=\"jfr\"\r\n\r\n");
	memcpy(body + len, rec, n);
	len += n;
	len += (size_t)sprintf((char *)body + len, "\r\n--B\r\nContent-Disposition: form-data; "
						    "name=\"labels\"; filename=\"labels\"\r\n\r\n");
	memcpy(body + len, pb, sizeof(pb) - 1);
	len += sizeof(pb) - 1;
	len += (size_t)sprintf((char *)body + len, "\r\n--B--\r\n");
	srv_kv kv[] = {{"name", "shop.cpu{env=prod}"}, {"format", "jfr"}, {"sampleRate", "100"},
			  {"from", "1700000000"}, {"until", "1700000010"}};
	srv_pyro_request req = {kv, 5, "multipart/form-data; boundary=B", body, len, 0, NULL};
	srv_pyro_batch b;
	int status;
	strobe_err err = {{0}};
	if (srv_pyro_parse(&req, &b, &status, &err) < 0)
		fail_msg("%d %s", status, err.msg);
	assert_int_equal(status, 200);
	assert_int_equal(b.nitems, 3);
	const char *want[] = {"process_cpu:cpu:nanoseconds:cpu:nanoseconds",
			      "mutex:contentions:count:mutex:count",
			      "mutex:delay:nanoseconds:mutex:count"};
	int64_t total[] = {20000000, 1, 5000000};
	for (size_t i = 0; i < 3; i++) {
		const srv_pyro_item *it = &b.items[i];
		assert_string_equal(it->type, want[i]);
		assert_int_equal(strobe_total(it->profile, 0), total[i]);
		bool svc = false;
		for (uint32_t l = 0; l < it->nlabels; l++)
			if (!strcmp(it->labels[l].name, "service_name"))
				svc = !strcmp(it->labels[l].value, "shop"); /* .cpu dropped */
		assert_true(svc);
	}
	/* the cpu samples carry the context's labels; the monitor event has no contextId */
	const strobe_profile *p = b.items[0].profile;
	assert_int_equal(strobe_nsamples(p), 1);
	uint32_t nl;
	const strobe_label *lb = strobe_labelset_get(p, strobe_sample(p, 1)->labels, &nl);
	assert_int_equal(nl, 1);
	assert_string_equal(strobe_str(p, lb[0].key), "endpoint");
	assert_string_equal(strobe_str(p, lb[0].str), "/checkout");
	srv_pyro_batch_free(&b);
	/* a form without a jfr part */
	srv_pyro_request bad = {kv, 5, "multipart/form-data; boundary=B",
				   (const uint8_t *)"--B--\r\n", 7, 0, NULL};
	assert_true(srv_pyro_parse(&bad, &b, &status, &err) < 0);
	assert_int_equal(status, 422);
	assert_non_null(strstr(err.msg, "no part named jfr"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_labels_and_period),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_labels_decode),
		cmocka_unit_test(test_ingest_form),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
