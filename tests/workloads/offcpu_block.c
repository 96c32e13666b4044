// SPDX-License-Identifier: Apache-2.0
/* offcpu_block: threads that block for known times in three different ways, for the off-CPU
 * recorder's truth tests.
 *
 *   offcpu_block [-o TRUTH] [-s SLEEP_MS] [-m HOLD_MS] [-p PIPE_MS] [-k LONG_MS] SECONDS
 *
 * - thread "sleeper": nanosleep(SLEEP_MS, default 50) a round, in site_nanosleep_outer.
 * - threads "mtx-holder" and "mtx-waiter": the holder takes a mutex and keeps it HOLD_MS (default
 *   150) a round while the waiter blocks in pthread_mutex_lock, in site_mutex_outer. They hand
 *   over with two semaphores so that the waiter is blocked on the mutex for the whole hold.
 * - threads "pipe-writer" and "pipe-reader": the writer writes a byte every PIPE_MS (default
 *   100); the reader blocks in read(2) in site_read_outer meanwhile.
 *
 * Why the "_outer" functions: Debian's glibc is built without frame pointers, so a stack taken
 * while a thread is inside libc (nanosleep, read, pthread_mutex_lock -> futex) unwinds from the
 * libc code through the rbp of the function that called libc, whose saved return address belongs
 * to ITS caller: the direct caller of libc is skipped. Each blocking site is therefore a chain of
 * two noinline functions of ours (site_X_outer -> site_X -> libc); the outer one is always in the
 * stack and is the one the truth is keyed by.
 *
 * Truth ("key value" lines): for each site, "site_X_outer NS" is the CLOCK_MONOTONIC time spent
 * inside the blocking call, summed over all its calls (all of which end before exit), and
 * "rounds_site_X_outer N" the number of calls; also pid and the nominal per-round times. With
 * -k LONG_MS, "long_site_nanosleep_outer NS" sums the sleeps that took LONG_MS or more as
 * measured here: on a loaded machine a 50 ms sleep can wait its turn to run long after it
 * expired, and a --min-block filter rightly keeps those. */
#include "wl_common.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <unistd.h>

static int64_t deadline;
static int64_t sleep_ns = 50000000, hold_ns = 150000000, pipe_ns = 100000000;
static int64_t long_ns = INT64_MAX, sleep_long_ns; /* -k, and the sleeps that took that long */

struct site {
	int64_t ns;
	long rounds;
};
static struct site s_sleep, s_mutex, s_read;

static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static sem_t held, handed;
static atomic_int mutex_stop;
static int pipefd[2];

/* ---- nanosleep ---------------------------------------------------------------------------- */
static __attribute__((noinline)) int64_t site_nanosleep(void)
{
	struct timespec ts = { .tv_sec = sleep_ns / 1000000000, .tv_nsec = sleep_ns % 1000000000 };
	int64_t t0 = wl_mono_ns();
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	return wl_mono_ns() - t0;
}
static __attribute__((noinline)) void site_nanosleep_outer(void)
{
	int64_t t = site_nanosleep();
	s_sleep.ns += t;
	s_sleep.rounds++;
	if (t >= long_ns)
		sleep_long_ns += t;
}
static __attribute__((noinline)) void *sleeper_main(void *arg)
{
	pthread_setname_np(pthread_self(), "sleeper");
	while (wl_mono_ns() < deadline)
		site_nanosleep_outer();
	return arg;
}

/* ---- contended mutex ---------------------------------------------------------------------- */
static __attribute__((noinline)) int64_t site_mutex_lock(void)
{
	int64_t t0 = wl_mono_ns();
	pthread_mutex_lock(&mtx);
	int64_t t = wl_mono_ns() - t0;
	pthread_mutex_unlock(&mtx);
	return t;
}
static __attribute__((noinline)) void site_mutex_outer(void)
{
	s_mutex.ns += site_mutex_lock();
	s_mutex.rounds++;
}
static __attribute__((noinline)) void holder_hold(void)
{
	pthread_mutex_lock(&mtx);
	sem_post(&held); /* the waiter may try now: it will block until we unlock */
	wl_sleep_ns(hold_ns);
	pthread_mutex_unlock(&mtx);
}
static __attribute__((noinline)) void *holder_main(void *arg)
{
	pthread_setname_np(pthread_self(), "mtx-holder");
	while (wl_mono_ns() < deadline) {
		holder_hold();
		while (sem_wait(&handed) && errno == EINTR) /* the waiter has had its turn */
			;
	}
	atomic_store(&mutex_stop, 1);
	sem_post(&held);
	return arg;
}
static __attribute__((noinline)) void *waiter_main(void *arg)
{
	pthread_setname_np(pthread_self(), "mtx-waiter");
	for (;;) {
		while (sem_wait(&held) && errno == EINTR)
			;
		if (atomic_load(&mutex_stop))
			break;
		site_mutex_outer();
		sem_post(&handed);
	}
	return arg;
}

/* ---- pipe read ---------------------------------------------------------------------------- */
static __attribute__((noinline)) int64_t site_read(ssize_t *n)
{
	char c;
	int64_t t0 = wl_mono_ns();
	do
		*n = read(pipefd[0], &c, 1);
	while (*n < 0 && errno == EINTR);
	return wl_mono_ns() - t0;
}
static __attribute__((noinline)) int site_read_outer(void)
{
	ssize_t n;
	s_read.ns += site_read(&n);
	s_read.rounds++;
	return n > 0;
}
static __attribute__((noinline)) void *reader_main(void *arg)
{
	pthread_setname_np(pthread_self(), "pipe-reader");
	while (site_read_outer())
		;
	return arg;
}
static __attribute__((noinline)) void *writer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "pipe-writer");
	while (wl_mono_ns() < deadline) {
		wl_sleep_ns(pipe_ns);
		if (write(pipefd[1], "x", 1) != 1)
			break;
	}
	close(pipefd[1]); /* the reader's last read returns 0 */
	return arg;
}

static int64_t ms_arg(const char *s)
{
	long v = atol(s);
	if (v < 1 || v > 60000) {
		fprintf(stderr, "offcpu_block: bad milliseconds '%s'\n", s);
		exit(2);
	}
	return (int64_t)v * 1000000;
}

int main(int argc, char **argv)
{
	const char *truth = NULL;
	int c;
	while ((c = getopt(argc, argv, "o:s:m:p:k:")) != -1) {
		switch (c) {
		case 'o': truth = optarg; break;
		case 's': sleep_ns = ms_arg(optarg); break;
		case 'm': hold_ns = ms_arg(optarg); break;
		case 'p': pipe_ns = ms_arg(optarg); break;
		case 'k': long_ns = ms_arg(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	double secs = wl_parse_seconds(argv[optind], "offcpu_block");
	FILE *tf = wl_truth_open(truth, "offcpu_block");
	if (pipe(pipefd) || sem_init(&held, 0, 0) || sem_init(&handed, 0, 0)) {
		perror("offcpu_block");
		return 1;
	}
	deadline = wl_mono_ns() + (int64_t)(secs * 1e9);
	void *(*const fns[])(void *) = { sleeper_main, holder_main, waiter_main, reader_main, writer_main };
	pthread_t th[5];
	for (int i = 0; i < 5; i++)
		if (pthread_create(&th[i], NULL, fns[i], NULL)) {
			fprintf(stderr, "offcpu_block: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	if (tf) {
		fprintf(tf, "pid %d\n", (int)getpid());
		fprintf(tf, "sleep_round_ns %lld\nhold_round_ns %lld\npipe_round_ns %lld\n",
			(long long)sleep_ns, (long long)hold_ns, (long long)pipe_ns);
		const struct { const char *name; struct site *s; } out[] = {
			{ "site_nanosleep_outer", &s_sleep },
			{ "site_mutex_outer", &s_mutex },
			{ "site_read_outer", &s_read },
		};
		for (int i = 0; i < 3; i++)
			fprintf(tf, "%s %lld\nrounds_%s %ld\n", out[i].name, (long long)out[i].s->ns,
				out[i].name, out[i].s->rounds);
		if (long_ns != INT64_MAX)
			fprintf(tf, "long_site_nanosleep_outer %lld\n", (long long)sleep_long_ns);
	}
	wl_truth_close(tf, truth, "offcpu_block");
	return 0;
usage:
	fprintf(stderr, "usage: offcpu_block [-o TRUTH] [-s SLEEP_MS] [-m HOLD_MS] [-p PIPE_MS] [-k LONG_MS] SECONDS\n");
	return 2;
}
