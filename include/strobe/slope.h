/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Robust trend of a series over time (lib/slope.c): the Theil–Sen slope (the median of the
 * slopes between every pair of points), its confidence interval by Sen's method (ranks of the
 * pairwise slopes taken from the variance of Kendall's S), and the Mann–Kendall test of "no
 * trend". The leak finder (/api/v1/leaks) ranks stacks by this slope of their in-use bytes; a
 * median of pairwise slopes ignores up to 29 % of wild points (a GC that happened to run just
 * before one profile), where least squares would follow them.
 *
 * Also Benjamini–Hochberg over many such tests, because a leak search tests every stack at once
 * and at 1 % per stack a thousand stationary stacks would report ten leaks.
 *
 * Ownership: nothing is kept; inputs are the caller's. Errors: -EINVAL for a bad argument,
 * -E2BIG past STROBE_SLOPE_MAX_POINTS (the pairs are O(n^2)), -ENOMEM.
 */
#ifndef STROBE_SLOPE_H
#define STROBE_SLOPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_SLOPE_MAX_POINTS 4096u /* 8.4 M pairwise slopes, 64 MiB */

typedef struct strobe_slope {
	double slope;     /* Theil–Sen: median pairwise slope, units of y per unit of x */
	double lo, hi;    /* Sen's two-sided confidence interval at the confidence asked */
	double intercept; /* median of y - slope * x */
	double s;         /* Kendall's S: concordant minus discordant pairs */
	double var_s;     /* its variance under no trend, corrected for ties in x and in y */
	double tau;       /* Kendall's tau-a: S over the number of pairs */
	double z;         /* Mann–Kendall statistic, continuity-corrected */
	double p_up;      /* one-sided p-value of "no trend" against "rising" */
	double p;         /* two-sided p-value */
	size_t n, npairs; /* points; pairs with distinct x (the slopes the median is taken of) */
} strobe_slope;

/* The trend of (x[i], y[i]), i < n (any order). Needs n >= 3 and at least two distinct x;
 * confidence in (0, 1), e.g. 0.99. When the interval's ranks fall outside the slopes (too few
 * points for that confidence), lo and hi are -inf and +inf. */
int strobe_theil_sen(const double *x, const double *y, size_t n, double confidence,
		     strobe_slope *out);

/* The standard normal quantile: z with P(Z < z) = p, p in (0, 1). */
double strobe_normal_quantile(double p);

/* Benjamini–Hochberg: q[i] receives the adjusted p-value of p[i] (the smallest false discovery
 * rate at which test i is a discovery), so the discoveries at rate alpha are q[i] <= alpha. */
int strobe_bh_adjust(const double *p, double *q, size_t n);

#ifdef __cplusplus
}
#endif
#endif
