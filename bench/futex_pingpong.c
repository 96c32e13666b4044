// SPDX-License-Identifier: Apache-2.0
// Futex-wait benchmark for the lock-contention program's overhead (bench/locks.sh): two threads
// pass a turn back and forth through one word with raw futex calls (FUTEX_WAIT_PRIVATE until the
// word says it is their turn, FUTEX_WAKE_PRIVATE after flipping it), as a mutex or condition
// variable hand-off does, for a fixed wall time. Each round trip is about two futex waits that
// sleep (each thread waits for the other's answer), so -r 25000 makes about 50,000 waits a
// second: the goal's rate. Output as bench/pingpong's:
//
//   futex_pingpong [-s SECONDS] [-r ROUND_TRIPS_PER_S]
//
// prints "round_trips_per_s N ops_per_cpu_s M seconds S" (M: round trips per second of the
// process's CPU time, where the programs' work at each futex call is charged).
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t turn; /* 0: main's turn, 1: the partner's, 2: quit */

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static void wait_while(uint32_t v)
{
	while (atomic_load(&turn) == v)
		syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void give(uint32_t v)
{
	atomic_store(&turn, v);
	syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *partner(void *arg)
{
	(void)arg;
	for (;;) {
		wait_while(0);
		if (atomic_load(&turn) == 2)
			return NULL;
		give(0);
	}
}

int main(int argc, char **argv)
{
	double seconds = 5, rate = 0;
	int c;
	while ((c = getopt(argc, argv, "s:r:h")) != -1) {
		switch (c) {
		case 's': seconds = strtod(optarg, NULL); break;
		case 'r': rate = strtod(optarg, NULL); break;
		default:
			fprintf(stderr, "usage: futex_pingpong [-s SECONDS] [-r ROUND_TRIPS_PER_S]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!(seconds > 0) || !(rate >= 0)) {
		fprintf(stderr, "futex_pingpong: bad -s or -r\n");
		return 2;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, partner, NULL)) {
		fprintf(stderr, "futex_pingpong: pthread_create failed\n");
		return 1;
	}
	double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), el;
	uint64_t trips = 0;
	for (;;) {
		/* The clock is read every 64 round trips (each takes microseconds). */
		for (int i = 0; i < 64; i++) {
			give(1);
			wait_while(1);
		}
		trips += 64;
		if ((el = now_s() - t0) >= seconds)
			break;
		if (rate > 0 && (double)trips / rate > el) { /* ahead: wait for the schedule */
			double at = t0 + (double)trips / rate;
			struct timespec ts = {(time_t)at, (long)((at - (double)(time_t)at) * 1e9)};
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
	double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	give(2);
	pthread_join(th, NULL);
	printf("round_trips_per_s %.1f ops_per_cpu_s %.1f seconds %.3f\n", (double)trips / el,
	       cpu > 0 ? (double)trips / cpu : 0, el);
	return 0;
}
