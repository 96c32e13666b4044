/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Significance of the changes in a diff: is a function's share of the total different between
 * BASE and NEW by more than the noise? Two tests, one correction:
 *
 *  - two profiles (one count per side): the exact conditional binomial test of a function's
 *    count given the two totals (the sampling model of a sampling profiler);
 *  - two sets of profiles (many pushes per window): a bootstrap over whole profiles, so the
 *    variation between runs, usually larger than the counting noise, sets the error bar;
 *  - Benjamini-Hochberg across every function tested at once.
 *
 * Pure arithmetic with no profile, store or server types, so the CLI and the server share it.
 * docs/significance.md explains the method and why it fits.
 */
#ifndef STROBE_SIGNIFICANCE_H
#define STROBE_SIGNIFICANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One function's (or frame's) change. Shares are fractions of each side's total (0..1). */
typedef struct strobe_sig_row {
	double base_share, new_share;
	double change;  /* new_share - base_share */
	double lo, hi;  /* confidence interval of change at the confidence asked */
	double p;       /* two-sided p-value; 1 when nothing to test */
	double q;       /* Benjamini-Hochberg adjusted p-value over the family */
	bool significant; /* q <= 1 - confidence */
} strobe_sig_row;

/* The caps that bound the profile-set test's work (a request cannot make it unbounded). */
enum {
	STROBE_SIG_MAX_RESAMPLES = 400,   /* bootstrap resamples at most */
	STROBE_SIG_MIN_RESAMPLES = 50,    /* ... and at least, however much data */
	STROBE_SIG_MAX_PROFILES = 4096,   /* profiles per side */
};
#define STROBE_SIG_MAX_WORK 60e6 /* resamples x profiles x functions, roughly cycles/4 */

/* P(X <= k) and P(X >= k) for X ~ Binomial(n, p); k and n may be fractional (scaled values),
 * through the regularised incomplete beta function. */
double strobe_sig_binom_cdf(double k, double n, double p);
double strobe_sig_binom_sf(double k, double n, double p);

/* Two-sided p-value of the conditional binomial test: NEW count k_new out of total n_new, BASE
 * count k_base out of n_base; H0: equal shares. Doubled smaller tail, capped at 1. */
double strobe_sig_binom_p(double k_base, double n_base, double k_new, double n_new);

/* Benjamini-Hochberg adjusted p-values (q) of p[0..n): q[i] = min over ranks j >= rank(i) of
 * p_(j) * n / j, capped at 1. NaN entries are left out of the family and get q = NaN. */
int strobe_sig_bh(const double *p, size_t n, double *q);

/* The two-profile test for n functions: base[i] and cur[i] are the function's values, totals
 * the profiles' totals, all in units of `per_sample` (the value of one sample: 1 for counts,
 * the period for nanoseconds; values are divided by it to get counts). Fills out[0..n), BH over
 * the n rows. confidence in (0, 1), e.g. 0.99. */
int strobe_sig_counts(const double *base, const double *cur, size_t n, double base_total,
		      double new_total, double per_sample, double confidence, strobe_sig_row *out);

/* One side of the profile-set test: nprof profiles, vals row-major nfunc x nprof (vals[f *
 * nprof + j] = function f's value in profile j), totals[j] each profile's total. */
typedef struct strobe_sig_set {
	const double *vals;
	const double *totals;
	size_t nprof;
} strobe_sig_set;

/* The profile-set test: the change of each function's pooled share (sum of values over sum of
 * totals), its standard error from a bootstrap that resamples whole profiles within each side
 * (a fixed seed: the same input gives the same answer), floored at the counting noise, a normal
 * p-value and interval, BH over the nfunc rows. -EINVAL for fewer than 2 profiles a side or
 * more than STROBE_SIG_MAX_PROFILES. */
int strobe_sig_sets(const strobe_sig_set *base, const strobe_sig_set *cur, size_t nfunc,
		    double per_sample, double confidence, uint64_t seed, strobe_sig_row *out);

/* The counting test per unit of work: base[i] and cur[i] are values (units of per_sample), the
 * sides did base_units and new_units of work (requests, say). H0: equal value per unit. Rows
 * hold value per unit in base_share and new_share. BH over the n rows. */
int strobe_sig_rates(const double *base, const double *cur, size_t n, double base_units,
		     double new_units, double per_sample, double confidence, strobe_sig_row *out);

/* Sets `significant` again for a family whose q values were computed elsewhere (e.g. when rows
 * of two tests were corrected together). */
void strobe_sig_mark(strobe_sig_row *rows, size_t n, double confidence);

/* The two-sided normal quantile for a confidence: z with P(|Z| <= z) = confidence. */
double strobe_sig_z(double confidence);

#ifdef __cplusplus
}
#endif
#endif
