// SPDX-License-Identifier: Apache-2.0
/* proc_churn: process churn at a paced rate, for the agent's churn test. The parent starts
 * RATE short-lived processes a second for SECONDS, each a fork and an exec of this program
 * (`proc_churn --child BURN_US`), which burns BURN_US microseconds of CPU in churn_child_burn
 * and exits; the parent reaps them as it goes. It measures what it achieved rather than
 * assuming it: on a busy machine the rate asked for may not be reached.
 *
 *   proc_churn [-r RATE] [-b BURN_US] [-o TRUTH] SECONDS      (default 170/s, 1000 us)
 *
 * Truth ("key value"): pid (the parent), spawned N (children that exec'd and exited 0), failed
 * N, seconds S (wall time from the first spawn to the last reap), rate R (spawned / seconds),
 * children_cpu_ns NS (the children's user + system CPU, from wait4's rusage), parent_cpu_ns NS
 * (its own), max_live N (most children alive at once). */
#include "wl_common.h"

#include <sys/resource.h>
#include <sys/wait.h>

static __attribute__((noinline)) void churn_child_burn(int64_t want)
{
	uint64_t acc = (uint64_t)want;
	int64_t t0 = wl_thread_cpu_ns();
	do
		WL_SPIN_CHUNK(acc);
	while (wl_thread_cpu_ns() - t0 < want);
}

static int64_t cpu_ns, spawned, failed, live, max_live;

/* Reaps exited children; blocks for one when block is set. */
static void reap(int block)
{
	int status;
	struct rusage ru;
	pid_t p;
	while ((p = wait4(-1, &status, block ? 0 : WNOHANG, &ru)) > 0) {
		live--;
		cpu_ns += ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
			  ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			spawned++;
		else
			failed++;
		block = 0;
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		churn_child_burn((int64_t)atol(argv[2]) * 1000);
		return 0;
	}
	const char *truth = NULL;
	double rate = 170;
	long burn_us = 1000;
	int c;
	while ((c = getopt(argc, argv, "r:b:o:")) != -1) {
		switch (c) {
		case 'r': rate = atof(optarg); break;
		case 'b': burn_us = atol(optarg); break;
		case 'o': truth = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || rate < 1 || rate > 100000 || burn_us < 0 || burn_us > 1000000)
		goto usage;
	double secs = wl_parse_seconds(argv[optind], "proc_churn");
	static char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("proc_churn: /proc/self/exe");
		return 1;
	}
	self[n] = 0;
	char burn[32];
	snprintf(burn, sizeof(burn), "%ld", burn_us);
	FILE *tf = wl_truth_open(truth, "proc_churn");
	int64_t t0 = wl_mono_ns(), end = t0 + (int64_t)(secs * 1e9);
	for (int64_t i = 0;; i++) {
		int64_t at = t0 + (int64_t)((double)i * 1e9 / rate), now = wl_mono_ns();
		if (at >= end)
			break;
		if (at > now)
			wl_sleep_ns(at - now); /* behind schedule: start at once, no burst to catch up */
		reap(0);
		pid_t pid = fork();
		if (pid < 0) {
			if (errno == EAGAIN) { /* too many processes: wait for one, count the miss */
				failed++;
				reap(live > 0);
				continue;
			}
			perror("proc_churn: fork");
			return 1;
		}
		if (pid == 0) {
			execl(self, "proc_churn", "--child", burn, (char *)NULL);
			_exit(127);
		}
		if (++live > max_live)
			max_live = live;
	}
	while (live > 0)
		reap(1);
	double took = (double)(wl_mono_ns() - t0) / 1e9;
	int64_t self_ns = wl_process_cpu_ns();
	if (tf)
		fprintf(tf, "pid %d\nspawned %lld\nfailed %lld\nseconds %.3f\nrate %.1f\n"
			"children_cpu_ns %lld\nparent_cpu_ns %lld\nmax_live %lld\n", (int)getpid(), (long long)spawned,
			(long long)failed, took, (double)spawned / took, (long long)cpu_ns, (long long)self_ns,
			(long long)max_live);
	wl_truth_close(tf, truth, "proc_churn");
	return failed ? 1 : 0;
usage:
	fprintf(stderr, "usage: proc_churn [-r RATE] [-b BURN_US] [-o TRUTH] SECONDS\n");
	return 2;
}
