// SPDX-License-Identifier: Apache-2.0
/*
 * Lock-contention truth workload for strobe record -e mutex (tests/e2e/record_mutex.sh).
 *
 * -t THREADS threads (default 4) take one shared mutex in contend() -r ROUNDS times each
 * (default 300), hold it for about -u MICROSECONDS of CPU (default 500), and time every
 * pthread_mutex_lock call themselves; the sum of those waits is the truth the profile's
 * delay/nanoseconds must match. Each thread also takes a mutex of its own in solo(), which no
 * other thread ever touches: it must give no sample. A pthread_rwlock taken for writing in
 * rw_contend() by every thread likewise (truth: rw_wait_ns). Truth file: "key value" lines
 * contend_wait_ns, contend_count (calls that waited at all), rw_wait_ns, solo_calls.
 */
#include <pthread.h>
#include <stdlib.h>

#include "wl_common.h"

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int rounds = 300, hold_us = 500;
static int64_t total_wait, total_rw_wait, waited, solo_calls;
static pthread_mutex_t tally = PTHREAD_MUTEX_INITIALIZER;

static void hold(int us)
{
	int64_t end = wl_mono_ns() + (int64_t)us * 1000;
	while (wl_mono_ns() < end)
		wl_sink++;
}

__attribute__((noinline)) int64_t contend(int *did_wait)
{
	int64_t t0 = wl_mono_ns();
	pthread_mutex_lock(&shared);
	int64_t w = wl_mono_ns() - t0;
	hold(hold_us);
	pthread_mutex_unlock(&shared);
	*did_wait = w > 20000;
	return w;
}

__attribute__((noinline)) int64_t rw_contend(void)
{
	int64_t t0 = wl_mono_ns();
	pthread_rwlock_wrlock(&rw);
	int64_t w = wl_mono_ns() - t0;
	/* held longer than contend() holds the mutex: the threads leave contend() one by one,
	 * and the next one then finds the rwlock still taken (held for less, they rarely met) */
	hold(hold_us * 2);
	pthread_rwlock_unlock(&rw);
	return w;
}

__attribute__((noinline)) void solo(pthread_mutex_t *m)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(m);
		wl_sink++;
		pthread_mutex_unlock(m);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_t mine = PTHREAD_MUTEX_INITIALIZER;
	int64_t wait = 0, rwait = 0, n = 0;
	for (int r = 0; r < rounds; r++) {
		int did;
		wait += contend(&did);
		n += did;
		if (r % 4 == 0)
			rwait += rw_contend();
		solo(&mine);
		hold(50); /* a gap, so the others do not always find the lock taken */
	}
	pthread_mutex_lock(&tally);
	total_wait += wait;
	total_rw_wait += rwait;
	waited += n;
	solo_calls += rounds * 1000;
	pthread_mutex_unlock(&tally);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 4, c;
	const char *out = NULL;
	while ((c = getopt(argc, argv, "t:r:u:o:")) != -1) {
		switch (c) {
		case 't': nthreads = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'u': hold_us = atoi(optarg); break;
		case 'o': out = optarg; break;
		default: fprintf(stderr, "usage: lock_truth [-t THREADS] [-r ROUNDS] [-u US] -o TRUTH\n"); return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64)
		return 2;
	pthread_t t[64];
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	FILE *f = out ? fopen(out, "w") : stdout;
	if (!f)
		return 2;
	fprintf(f, "contend_wait_ns %lld\ncontend_count %lld\nrw_wait_ns %lld\nsolo_calls %lld\n",
		(long long)total_wait, (long long)waited, (long long)total_rw_wait, (long long)solo_calls);
	if (f != stdout)
		fclose(f);
	return 0;
}
