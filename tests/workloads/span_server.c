// SPDX-License-Identifier: Apache-2.0
/*
 * span_server: a C server with two kinds of requests on a thread pool, labelled with the C SDK
 * (sdk/strobe_labels.h) as a real one would be: each request sets `endpoint` (/fast or /slow)
 * and its own `span_id` on the worker thread that handles it, burns CPU (a known amount per
 * kind), and clears them. It measures the truth itself, with each worker's thread CPU clock read
 * right after the labels are set and right before they are cleared: per kind and per request.
 *
 *   span_server GO_FILE TRUTH_FILE [REQUESTS]
 *
 * It waits (at most 30 s) for GO_FILE to exist, so that a profiler can attach first, then
 * handles REQUESTS requests (default 120: every fourth /slow, 60 ms of CPU each, the rest
 * /fast, 10 ms each) on 4 threads and writes TRUTH_FILE: "cpu_ns /fast N", "cpu_ns /slow N",
 * then "span ID ENDPOINT CPU_NS" per request.
 */
#include <pthread.h>
#include <sys/stat.h>

#include "strobe_labels.h"
#include "wl_common.h"

#define THREADS 4
#define MAX_REQ 10000

static struct req {
	int slow;
	uint64_t span;
	int64_t cpu_ns;
} reqs[MAX_REQ];
static int nreq, next;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void burn(int64_t ns)
{
	uint64_t acc = 1;
	int64_t end = wl_thread_cpu_ns() + ns;
	while (wl_thread_cpu_ns() < end)
		WL_SPIN_CHUNK(acc);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		int i = next < nreq ? next++ : -1;
		pthread_mutex_unlock(&mu);
		if (i < 0)
			return NULL;
		struct req *r = &reqs[i];
		strobe_labels_set("endpoint", r->slow ? "/slow" : "/fast");
		strobe_labels_set_span_id(r->span);
		int64_t t0 = wl_thread_cpu_ns();
		burn(r->slow ? 60000000 : 10000000);
		r->cpu_ns = wl_thread_cpu_ns() - t0;
		strobe_labels_clear();
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: span_server GO_FILE TRUTH_FILE [REQUESTS]\n");
		return 2;
	}
	nreq = argc > 3 ? atoi(argv[3]) : 120;
	if (nreq < 1 || nreq > MAX_REQ) {
		fprintf(stderr, "span_server: REQUESTS must be 1 to %d\n", MAX_REQ);
		return 2;
	}
	for (int i = 0; i < nreq; i++) {
		reqs[i].slow = i % 4 == 3;
		reqs[i].span = 0x5a00000000000000ull + (uint64_t)i * 0x10001ull;
	}
	struct stat st;
	int64_t deadline = wl_mono_ns() + 30 * 1000000000LL;
	while (stat(argv[1], &st) != 0) {
		if (wl_mono_ns() > deadline) {
			fprintf(stderr, "span_server: %s did not appear within 30 s\n", argv[1]);
			return 1;
		}
		usleep(10000);
	}
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	int64_t cpu[2] = {0, 0};
	for (int i = 0; i < nreq; i++)
		cpu[reqs[i].slow] += reqs[i].cpu_ns;
	FILE *f = fopen(argv[2], "w");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	fprintf(f, "cpu_ns /fast %lld\ncpu_ns /slow %lld\n", (long long)cpu[0], (long long)cpu[1]);
	for (int i = 0; i < nreq; i++)
		fprintf(f, "span %016llx %s %lld\n", (unsigned long long)reqs[i].span,
			reqs[i].slow ? "/slow" : "/fast", (long long)reqs[i].cpu_ns);
	return fclose(f) == 0 ? 0 : 1;
}
