// SPDX-License-Identifier: Apache-2.0
/*
 * The smallest regression strobe's diff significance finds 95 % of the time (issue 24): one
 * service profiled at 19 Hz for one hour, 68,400 samples a side, 100 functions with Zipf-like
 * shares (tests/unit/sig_synth.h). The counts are simulated, not recorded: the question is
 * statistical, and a simulation with a known truth is what answers it. For a function at a
 * given share, a change of +D points of the total is planted in NEW; D is found by bisection as
 * the smallest with the planted function flagged (99 % confidence, Benjamini-Hochberg over all
 * 100) in at least 95 % of TRIALS trials. Two setups:
 *   - counts: two merged profiles, the conditional binomial test (strobe diff, a CLI user);
 *   - sets:   240 pushes of 15 s a side whose shares jitter by 10 % (log-normal) from push to
 *             push, the bootstrap over profiles (the server's case; run-to-run variation costs
 *             sensitivity, which this measures).
 * Also the A/A false-flag rate of each setup over the same trials.
 *
 *   build/bench/significance [TRIALS]    markdown on stdout (bench/significance.sh)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/sig_synth.h"
#include "strobe/significance.h"

enum { NF = 100, HZ = 19, SECONDS = 3600, PUSH_S = 15 };

static double *bv, *nv, *tot;

/* One trial; returns whether `fn` was flagged, *others the other flags. */
static bool trial(synth *s, bool sets, size_t fn, double plant, size_t *others)
{
	strobe_sig_row r[NF];
	size_t k = sets ? SECONDS / PUSH_S : 1, per = (size_t)HZ * SECONDS / k;
	memset(bv, 0, NF * k * sizeof(*bv));
	memset(nv, 0, NF * k * sizeof(*nv));
	for (size_t j = 0; j < k; j++) {
		tot[j] = (double)per;
		synth_profile(s, bv + j, k, per, SIZE_MAX, 0, sets ? 0.1 : 0);
		synth_profile(s, nv + j, k, per, plant > 0 ? fn : SIZE_MAX, plant, sets ? 0.1 : 0);
	}
	if (sets) {
		strobe_sig_set b = {bv, tot, k}, n = {nv, tot, k};
		if (strobe_sig_sets(&b, &n, NF, 1, 0.99, 11, r) < 0)
			exit(2);
	} else if (strobe_sig_counts(bv, nv, NF, tot[0], tot[0], 1, 0.99, r) < 0) {
		exit(2);
	}
	*others = 0;
	for (size_t i = 0; i < NF; i++)
		if (r[i].significant && i != fn)
			(*others)++;
	return r[fn].significant && r[fn].change > 0;
}

static double rate(synth *s, bool sets, size_t fn, double plant, int trials)
{
	int hit = 0;
	size_t o;
	for (int t = 0; t < trials; t++)
		hit += trial(s, sets, fn, plant, &o);
	return (double)hit / trials;
}

int main(int argc, char **argv)
{
	int trials = argc > 1 ? atoi(argv[1]) : 100;
	if (trials < 20)
		trials = 20;
	size_t k = SECONDS / PUSH_S;
	bv = calloc(NF * k, sizeof(*bv));
	nv = calloc(NF * k, sizeof(*nv));
	tot = calloc(k, sizeof(*tot));
	synth s;
	if (!bv || !nv || !tot || synth_init(&s, NF, 19) < 0)
		return 2;
	printf("One service at %d Hz for 1 h: %d samples a side, %d functions (Zipf shares), "
	       "simulated counts; 99 %% confidence, Benjamini-Hochberg over all functions; %d "
	       "trials per point.\n\n",
	       HZ, HZ * SECONDS, NF, trials);
	printf("| setup | function's share | smallest change found in >= 95 %% of trials | "
	       "relative to its share | A/A: functions flagged |\n|---|---|---|---|---|\n");
	const size_t fns[] = {0, 3, 19};
	for (int sets = 0; sets < 2; sets++) {
		size_t flagged = 0, o;
		for (int t = 0; t < trials; t++) {
			trial(&s, sets, 0, 0, &o);
			flagged += o;
		}
		for (size_t f = 0; f < sizeof(fns) / sizeof(*fns); f++) {
			double lo = 0, hi = 0.05; /* points of the total, as a fraction */
			for (int it = 0; it < 9; it++) {
				double mid = (lo + hi) / 2;
				if (rate(&s, sets, fns[f], mid, trials) >= 0.95)
					hi = mid;
				else
					lo = mid;
			}
			printf("| %s | %.2f %% | +%.2f points | +%.0f %% | %zu of %zu (%.3f %%) |\n",
			       sets ? "240 pushes of 15 s, 10 % run-to-run jitter, bootstrap"
				    : "two profiles, binomial count test",
			       100 * s.share[fns[f]], 100 * hi, 100 * hi / s.share[fns[f]], flagged,
			       (size_t)trials * NF, 100.0 * (double)flagged / (trials * NF));
		}
	}
	synth_free(&s);
	free(bv);
	free(nv);
	free(tot);
	return 0;
}
