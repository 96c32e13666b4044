// SPDX-License-Identifier: Apache-2.0
// CPU-bound benchmark for the recorder's overhead (bench/record.sh): N threads (default: one per
// online CPU) each run a fixed, deterministic integer kernel (64-bit FNV-1a over a xorshift
// stream) in chunks of a fixed size for a fixed wall time, and the program prints the chunks
// completed per second, all threads together. A profiler running beside it takes CPU time from
// these threads, so the drop in this number against a run without one is the profiler's cost.
//
//   cpu_work [-t THREADS] [-s SECONDS]
//   prints "ops_per_s N ops_per_cpu_s C threads T seconds S cpu_s U sink X"
//
// ops_per_cpu_s divides by the CPU time the threads got (getrusage): other processes taking
// CPUs from the benchmark cancel out of it, work done in interrupts that land on its threads
// (a profiler's sampling, which the kernel charges to the interrupted task) does not.
//
// The clock is read once per chunk (about 0.1 ms of work), so reading it costs nothing
// measurable and the end of the run is overshot by at most one chunk per thread.
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 4096 /* kernel iterations between two clock reads */

struct worker {
	pthread_t th;
	double seconds;
	uint64_t chunks;
	uint64_t sink; /* keeps the result alive so the kernel is not optimized away */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One chunk: FNV-1a of CHUNK words of a xorshift64 stream. Pure integer work, no memory traffic
 * beyond registers, the same for every chunk and every run. */
static uint64_t chunk(uint64_t seed)
{
	uint64_t x = seed | 1, h = 0xcbf29ce484222325ull;
	for (int i = 0; i < CHUNK; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (int b = 0; b < 8; b++) {
			h ^= (x >> (b * 8)) & 0xff;
			h *= 0x100000001b3ull;
		}
	}
	return h;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	double end = now_s() + w->seconds;
	uint64_t h = 1;
	do {
		h = chunk(h);
		w->chunks++;
	} while (now_s() < end);
	w->sink = h;
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	double seconds = 10;
	int c;
	while ((c = getopt(argc, argv, "t:s:h")) != -1) {
		switch (c) {
		case 't': threads = strtol(optarg, NULL, 10); break;
		case 's': seconds = strtod(optarg, NULL); break;
		default:
			fprintf(stderr, "usage: cpu_work [-t THREADS] [-s SECONDS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (threads < 1 || threads > 1024 || !(seconds > 0)) {
		fprintf(stderr, "cpu_work: bad -t or -s\n");
		return 2;
	}
	struct worker *w = calloc((size_t)threads, sizeof *w);
	if (!w)
		return 1;
	double t0 = now_s();
	for (long i = 0; i < threads; i++) {
		w[i].seconds = seconds;
		int e = pthread_create(&w[i].th, NULL, run, &w[i]);
		if (e) {
			fprintf(stderr, "cpu_work: pthread_create: %s\n", strerror(e));
			return 1;
		}
	}
	uint64_t total = 0, sink = 0;
	for (long i = 0; i < threads; i++) {
		pthread_join(w[i].th, NULL);
		total += w[i].chunks;
		sink ^= w[i].sink;
	}
	double el = now_s() - t0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		     (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	printf("ops_per_s %.1f ops_per_cpu_s %.1f threads %ld seconds %.3f cpu_s %.3f sink %" PRIx64
	       "\n", (double)total / el, cpu > 0 ? (double)total / cpu : 0, threads, el, cpu,
	       sink & 0xf);
	free(w);
	return 0;
}
