// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's lookup of each exported process's identity by pid (agent/proc_cache.c), as an
 * export does it: every process of a busy host once per interval, in the aggregate's order.
 * Against the linear scan of the array it replaced (agent.c's proc_lookup before issue 19),
 * which is kept here as the reference. CPU microseconds per export, median of RUNS.
 *
 *   proc_lookup [PROCESSES [EXPORTS [RUNS]]]    defaults 500 2000 5
 * prints: | processes | linear scan, CPU us per export | hash | hash / scan |
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "proc_cache.h"

static proc_entry *scan(proc_cache *c, pid_t pid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].pid == pid)
			return &c->v[i];
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned procs = argc > 1 ? (unsigned)atoi(argv[1]) : 500;
	unsigned exports = argc > 2 ? (unsigned)atoi(argv[2]) : 2000;
	unsigned runs = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
	if (!procs || procs > 1000000 || !exports || !runs || runs > 100) {
		fprintf(stderr, "usage: proc_lookup [PROCESSES [EXPORTS [RUNS]]]\n");
		return 2;
	}
	proc_cache c = {0};
	pid_t *order = malloc(procs * sizeof(*order));
	double *ms_scan = malloc(runs * sizeof(double)), *ms_hash = malloc(runs * sizeof(double));
	if (!order || !ms_scan || !ms_hash)
		return 1;
	/* pids as a host has them (spread, not sorted by slot); looked up in another order */
	srand(1);
	for (unsigned i = 0; i < procs; i++) {
		pid_t pid = (pid_t)(1000 + i * 37 + (unsigned)rand() % 37);
		if (!proc_cache_add(&c, pid))
			return 1;
		order[i] = pid;
	}
	for (unsigned i = procs - 1; i > 0; i--) {
		unsigned j = (unsigned)rand() % (i + 1);
		pid_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	volatile int64_t sink = 0;
	for (unsigned r = 0; r < runs; r++) {
		double t0 = bench_cpu_ms();
		for (unsigned x = 0; x < exports; x++)
			for (unsigned i = 0; i < procs; i++)
				sink += scan(&c, order[i])->seen_interval++;
		ms_scan[r] = bench_cpu_ms() - t0;
		t0 = bench_cpu_ms();
		for (unsigned x = 0; x < exports; x++)
			for (unsigned i = 0; i < procs; i++)
				sink += proc_cache_find(&c, order[i])->seen_interval++;
		ms_hash[r] = bench_cpu_ms() - t0;
	}
	double s = bench_median(ms_scan, runs) * 1e3 / exports;
	double h = bench_median(ms_hash, runs) * 1e3 / exports;
	printf("| %u processes | %.1f | %.1f | %.3f |\n", procs, s, h, h / s);
	proc_cache_free(&c);
	free(order);
	free(ms_scan);
	free(ms_hash);
	return sink == -1;
}
