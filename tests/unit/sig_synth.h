/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A seeded generator of synthetic profiles for validating lib/significance.c: a steady
 * workload of N functions with Zipf-like shares, sampled as a sampling profiler would
 * (multinomial counts), optionally with run-to-run variation (each profile's shares jittered
 * by a log-normal factor) and a planted change of one function's share. Shared by the unit
 * test (A/A, A/B) and bench/significance.c (the smallest regression found), so both measure
 * the same thing. Header-only: static functions.
 */
#ifndef STROBE_SIG_SYNTH_H
#define STROBE_SIG_SYNTH_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct synth {
	uint64_t rng;
	size_t nfunc;
	double *share; /* the workload's shares, summing to 1 */
	double *cum;   /* scratch: cumulative shares of one profile */
} synth;

static uint64_t synth_u64(synth *s)
{
	uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double synth_unif(synth *s)
{
	return ((double)(synth_u64(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double synth_normal(synth *s)
{
	return sqrt(-2 * log(synth_unif(s))) * cos(6.283185307179586 * synth_unif(s));
}

/* Shares proportional to 1 / (i + 1). */
static int synth_init(synth *s, size_t nfunc, uint64_t seed)
{
	s->rng = seed;
	s->nfunc = nfunc;
	s->share = calloc(nfunc, sizeof(double));
	s->cum = calloc(nfunc, sizeof(double));
	if (!s->share || !s->cum)
		return -1;
	double h = 0;
	for (size_t i = 0; i < nfunc; i++)
		h += 1.0 / (double)(i + 1);
	for (size_t i = 0; i < nfunc; i++)
		s->share[i] = 1.0 / (double)(i + 1) / h;
	return 0;
}

static void synth_free(synth *s)
{
	free(s->share);
	free(s->cum);
}

/* Samples one profile of n samples into counts[0..nfunc) (added to, stride `stride`): function
 * `planted` (or SIZE_MAX for none) gains `plant` of the total share (0.02 = +2 points), the
 * others shrink in proportion; jitter > 0 multiplies each share by exp(jitter * N(0,1)). */
static void synth_profile(synth *s, double *counts, size_t stride, size_t n, size_t planted,
			  double plant, double jitter)
{
	double acc = 0;
	for (size_t i = 0; i < s->nfunc; i++) {
		double v = s->share[i];
		if (planted < s->nfunc)
			v = i == planted ? v + plant : v * (1 - s->share[planted] - plant) /
							      (1 - s->share[planted]);
		if (jitter > 0)
			v *= exp(jitter * synth_normal(s));
		acc += v;
		s->cum[i] = acc;
	}
	for (size_t k = 0; k < n; k++) {
		double u = synth_unif(s) * acc;
		size_t lo = 0, hi = s->nfunc - 1;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (s->cum[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		counts[lo * stride] += 1;
	}
}

#endif
