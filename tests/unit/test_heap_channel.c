// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of libstrobe-heap.so's arithmetic and tables and of the channel's reader
 * (lib/heap_channel.c), built with ASan and UBSan like every unit test:
 *   - the sampler: the libm-free logarithm, the exponential countdown's mean and tail, and the
 *     probability that an allocation of size s is sampled (1 - exp(-s/R), what Go's un-biasing
 *     assumes), by simulation of the library's own countdown rule;
 *   - un-biasing: Go's scale, and the estimate of a simulated mixed-size workload through the
 *     size classes, within a few percent of the truth;
 *   - the live table (preload/live_table.h, the code the library runs): inserts, removals in
 *     random order with colliding keys, the 3/4 cap, absent lookups, growth by rehash;
 *   - the reader: a small synthetic channel read into a profile (types, values, frames with
 *     mappings) and its leak list (the last-tenth rule); malformed channels refused; the
 *     paused flag, the one field a reader writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../preload/live_table.h"
#include "strobe/heap_channel.h"
#include "strobe/profile.h"

static void test_ln(void **state)
{
	(void)state;
	for (double x = 1e-15; x <= 1.0; x *= 1.37)
		assert_true(fabs(strobe_heap_ln(x) - log(x)) < 1e-8);
	assert_true(fabs(strobe_heap_ln(1.0)) < 1e-12);
}

static void test_countdown_distribution(void **state)
{
	(void)state;
	uint64_t rng = 12345, R = 524288;
	double sum = 0;
	int over = 0, n = 1000000;
	for (int i = 0; i < n; i++) {
		uint64_t d = strobe_heap_next_sample(&rng, R);
		assert_true(d >= 1);
		sum += (double)d;
		over += d > R;
	}
	/* mean R within 0.5 % (std error 0.1 %), P(d > R) = 1/e within 0.5 points */
	assert_true(fabs(sum / n / (double)R - 1) < 0.005);
	assert_true(fabs((double)over / n - exp(-1)) < 0.005);
}

/* The library's rule (preload/heap.c sample_slow): left -= size; left <= 0 -> sampled, left is
 * drawn afresh. The sampled fraction of allocations of one size is 1 - exp(-size/R). */
static void test_sampling_probability(void **state)
{
	(void)state;
	const uint64_t R = 65536;
	const uint64_t sizes[] = {16, 4096, 65536, 262144};
	for (size_t k = 0; k < 4; k++) {
		uint64_t rng = 99 + k;
		int64_t left = (int64_t)strobe_heap_next_sample(&rng, R);
		int n = 400000, hits = 0;
		for (int i = 0; i < n; i++) {
			left -= (int64_t)sizes[k];
			if (left <= 0) {
				hits++;
				left = (int64_t)strobe_heap_next_sample(&rng, R);
			}
		}
		double p = 1 - exp(-(double)sizes[k] / (double)R), got = (double)hits / n;
		double se = sqrt(p * (1 - p) / n);
		assert_true(fabs(got - p) < 5 * se + 1e-6);
	}
}

static void test_scale(void **state)
{
	(void)state;
	assert_true(strobe_heap_scale(0, 0, 524288) == 1);
	assert_true(strobe_heap_scale(5, 100, 0) == 1);
	/* one 512 KiB block at R = 512 KiB: 1/(1 - 1/e) */
	assert_true(fabs(strobe_heap_scale(1, 524288, 524288) - 1 / (1 - exp(-1))) < 1e-9);
	/* small blocks: about R / size */
	assert_true(fabs(strobe_heap_scale(10, 160, 524288) / (524288.0 / 16) - 1) < 1e-3);
	/* huge blocks: about 1 */
	assert_true(strobe_heap_scale(1, 1u << 30, 524288) < 1.0000001);
}

static void test_size_class(void **state)
{
	(void)state;
	uint32_t prev = 0;
	for (uint64_t s = 1; s < (1u << 24); s += 1 + s / 64) {
		uint32_t c = strobe_heap_size_class(s);
		assert_true(c >= prev);
		prev = c;
	}
	/* one class spans less than 25 % in size */
	for (uint64_t s = 4; s < (1u << 20); s++) {
		uint32_t c = strobe_heap_size_class(s);
		uint64_t e = s;
		while (strobe_heap_size_class(e + 1) == c && e < s + s)
			e++;
		assert_true((double)e / (double)s < 1.25 + 1e-9);
		s = e;
	}
}

/* A mixed workload through the sampler, counted per size class as the library counts it and
 * un-biased per class as the reader does: within 3 % of the truth in objects and bytes. */
static void test_unbiased_estimate(void **state)
{
	(void)state;
	const uint64_t R = 16384;
	enum { NC = 256 };
	static uint64_t cnt[NC], bytes[NC];
	memset(cnt, 0, sizeof(cnt));
	memset(bytes, 0, sizeof(bytes));
	uint64_t rng = 7, pick = 11, true_n = 0, true_b = 0;
	int64_t left = (int64_t)strobe_heap_next_sample(&rng, R);
	for (int i = 0; i < 3000000; i++) {
		uint64_t size = 16ull << (strobe_heap_rand(&pick) % 17); /* 16 B .. 1 MiB */
		size += strobe_heap_rand(&pick) % (size / 8 + 1);
		true_n++;
		true_b += size;
		left -= (int64_t)size;
		if (left <= 0) {
			uint32_t c = strobe_heap_size_class(size);
			cnt[c]++;
			bytes[c] += size;
			left = (int64_t)strobe_heap_next_sample(&rng, R);
		}
	}
	double est_n = 0, est_b = 0;
	for (int c = 0; c < NC; c++) {
		double sc = strobe_heap_scale(cnt[c], bytes[c], R);
		est_n += (double)cnt[c] * sc;
		est_b += (double)bytes[c] * sc;
	}
	assert_true(fabs(est_b / (double)true_b - 1) < 0.03);
	assert_true(fabs(est_n / (double)true_n - 1) < 0.03);
}

/* Growth: a full table moved into one twice its size keeps every entry (and its fields) and takes
 * more; the library grows its table so, from 1024 slots up. */
static void test_live_table_grow(void **state)
{
	(void)state;
	enum { SLOTS = 1024, FULL = SLOTS / 4 * 3 };
	strobe_heap_live *t = calloc(SLOTS, sizeof(*t)), *nt = calloc(2 * SLOTS, sizeof(*nt));
	assert_non_null(t);
	assert_non_null(nt);
	uint32_t count = 0, ncount = 0;
	for (uint32_t i = 0; i < FULL; i++)
		assert_true(strobe_live_insert(t, SLOTS, &count, 0x40000 + 16 * (uintptr_t)i * 3, i + 7,
					       i, 1000 + i));
	assert_false(strobe_live_insert(t, SLOTS, &count, 0x7000000, 1, 0, 0));
	/* one removed first: a shifted run must move too */
	strobe_heap_live out;
	assert_true(strobe_live_remove(t, SLOTS, &count, 0x40000, &out));
	strobe_live_rehash(t, SLOTS, nt, 2 * SLOTS, &ncount);
	assert_int_equal(ncount, FULL - 1);
	for (uint32_t i = 1; i < FULL; i++) {
		assert_true(strobe_live_remove(nt, 2 * SLOTS, &ncount, 0x40000 + 16 * (uintptr_t)i * 3,
					       &out));
		assert_int_equal(out.size, i + 7);
		assert_int_equal(out.stack, i);
		assert_int_equal(out.time_ns, 1000 + i);
	}
	assert_int_equal(ncount, 0);
	assert_false(strobe_live_find(nt, 2 * SLOTS, 0x40000));
	free(t);
	free(nt);
}

static void test_live_table(void **state)
{
	(void)state;
	enum { SLOTS = 1024, N = 700 };
	strobe_heap_live *t = calloc(SLOTS, sizeof(*t));
	uintptr_t *keys = calloc(N, sizeof(*keys));
	assert_non_null(t);
	assert_non_null(keys);
	uint32_t count = 0;
	uint64_t rng = 3;
	/* addresses in a narrow range: many share a home slot */
	for (int i = 0; i < N; i++) {
		keys[i] = 0x10000 + 16 * (uintptr_t)i * 64;
		assert_true(strobe_live_insert(t, SLOTS, &count, keys[i], (uint64_t)i + 1,
					       (uint32_t)i, (uint64_t)i));
	}
	assert_int_equal(count, N);
	/* 3/4 full: refused beyond */
	uint32_t extra = 0;
	while (strobe_live_insert(t, SLOTS, &count, 0x900000 + 16 * (uintptr_t)extra, 1, 0, 0))
		extra++;
	assert_int_equal(count, SLOTS / 4 * 3);
	for (uint32_t e = 0; e < extra; e++) {
		strobe_heap_live out;
		assert_true(strobe_live_remove(t, SLOTS, &count, 0x900000 + 16 * (uintptr_t)e, &out));
	}
	/* the reserved marks are never keys */
	assert_false(strobe_live_insert(t, SLOTS, &count, STROBE_HEAP_LIVE_TOMB, 1, 0, 0));
	/* remove in random order; every remaining key stays findable after each shift */
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(strobe_heap_rand(&rng) % (uint64_t)(i + 1));
		uintptr_t k = keys[i];
		keys[i] = keys[j];
		keys[j] = k;
	}
	for (int i = 0; i < N; i++) {
		strobe_heap_live out;
		assert_true(strobe_live_remove(t, SLOTS, &count, keys[i], &out));
		assert_int_equal(out.ptr, keys[i]);
		assert_int_equal(out.size, (out.stack + 1));
		assert_false(strobe_live_find(t, SLOTS, keys[i]));
		assert_false(strobe_live_remove(t, SLOTS, &count, keys[i], &out));
		if (i % 50 == 0)
			for (int k = i + 1; k < N; k++)
				assert_true(strobe_live_find(t, SLOTS, keys[k]));
	}
	assert_int_equal(count, 0);
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(t[i].ptr, 0);
	free(t);
	free(keys);
}

/* ---- the reader ---- */

enum { T_STACKS = 8, T_LIVE = 16, T_MAPS = 1024 };
#define T_SIZE (STROBE_HEAP_HDR_SIZE + T_STACKS * sizeof(strobe_heap_stack) + \
		T_LIVE * sizeof(strobe_heap_live) + T_MAPS)

static uint8_t *make_channel(void)
{
	uint8_t *b = calloc(1, T_SIZE);
	assert_non_null(b);
	strobe_heap_hdr *h = (strobe_heap_hdr *)b;
	memcpy(h->magic, STROBE_HEAP_MAGIC, 8);
	h->version = STROBE_HEAP_VERSION;
	h->hdr_size = STROBE_HEAP_HDR_SIZE;
	h->file_size = T_SIZE;
	h->pid = 42;
	h->state = STROBE_HEAP_EXITED;
	h->rate = 1024;
	h->start_ns = 1000000000;
	h->exit_ns = 11000000000; /* a 10 s run: the last tenth starts at 10 s */
	h->start_unix_ns = 1700000000000000000ull;
	h->max_stacks = T_STACKS;
	h->max_depth = STROBE_HEAP_MAX_DEPTH;
	h->live_slots = T_LIVE;
	h->maps_cap = T_MAPS;
	h->stacks_off = STROBE_HEAP_HDR_SIZE;
	h->live_off = h->stacks_off + T_STACKS * sizeof(strobe_heap_stack);
	h->maps_off = h->live_off + T_LIVE * sizeof(strobe_heap_live);
	const char *maps = "400000-401000 r-xp 00001000 08:01 1234  /usr/bin/prog\n"
			   "7f0000000000-7f0000010000 r-xp 00000000 08:01 99  /lib/libc.so.6\n";
	memcpy(b + h->maps_off, maps, strlen(maps));
	h->maps_len = (uint32_t)strlen(maps);
	strobe_heap_stack *st = (strobe_heap_stack *)(b + h->stacks_off);
	/* stack 0: prog -> libc, 10 sampled allocations of 64 B, 4 freed */
	st[0] = (strobe_heap_stack){.ready = STROBE_HEAP_READY, .kind = STROBE_HEAP_KIND_ALLOC,
				    .depth = 2, .alloc_count = 10, .alloc_bytes = 640,
				    .free_count = 4, .free_bytes = 256};
	st[0].frames[0] = 0x7f0000000100;
	st[0].frames[1] = 0x400200;
	/* stack 1: a lock stack */
	st[1] = (strobe_heap_stack){.ready = STROBE_HEAP_READY, .kind = STROBE_HEAP_KIND_LOCK,
				    .depth = 1, .lock_count_milli = 3000, .lock_delay_ns = 5000};
	st[1].frames[0] = 0x400300;
	/* stack 2: one big block, same frames as 0 in another size class */
	st[2] = (strobe_heap_stack){.ready = STROBE_HEAP_READY, .kind = STROBE_HEAP_KIND_ALLOC,
				    .depth = 2, .size_class = 80, .alloc_count = 1,
				    .alloc_bytes = 1 << 20};
	st[2].frames[0] = 0x7f0000000100;
	st[2].frames[1] = 0x400200;
	h->stacks_reserved = 3;
	strobe_heap_live *lv = (strobe_heap_live *)(b + h->live_off);
	lv[0] = (strobe_heap_live){.ptr = 0x5000, .size = 64, .stack = 0, .time_ns = 2000000000};
	lv[1] = (strobe_heap_live){.ptr = 0x6000, .size = 64, .stack = 0, .time_ns = 10500000000};
	lv[2] = (strobe_heap_live){.ptr = 0x7000, .size = 1 << 20, .stack = 2, .time_ns = 3000000000};
	lv[3] = (strobe_heap_live){.ptr = 0x8000, .size = 8, .stack = 7, .time_ns = 1}; /* bad stack */
	h->live_count = 4;
	return b;
}

static int64_t total(const strobe_profile *p, const char *type)
{
	int i = strobe_type_index(p, type);
	assert_true(i >= 0);
	return strobe_total(p, i);
}

static void test_reader_profile(void **state)
{
	(void)state;
	uint8_t *b = make_channel();
	strobe_heap_snap *s = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_heap_snap_parse(b, T_SIZE, &s, &err), 0);
	assert_int_equal(s->nstacks, 3);
	assert_int_equal(s->nlive, 3); /* the entry with a stack index out of range is dropped */
	strobe_profile *p = strobe_profile_new();
	strobe_heap_profile_opts o = {.kind = STROBE_HEAP_KIND_ALLOC};
	assert_int_equal(strobe_heap_profile_add(p, s, &o, &err), 0);
	assert_int_equal(p->ntypes, 4);
	double sc = strobe_heap_scale(10, 640, 1024), sb = strobe_heap_scale(1, 1 << 20, 1024);
	double si = strobe_heap_scale(6, 384, 1024);
	assert_int_equal(total(p, "alloc_objects"), llround(10 * sc) + llround(sb));
	assert_int_equal(total(p, "alloc_space"), llround(640 * sc) + llround((1 << 20) * sb));
	assert_int_equal(total(p, "inuse_space"), llround(384 * si) + llround((1 << 20) * sb));
	/* two size classes of one stack are one sample; frames carry their mappings */
	assert_int_equal(strobe_nsamples(p), 1);
	const strobe_sample_key *k = strobe_sample(p, 1);
	const strobe_location *leaf = strobe_location_get(p, strobe_stack_get(p, k->stack)->location);
	assert_int_equal(leaf->address, 0x7f0000000100);
	const strobe_mapping *m = strobe_mapping_get(p, leaf->mapping);
	assert_string_equal(strobe_str(p, m->filename), "/lib/libc.so.6");
	strobe_profile_free(p);

	p = strobe_profile_new();
	o.kind = STROBE_HEAP_KIND_LOCK;
	assert_int_equal(strobe_heap_profile_add(p, s, &o, &err), 0);
	assert_int_equal(total(p, "contentions"), 3);
	assert_int_equal(total(p, "delay"), 5000);
	/* a heap snapshot into a lock profile: refused */
	o.kind = STROBE_HEAP_KIND_ALLOC;
	assert_int_equal(strobe_heap_profile_add(p, s, &o, &err), -EINVAL);
	strobe_profile_free(p);

	/* leaks: the 64 B block of the last tenth is not one; stack 0's other block and stack 2's
	 * big one are the same call stack: one leak, the big one's bytes first */
	strobe_heap_leak *l;
	size_t n;
	assert_int_equal(strobe_heap_leaks(s, &l, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(l[0].count, 2);
	assert_int_equal(l[0].bytes, 64 + (1 << 20));
	free(l);
	/* a process that did not exit normally: no leak report */
	s->hdr.state = STROBE_HEAP_RUNNING;
	assert_int_equal(strobe_heap_leaks(s, &l, &n), 0);
	assert_int_equal(n, 0);
	strobe_heap_snap_free(s);
	/* nor live entries from a file still RUNNING (the library publishes them at exit), and
	 * a live_count past the area is cut to it */
	((strobe_heap_hdr *)b)->state = STROBE_HEAP_RUNNING;
	assert_int_equal(strobe_heap_snap_parse(b, T_SIZE, &s, &err), 0);
	assert_int_equal(s->nlive, 0);
	strobe_heap_snap_free(s);
	((strobe_heap_hdr *)b)->state = STROBE_HEAP_EXITED;
	((strobe_heap_hdr *)b)->live_count = UINT32_MAX;
	assert_int_equal(strobe_heap_snap_parse(b, T_SIZE, &s, &err), 0);
	assert_true(s->nlive <= T_LIVE);
	strobe_heap_snap_free(s);
	free(b);
}

/* An agent's interval: what was allocated and waited since an earlier snapshot of the same image,
 * while the in-use values stay what is live now; another image's snapshot is no base. */
static void test_reader_delta(void **state)
{
	(void)state;
	uint8_t *b0 = make_channel(), *b1 = make_channel();
	strobe_heap_stack *st0 = (strobe_heap_stack *)(b0 + STROBE_HEAP_HDR_SIZE);
	strobe_heap_stack *st1 = (strobe_heap_stack *)(b1 + STROBE_HEAP_HDR_SIZE);
	/* earlier: stack 0 had 4 allocations (256 B), 1 freed; the lock 1 contention of 1000 ns;
	 * stack 2 not yet written */
	st0[0].alloc_count = 4, st0[0].alloc_bytes = 256, st0[0].free_count = 1;
	st0[0].free_bytes = 64;
	st0[1].lock_count_milli = 1000, st0[1].lock_delay_ns = 1000;
	st0[2].ready = 0;
	strobe_heap_snap *s0 = NULL, *s1 = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_heap_snap_parse(b0, T_SIZE, &s0, &err), 0);
	assert_int_equal(strobe_heap_snap_parse(b1, T_SIZE, &s1, &err), 0);
	strobe_profile *p = strobe_profile_new();
	strobe_heap_profile_opts o = {.kind = STROBE_HEAP_KIND_ALLOC, .base = s0};
	assert_int_equal(strobe_heap_profile_add(p, s1, &o, &err), 0);
	double sc = strobe_heap_scale(6, 384, 1024), sb = strobe_heap_scale(1, 1 << 20, 1024);
	double si = strobe_heap_scale(6, 384, 1024);
	assert_int_equal(total(p, "alloc_objects"), llround(6 * sc) + llround(sb));
	assert_int_equal(total(p, "alloc_space"), llround(384 * sc) + llround((1 << 20) * sb));
	assert_int_equal(total(p, "inuse_space"), llround(384 * si) + llround((1 << 20) * sb));
	strobe_profile_free(p);
	p = strobe_profile_new();
	o.kind = STROBE_HEAP_KIND_LOCK;
	assert_int_equal(strobe_heap_profile_add(p, s1, &o, &err), 0);
	assert_int_equal(total(p, "contentions"), 2);
	assert_int_equal(total(p, "delay"), 4000);
	strobe_profile_free(p);
	/* nothing new since the base: no allocation sample, the in-use ones remain */
	p = strobe_profile_new();
	o = (strobe_heap_profile_opts){.kind = STROBE_HEAP_KIND_ALLOC, .base = s1};
	assert_int_equal(strobe_heap_profile_add(p, s1, &o, &err), 0);
	assert_int_equal(total(p, "alloc_space"), 0);
	assert_true(total(p, "inuse_space") > 0);
	strobe_profile_free(p);
	/* a base of another image (another start): the totals since the start */
	s0->hdr.start_ns++;
	p = strobe_profile_new();
	o = (strobe_heap_profile_opts){.kind = STROBE_HEAP_KIND_ALLOC, .base = s0};
	assert_int_equal(strobe_heap_profile_add(p, s1, &o, &err), 0);
	sc = strobe_heap_scale(10, 640, 1024);
	assert_int_equal(total(p, "alloc_objects"), llround(10 * sc) + llround(sb));
	strobe_profile_free(p);
	/* a free counted after the allocations were read: in use never goes below zero */
	st1[0].free_count = 11, st1[0].free_bytes = 704;
	strobe_heap_snap_free(s1);
	assert_int_equal(strobe_heap_snap_parse(b1, T_SIZE, &s1, &err), 0);
	p = strobe_profile_new();
	o = (strobe_heap_profile_opts){.kind = STROBE_HEAP_KIND_ALLOC};
	assert_int_equal(strobe_heap_profile_add(p, s1, &o, &err), 0);
	assert_int_equal(total(p, "inuse_objects"), llround(sb));
	strobe_profile_free(p);
	strobe_heap_snap_free(s0);
	strobe_heap_snap_free(s1);
	free(b0);
	free(b1);
}

static void refused(uint8_t *b, size_t len, const char *why)
{
	strobe_heap_snap *s = (void *)1;
	strobe_err err = {{0}};
	int rc = strobe_heap_snap_parse(b, len, &s, &err);
	if (rc != -EINVAL)
		fail_msg("%s: accepted (rc %d)", why, rc);
	assert_null(s);
	assert_true(err.msg[0] != 0);
}

static void test_reader_refuses(void **state)
{
	(void)state;
	uint8_t *b = make_channel();
	strobe_heap_hdr *h = (strobe_heap_hdr *)b;
	refused(b, 100, "short");
	refused(b, T_SIZE - 1, "areas past the end");
#define BAD(field, value, why)                                                                  \
	do {                                                                                    \
		__typeof__(h->field) old_ = h->field;                                           \
		h->field = value;                                                               \
		refused(b, T_SIZE, why);                                                        \
		h->field = old_;                                                                \
	} while (0)
	BAD(version, 99, "version");
	BAD(hdr_size, 64, "header size");
	BAD(max_stacks, STROBE_HEAP_MAX_STACKS + 1, "stacks cap");
	BAD(max_depth, 1000, "depth");
	BAD(live_slots, 1u << 30, "live cap");
	BAD(maps_cap, UINT32_MAX, "maps cap");
	BAD(stacks_off, UINT64_MAX - 10, "stacks offset");
	BAD(live_off, T_SIZE, "live offset");
	BAD(maps_off, (uint64_t)T_SIZE + 1, "maps offset");
	BAD(state, 7, "state");
	memcpy(h->magic, "NOTHEAP!", 8);
	refused(b, T_SIZE, "magic");
	memcpy(h->magic, STROBE_HEAP_MAGIC, 8);
	strobe_heap_stack *st = (strobe_heap_stack *)(b + h->stacks_off);
	st[0].depth = STROBE_HEAP_MAX_DEPTH + 1;
	refused(b, T_SIZE, "stack depth");
	st[0].depth = 2;
	st[1].kind = 9;
	refused(b, T_SIZE, "stack kind");
	st[1].kind = STROBE_HEAP_KIND_LOCK;
	/* not refused but clamped: frees above allocations, maps_len past its area, a stack not
	 * ready, a reserved count past the table */
	st[0].free_count = 1000;
	h->maps_len = UINT32_MAX;
	st[2].ready = 0;
	h->stacks_reserved = 1000;
	strobe_heap_snap *s;
	strobe_err err = {{0}};
	assert_int_equal(strobe_heap_snap_parse(b, T_SIZE, &s, &err), 0);
	assert_int_equal(s->nstacks, T_STACKS);
	assert_int_equal(s->stacks[0].free_count, 10);
	assert_true(s->maps_len <= T_MAPS);
	strobe_profile *p = strobe_profile_new();
	strobe_heap_profile_opts o = {.kind = STROBE_HEAP_KIND_ALLOC};
	assert_int_equal(strobe_heap_profile_add(p, s, &o, &err), 0);
	assert_int_equal(total(p, "inuse_objects"), 0);
	strobe_profile_free(p);
	strobe_heap_snap_free(s);
	free(b);
}

/* The reader's one write: the paused flag, and nothing else, changes in the file. */
static void test_set_paused(void **state)
{
	(void)state;
	uint8_t *b = make_channel();
	char path[] = "/tmp/test_heap_channel.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, T_SIZE), (ssize_t)T_SIZE);
	close(fd);
	assert_int_equal(strobe_heap_set_paused(path, true), 0);
	strobe_heap_snap *s;
	strobe_err err = {{0}};
	assert_int_equal(strobe_heap_snap_read(path, &s, &err), 0);
	assert_int_equal(s->hdr.paused, 1);
	assert_int_equal(s->nstacks, 3);
	strobe_heap_snap_free(s);
	assert_int_equal(strobe_heap_set_paused(path, false), 0);
	assert_int_equal(strobe_heap_snap_read(path, &s, &err), 0);
	assert_int_equal(s->hdr.paused, 0);
	strobe_heap_snap_free(s);
	/* not a channel: refused, untouched */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "hello", 5), 5);
	close(fd);
	assert_int_equal(strobe_heap_set_paused(path, true), -EINVAL);
	assert_int_equal(strobe_heap_snap_read(path, &s, &err), -EINVAL);
	unlink(path);
	assert_true(strobe_heap_set_paused(path, true) < 0);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ln),
		cmocka_unit_test(test_countdown_distribution),
		cmocka_unit_test(test_sampling_probability),
		cmocka_unit_test(test_scale),
		cmocka_unit_test(test_size_class),
		cmocka_unit_test(test_unbiased_estimate),
		cmocka_unit_test(test_live_table),
		cmocka_unit_test(test_live_table_grow),
		cmocka_unit_test(test_reader_profile),
		cmocka_unit_test(test_reader_delta),
		cmocka_unit_test(test_reader_refuses),
		cmocka_unit_test(test_set_paused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
