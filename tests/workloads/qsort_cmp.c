// SPDX-License-Identifier: Apache-2.0
/* qsort_cmp: a hot comparator called back from libc's qsort, for the unwinder's truth tests.
 *
 *   qsort_cmp [-x MAPPINGS] [-o TRUTH] SECONDS
 *
 * main -> sort_rounds -> sort_once -> qsort(3) -> glibc's merge sort (built without frame
 * pointers) -> cmp_hot, alternating with other_work, which burns half as much CPU as the sort
 * before it took. A frame-pointer unwind from cmp_hot goes through glibc's frames with whatever
 * rbp they left and loses sort_once, sort_rounds and main; unwind tables give the whole chain.
 *
 * Truth ("key value" lines): "cmp_hot NS" is the thread CPU time spent inside the qsort calls,
 * "other_work NS" that of other_work, "process_cpu_ns" the process's, and share_X = X / process.
 * The comparator spins about 4000 multiply-adds per call, so qsort's own work (a few ns per
 * comparison) is well under 0.5% of the time charged to it.
 *
 * -x MAPPINGS first maps that many one-page anonymous executable regions (separate mappings,
 * below the program and the libraries), so that their code lies beyond the first 64 executable
 * mappings, the most the eBPF walk's per-process table holds (STROBE_OB_MAX_MAPS): as in a
 * process with many libraries, their frames are then found by their file or not at all. */
#include "wl_common.h"

#include <sys/mman.h>
#include <unistd.h>

#define N 1024

static uint64_t keys[N];

static __attribute__((noinline)) int cmp_hot(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b, acc = x ^ y;
	for (int i = 0; i < 4000; i++)
		acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
	wl_sink = acc;
	return x < y ? -1 : x > y;
}

static __attribute__((noinline)) int64_t sort_once(uint64_t *seed)
{
	for (int i = 0; i < N; i++) {
		*seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
		keys[i] = *seed >> 11;
	}
	int64_t t0 = wl_thread_cpu_ns();
	qsort(keys, N, sizeof(keys[0]), cmp_hot);
	int64_t t = wl_thread_cpu_ns() - t0;
	wl_sink = keys[N / 2]; /* qsort is not the tail call: sort_once stays on the stack */
	return t;
}

static __attribute__((noinline)) int64_t other_work(int64_t want)
{
	uint64_t acc = 1;
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < want);
	return t - t0;
}

static __attribute__((noinline)) void sort_rounds(int64_t deadline, int64_t ns[2], long *rounds)
{
	uint64_t seed = 42;
	while (wl_mono_ns() < deadline) {
		int64_t s = sort_once(&seed);
		ns[0] += s;
		ns[1] += other_work(s / 2);
		(*rounds)++;
	}
}

/* n executable one-page mappings: every other page of a read-only region made executable, so
 * that no two merge into one */
static void exec_maps(long n)
{
	long pg = sysconf(_SC_PAGESIZE);
	/* (a hint far below where the program is loaded; the kernel takes it when it is free) */
	char *p = mmap((void *)0x10000000ul, (size_t)(2 * n * pg), PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("qsort_cmp: mmap");
		exit(1);
	}
	for (long i = 0; i < n; i++)
		if (mprotect(p + 2 * i * pg, (size_t)pg, PROT_READ | PROT_EXEC) < 0) {
			perror("qsort_cmp: mprotect");
			exit(1);
		}
}

int main(int argc, char **argv)
{
	const char *truth;
	double secs;
	if (argc > 2 && strcmp(argv[1], "-x") == 0) {
		exec_maps(atol(argv[2]));
		argv[2] = argv[0];
		argc -= 2;
		argv += 2;
	}
	wl_args_truth_seconds(argc, argv, "qsort_cmp", &truth, &secs);
	FILE *tf = wl_truth_open(truth, "qsort_cmp");
	int64_t ns[2] = {0, 0};
	long rounds = 0;
	sort_rounds(wl_mono_ns() + (int64_t)(secs * 1e9), ns, &rounds);
	int64_t total = wl_process_cpu_ns();
	if (tf) {
		fprintf(tf, "pid %d\nrounds %ld\ncmp_hot %lld\nother_work %lld\nprocess_cpu_ns %lld\n",
			(int)getpid(), rounds, (long long)ns[0], (long long)ns[1], (long long)total);
		fprintf(tf, "share_cmp_hot %.4f\nshare_other_work %.4f\n",
			total ? (double)ns[0] / (double)total : 0, total ? (double)ns[1] / (double)total : 0);
	}
	wl_truth_close(tf, truth, "qsort_cmp");
	return 0;
}
