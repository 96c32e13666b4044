// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the sampler's record processing, fed synthetic kernel records through the
 * offline interface: on-CPU aggregation, off-CPU intervals split into blocked and run-queue
 * time, the --min-block threshold, time ordering across rings, exec and fork in the process
 * tracker, lost-record accounting and malformed input. One live case (SKIP without perf
 * events): a sampler under a fake proc root names processes and threads and reads their
 * mappings there.
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
#include <linux/perf_event.h>

#include "strobe/codec.h"
#include "strobe/sampler.h"

#include "../../agent/sampler_events.h" /* sampler_event_attr, EVK_* */
#include "../../agent/sampler_ext.h"       /* strobe_sampler_add_*, labelset */
#include "../../agent/stack_cap.h"

#include "perf_records.h"

/* sample_id_all trailer: pid, tid, time, cpu, identifier */
static void trailer(buf *w, uint32_t pid, uint32_t tid, uint64_t t)
{
	u32x2(w, pid, tid);
	u64(w, t);
	u32x2(w, 0, 0);
	u64(w, L.id[0]);
}

static void mmap2(buf *w, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
		  const char *path, uint64_t t)
{
	begin(w, PERF_RECORD_MMAP2, 0);
	u32x2(w, pid, pid);
	u64(w, start);
	u64(w, len);
	u64(w, pgoff);
	u32x2(w, 8, 1); /* maj, min */
	u64(w, 1234);   /* ino */
	u64(w, 0);      /* ino generation */
	u32x2(w, 5 /* PROT_READ|PROT_EXEC */, 2);
	size_t n = strlen(path) + 1;
	put(w, path, n);
	while ((w->len - w->start) % 8)
		w->b[w->len++] = 0;
	trailer(w, pid, pid, t);
	end(w);
}

static void comm(buf *w, uint32_t pid, uint32_t tid, const char *name, bool exec, uint64_t t)
{
	begin(w, PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
	u32x2(w, pid, tid);
	char c[16] = {0};
	snprintf(c, sizeof(c), "%s", name);
	put(w, c, 16);
	trailer(w, pid, tid, t);
	end(w);
}

static void fork_rec(buf *w, uint32_t pid, uint32_t ppid, uint32_t tid, uint64_t t)
{
	begin(w, PERF_RECORD_FORK, 0);
	u32x2(w, pid, ppid);
	u32x2(w, tid, ppid);
	u64(w, t);
	trailer(w, pid, tid, t);
	end(w);
}

/* A sample of event `ev` (0 clock, 1 switch, 2 wakeup); ips are user addresses, leaf first. */
static void sample(buf *w, int ev, uint32_t pid, uint32_t tid, uint64_t t, const uint64_t *ips,
		   int n, const uint8_t *raw, uint32_t rawlen)
{
	begin(w, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	u64(w, L.id[ev]);
	if (ev != 2)
		u64(w, n ? ips[0] : 0); /* ip */
	u32x2(w, pid, tid);
	u64(w, t);
	u32x2(w, 0, 0);
	if (ev != 2) {
		u64(w, 10000000); /* period: 10 ms */
		u64(w, (uint64_t)n + 1);
		u64(w, (uint64_t)PERF_CONTEXT_USER);
		for (int i = 0; i < n; i++)
			u64(w, ips[i]);
	}
	if (ev != 0) {
		uint32_t sz = rawlen;
		put(w, &sz, 4);
		put(w, raw, rawlen);
	}
	end(w);
}

static void sched_switch(buf *w, uint32_t pid, uint32_t tid, uint64_t t, uint64_t state,
			 uint32_t next, const uint64_t *ips, int n)
{
	uint8_t raw[68] = {0};
	memcpy(raw + 24, &tid, 4);
	memcpy(raw + 32, &state, 8);
	memcpy(raw + 56, &next, 4);
	sample(w, 1, pid, tid, t, ips, n, raw, sizeof(raw));
}

static void wakeup(buf *w, uint32_t wakee, uint64_t t)
{
	uint8_t raw[36] = {0};
	memcpy(raw + 24, &wakee, 4);
	sample(w, 2, 0, 0, t, NULL, 0, raw, sizeof(raw));
}

/* A system-wide switch record (PERF_RECORD_SWITCH_CPU_WIDE), written in the context of
 * `tid`: the task coming in (out = false; `other` is the one going out) or going out. */
static void switch_rec(buf *w, bool out, uint32_t pid, uint32_t tid, uint32_t other, uint64_t t)
{
	begin(w, PERF_RECORD_SWITCH_CPU_WIDE, out ? PERF_RECORD_MISC_SWITCH_OUT : 0);
	u32x2(w, other, other);
	trailer(w, pid, tid, t);
	end(w);
}

/* ---- helpers --------------------------------------------------------------------------------- */

/* Feeds w to s; with STROBE_SEED_DIR set, also saves it as a seed for fuzz_perf_records (whose
 * first byte selects events and mode). */
static int feed(strobe_sampler *s, const buf *w, unsigned events, bool all)
{
	const char *dir = getenv("STROBE_SEED_DIR");
	if (dir) {
		static int n;
		char path[512];
		snprintf(path, sizeof(path), "%s/seed-%d", dir, n++);
		FILE *f = fopen(path, "wb");
		if (f) {
			uint8_t mode = (uint8_t)(events | (all ? 4 : 0) | 16);
			fwrite(&mode, 1, 1, f);
			fwrite(w->b, 1, w->len, f);
			fclose(f);
		}
	}
	return strobe_sampler_feed(s, w->b, w->len, INT64_MAX);
}

static strobe_sampler *offline(unsigned events, bool all, int64_t min_block)
{
	strobe_sampler_opts o = {.events = events, .freq = 100, .all = all, .kernel = true,
				 .min_block_ns = min_block};
	strobe_sampler *s = strobe_sampler_open_offline(&o, &L);
	assert_non_null(s);
	return s;
}

static strobe_profile *profile(strobe_sampler *s)
{
	strobe_sampler_profile_opts po = {.per_thread = true};
	strobe_err err;
	strobe_profile *p = strobe_sampler_profile(s, &po, &err);
	assert_non_null(p);
	return p;
}

/* Folded text of one sample type (stacks named [file+0xoffset] without a symbolizer). */
static char *folded(strobe_profile *p, const char *type)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	int t = strobe_type_index(p, type);
	assert_true(t >= 0);
	assert_int_equal(strobe_folded_write(f, p, t, STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	return out;
}

static int64_t total(strobe_profile *p, const char *type)
{
	int t = strobe_type_index(p, type);
	assert_true(t >= 0);
	return strobe_total(p, t);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_cpu_samples(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	mmap2(w, 100, 0x400000, 0x2000, 0x1000, "/bin/app", 1);
	comm(w, 100, 100, "app", false, 2);
	uint64_t st[] = {0x400100, 0x400800};
	for (int i = 0; i < 3; i++)
		sample(w, 0, 100, 100, 10 + (uint64_t)i, st, 2, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(p->ntypes, 2);
	assert_int_equal(total(p, "samples"), 3);
	assert_int_equal(total(p, "cpu"), 30000000);
	assert_int_equal(p->period, 10000000);
	char *f = folded(p, "samples");
	/* root first; offsets are address - start + pgoff */
	assert_string_equal(f, "[app+0x1800];[app+0x1100] 3\n");
	free(f);
	/* labels */
	uint32_t n;
	const strobe_label *l = strobe_labelset_get(p, strobe_sample(p, 1)->labels, &n);
	assert_int_equal(n, 4);
	bool saw_process = false;
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(strobe_str(p, l[i].key), "process") == 0)
			saw_process = strcmp(strobe_str(p, l[i].str), "app") == 0;
	assert_true(saw_process);
	strobe_sampler_stats stt;
	strobe_sampler_get_stats(s, &stt);
	assert_int_equal(stt.samples, 3);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

/* Lock sums from the futex-wait program (sampler_add_lock) live in the same aggregate as
 * the CPU samples but only in lock profiles: Go's mutex types, one sample per lock address. */
/* On-CPU sums with the C SDK's labels (sampler_labelset, the eBPF path's drain): the same
 * stack under two label sets stays two samples, each with its labels beside pid/process; an SDK
 * key named like one of the profile's own (pid) is left out; reset_agg forgets the sets. */
static void test_oncpu_label_sets(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	mmap2(w, 100, 0x400000, 0x2000, 0x1000, "/bin/app", 1);
	comm(w, 100, 100, "app", false, 2);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	uint64_t u[] = {0x400100, 0x400800};
	strobe_labelpair fast[] = {{"endpoint", "/fast"}, {"span_id", "5a01"}, {"pid", "1"}};
	strobe_labelpair slow[] = {{"endpoint", "/slow"}, {"span_id", "5a02"}};
	uint32_t lf = sampler_labelset(s, fast, 3), ls = sampler_labelset(s, slow, 2);
	assert_true(lf > 0 && ls > 0 && lf != ls);
	assert_int_equal(sampler_labelset(s, fast, 3), lf); /* interned */
	assert_int_equal(sampler_labelset(s, NULL, 0), 0);
	assert_int_equal(sampler_add_oncpu_lset(s, 100, 0, NULL, 0, u, NULL, 2, lf, 3, 30), 0);
	assert_int_equal(sampler_add_oncpu_lset(s, 100, 0, NULL, 0, u, NULL, 2, ls, 5, 50), 0);
	assert_int_equal(sampler_add_oncpu_lset(s, 100, 0, NULL, 0, u, NULL, 2, lf, 1, 10), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(strobe_nsamples(p), 2);
	int64_t got[2] = {0, 0};
	for (uint32_t i = 1; i <= strobe_nsamples(p); i++) {
		uint32_t n, pids = 0;
		const strobe_sample_key *sk = strobe_sample(p, i);
		const strobe_label *l = strobe_labelset_get(p, sk->labels, &n);
		const char *ep = NULL, *span = NULL;
		for (uint32_t j = 0; j < n; j++) {
			const char *k = strobe_str(p, l[j].key), *v = strobe_str(p, l[j].str);
			if (strcmp(k, "endpoint") == 0)
				ep = v;
			if (strcmp(k, "span_id") == 0)
				span = v;
			if (strcmp(k, "pid") == 0) {
				pids++;
				assert_string_equal(v, "100"); /* the profile's, not the SDK's "1" */
			}
		}
		assert_int_equal(pids, 1);
		assert_non_null(ep);
		assert_non_null(span);
		int slow_ = strcmp(ep, "/slow") == 0;
		assert_string_equal(span, slow_ ? "5a02" : "5a01");
		got[slow_] += strobe_sample_values(p, i)[strobe_type_index(p, "samples")];
	}
	assert_int_equal(got[0], 4); /* samples */
	assert_int_equal(got[1], 5);
	strobe_profile_free(p);
	sampler_reset_agg(s);
	assert_int_equal(sampler_labelset(s, slow, 2), 1); /* the sets start afresh */
	strobe_sampler_close(s);
	free(w);
}

static void test_lock_sums(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	mmap2(w, 100, 0x400000, 0x2000, 0x1000, "/bin/app", 1);
	comm(w, 100, 100, "app", false, 2);
	uint64_t st[] = {0x400100, 0x400800};
	sample(w, 0, 100, 100, 10, st, 2, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	uint64_t ls[] = {0x400200, 0x400800};
	assert_int_equal(sampler_add_lock(s, 100, 100, 0x7000, ls, 2, 2, 2000), 0);
	assert_int_equal(sampler_add_lock(s, 100, 100, 0x7000, ls, 2, 1, 500), 0);
	assert_int_equal(sampler_add_lock(s, 100, 100, 0x9000, ls, 2, 1, 700), 0);
	strobe_profile *p = profile(s); /* the CPU profile: no lock sums in it */
	assert_int_equal(strobe_nsamples(p), 1);
	assert_int_equal(total(p, "samples"), 1);
	assert_true(strobe_type_index(p, "delay") < 0);
	strobe_profile_free(p);
	strobe_sampler_profile_opts po = {.per_thread = true, .locks = true};
	strobe_err err;
	p = strobe_sampler_profile(s, &po, &err);
	assert_non_null(p);
	assert_int_equal(p->ntypes, 2);
	assert_int_equal(strobe_nsamples(p), 2); /* one per lock address */
	assert_int_equal(total(p, "contentions"), 4);
	assert_int_equal(total(p, "delay"), 3200);
	assert_string_equal(strobe_str(p, p->period_type.type), "contentions");
	assert_int_equal(p->default_type, 1);
	char *f = folded(p, "delay");
	/* the leaf is where the wait returned to (not a return address) */
	assert_string_equal(f, "[app+0x1800];[app+0x1200] 3200\n");
	free(f);
	bool saw[2] = {false, false};
	for (uint32_t i = 1; i <= strobe_nsamples(p); i++) {
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, strobe_sample(p, i)->labels, &n);
		for (uint32_t j = 0; j < n; j++) {
			if (strcmp(strobe_str(p, l[j].key), "lock_addr") != 0)
				continue;
			saw[0] |= strcmp(strobe_str(p, l[j].str), "0x7000") == 0;
			saw[1] |= strcmp(strobe_str(p, l[j].str), "0x9000") == 0;
		}
	}
	assert_true(saw[0] && saw[1]);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

/* The frames of sample id's stack, and its leaf's address. */
static unsigned stack_depth(const strobe_profile *p, uint32_t id, uint64_t *leaf)
{
	unsigned n = 0;
	uint32_t st = strobe_sample(p, id)->stack;
	*leaf = st ? strobe_location_get(p, strobe_stack_get(p, st)->location)->address : 0;
	for (; st; st = strobe_stack_get(p, st)->parent)
		n++;
	return n;
}

/* A stack is a kernel walk then a user walk of at most STROBE_STACK_DEPTH frames each: both fit
 * whole in STROBE_STACK_FRAMES. A longer one keeps its leaf and loses its outermost callers. */
static void test_stack_cap(void **state)
{
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	uint64_t k[300], u[300];
	for (int i = 0; i < 300; i++) {
		k[i] = 0xffffffff81000000ull + 16 * (uint64_t)i;
		u[i] = 0x400000 + 16 * (uint64_t)i;
	}
	assert_int_equal(sampler_add_oncpu(s, 100, 100, k, STROBE_STACK_DEPTH, u,
						  STROBE_STACK_DEPTH, 1, 10),
			 0);
	assert_int_equal(sampler_add_oncpu(s, 200, 200, k, 300, u, 300, 1, 10), 0);
	for (int pid = 100; pid <= 200; pid += 100) {
		strobe_sampler_profile_opts po = {.only_pid = pid};
		strobe_err err;
		strobe_profile *p = strobe_sampler_profile(s, &po, &err);
		assert_non_null(p);
		assert_int_equal(strobe_nsamples(p), 1);
		uint64_t leaf;
		unsigned n = stack_depth(p, 1, &leaf);
		assert_int_equal(n, pid == 100 ? 2 * STROBE_STACK_DEPTH : STROBE_STACK_FRAMES);
		assert_int_equal(leaf, k[0]);
		strobe_profile_free(p);
	}
	strobe_sampler_close(s);
}

static void test_offcpu_split(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_OFFCPU, true, 0);
	mmap2(w, 7, 0x1000, 0x1000, 0, "/bin/srv", 1);
	uint64_t blk[] = {0x1100}, pre[] = {0x1200};
	/* tid 8 blocks at 1000, is woken at 1500, runs again at 1600 */
	sched_switch(w, 7, 8, 1000, 1 /* S */, 0, blk, 1);
	wakeup(w, 8, 1500);
	sched_switch(w, 0, 0, 1600, 0, 8, NULL, 0); /* idle -> 8 */
	/* then it is preempted at 2000 and runs at 2300: all run-queue */
	sched_switch(w, 7, 8, 2000, 0x100 /* preempted */, 9, pre, 1);
	sched_switch(w, 9, 9, 2300, 0, 8, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_OFFCPU, true), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(total(p, "off_cpu"), 600 + 300);
	assert_int_equal(total(p, "blocked"), 500);
	assert_int_equal(total(p, "runqueue"), 100 + 300);
	assert_int_equal(total(p, "switches"), 2);
	char *f = folded(p, "off_cpu");
	assert_non_null(strstr(f, "[srv+0x100] 600\n"));
	assert_non_null(strstr(f, "[srv+0x200] 300\n"));
	free(f);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

static void test_min_block_and_open_interval(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_OFFCPU, true, 100);
	uint64_t a[] = {0x10};
	sched_switch(w, 5, 5, 1000, 2 /* D */, 0, a, 1);
	sched_switch(w, 0, 0, 1050, 0, 5, NULL, 0); /* 50 ns: below 100, dropped */
	sched_switch(w, 5, 5, 2000, 1, 0, a, 1);    /* never switched back in */
	sched_switch(w, 6, 6, 2500, 0x100, 0, a, 1); /* the last record: horizon 2500 */
	assert_int_equal(feed(s, w, STROBE_EV_OFFCPU, true), 0);
	strobe_profile *p = profile(s);
	/* the open interval of tid 5 counts up to the horizon (500); tid 6's 0 ns is short */
	assert_int_equal(total(p, "off_cpu"), 500);
	strobe_sampler_stats st;
	strobe_sampler_get_stats(s, &st);
	assert_int_equal(st.short_blocks, 1);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

/* Records from different CPUs arrive out of order; processing must follow their timestamps. */
static void test_time_order_exec(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	uint64_t ip[] = {0x400100};
	/* in buffer order: sample after exec, exec, new mmap, old mmap, sample before exec */
	sample(w, 0, 50, 50, 40, ip, 1, NULL, 0);
	comm(w, 50, 50, "new", true, 20);
	mmap2(w, 50, 0x400000, 0x1000, 0, "/bin/new", 21);
	mmap2(w, 50, 0x400000, 0x1000, 0, "/bin/old", 1);
	comm(w, 50, 50, "old", false, 2);
	sample(w, 0, 50, 50, 10, ip, 1, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	strobe_profile *p = profile(s);
	char *f = folded(p, "samples");
	assert_non_null(strstr(f, "[old+0x100] 1\n"));
	assert_non_null(strstr(f, "[new+0x100] 1\n"));
	free(f);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}
/* pprof readers take mapping 1 for the program (go tool pprof's "File:"): the program's mapping
 * comes first although the first stack met libc's first (a thread's root, clone, is in libc;
 * with a symbolizer, frames are named one object at a time, in no order of their own). */
static void test_program_mapping_first(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	mmap2(w, 100, 0x7f0000, 0x2000, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", 1);
	mmap2(w, 100, 0x7e0000, 0x1000, 0, "[vdso]", 2);
	mmap2(w, 100, 0x400000, 0x2000, 0x1000, "/bin/app", 3);
	comm(w, 100, 100, "app", false, 4);
	uint64_t in_libc[] = {0x400100, 0x7f0100}, in_vdso[] = {0x7e0010, 0x400800};
	for (int i = 0; i < 3; i++)
		sample(w, 0, 100, 100, 10 + (uint64_t)i, in_libc, 2, NULL, 0);
	sample(w, 0, 100, 100, 20, in_vdso, 2, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(p->mappings.n - 1, 3);
	assert_string_equal(strobe_str(p, strobe_mapping_get(p, 1)->filename), "/bin/app");
	char *f = folded(p, "samples"); /* the frames keep their own mappings */
	assert_non_null(strstr(f, "[libc.so.6+0x100];[app+0x1100] 3\n"));
	free(f);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

static void test_fork_inherits_maps(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	uint64_t ip[] = {0x7000};
	mmap2(w, 60, 0x6000, 0x2000, 0, "/usr/lib/libx.so", 1);
	fork_rec(w, 61, 60, 61, 5);
	sample(w, 0, 61, 61, 6, ip, 1, NULL, 0);
	/* an address in no mapping keeps its address */
	uint64_t bad[] = {0x9999};
	sample(w, 0, 61, 61, 7, bad, 1, NULL, 0);
	assert_int_equal(feed(s, w, STROBE_EV_CPU, false), 0);
	strobe_profile *p = profile(s);
	char *f = folded(p, "samples");
	assert_non_null(strstr(f, "[libx.so+0x1000] 1\n"));
	assert_non_null(strstr(f, "0x9999 1\n"));
	free(f);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

static void test_lost_and_malformed(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_CPU, false, 0);
	begin(w, PERF_RECORD_LOST, 0);
	u64(w, L.id[0]);
	u64(w, 17);
	trailer(w, 0, 0, 3);
	end(w);
	assert_int_equal(strobe_sampler_feed(s, w->b, w->len, INT64_MAX), 0);
	strobe_sampler_stats st;
	strobe_sampler_get_stats(s, &st);
	assert_int_equal(st.lost, 17);
	/* a record claiming more bytes than there are, a zero size, a truncated callchain */
	uint8_t bad[16] = {0};
	struct perf_event_header h = {.type = PERF_RECORD_SAMPLE, .size = 64};
	memcpy(bad, &h, sizeof(h));
	assert_int_equal(strobe_sampler_feed(s, bad, sizeof(bad), INT64_MAX), -EINVAL);
	h.size = 0;
	memcpy(bad, &h, sizeof(h));
	assert_int_equal(strobe_sampler_feed(s, bad, sizeof(bad), INT64_MAX), -EINVAL);
	w->len = 0;
	uint64_t ip[] = {1, 2, 3};
	sample(w, 0, 1, 1, 9, ip, 3, NULL, 0);
	uint64_t huge = 1000; /* nr: more frames than the record holds */
	memcpy(w->b + 8 + 8 + 8 + 8 + 8 + 8 + 8, &huge, 8);
	assert_int_equal(strobe_sampler_feed(s, w->b, w->len, INT64_MAX), 0); /* ignored, not a crash */
	strobe_sampler_get_stats(s, &st);
	assert_int_equal(st.samples, 0);
	strobe_sampler_close(s);
	free(w);
}

/* Records held across rounds are compacted; records that arrive in the buffer in an order
 * other than their time order must survive that intact (a bug once corrupted them). */
static void test_held_records_survive(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_OFFCPU, true, 0);
	mmap2(w, 7, 0x1000, 0x1000, 0, "/bin/srv", 1);
	uint64_t st[] = {0x1100, 0x1200, 0x1300};
	/* 40 threads; in buffer order their switch-ins (late, newest first) come before their
	 * switch-outs (early), so after the first round the held records are in the reverse of
	 * arena order. */
	for (uint32_t t = 40; t-- > 0;) /* newest first: the reverse of their time order */
		sched_switch(w, 0, 0, 5000 + t * 10, 0, 100 + t, NULL, 0);
	for (uint32_t t = 0; t < 40; t++)
		sched_switch(w, 7, 100 + t, 1000 + t * 10, 1, 0, st, 3);
	/* first round: only the switch-outs are old enough */
	assert_int_equal(strobe_sampler_feed(s, w->b, w->len, 3000), 0);
	/* a later round brings one more record and processes everything */
	w->len = 0;
	sched_switch(w, 0, 0, 9000, 0, 0, NULL, 0);
	assert_int_equal(strobe_sampler_feed(s, w->b, w->len, INT64_MAX), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(total(p, "off_cpu"), 40 * 4000);
	assert_int_equal(total(p, "switches"), 40);
	strobe_sampler_stats stt;
	strobe_sampler_get_stats(s, &stt);
	assert_int_equal(stt.orphan_in, 0);
	assert_int_equal(stt.unmatched, 0);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

/* System-wide, a thread that slept on an idle CPU comes back in a sched_switch sample taken in
 * the idle task's context, and some kernels never deliver those (a VM's CPU 1 delivered none):
 * the sampler asks for switch records too, whose switch-in is written in the context of the
 * task coming in, and counts each switch once whichever of the two reports it. */
static void test_switch_in_without_idle_sample(void **state)
{
	buf *w = calloc(1, sizeof(*w));
	strobe_sampler *s = offline(STROBE_EV_OFFCPU, true, 0);
	struct perf_event_attr a;
	sampler_event_attr(s, &a, EVK_SWITCH, true, false, 1);
	assert_true(a.context_switch); /* system-wide: switch-in records asked for */
	sampler_event_attr(s, &a, EVK_SWITCH, true, true, 1);
	assert_true(a.context_switch); /* per task, as before */
	mmap2(w, 7, 0x1000, 0x1000, 0, "/bin/srv", 1);
	uint64_t slp[] = {0x1100};
	/* tid 8 sleeps at 1000 (to idle); the idle task's sample of its return at 1600 is never
	 * delivered, only the switch-in record, at 1601 */
	sched_switch(w, 7, 8, 1000, 1 /* S */, 0, slp, 1);
	switch_rec(w, true, 7, 8, 0, 1000);
	switch_rec(w, false, 7, 8, 0, 1601);
	/* it sleeps again at 2000; this time both report the return: counted once, at 2500 */
	sched_switch(w, 7, 8, 2000, 1, 0, slp, 1);
	switch_rec(w, true, 7, 8, 0, 2000);
	sched_switch(w, 0, 0, 2500, 0, 8, NULL, 0);
	switch_rec(w, false, 7, 8, 0, 2501);
	/* and a third time, at 3000, back at 3200 */
	sched_switch(w, 7, 8, 3000, 1, 0, slp, 1);
	switch_rec(w, false, 7, 8, 0, 3200);
	sched_switch(w, 9, 9, 3300, 0x100, 0, NULL, 0); /* the horizon */
	assert_int_equal(feed(s, w, STROBE_EV_OFFCPU, true), 0);
	strobe_profile *p = profile(s);
	assert_int_equal(total(p, "off_cpu"), 601 + 500 + 200);
	assert_int_equal(total(p, "switches"), 3);
	strobe_sampler_stats st;
	strobe_sampler_get_stats(s, &st);
	assert_int_equal(st.unmatched, 0);
	assert_int_equal(st.orphan_in, 0); /* the second report of the return at 2500 */
	strobe_profile_free(p);
	strobe_sampler_close(s);
	free(w);
}

/* Process churn: exited processes and threads are forgotten after one pass of grace, the
 * others keep their mappings and threads, and a pid used again is a new process. */
static void test_tracker_forget(void **state)
{
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	t.proc_root = NULL; /* records only */
	for (int32_t pid = 100; pid < 110; pid++) {
		assert_int_equal(tracker_fork(&t, pid, 1, pid, 0), 0);
		assert_int_equal(tracker_mmap(&t, pid, 0x1000 * (uint64_t)pid, 0x1000, 0, 1,
						     (uint64_t)pid, NULL, 0, "/bin/x"), 0);
	}
	assert_int_equal(tracker_fork(&t, 105, 105, 1105, 0), 0); /* a thread of 105 */
	assert_int_equal(tracker_fork(&t, 106, 106, 1106, 0), 0); /* one of 106 */
	tracker_exit(&t, 101, 101);
	tracker_exit(&t, 103, 103);
	tracker_exit(&t, 105, 1105);
	assert_int_equal(t.pids.n, 10);
	assert_int_equal(t.tids.n, 12);
	/* the first pass is the grace: a sample read late still finds them */
	assert_int_equal(tracker_forget(&t), 0);
	assert_non_null(tracker_proc(&t, 101, false));
	assert_int_equal(tracker_forget(&t), 2);
	assert_int_equal(t.pids.n, 8);
	assert_int_equal(t.tids.n, 9);
	assert_null(tracker_proc(&t, 101, false));
	assert_null(tracker_proc(&t, 103, false));
	assert_null(tracker_thread(&t, 101, 0, false));
	assert_null(tracker_thread(&t, 1105, 0, false));
	assert_non_null(tracker_thread(&t, 1106, 0, false));
	for (int32_t pid = 100; pid < 110; pid++) {
		if (pid == 101 || pid == 103)
			continue;
		const proc *p = tracker_proc(&t, pid, false);
		assert_non_null(p);
		assert_int_equal(p->pid, pid);
		uint32_t m = tracker_find(p, 0x1000 * (uint64_t)pid + 8);
		assert_int_not_equal(m, STROBE_MAP_NONE);
		assert_int_equal(tracker_map(&t, m)->ino, (uint64_t)pid);
		const proc_thread *th = tracker_thread(&t, pid, 0, false);
		assert_non_null(th);
		assert_int_equal(th->pid, pid);
	}
	/* pid 101 again: a new process, kept by the next passes */
	assert_int_equal(tracker_fork(&t, 101, 1, 101, 0), 0);
	assert_int_equal(tracker_forget(&t), 0);
	assert_int_equal(tracker_forget(&t), 0);
	assert_non_null(tracker_proc(&t, 101, false));
	assert_non_null(tracker_thread(&t, 101, 0, false));
	tracker_free(&t);
}

/* A live sampler reads what it reads of processes under its proc root (strobe_sampler_opts
 * proc_root), not /proc: a fake root lists this process's main thread (for the events) and a
 * process 4242 that exists nowhere else, whose sums are named after its comm files there and
 * whose frame falls in the mapping its maps file there lists. SKIP where perf events cannot be
 * opened. */
static void test_proc_root_names(void **state)
{
	char root[] = "/tmp/strobe-test-sroot-XXXXXX", path[200];
	assert_non_null(mkdtemp(root));
	pid_t self = getpid();
	snprintf(path, sizeof(path), "mkdir -p %s/%d/task/%d %s/4242/task/4243", root, (int)self,
		 (int)self, root);
	assert_int_equal(system(path), 0);
	static const struct { const char *file, *text; } files[] = {
		{"4242/comm", "fakeproc\n"},
		{"4242/task/4243/comm", "fakethread\n"},
		{"4242/maps", "00400000-00410000 r-xp 00001000 08:01 77 /fake/bin/app\n"},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", root, files[i].file);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(files[i].text, f);
		fclose(f);
	}
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 1, .pids = &self, .npids = 1,
				 .call_graph = STROBE_CG_FP, .proc_root = root};
	strobe_err err = {{0}};
	strobe_sampler *s = strobe_sampler_open(&o, &err);
	int rc = s ? 0 : -errno;
	bool skipped = rc == -EACCES || rc == -EPERM || rc == -ENOENT || rc == -ENOSYS;
	if (!skipped) {
		assert_int_equal(rc, 0);
		const uint64_t u[] = {0x400100};
		assert_int_equal(sampler_add_oncpu(s, 4242, 4243, NULL, 0, u, 1, 5, 5000000),
				 0);
		strobe_profile *p = profile(s);
		char *f = folded(p, "samples");
		assert_string_equal(f, "[app+0x1100] 5\n");
		free(f);
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, strobe_sample(p, 1)->labels, &n);
		int named = 0;
		for (uint32_t i = 0; i < n; i++) {
			const char *k = strobe_str(p, l[i].key), *v = strobe_str(p, l[i].str);
			named += strcmp(k, "process") == 0 && strcmp(v, "fakeproc") == 0;
			named += strcmp(k, "thread") == 0 && strcmp(v, "fakethread") == 0;
		}
		assert_int_equal(named, 2);
		strobe_profile_free(p);
		strobe_sampler_close(s);
	}
	snprintf(path, sizeof(path), "rm -rf %s", root);
	assert_int_equal(system(path), 0);
	if (skipped) {
		print_message("SKIP (cannot open perf events here: %s)\n", err.msg);
		skip();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpu_samples),
		cmocka_unit_test(test_offcpu_split),
		cmocka_unit_test(test_min_block_and_open_interval),
		cmocka_unit_test(test_time_order_exec),
		cmocka_unit_test(test_program_mapping_first),
		cmocka_unit_test(test_fork_inherits_maps),
		cmocka_unit_test(test_lost_and_malformed),
		cmocka_unit_test(test_held_records_survive),
		cmocka_unit_test(test_switch_in_without_idle_sample),
		cmocka_unit_test(test_tracker_forget),
		cmocka_unit_test(test_lock_sums),
		cmocka_unit_test(test_oncpu_label_sets),
		cmocka_unit_test(test_stack_cap),
		cmocka_unit_test(test_proc_root_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
