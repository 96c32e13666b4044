// SPDX-License-Identifier: Apache-2.0
/*
 * libstrobe-heap.so's overhead microbenchmark: ns per malloc/free pair (sizes 16..512 B, from
 * -t threads at once) and ns per uncontended pthread_mutex_lock/unlock and rwlock wrlock/unlock
 * pair. Run it plain and with LD_PRELOAD=build/libstrobe-heap.so (bench/heap.sh does both, several
 * times, and prints the differences); the best of -r repetitions is printed, the machines being
 * shared and noisy. Times are the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time:
 * on a machine shared with other jobs (load averages far above the core count) wall time mostly
 * measures how long the thread waited for a core. Output: "key ns" lines.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static volatile unsigned long sink;
enum { N = 2000000 };

static void *malloc_loop(void *arg)
{
	double *out = arg;
	void *ring[64] = {0};
	unsigned x = 12345;
	double t0 = now();
	for (int i = 0; i < N; i++) {
		x = x * 1103515245 + 12345;
		size_t size = 16 + ((x >> 16) & 511);
		free(ring[i & 63]);
		ring[i & 63] = malloc(size);
		*(char *)ring[i & 63] = 1;
	}
	*out = (now() - t0) / N;
	for (int i = 0; i < 64; i++)
		free(ring[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 4, reps = 5, c;
	while ((c = getopt(argc, argv, "t:r:")) != -1) {
		if (c == 't')
			threads = atoi(optarg);
		else if (c == 'r')
			reps = atoi(optarg);
	}
	if (threads < 1 || threads > 64)
		threads = 4;
	double best1 = 1e9, bestn = 1e9, bestm = 1e9, bestw = 1e9;
	for (int r = 0; r < reps; r++) {
		double v;
		malloc_loop(&v);
		if (v < best1)
			best1 = v;
		pthread_t t[64];
		double vs[64];
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, malloc_loop, &vs[i]);
		double sum = 0;
		for (int i = 0; i < threads; i++) {
			pthread_join(t[i], NULL);
			sum += vs[i];
		}
		if (sum / threads < bestn)
			bestn = sum / threads;
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		double t0 = now();
		for (int i = 0; i < 10 * N; i++) {
			pthread_mutex_lock(&m);
			sink++;
			pthread_mutex_unlock(&m);
		}
		v = (now() - t0) / (10 * N);
		if (v < bestm)
			bestm = v;
		pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
		t0 = now();
		for (int i = 0; i < 10 * N; i++) {
			pthread_rwlock_wrlock(&rw);
			sink++;
			pthread_rwlock_unlock(&rw);
		}
		v = (now() - t0) / (10 * N);
		if (v < bestw)
			bestw = v;
	}
	printf("malloc_free_1thread %.2f\nmalloc_free_%dthreads %.2f\nmutex_pair %.2f\nrwlock_wr_pair %.2f\n",
	       best1, threads, bestn, bestm, bestw);
	return 0;
}
