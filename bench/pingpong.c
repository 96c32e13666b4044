// SPDX-License-Identifier: Apache-2.0
// Context-switch benchmark for the off-CPU recorder's overhead (bench/record.sh): two threads
// pass a one-byte token back and forth through two pipes for a fixed wall time, and the program
// prints the round trips per second. A hand-off blocks the sender (unless the answer is already
// there) and wakes the other thread, so a round trip is one to two blocking switches and as many
// switch-ins: the worst case for a recorder that records every switch.
//
//   pingpong [-s SECONDS] [-r RATE]
//
// prints "round_trips_per_s N ops_per_cpu_s M seconds S": M is round trips per second of the
// process's CPU time (both threads, user and system), which is where a recorder's in-kernel work
// at each switch is charged. -r paces it to RATE round trips a second (about twice as many
// switch-outs): at a fixed rate the wall-clock rate cannot show a cost, the CPU per round trip
// does.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ping[2], pong[2]; /* main -> partner, partner -> main */

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static void *partner(void *arg)
{
	char c;
	for (;;) {
		if (read(ping[0], &c, 1) != 1 || c == 'q')
			return NULL;
		if (write(pong[1], &c, 1) != 1)
			return NULL;
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
			fprintf(stderr, "usage: pingpong [-s SECONDS] [-r ROUND_TRIPS_PER_S]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (!(seconds > 0) || !(rate >= 0) || pipe(ping) || pipe(pong)) {
		fprintf(stderr, "pingpong: bad -s or -r, or pipe failed\n");
		return 2;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, partner, NULL)) {
		fprintf(stderr, "pingpong: pthread_create failed\n");
		return 1;
	}
	double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), el;
	uint64_t trips = 0;
	char t = 't';
	for (;;) {
		/* The clock is read every 64 round trips (each takes microseconds). */
		for (int i = 0; i < 64; i++) {
			if (write(ping[1], &t, 1) != 1 || read(pong[0], &t, 1) != 1) {
				fprintf(stderr, "pingpong: pipe I/O failed\n");
				return 1;
			}
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
	t = 'q';
	if (write(ping[1], &t, 1) != 1)
		return 1;
	pthread_join(th, NULL);
	printf("round_trips_per_s %.1f ops_per_cpu_s %.1f seconds %.3f\n", (double)trips / el,
	       cpu > 0 ? (double)trips / cpu : 0, el);
	return 0;
}
