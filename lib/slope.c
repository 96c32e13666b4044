// SPDX-License-Identifier: Apache-2.0
/*
 * Theil–Sen slope with Sen's confidence interval, the Mann–Kendall trend test and
 * Benjamini–Hochberg adjustment (include/strobe/slope.h). The methods, as in Sen (1968),
 * "Estimates of the regression coefficient based on Kendall's tau", JASA 63; Gilbert (1987),
 * "Statistical methods for environmental pollution monitoring", ch. 16; and Benjamini and
 * Hochberg (1995). Exact O(n^2) pairs: series here are a few hundred points (one per step of a
 * leak search), where that is a few milliseconds and needs no approximation.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/slope.h"

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The value at 1-based fractional rank r of sorted v[0..n), interpolated between neighbours. */
static double at_rank(const double *v, size_t n, double r)
{
	if (r < 1.0)
		return -INFINITY;
	if (r > (double)n)
		return INFINITY;
	size_t i = (size_t)floor(r);
	double f = r - (double)i;
	if (i >= n)
		return v[n - 1];
	return v[i - 1] + f * (v[i] - v[i - 1]);
}

static double median_sorted(const double *v, size_t n)
{
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Sum over groups of equal values of t(t-1)(2t+5), the tie term of Var(S). */
static double tie_term(const double *v, size_t n, double *tmp)
{
	memcpy(tmp, v, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), dcmp);
	double sum = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && tmp[j] == tmp[i])
			j++;
		double t = (double)(j - i);
		sum += t * (t - 1) * (2 * t + 5);
		i = j;
	}
	return sum;
}

double strobe_normal_quantile(double p)
{
	if (!(p > 0 && p < 1))
		return NAN;
	/* Bisection on the CDF, 0.5 erfc(-z / sqrt 2): 200 halvings of [-40, 40] reach the double
	 * resolution, and this is called once per request, not per stack. */
	double lo = -40, hi = 40;
	for (int i = 0; i < 200; i++) {
		double mid = 0.5 * (lo + hi);
		if (0.5 * erfc(-mid / M_SQRT2) < p)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

int strobe_theil_sen(const double *x, const double *y, size_t n, double confidence,
		     strobe_slope *out)
{
	if (!x || !y || !out || n < 3 || !(confidence > 0 && confidence < 1))
		return -EINVAL;
	if (n > STROBE_SLOPE_MAX_POINTS)
		return -E2BIG;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]) || !isfinite(y[i]))
			return -EINVAL;
	size_t npairs = n * (n - 1) / 2;
	double *sl = malloc(npairs * sizeof(*sl)), *tmp = malloc(n * sizeof(*tmp));
	if (!sl || !tmp) {
		free(sl);
		free(tmp);
		return -ENOMEM;
	}
	size_t m = 0;
	double s = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			double dx = x[j] - x[i], dy = y[j] - y[i];
			/* Kendall's S counts pairs ordered alike in x and y as +1, opposite as -1. */
			s += (double)((dx > 0) - (dx < 0)) * (double)((dy > 0) - (dy < 0));
			if (dx != 0)
				sl[m++] = dy / dx;
		}
	if (m == 0) {
		free(sl);
		free(tmp);
		return -EINVAL; /* every x the same: no slope */
	}
	qsort(sl, m, sizeof(*sl), dcmp);
	memset(out, 0, sizeof(*out));
	out->n = n;
	out->npairs = m;
	out->slope = median_sorted(sl, m);
	out->s = s;
	double nn = (double)n;
	out->var_s = (nn * (nn - 1) * (2 * nn + 5) - tie_term(x, n, tmp) - tie_term(y, n, tmp)) / 18;
	out->tau = s / (double)npairs;
	double sd = out->var_s > 0 ? sqrt(out->var_s) : 0;
	/* Continuity correction: S moves in steps of 2, so |S| - 1 is the normal's half-step. */
	out->z = sd > 0 ? (s > 0 ? s - 1 : s < 0 ? s + 1 : 0) / sd : 0;
	out->p_up = 0.5 * erfc(out->z / M_SQRT2);
	out->p = erfc(fabs(out->z) / M_SQRT2);
	if (out->p > 1)
		out->p = 1;
	/* Sen: the interval's ends are the slopes of ranks (N - C)/2 and (N + C)/2 + 1, where
	 * C = z_(1-a/2) sqrt(Var S) (Gilbert 1987, 16.5.1). */
	double c = strobe_normal_quantile(1 - (1 - confidence) / 2) * sd;
	out->lo = at_rank(sl, m, ((double)m - c) / 2);
	out->hi = at_rank(sl, m, ((double)m + c) / 2 + 1);
	for (size_t i = 0; i < n; i++)
		tmp[i] = y[i] - out->slope * x[i];
	qsort(tmp, n, sizeof(*tmp), dcmp);
	out->intercept = median_sorted(tmp, n);
	free(sl);
	free(tmp);
	return 0;
}

typedef struct pidx {
	double p;
	size_t i;
} pidx;

static int pcmp(const void *a, const void *b)
{
	const pidx *x = a, *y = b;
	return x->p < y->p ? -1 : x->p > y->p ? 1 : (x->i > y->i) - (x->i < y->i);
}

int strobe_bh_adjust(const double *p, double *q, size_t n)
{
	if (!n)
		return 0;
	if (!p || !q)
		return -EINVAL;
	pidx *v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (pidx){isnan(p[i]) ? 1 : p[i], i};
	qsort(v, n, sizeof(*v), pcmp);
	/* q of rank k (1-based) = min over ranks j >= k of p_(j) n / j, capped at 1. */
	double run = 1;
	for (size_t k = n; k-- > 0;) {
		double a = v[k].p * (double)n / (double)(k + 1);
		if (a < run)
			run = a;
		q[v[k].i] = run;
	}
	free(v);
	return 0;
}
