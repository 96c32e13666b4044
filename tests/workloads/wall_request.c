// SPDX-License-Identifier: Apache-2.0
/* wall_request: "requests" that each compute for a while and then wait, so that a wall-clock
 * profile must show both halves side by side in their true proportion (by default 20 ms of CPU
 * and 280 ms waiting: a CPU-only profile sees 1/15 of the story).
 *
 *   wall_request [-t THREADS] [-c CPU_MS] [-w WAIT_MS] [-o TRUTH] SECONDS
 *
 * Each worker thread ("worker-N", default 4) serves requests until SECONDS have passed:
 * handle_request -> req_compute (spins until CPU_MS of its thread CPU clock) and then
 * handle_request -> req_wait_outer -> req_wait -> nanosleep (WAIT_MS, as if for a backend). The
 * wait is two functions deep because glibc has no frame pointers: a stack taken inside nanosleep
 * skips its direct caller (req_wait), so the truth is keyed by req_wait_outer.
 *
 * Truth ("key value"): req_compute NS (thread CPU time in it, all threads), req_wait_outer NS
 * (CLOCK_MONOTONIC time inside nanosleep), handle_request NS (wall time of whole requests),
 * requests N, threads N, pid, process_cpu_ns. */
#include "wl_common.h"

#include <pthread.h>
#include <unistd.h>

static int64_t deadline, cpu_ns = 20000000, wait_ns = 280000000;

struct worker {
	pthread_t th;
	int index;
	int64_t compute_ns, wait_ns, request_ns;
	long requests;
};

static __attribute__((noinline)) int64_t req_compute(void)
{
	uint64_t acc = (uint64_t)cpu_ns;
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < cpu_ns);
	return t - t0;
}

static __attribute__((noinline)) int64_t req_wait(void)
{
	struct timespec ts = { .tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000 };
	int64_t t0 = wl_mono_ns();
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return wl_mono_ns() - t0;
}

static __attribute__((noinline)) int64_t req_wait_outer(void)
{
	return req_wait();
}

static __attribute__((noinline)) void handle_request(struct worker *w)
{
	int64_t t0 = wl_mono_ns();
	w->compute_ns += req_compute();
	w->wait_ns += req_wait_outer();
	w->request_ns += wl_mono_ns() - t0;
	w->requests++;
}

static __attribute__((noinline)) void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16];
	snprintf(name, sizeof(name), "worker-%d", w->index);
	pthread_setname_np(pthread_self(), name);
	/* Stagger the workers so that their compute phases rarely overlap on few CPUs. */
	wl_sleep_ns((cpu_ns + wait_ns) * w->index / 8);
	while (wl_mono_ns() < deadline)
		handle_request(w);
	return NULL;
}

static int64_t ms_arg(const char *s)
{
	long v = atol(s);
	if (v < 1 || v > 60000) {
		fprintf(stderr, "wall_request: bad milliseconds '%s'\n", s);
		exit(2);
	}
	return (int64_t)v * 1000000;
}

int main(int argc, char **argv)
{
	const char *truth = NULL;
	int nthreads = 4, c;
	while ((c = getopt(argc, argv, "t:c:w:o:")) != -1) {
		switch (c) {
		case 't': nthreads = atoi(optarg); break;
		case 'c': cpu_ns = ms_arg(optarg); break;
		case 'w': wait_ns = ms_arg(optarg); break;
		case 'o': truth = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || nthreads < 1 || nthreads > 64)
		goto usage;
	double secs = wl_parse_seconds(argv[optind], "wall_request");
	FILE *tf = wl_truth_open(truth, "wall_request");
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return 1;
	deadline = wl_mono_ns() + (int64_t)(secs * 1e9);
	for (int i = 0; i < nthreads; i++) {
		w[i].index = i;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i])) {
			fprintf(stderr, "wall_request: pthread_create failed\n");
			return 1;
		}
	}
	int64_t compute = 0, waited = 0, req = 0;
	long requests = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].th, NULL);
		compute += w[i].compute_ns;
		waited += w[i].wait_ns;
		req += w[i].request_ns;
		requests += w[i].requests;
	}
	if (tf) {
		fprintf(tf, "pid %d\nthreads %d\nrequests %ld\n", (int)getpid(), nthreads, requests);
		fprintf(tf, "req_compute %lld\nreq_wait_outer %lld\nhandle_request %lld\n",
			(long long)compute, (long long)waited, (long long)req);
		fprintf(tf, "process_cpu_ns %lld\n", (long long)wl_process_cpu_ns());
	}
	wl_truth_close(tf, truth, "wall_request");
	free(w);
	return 0;
usage:
	fprintf(stderr, "usage: wall_request [-t THREADS] [-c CPU_MS] [-w WAIT_MS] [-o TRUTH] SECONDS\n");
	return 2;
}
