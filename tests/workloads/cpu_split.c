// SPDX-License-Identifier: Apache-2.0
/* cpu_split: a CPU workload whose profile is known in advance. Every round, each burner thread
 * spins in burn_60 until it has used 6 ms of its own CPU (CLOCK_THREAD_CPUTIME_ID), then in burn_30
 * for 3 ms and burn_10 for 1 ms, so the three functions take 60/30/10% of the process's CPU. The
 * truth file records the CPU each function really used, measured with the same thread CPU clock:
 *
 *   cpu_split [-t THREADS] [-o TRUTH] [-r READY] [-c CPU_SECONDS] [-l LOG] SECONDS
 *
 *   pid N, threads N, rounds N, burn_60 NS, burn_30 NS, burn_10 NS (summed over threads),
 *   process_cpu_ns NS (CLOCK_PROCESS_CPUTIME_ID at exit: everything the process used),
 *   share_burn_60 F ... (each function's CPU over process_cpu_ns, 0..1)
 *
 * With -t 0 the main thread burns itself (stacks main;run_rounds;burn_NN, for tests that want
 * main named); otherwise THREADS threads "burner-N" burn (default 1) while main waits.
 * READY, when given, is created once every burner thread is running (for tests that attach with
 * -p and need the threads to exist first).
 *
 * For tests that must hold on a loaded machine: -c stops the burners once the process has used
 * CPU_SECONDS of CPU (SECONDS of wall time stays the cap), so a profile of it holds the same
 * number of samples however busy the machine is; -l LOG has the main thread (THREADS >= 1)
 * append "REALTIME_NS PROCESS_CPU_NS" every 20 ms, so that a test can tell how much CPU the
 * workload got inside a profile's own time window. The burners are leaf functions of ours, compiled with
 * frame pointers, so a sampled stack is thread_main;run_rounds;burn_NN with nothing skipped.
 *
 * -P PERIOD_NS runs and sleeps in a cycle of PERIOD_NS of wall time instead: three burners, each
 * in one function only (burner-0 in burn_60, burner-1 in burn_30, burner-2 in burn_10), burning
 * 60, 30 or 10 % of each period and sleeping to the next period's start (absolute deadlines on
 * one epoch, so the cycle does not drift). With the period a sampler's own, a sampler that fires
 * on each CPU's wall clock meets every thread at the same phase of its cycle each time (one
 * thread takes the samples, the others none); one that counts each thread's CPU time gives
 * each its share (-t is ignored). */
#include "wl_common.h"

#include <pthread.h>
#include <unistd.h>

struct burner {
	pthread_t th;
	int index;
	int64_t deadline, cpu_budget;
	int64_t period, epoch; /* -P: the cycle, and when its first period starts */
	int64_t ns[3];
	long rounds;
};


/* Each burner spins in its own body (WL_SPIN_CHUNK is inlined), reading its thread CPU clock every
 * chunk, so its samples land on burn_NN itself and not on a shared helper. */
static __attribute__((noinline)) int64_t burn_60(int64_t want)
{
	uint64_t acc = (uint64_t)want;
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < want);
	return t - t0;
}

static __attribute__((noinline)) int64_t burn_30(int64_t want)
{
	uint64_t acc = (uint64_t)want + 1;
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < want);
	return t - t0;
}

static __attribute__((noinline)) int64_t burn_10(int64_t want)
{
	uint64_t acc = (uint64_t)want + 2;
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < want);
	return t - t0;
}

static __attribute__((noinline)) void run_rounds(struct burner *b)
{
	while (wl_mono_ns() < b->deadline && wl_process_cpu_ns() < b->cpu_budget) {
		b->ns[0] += burn_60(6000000);
		b->ns[1] += burn_30(3000000);
		b->ns[2] += burn_10(1000000);
		b->rounds++;
	}
}

/* -P: burner i runs its one function for its share of every period, then sleeps to the next. */
static __attribute__((noinline)) void run_cycles(struct burner *b)
{
	static int64_t (*const fn[3])(int64_t) = {burn_60, burn_30, burn_10};
	static const int pct[3] = {60, 30, 10};
	int64_t next = b->epoch;
	while (wl_mono_ns() < b->deadline && wl_process_cpu_ns() < b->cpu_budget) {
		b->ns[b->index] += fn[b->index](b->period * pct[b->index] / 100);
		b->rounds++;
		int64_t now = wl_mono_ns();
		do /* (a period overrun on a busy machine: the next start still on the grid) */
			next += b->period;
		while (next <= now);
		struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
}

static __attribute__((noinline)) void *thread_main(void *arg)
{
	struct burner *b = arg;
	char name[16];
	snprintf(name, sizeof(name), "burner-%d", b->index);
	pthread_setname_np(pthread_self(), name);
	if (b->period)
		run_cycles(b);
	else
		run_rounds(b);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *truth = NULL, *ready = NULL, *log = NULL;
	int nthreads = 1, c;
	int64_t cpu_budget = INT64_MAX, period = 0;
	while ((c = getopt(argc, argv, "t:o:r:c:l:P:")) != -1) {
		switch (c) {
		case 'P': period = atoll(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'c': cpu_budget = (int64_t)(wl_parse_seconds(optarg, "cpu_split") * 1e9); break;
		case 'l': log = optarg; break;
		case 'o': truth = optarg; break;
		case 'r': ready = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || nthreads < 0 || nthreads > 64 || period < 0 ||
	    (period && period < 100000))
		goto usage;
	if (period)
		nthreads = 3;
	double secs = wl_parse_seconds(argv[optind], "cpu_split");
	FILE *tf = wl_truth_open(truth, "cpu_split");

	int inmain = nthreads == 0;
	if (inmain)
		nthreads = 1;
	struct burner *b = calloc((size_t)nthreads, sizeof(*b));
	if (!b)
		return 1;
	int64_t deadline = wl_mono_ns() + (int64_t)(secs * 1e9);
	int64_t epoch = period ? (wl_mono_ns() / period + 1) * period : 0;
	for (int i = 0; i < nthreads && !inmain; i++) {
		b[i].index = i;
		b[i].period = period;
		b[i].epoch = epoch;
		b[i].deadline = deadline;
		b[i].cpu_budget = cpu_budget;
		if (pthread_create(&b[i].th, NULL, thread_main, &b[i])) {
			fprintf(stderr, "cpu_split: pthread_create failed\n");
			return 1;
		}
	}
	if (ready) {
		FILE *rf = fopen(ready, "w");
		if (rf) {
			fprintf(rf, "%d\n", (int)getpid());
			fclose(rf);
		}
	}
	if (inmain) {
		b[0].deadline = deadline;
		b[0].cpu_budget = cpu_budget;
		run_rounds(&b[0]);
	} else if (log) {
		FILE *lf = fopen(log, "w");
		if (!lf) {
			perror(log);
			return 1;
		}
		setvbuf(lf, NULL, _IOLBF, 0);
		while (wl_mono_ns() < deadline && wl_process_cpu_ns() < cpu_budget) {
			fprintf(lf, "%lld %lld\n", (long long)wl_clock_ns(CLOCK_REALTIME),
				(long long)wl_process_cpu_ns());
			wl_sleep_ns(20000000);
		}
		fprintf(lf, "%lld %lld\n", (long long)wl_clock_ns(CLOCK_REALTIME), (long long)wl_process_cpu_ns());
		fclose(lf);
	}
	int64_t ns[3] = { 0, 0, 0 };
	long rounds = 0;
	for (int i = 0; i < nthreads; i++) {
		if (!inmain)
			pthread_join(b[i].th, NULL);
		for (int k = 0; k < 3; k++)
			ns[k] += b[i].ns[k];
		rounds += b[i].rounds;
	}
	int64_t total = wl_process_cpu_ns();
	if (tf) {
		static const char *const fn[3] = { "burn_60", "burn_30", "burn_10" };
		fprintf(tf, "pid %d\nthreads %d\nrounds %ld\n", (int)getpid(), inmain ? 0 : nthreads, rounds);
		for (int k = 0; k < 3; k++)
			fprintf(tf, "%s %lld\n", fn[k], (long long)ns[k]);
		fprintf(tf, "process_cpu_ns %lld\n", (long long)total);
		for (int k = 0; k < 3; k++)
			fprintf(tf, "share_%s %.4f\n", fn[k], total ? (double)ns[k] / (double)total : 0);
	}
	wl_truth_close(tf, truth, "cpu_split");
	free(b);
	return 0;
usage:
	fprintf(stderr, "usage: cpu_split [-t THREADS | -P PERIOD_NS] [-o TRUTH] [-r READY] [-c CPU_SECONDS] [-l LOG] SECONDS\n");
	return 2;
}
