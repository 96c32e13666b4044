// SPDX-License-Identifier: Apache-2.0
/*
 * Heap truth workload for strobe record -e heap (tests/e2e/record_heap.sh). It counts what it
 * does and writes the counts to a truth file ("key value" lines), so the profile can be judged
 * against the answer, not against plausibility.
 *
 *   -m alloc (default)  alloc_a, alloc_b and alloc_c allocate 600, 300 and 100 MB (times -s,
 *                       default 1) in sizes from 16 B to 1 MiB, equal bytes in each of the nine
 *                       size classes 16 B * 4^k, and free each block at once. Truth: <fn>_bytes
 *                       and <fn>_count.
 *   -m alloc -h S       the same, alive S seconds more after the truth is written
 *   -m inuse [-h S]     hold_big and hold_small allocate 48 MB in 64 KiB blocks and 16 MB in
 *                       256 B blocks and keep them until exit; churn allocates and frees 200 MB
 *                       meanwhile. Truth: <fn>_live_bytes, <fn>_live_count at exit. -h: then
 *                       hold them S seconds more before exiting (the truth file is written
 *                       first), for a reader that takes snapshots while the process lives.
 *   -m leak -t SECONDS  leak_site keeps 1 MB a second (4 KiB blocks) for the whole run, while
 *                       churn_a and churn_b allocate and free 20 MB a second each, keeping up to
 *                       256 blocks in a ring that is emptied before exit. Truth: leak_bytes.
 *   -m dl               dl_cycle loads libz.so.1 with dlopen, has it allocate its deflate state
 *                       (deflateInit_: about 256 KiB through calloc), frees it and unloads the
 *                       library with dlclose, 100 times: the allocations are made in code that is
 *                       no longer mapped when the profile is written. Truth: dl_cycles.
 *
 * Built with -O1 and frame pointers like every workload; the functions are noinline so each is
 * a frame of its own.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "wl_common.h"

#define MB (1024.0 * 1024.0)
static const size_t classes[9] = {16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576};

static void touch(char *p, size_t n)
{
	p[0] = 1;
	p[n - 1] = 2;
	wl_sink += (uint64_t)(uintptr_t)p;
}

typedef struct tally { uint64_t bytes, count; } tally;

/* Allocates `total` bytes, equal shares per size class, freeing each block at once. Inlined into
 * each caller so that the caller is the frame above malloc. */
static inline __attribute__((always_inline)) void spend(double total, tally *t)
{
	for (int c = 0; c < 9; c++) {
		uint64_t n = (uint64_t)(total / 9 / (double)classes[c]);
		for (uint64_t i = 0; i < n; i++) {
			char *p = malloc(classes[c]);
			touch(p, classes[c]);
			free(p);
		}
		t->bytes += n * classes[c];
		t->count += n;
	}
}

__attribute__((noinline)) void alloc_a(double mb, tally *t) { spend(mb * MB, t); }
__attribute__((noinline)) void alloc_b(double mb, tally *t) { spend(mb * MB, t); }
__attribute__((noinline)) void alloc_c(double mb, tally *t) { spend(mb * MB, t); }

static void **keep;
static size_t nkeep, capkeep;
static void kept(void *p)
{
	if (nkeep == capkeep) {
		capkeep = capkeep ? capkeep * 2 : 4096;
		keep = realloc(keep, capkeep * sizeof(*keep));
		if (!keep)
			exit(3);
	}
	keep[nkeep++] = p;
}

__attribute__((noinline)) void hold_big(double mb, tally *t)
{
	for (uint64_t i = 0; i < (uint64_t)(mb * MB / 65536); i++) {
		char *p = malloc(65536);
		touch(p, 65536);
		kept(p);
		t->bytes += 65536;
		t->count++;
	}
}
__attribute__((noinline)) void hold_small(double mb, tally *t)
{
	for (uint64_t i = 0; i < (uint64_t)(mb * MB / 256); i++) {
		char *p = malloc(256);
		touch(p, 256);
		kept(p);
		t->bytes += 256;
		t->count++;
	}
}
__attribute__((noinline)) void churn(double mb)
{
	tally t = {0};
	spend(mb * MB, &t);
}

/* ---- leak mode ---- */
static void *ring_a[256], *ring_b[256];
__attribute__((noinline)) void leak_site(tally *t)
{
	char *p = malloc(4096); /* never freed */
	touch(p, 4096);
	t->bytes += 4096;
	t->count++;
}
__attribute__((noinline)) void churn_a(unsigned i, size_t size)
{
	free(ring_a[i % 256]);
	ring_a[i % 256] = malloc(size);
	touch(ring_a[i % 256], size);
}
__attribute__((noinline)) void churn_b(unsigned i, size_t size)
{
	free(ring_b[i % 256]);
	ring_b[i % 256] = calloc(1, size);
	touch(ring_b[i % 256], size);
}

/* ---- dl mode: zlib's entry points by dlsym, no header needed ---- */
__attribute__((noinline)) int dl_cycle(void)
{
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	int (*init)(void *, int, const char *, int) = (int (*)(void *, int, const char *, int))dlsym(h, "deflateInit_");
	int (*end)(void *) = (int (*)(void *))dlsym(h, "deflateEnd");
	const char *(*version)(void) = (const char *(*)(void))dlsym(h, "zlibVersion");
	int rc = -1;
	if (init && end && version) {
		/* z_stream is 112 bytes on LP64; zalloc/zfree NULL: zlib's own calloc/free */
		_Alignas(16) unsigned char strm[112] = {0};
		rc = init(strm, 6, version(), (int)sizeof(strm));
		if (rc == 0)
			end(strm);
	}
	dlclose(h);
	return rc;
}

int main(int argc, char **argv)
{
	const char *mode = "alloc", *out = NULL;
	double scale = 1, secs = 5, hold = 0;
	int c;
	while ((c = getopt(argc, argv, "m:s:o:t:h:")) != -1) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 's': scale = atof(optarg); break;
		case 'o': out = optarg; break;
		case 't': secs = atof(optarg); break;
		case 'h': hold = atof(optarg); break;
		default: fprintf(stderr, "usage: alloc_truth [-m alloc|inuse|leak] [-s SCALE] [-t SECONDS] [-h HOLD_SECONDS] -o TRUTH\n"); return 2;
		}
	}
	FILE *f = out ? fopen(out, "w") : stdout;
	if (!f)
		return 2;
	if (strcmp(mode, "alloc") == 0) {
		tally a = {0}, b = {0}, cc = {0};
		/* interleaved in rounds, so a sampler drifting over time would show */
		for (int r = 0; r < 10; r++) {
			alloc_a(60 * scale, &a);
			alloc_b(30 * scale, &b);
			alloc_c(10 * scale, &cc);
		}
		fprintf(f, "alloc_a_bytes %llu\nalloc_a_count %llu\n", (unsigned long long)a.bytes, (unsigned long long)a.count);
		fprintf(f, "alloc_b_bytes %llu\nalloc_b_count %llu\n", (unsigned long long)b.bytes, (unsigned long long)b.count);
		fprintf(f, "alloc_c_bytes %llu\nalloc_c_count %llu\n", (unsigned long long)cc.bytes, (unsigned long long)cc.count);
		fflush(f);
		if (hold > 0) { /* -h: alive S seconds more, for a reader that looks at living processes */
			struct timespec ts = {(time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9)};
			nanosleep(&ts, NULL);
		}
	} else if (strcmp(mode, "inuse") == 0) {
		tally big = {0}, small = {0};
		/* the list of kept blocks, allocated before (and apart from) the measured ones */
		capkeep = (size_t)(70000 * scale) + 4096;
		keep = malloc(capkeep * sizeof(*keep));
		for (int r = 0; r < 8; r++) {
			hold_big(6 * scale, &big);
			churn(12.5 * scale);
			hold_small(2 * scale, &small);
			churn(12.5 * scale);
		}
		fprintf(f, "hold_big_live_bytes %llu\nhold_big_live_count %llu\n", (unsigned long long)big.bytes, (unsigned long long)big.count);
		fprintf(f, "hold_small_live_bytes %llu\nhold_small_live_count %llu\n", (unsigned long long)small.bytes, (unsigned long long)small.count);
		fflush(f);
		if (hold > 0) {
			struct timespec ts = {(time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9)};
			nanosleep(&ts, NULL);
		}
	} else if (strcmp(mode, "leak") == 0) {
		tally l = {0};
		int64_t t0 = wl_mono_ns(), end = t0 + (int64_t)(secs * 1e9);
		unsigned i = 0;
		/* 1 MB/s of leaks: one 4 KiB block every 1/256 s; 20 MB/s of churn each */
		for (int64_t next = t0; wl_mono_ns() < end; next += 1000000000 / 256) {
			leak_site(&l);
			for (int k = 0; k < 20; k++, i++) {
				churn_a(i, 4096);
				churn_b(i, 4096);
			}
			int64_t now = wl_mono_ns();
			if (next > now) {
				struct timespec ts = {0, (long)(next - now)};
				nanosleep(&ts, NULL);
			}
		}
		for (int k = 0; k < 256; k++) {
			free(ring_a[k]);
			free(ring_b[k]);
		}
		fprintf(f, "leak_bytes %llu\nleak_count %llu\n", (unsigned long long)l.bytes, (unsigned long long)l.count);
	} else if (strcmp(mode, "dl") == 0) {
		int ok = 0;
		for (int i = 0; i < 100; i++)
			ok += dl_cycle() == 0;
		fprintf(f, "dl_cycles %d\n", ok);
	} else {
		fprintf(stderr, "alloc_truth: unknown mode %s\n", mode);
		return 2;
	}
	if (f != stdout)
		fclose(f);
	return 0;
}
