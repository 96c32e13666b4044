// SPDX-License-Identifier: Apache-2.0
/*
 * The sampler's per-record path (issue 19: event kinds, decoding, time ordering): RECORDS
 * synthetic on-CPU samples of 50 processes (a 16-frame user call chain each, from four
 * interleaved "rings" whose times overlap) with their mmap2 and comm records, fed to an offline
 * sampler in rounds of 4096 records, each round ordered and processed up to its own time, as the
 * rings are read. CPU time of this process per record, median of RUNS; the profile's sample count
 * is checked against what was fed.
 *
 *   build/bench/sampler_feed [RECORDS [RUNS]]    a markdown row on stdout (bench/sampler.sh)
 */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "strobe/profile.h"
#include "strobe/sampler.h"

enum { PROCS = 50, DEPTH = 16, ROUND = 4096 };

static const strobe_sampler_layout L = {.id = {11, 22, 33}};

typedef struct buf {
	uint8_t *b;
	size_t len, cap, start;
} buf;

static void put(buf *w, const void *p, size_t n)
{
	if (w->len + n > w->cap) {
		w->cap = w->cap ? w->cap * 2 : 1 << 20;
		w->b = realloc(w->b, w->cap);
		if (!w->b)
			exit(1);
	}
	memcpy(w->b + w->len, p, n);
	w->len += n;
}
static void u64(buf *w, uint64_t v) { put(w, &v, 8); }
static void u32x2(buf *w, uint32_t a, uint32_t b)
{
	uint32_t v[2] = {a, b};
	put(w, v, 8);
}
static void begin(buf *w, uint32_t type, uint16_t misc)
{
	w->start = w->len;
	struct perf_event_header h = {.type = type, .misc = misc};
	put(w, &h, sizeof(h));
}
static void end(buf *w)
{
	while (w->len % 8)
		put(w, "", 1);
	struct perf_event_header *h = (void *)(w->b + w->start);
	h->size = (uint16_t)(w->len - w->start);
}
static void trailer(buf *w, uint32_t pid, uint64_t t)
{
	u32x2(w, pid, pid);
	u64(w, t);
	u32x2(w, 0, 0);
	u64(w, L.id[0]);
}

int main(int argc, char **argv)
{
	unsigned records = argc > 1 ? (unsigned)atoi(argv[1]) : 200000;
	unsigned runs = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
	if (records < ROUND || records > 10000000 || !runs || runs > 100) {
		fprintf(stderr, "usage: sampler_feed [RECORDS (4096..10000000) [RUNS (1..100)]]\n");
		return 2;
	}
	buf w = {0};
	/* side-band first: each process's program and name */
	for (uint32_t p = 0; p < PROCS; p++) {
		uint32_t pid = 1000 + p;
		begin(&w, PERF_RECORD_MMAP2, 0);
		u32x2(&w, pid, pid);
		u64(&w, 0x400000);
		u64(&w, 0x100000);
		u64(&w, 0);
		u32x2(&w, 8, 1);
		u64(&w, 1234 + p);
		u64(&w, 0);
		u32x2(&w, 5, 2);
		put(&w, "/usr/bin/app", 13);
		while ((w.len - w.start) % 8)
			put(&w, "", 1);
		trailer(&w, pid, 1);
		end(&w);
		begin(&w, PERF_RECORD_COMM, 0);
		u32x2(&w, pid, pid);
		put(&w, "app\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
		trailer(&w, pid, 2);
		end(&w);
	}
	size_t sideband = w.len;
	/* samples: four rings' worth interleaved, so that times go back and forth by up to 3 us */
	for (unsigned i = 0; i < records; i++) {
		uint32_t pid = 1000 + (i * 7) % PROCS;
		uint64_t t = 1000 + (uint64_t)(i / 4) * 4 + (3 - i % 4) * 1000;
		begin(&w, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
		u64(&w, L.id[0]);
		u64(&w, 0x400100);
		u32x2(&w, pid, pid);
		u64(&w, t);
		u32x2(&w, i % 4, 0);
		u64(&w, 10101010);
		u64(&w, DEPTH + 1);
		u64(&w, (uint64_t)PERF_CONTEXT_USER);
		for (unsigned d = 0; d < DEPTH; d++)
			u64(&w, 0x400100 + ((i % 97) * 64 + d * 4096) % 0x100000);
		end(&w);
	}
	double *ms = calloc(runs, sizeof(*ms));
	if (!ms)
		return 1;
	for (unsigned r = 0; r < runs; r++) {
		strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 99};
		strobe_sampler *s = strobe_sampler_open_offline(&o, &L);
		if (!s)
			return 1;
		double t0 = bench_cpu_ms();
		if (strobe_sampler_feed(s, w.b, sideband, 3) < 0)
			return 1;
		/* rounds of ROUND records, each processed up to its own start (later ones wait) */
		size_t off = sideband, rec = 0, start = off;
		while (off < w.len) {
			const struct perf_event_header *h = (const void *)(w.b + off);
			off += h->size;
			if (++rec % ROUND == 0 || off == w.len) {
				int64_t until = off == w.len ? INT64_MAX : 1000 + (int64_t)(rec / 4) * 4;
				if (strobe_sampler_feed(s, w.b + start, off - start, until) < 0)
					return 1;
				start = off;
			}
		}
		ms[r] = bench_cpu_ms() - t0;
		strobe_sampler_profile_opts po = {0};
		strobe_err err;
		strobe_profile *p = strobe_sampler_profile(s, &po, &err);
		int64_t got = p ? strobe_total(p, 0) : -1;
		strobe_profile_free(p);
		strobe_sampler_close(s);
		if (got != (int64_t)records) {
			fprintf(stderr, "sampler_feed: %lld samples in the profile, %u fed\n",
				(long long)got, records);
			return 1;
		}
	}
	double med = bench_median(ms, runs);
	printf("| %u samples of %d frames, %d processes, rounds of %d | %.1f | %.0f |\n", records,
	       DEPTH, PROCS, ROUND, med, med * 1e6 / records);
	free(ms);
	free(w.b);
	return 0;
}
