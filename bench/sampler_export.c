// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's export on a busy host (issue 19): the sampler's aggregate holds PROCS processes
 * with STACKS distinct stacks each, and, as agent.c's export_interval does, the processes are
 * listed (strobe_sampler_pids) and each gets its own profile (strobe_sampler_profile with
 * only_pid). What is timed is the sampler's part of that: finding each process's entries and
 * building its pprof, without symbolization (no symbolizer: the frames keep their addresses),
 * which costs the same whichever way the entries are found.
 *
 * Stacks are DEPTH frames, leaf first; the leaf is the process's own, the callers are shared by
 * every process (libc, the runtime), as on a real host where most frames are in shared
 * libraries. The sampler is an offline one (never reads /proc), filled through
 * sampler_add_oncpu, as the eBPF on-CPU collector fills it.
 *
 * CPU time of this process (CLOCK_PROCESS_CPUTIME_ID), not wall time: the machines it runs on
 * are shared. The sum of the profiles' samples is checked against what was added.
 *
 *   build/bench/sampler_export [PROCS [STACKS [RUNS]]]    markdown on stdout (bench/sampler.sh)
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "sampler_ext.h" /* sampler_add_oncpu */

enum { DEPTH = 16 };

int main(int argc, char **argv)
{
	unsigned procs = argc > 1 ? (unsigned)atoi(argv[1]) : 500;
	unsigned stacks = argc > 2 ? (unsigned)atoi(argv[2]) : 100;
	unsigned runs = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
	if (!procs || procs > 60000 || !stacks || stacks > 100000 || !runs || runs > 100) {
		fprintf(stderr, "usage: sampler_export [PROCS (1..60000) [STACKS (1..100000) "
				"[RUNS (1..100)]]]\n");
		return 2;
	}
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 99};
	strobe_sampler_layout l = {.id = {1, 2, 3}};
	strobe_sampler *s = strobe_sampler_open_offline(&o, &l);
	if (!s) {
		fprintf(stderr, "sampler_export: cannot open an offline sampler\n");
		return 1;
	}
	double t0 = bench_cpu_ms();
	int64_t added = 0;
	uint64_t ips[DEPTH];
	for (unsigned p = 0; p < procs; p++) {
		int32_t pid = 1000 + (int32_t)p;
		for (unsigned j = 0; j < stacks; j++) {
			ips[0] = 0x7f0000000000ull + ((uint64_t)p * stacks + j) * 16; /* its own leaf */
			for (unsigned d = 1; d < DEPTH; d++) /* shared callers */
				ips[d] = 0x400000ull + (uint64_t)(j % 64) * 4096 + d * 16;
			int64_t n = 1 + (int64_t)((p * 31 + j * 7) % 10);
			if (sampler_add_oncpu(s, pid, pid, NULL, 0, ips, DEPTH, n,
						     n * 10101010) < 0) {
				fprintf(stderr, "sampler_export: out of memory filling the aggregate\n");
				return 1;
			}
			added += n;
		}
	}
	double fill_ms = bench_cpu_ms() - t0;
	pid_t *pids = malloc(65536 * sizeof(*pids));
	double *ms = calloc(runs, sizeof(*ms));
	if (!pids || !ms)
		return 1;
	for (unsigned r = 0; r < runs; r++) {
		double t = bench_cpu_ms();
		unsigned np = strobe_sampler_pids(s, pids, 65536);
		int64_t got = 0;
		for (unsigned i = 0; i < np; i++) {
			strobe_sampler_profile_opts po = {.only_pid = pids[i]};
			strobe_err err = {{0}};
			strobe_profile *pr = strobe_sampler_profile(s, &po, &err);
			if (!pr) {
				fprintf(stderr, "sampler_export: profile of %d: %s\n", (int)pids[i],
					err.msg);
				return 1;
			}
			got += strobe_total(pr, 0);
			strobe_profile_free(pr);
		}
		ms[r] = bench_cpu_ms() - t;
		if (np != procs || got != added) {
			fprintf(stderr, "sampler_export: %u processes with %lld samples exported, "
					"%u with %lld added\n", np, (long long)got, procs,
				(long long)added);
			return 1;
		}
	}
	double med = bench_median(ms, runs);
	printf("| %u processes x %u stacks of %d frames (%u entries) | %.1f | %.1f | %.1f |\n",
	       procs, stacks, DEPTH, procs * stacks, fill_ms, med, med * 1e3 / procs);
	free(pids);
	free(ms);
	strobe_sampler_close(s);
	return 0;
}
