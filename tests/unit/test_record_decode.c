// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the perf record decoders (agent/record_decode.c), driven directly with
 * synthetic records: each record type reaches its handler with its fields, a sample is told
 * by its event's kind, and records that are cut short, of an unknown event, not executable or
 * of a type without a handler reach no handler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

#include "../../agent/record_decode.h"

#include "perf_records.h"

static const uint64_t common = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_CPU;
static uint64_t types[EVK_WAKEUP + 1];

typedef struct seen {
	int n;                   /* handler calls */
	char what[16][16];       /* which, in order */
	int kind;
	rec_sample sm;
	uint64_t ip0;
	bool pre;
	rec_mmap2 m;
	char path[64];
	int32_t a, b, c;
	char comm[16];
	bool exec;
	int64_t time;
} seen;

static void note(seen *s, const char *what)
{
	if (s->n < 16)
		strcpy(s->what[s->n], what);
	s->n++;
}
static void h_sample(void *ctx, int kind, const rec_sample *sm, const rec_unwound *pre)
{
	seen *s = ctx;
	note(s, "sample");
	s->kind = kind;
	s->sm = *sm;
	s->ip0 = sm->nr > 1 ? sm->ips[1] : 0;
	s->pre = pre != NULL;
}
static void h_mmap2(void *ctx, const rec_mmap2 *m)
{
	seen *s = ctx;
	note(s, "mmap2");
	s->m = *m;
	strncpy(s->path, m->path, sizeof(s->path) - 1);
}
static void h_comm(void *ctx, int32_t pid, int32_t tid, const char *comm, bool exec)
{
	seen *s = ctx;
	note(s, "comm");
	s->a = pid, s->b = tid, s->exec = exec;
	strcpy(s->comm, comm);
}
static void h_fork(void *ctx, int32_t pid, int32_t ppid, int32_t tid)
{
	seen *s = ctx;
	note(s, "fork");
	s->a = pid, s->b = ppid, s->c = tid;
}
static void h_exit(void *ctx, int32_t pid, int32_t tid)
{
	seen *s = ctx;
	note(s, "exit");
	s->a = pid, s->b = tid;
}
static void h_switch_in(void *ctx, int32_t tid, int64_t time)
{
	seen *s = ctx;
	note(s, "switch_in");
	s->a = tid, s->time = time;
}
static const rec_handlers all = {h_sample, h_mmap2, h_comm, h_fork, h_exit, h_switch_in};

static void trailer(buf *w, uint32_t pid, uint32_t tid, uint64_t t)
{
	u32x2(w, pid, tid);
	u64(w, t);
	u32x2(w, 0, 0);
	u64(w, L.id[0]);
}

static event_kinds kinds;
static rec_decoder dec = {&kinds, types};

static int setup(void **state)
{
	types[EVK_CLOCK] = common | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	types[EVK_SWITCH] = types[EVK_CLOCK] | PERF_SAMPLE_RAW;
	types[EVK_WAKEUP] = common | PERF_SAMPLE_RAW;
	event_kinds_init(&kinds);
	for (int i = 0; i < 3; i++)
		assert_int_equal(event_kinds_add(&kinds, L.id[i], EVK_CLOCK + i), 0);
	return 0;
}
static int teardown(void **state)
{
	event_kinds_free(&kinds);
	return 0;
}

/* Decodes the one record in w; returns the record. */
static const struct perf_event_header *one(const buf *w, seen *s)
{
	memset(s, 0, sizeof(*s));
	const struct perf_event_header *h = (const void *)w->b;
	rec_decode(&dec, h, &all, s);
	return h;
}

static void clock_sample(buf *w, uint64_t id, uint32_t pid, uint32_t tid, uint64_t t)
{
	begin(w, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	u64(w, id);
	u64(w, 0x401000); /* ip */
	u32x2(w, pid, tid);
	u64(w, t);
	u32x2(w, 3, 0);   /* cpu */
	u64(w, 10000000); /* period */
	u64(w, 3);
	u64(w, (uint64_t)PERF_CONTEXT_USER);
	u64(w, 0x401000);
	u64(w, 0x402000);
	end(w);
}

static void test_sample(void **state)
{
	static buf w;
	seen s;
	w.len = 0;
	clock_sample(&w, L.id[0], 100, 101, 5000);
	const struct perf_event_header *h = one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "sample");
	assert_int_equal(s.kind, EVK_CLOCK);
	assert_int_equal(s.sm.pid, 100);
	assert_int_equal(s.sm.tid, 101);
	assert_int_equal(s.sm.cpu, 3);
	assert_int_equal(s.sm.time, 5000);
	assert_int_equal(s.sm.period, 10000000);
	assert_int_equal(s.sm.nr, 3);
	assert_int_equal(s.ip0, 0x401000);
	assert_false(s.pre);
	assert_int_equal(rec_time(&dec, h), 5000);
	assert_int_equal(rec_sample_kind(&dec, h), EVK_CLOCK);
	/* a sample of an event that is none of ours */
	w.len = 0;
	clock_sample(&w, 999, 100, 101, 5000);
	h = one(&w, &s);
	assert_int_equal(s.n, 0);
	assert_int_equal(rec_time(&dec, h), 0);
	/* cut short: a call chain longer than the record */
	w.len = 0;
	clock_sample(&w, L.id[0], 100, 101, 5000);
	struct perf_event_header *mh = (void *)w.b;
	mh->size -= 16;
	one(&w, &s);
	assert_int_equal(s.n, 0);
	/* a wake-up (kind 3): its raw data */
	w.len = 0;
	begin(&w, PERF_RECORD_SAMPLE, 0);
	u64(&w, L.id[2]);
	u32x2(&w, 0, 0);
	u64(&w, 6000);
	u32x2(&w, 0, 0);
	uint32_t rs = 28;
	put(&w, &rs, 4);
	uint8_t raw[28] = {0};
	uint32_t wakee = 4242;
	memcpy(raw + 24, &wakee, 4);
	put(&w, raw, sizeof(raw));
	end(&w);
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.kind, EVK_WAKEUP);
	assert_int_equal(rec_raw_u(&s.sm, 24, 4), 4242);
	assert_int_equal(rec_raw_u(&s.sm, 26, 4), 0); /* out of the raw data */
}

static void test_sideband(void **state)
{
	static buf w;
	seen s;
	/* mmap2 of code, with device and inode */
	w.len = 0;
	begin(&w, PERF_RECORD_MMAP2, 0);
	u32x2(&w, 200, 200);
	u64(&w, 0x400000);
	u64(&w, 0x2000);
	u64(&w, 0x1000);
	u32x2(&w, 8, 1);
	u64(&w, 1234);
	u64(&w, 0);
	u32x2(&w, 5 /* PROT_READ|PROT_EXEC */, 2);
	put(&w, "/bin/app", 9);
	while ((w.len - w.start) % 8)
		w.b[w.len++] = 0;
	trailer(&w, 200, 200, 70);
	end(&w);
	const struct perf_event_header *h = one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "mmap2");
	assert_int_equal(s.m.pid, 200);
	assert_int_equal(s.m.start, 0x400000);
	assert_int_equal(s.m.len, 0x2000);
	assert_int_equal(s.m.pgoff, 0x1000);
	assert_int_equal(s.m.ino, 1234);
	assert_int_equal(s.m.dev, makedev(8, 1));
	assert_null(s.m.build_id);
	assert_string_equal(s.path, "/bin/app");
	assert_int_equal(rec_time(&dec, h), 70);
	/* the same, not executable: not handed on */
	uint32_t prot = 1;
	memcpy(w.b + 8 + 56, &prot, 4);
	one(&w, &s);
	assert_int_equal(s.n, 0);
	/* comm of an exec */
	w.len = 0;
	begin(&w, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	u32x2(&w, 200, 201);
	put(&w, "worker\0\0\0\0\0\0\0\0\0\0", 16);
	trailer(&w, 200, 201, 80);
	end(&w);
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "comm");
	assert_int_equal(s.a, 200);
	assert_int_equal(s.b, 201);
	assert_string_equal(s.comm, "worker");
	assert_true(s.exec);
	/* fork and exit: pid, ppid, tid, ptid, time */
	w.len = 0;
	begin(&w, PERF_RECORD_FORK, 0);
	u32x2(&w, 300, 200);
	u32x2(&w, 300, 200);
	u64(&w, 90);
	trailer(&w, 300, 300, 90);
	end(&w);
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "fork");
	assert_int_equal(s.a, 300);
	assert_int_equal(s.b, 200);
	assert_int_equal(s.c, 300);
	((struct perf_event_header *)w.b)->type = PERF_RECORD_EXIT;
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "exit");
	assert_int_equal(s.a, 300);
	assert_int_equal(s.b, 300);
	/* a switch in is handed on with the trailer's thread and time; a switch out is not */
	w.len = 0;
	begin(&w, PERF_RECORD_SWITCH_CPU_WIDE, 0);
	u32x2(&w, 7, 7);
	trailer(&w, 400, 401, 100);
	end(&w);
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.what[0], "switch_in");
	assert_int_equal(s.a, 401);
	assert_int_equal(s.time, 100);
	((struct perf_event_header *)w.b)->misc = PERF_RECORD_MISC_SWITCH_OUT;
	one(&w, &s);
	assert_int_equal(s.n, 0);
	/* a type without a decoder (PERF_RECORD_LOST is counted as it is read, never decoded) */
	((struct perf_event_header *)w.b)->type = PERF_RECORD_LOST;
	one(&w, &s);
	assert_int_equal(s.n, 0);
	/* a handler left out: its records are dropped */
	((struct perf_event_header *)w.b)->type = PERF_RECORD_SWITCH;
	((struct perf_event_header *)w.b)->misc = 0;
	rec_handlers none = {0};
	memset(&s, 0, sizeof(s));
	rec_decode(&dec, (const void *)w.b, &none, &s);
	assert_int_equal(s.n, 0);
}

/* A sample held with its walked user stack (the sampler's REC_UNWOUND). */
static void test_unwound(void **state)
{
	static buf w, in;
	seen s;
	in.len = 0;
	clock_sample(&in, L.id[0], 100, 101, 5000);
	w.len = 0;
	begin(&w, REC_UNWOUND, 0);
	put(&w, in.b, in.len);
	int32_t nu = 2;
	uint32_t n = 2;
	put(&w, &nu, 4);
	put(&w, &n, 4);
	u64(&w, 0x500000);
	u64(&w, 0x500100);
	put(&w, "\1\0", 2);
	end(&w);
	one(&w, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.kind, EVK_CLOCK);
	assert_true(s.pre);
	assert_int_equal(s.sm.pid, 100);
	/* counts that disagree: dropped */
	n = 3;
	memcpy(w.b + 8 + in.len + 4, &n, 4);
	one(&w, &s);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_sideband),
		cmocka_unit_test(test_unwound),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
