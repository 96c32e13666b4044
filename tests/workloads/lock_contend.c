// SPDX-License-Identifier: Apache-2.0
/* lock_contend: threads that queue on one pthread mutex, timing their own waits, for the lock
 * (futex-wait) recorder's truth tests.
 *
 *   lock_contend [-o TRUTH] [-t THREADS] [-m HOLD_MS] [-u UNCONTENDED] [-g FILE] SECONDS
 *
 * With -g, the threads start only once FILE exists (a recorder attached to the process first).
 * - THREADS threads (default 4, named "lk-waiter-N") each loop: contend_lock() takes the shared
 *   mutex `hot`, timing pthread_mutex_lock with CLOCK_MONOTONIC, holds it HOLD_MS (default 5,
 *   asleep: the machine stays idle) and lets it go, so the others queue behind it.
 * - Each round each thread also calls uncontended_lock() UNCONTENDED times (default 1000): a
 *   lock and unlock of a mutex no other thread touches. It never reaches the kernel, so no
 *   futex wait, and no sample, may name it.
 *
 * Truth ("key value" lines): "contend_lock NS", the time all threads spent inside
 * pthread_mutex_lock(&hot), "contend_lock_calls N", "uncontended_lock_calls N", "pid PID" and
 * "hot_addr 0x...", the mutex's address (the futex's: its lock word comes first).
 * What a futex-wait profile sees of those waits is the futex system calls inside them: the
 * user-space part of pthread_mutex_lock (an atomic or two) is noise at millisecond waits. */
#include "wl_common.h"

#include <pthread.h>
#include <stdatomic.h>

static int64_t deadline, hold_ns = 5000000;
static long nuncontended = 1000;
static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t wait_total;
static _Atomic long contend_calls, uncontended_calls;

/* noinline, and with work after the call, so that neither is a tail call folded into its
 * caller: each is a frame of its own in every stack taken inside it */
__attribute__((noinline)) static int64_t contend_lock(void)
{
	int64_t t0 = wl_mono_ns();
	pthread_mutex_lock(&hot);
	int64_t waited = wl_mono_ns() - t0;
	wl_sink += (uint64_t)waited;
	return waited;
}

__attribute__((noinline)) static void uncontended_lock(pthread_mutex_t *m)
{
	pthread_mutex_lock(m);
	wl_sink++;
	pthread_mutex_unlock(m);
}

static void *waiter(void *arg)
{
	char name[16];
	snprintf(name, sizeof(name), "lk-waiter-%d", (int)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_t mine = PTHREAD_MUTEX_INITIALIZER;
	int64_t waited = 0;
	long calls = 0, un = 0;
	while (wl_mono_ns() < deadline) {
		waited += contend_lock();
		calls++;
		wl_sleep_ns(hold_ns);
		pthread_mutex_unlock(&hot);
		for (long i = 0; i < nuncontended; i++, un++)
			uncontended_lock(&mine);
	}
	atomic_fetch_add(&wait_total, waited);
	atomic_fetch_add(&contend_calls, calls);
	atomic_fetch_add(&uncontended_calls, un);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *truth = NULL;
	const char *go = NULL;
	int nthreads = 4, c;
	while ((c = getopt(argc, argv, "o:t:m:u:g:")) != -1) {
		switch (c) {
		case 'o': truth = optarg; break;
		case 't': nthreads = atoi(optarg); break;
		case 'm': hold_ns = (int64_t)(atof(optarg) * 1e6); break;
		case 'u': nuncontended = atol(optarg); break;
		case 'g': go = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || nthreads < 2 || nthreads > 64 || hold_ns <= 0 || nuncontended < 0)
		goto usage;
	double secs = wl_parse_seconds(argv[optind], "lock_contend");
	FILE *tf = wl_truth_open(truth, "lock_contend");
	/* waiting for FILE in a timed condition-variable wait (a futex wait), so that a recorder
	 * started meanwhile meets the process, and loads its unwind tables, before the threads run */
	pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t gc = PTHREAD_COND_INITIALIZER;
	pthread_mutex_lock(&gm);
	while (go && access(go, F_OK) != 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&gc, &gm, &ts);
	}
	pthread_mutex_unlock(&gm);
	deadline = wl_mono_ns() + (int64_t)(secs * 1e9);
	pthread_t th[64];
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, waiter, (void *)(intptr_t)i) != 0) {
			fprintf(stderr, "lock_contend: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	if (tf) {
		fprintf(tf, "pid %d\nhot_addr %p\ncontend_lock %lld\ncontend_lock_calls %ld\n"
			    "uncontended_lock_calls %ld\nhold_ns %lld\nthreads %d\n",
			(int)getpid(), (void *)&hot, (long long)atomic_load(&wait_total),
			atomic_load(&contend_calls), atomic_load(&uncontended_calls),
			(long long)hold_ns, nthreads);
	}
	wl_truth_close(tf, truth, "lock_contend");
	return 0;
usage:
	fprintf(stderr, "usage: lock_contend [-o TRUTH] [-t THREADS] [-m HOLD_MS] [-u N] [-g FILE] "
			"SECONDS\n");
	return 2;
}
