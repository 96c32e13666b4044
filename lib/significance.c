// SPDX-License-Identifier: Apache-2.0
/*
 * Significance of per-function changes in a diff (see include/strobe/significance.h and
 * docs/significance.md).
 *
 * Why these tests:
 *  - Two profiles. A sampling profiler's samples arrive as a Poisson process, so a function's
 *    counts in BASE and NEW are independent Poisson variables with rates proportional to its
 *    share times each side's total. Conditional on their sum, NEW's count is binomial with
 *    success probability n_new / (n_base + n_new) when the shares are equal: the classic exact
 *    test for two Poisson rates (uniformly most powerful unbiased). Unlike a chi-square it is
 *    exact for the small counts of short profiles (the "9 samples, +23 %" case), and unlike
 *    Fisher's test it needs no 2x2 table per function. Where a share is large (a caller's
 *    cumulative value near 100 %) the binomial variance is below the Poisson one, so the test
 *    is conservative there: it errs towards "noise", never towards a false alarm.
 *  - Two sets of profiles. Runs differ by more than counting noise (load, caches, GC, the
 *    machine next door), and the counting test would call those differences real. Resampling
 *    whole profiles within each side (a bootstrap) measures that variation without assuming a
 *    distribution; the standard error it gives is floored at the counting noise, because a
 *    handful of profiles can look more alike than their sample counts allow. A normal p-value
 *    from that error keeps p continuous (a permutation test over 10 + 10 profiles could not go
 *    below 1/184756, too coarse once Benjamini-Hochberg divides the level by hundreds of
 *    functions), and the pooled-share estimate is what the diff shows.
 *  - Benjamini-Hochberg, because a diff tests hundreds of functions at once: at 1 % per test
 *    a 500-function diff would flag five by chance; BH bounds the expected share of false
 *    discoveries among those flagged instead, and under no change at all it bounds the chance
 *    of any flag.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/significance.h"

/* Continued fraction of the incomplete beta function (modified Lentz), as in Numerical
 * Recipes' betacf; converges quickly for x < (a + 1) / (a + b + 2). */
static double betacf(double a, double b, double x)
{
	const double tiny = 1e-300, eps = 1e-15;
	double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
	if (fabs(d) < tiny)
		d = tiny;
	d = 1 / d;
	double h = d;
	for (int m = 1; m <= 5000; m++) {
		int m2 = 2 * m;
		double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
		d = 1 + aa * d;
		if (fabs(d) < tiny)
			d = tiny;
		c = 1 + aa / c;
		if (fabs(c) < tiny)
			c = tiny;
		d = 1 / d;
		h *= d * c;
		aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
		d = 1 + aa * d;
		if (fabs(d) < tiny)
			d = tiny;
		c = 1 + aa / c;
		if (fabs(c) < tiny)
			c = tiny;
		d = 1 / d;
		double del = d * c;
		h *= del;
		if (fabs(del - 1) < eps)
			break;
	}
	return h;
}

/* The regularised incomplete beta function I_x(a, b), a, b > 0. lgamma_r, not lgamma: the
 * server calls this from several threads and lgamma writes a global. */
static double ibeta(double a, double b, double x)
{
	if (x <= 0)
		return 0;
	if (x >= 1)
		return 1;
	int s;
	double lbt = lgamma_r(a + b, &s) - lgamma_r(a, &s) - lgamma_r(b, &s) + a * log(x) +
		     b * log1p(-x);
	double bt = exp(lbt);
	if (x < (a + 1) / (a + b + 2))
		return bt * betacf(a, b, x) / a;
	return 1 - bt * betacf(b, a, 1 - x) / b;
}

double strobe_sig_binom_cdf(double k, double n, double p)
{
	if (k < 0)
		return 0;
	if (k >= n || p <= 0)
		return 1;
	if (p >= 1)
		return 0;
	return ibeta(n - k, k + 1, 1 - p);
}

double strobe_sig_binom_sf(double k, double n, double p)
{
	if (k <= 0)
		return 1;
	if (k > n || p <= 0)
		return 0;
	if (p >= 1)
		return 1;
	return ibeta(k, n - k + 1, p);
}

double strobe_sig_binom_p(double k_base, double n_base, double k_new, double n_new)
{
	double K = k_base + k_new, N = n_base + n_new;
	if (!(K > 0) || !(N > 0) || !(n_base > 0) || !(n_new > 0))
		return 1;
	double p0 = n_new / N, pv;
	if (K > 2e5) {
		/* The normal approximation, with continuity correction, where the binomial is
		 * indistinguishable from it and the continued fraction would iterate long. */
		double mu = K * p0, sd = sqrt(K * p0 * (1 - p0));
		double z = (fabs(k_new - mu) - 0.5) / sd;
		pv = z <= 0 ? 1 : erfc(z / M_SQRT2);
	} else {
		double lo = strobe_sig_binom_cdf(k_new, K, p0), hi = strobe_sig_binom_sf(k_new, K, p0);
		pv = 2 * (lo < hi ? lo : hi);
	}
	return pv > 1 ? 1 : pv;
}

typedef struct pidx {
	double p;
	size_t i;
} pidx;

static int by_p(const void *a, const void *b)
{
	const pidx *x = a, *y = b;
	if (x->p != y->p)
		return x->p < y->p ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

int strobe_sig_bh(const double *p, size_t n, double *q)
{
	pidx *s = malloc((n ? n : 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(p[i]))
			q[i] = NAN;
		else
			s[m++] = (pidx){p[i], i};
	}
	if (m)
		qsort(s, m, sizeof(*s), by_p);
	double run = 1;
	for (size_t j = m; j-- > 0;) {
		double v = s[j].p * (double)m / (double)(j + 1);
		if (v < run)
			run = v;
		q[s[j].i] = run;
	}
	free(s);
	return 0;
}

double strobe_sig_z(double confidence)
{
	double a = 1 - confidence, lo = 0, hi = 40;
	if (!(a > 0))
		return INFINITY;
	if (a >= 1)
		return 0;
	for (int i = 0; i < 200; i++) {
		double mid = (lo + hi) / 2;
		if (erfc(mid / M_SQRT2) > a)
			lo = mid;
		else
			hi = mid;
	}
	return (lo + hi) / 2;
}

void strobe_sig_mark(strobe_sig_row *rows, size_t n, double confidence)
{
	for (size_t i = 0; i < n; i++)
		rows[i].significant = !isnan(rows[i].q) && rows[i].q <= 1 - confidence &&
				      rows[i].change != 0;
}

/* Applies BH to the rows' p values and marks them. */
static int correct(strobe_sig_row *out, size_t n, double confidence)
{
	double *p = calloc((n ? n : 1) * 2, sizeof(*p)); /* calloc: gcc cannot see bh fill q */
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		p[i] = out[i].p;
	int r = strobe_sig_bh(p, n, p + n);
	for (size_t i = 0; r == 0 && i < n; i++)
		out[i].q = p[n + i];
	free(p);
	if (r == 0)
		strobe_sig_mark(out, n, confidence);
	return r;
}

static double share(double v, double tot)
{
	return tot > 0 ? v / tot : 0;
}

int strobe_sig_counts(const double *base, const double *cur, size_t n, double base_total,
		      double new_total, double per_sample, double confidence, strobe_sig_row *out)
{
	if (!(confidence > 0 && confidence < 1) || !(per_sample > 0))
		return -EINVAL;
	double z = strobe_sig_z(confidence), nb = base_total / per_sample,
	       nn = new_total / per_sample;
	for (size_t i = 0; i < n; i++) {
		strobe_sig_row *o = &out[i];
		o->base_share = share(base[i], base_total);
		o->new_share = share(cur[i], new_total);
		o->change = o->new_share - o->base_share;
		o->p = strobe_sig_binom_p(base[i] / per_sample, nb, cur[i] / per_sample, nn);
		/* Wald interval of the difference of two proportions. */
		double v = (nb > 0 ? o->base_share * (1 - o->base_share) / nb : 0) +
			   (nn > 0 ? o->new_share * (1 - o->new_share) / nn : 0);
		o->lo = o->change - z * sqrt(v);
		o->hi = o->change + z * sqrt(v);
	}
	return correct(out, n, confidence);
}

/* splitmix64: a small, well-mixed generator; the seed makes every answer reproducible. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Bootstrap variance of each function's pooled share on one side: R resamples of nprof
 * profiles drawn with replacement. var[f] receives the variance. */
static int boot_var(const strobe_sig_set *s, size_t nfunc, size_t R, uint64_t *rng, double *var)
{
	size_t k = s->nprof;
	unsigned *w = calloc(k, sizeof(*w));
	double *sum = calloc(nfunc ? nfunc * 2 : 1, sizeof(*sum));
	if (!w || !sum) {
		free(w);
		free(sum);
		return -ENOMEM;
	}
	double *sq = sum + nfunc;
	for (size_t r = 0; r < R; r++) {
		memset(w, 0, k * sizeof(*w));
		for (size_t j = 0; j < k; j++)
			w[next_rand(rng) % k]++;
		double tot = 0;
		for (size_t j = 0; j < k; j++)
			tot += w[j] * s->totals[j];
		for (size_t f = 0; f < nfunc; f++) {
			const double *x = s->vals + f * k;
			double v = 0;
			for (size_t j = 0; j < k; j++)
				v += w[j] * x[j];
			double sh = share(v, tot);
			sum[f] += sh;
			sq[f] += sh * sh;
		}
	}
	for (size_t f = 0; f < nfunc; f++) {
		double mean = sum[f] / (double)R, v = sq[f] / (double)R - mean * mean;
		var[f] = v > 0 ? v * (double)R / (double)(R - 1) : 0;
	}
	free(w);
	free(sum);
	return 0;
}

int strobe_sig_sets(const strobe_sig_set *base, const strobe_sig_set *cur, size_t nfunc,
		    double per_sample, double confidence, uint64_t seed, strobe_sig_row *out)
{
	if (!(confidence > 0 && confidence < 1) || !(per_sample > 0) || base->nprof < 2 ||
	    cur->nprof < 2 || base->nprof > STROBE_SIG_MAX_PROFILES ||
	    cur->nprof > STROBE_SIG_MAX_PROFILES)
		return -EINVAL;
	double work = (double)(base->nprof + cur->nprof) * (double)(nfunc ? nfunc : 1);
	size_t R = STROBE_SIG_MAX_RESAMPLES;
	if ((double)R * work > STROBE_SIG_MAX_WORK)
		R = (size_t)(STROBE_SIG_MAX_WORK / work);
	if (R < STROBE_SIG_MIN_RESAMPLES)
		R = STROBE_SIG_MIN_RESAMPLES;
	double *var = malloc((nfunc ? nfunc : 1) * 2 * sizeof(*var));
	if (!var)
		return -ENOMEM;
	uint64_t rng = seed;
	int r = boot_var(base, nfunc, R, &rng, var);
	if (r == 0)
		r = boot_var(cur, nfunc, R, &rng, var + nfunc);
	double tb = 0, tn = 0, z = strobe_sig_z(confidence);
	for (size_t j = 0; j < base->nprof; j++)
		tb += base->totals[j];
	for (size_t j = 0; j < cur->nprof; j++)
		tn += cur->totals[j];
	double nb = tb / per_sample, nn = tn / per_sample;
	for (size_t f = 0; r == 0 && f < nfunc; f++) {
		double xb = 0, xn = 0;
		for (size_t j = 0; j < base->nprof; j++)
			xb += base->vals[f * base->nprof + j];
		for (size_t j = 0; j < cur->nprof; j++)
			xn += cur->vals[f * cur->nprof + j];
		strobe_sig_row *o = &out[f];
		o->base_share = share(xb, tb);
		o->new_share = share(xn, tn);
		o->change = o->new_share - o->base_share;
		double boot = sqrt(var[f] + var[nfunc + f]);
		/* Counting-noise floors: under H0 (pooled share) for the test, at the observed
		 * shares for the interval. */
		double p0 = share(xb + xn, tb + tn);
		double se0 = nb > 0 && nn > 0 ? sqrt(p0 * (1 - p0) * (1 / nb + 1 / nn)) : 0;
		double se1 = sqrt((nb > 0 ? o->base_share * (1 - o->base_share) / nb : 0) +
				  (nn > 0 ? o->new_share * (1 - o->new_share) / nn : 0));
		double se = boot > se0 ? boot : se0, sei = boot > se1 ? boot : se1;
		o->p = o->change == 0 ? 1 : se > 0 ? erfc(fabs(o->change) / se / M_SQRT2) : 0;
		o->lo = o->change - z * sei;
		o->hi = o->change + z * sei;
	}
	free(var);
	return r < 0 ? r : correct(out, nfunc, confidence);
}

int strobe_sig_rates(const double *base, const double *cur, size_t n, double base_units,
		     double new_units, double per_sample, double confidence, strobe_sig_row *out)
{
	if (!(confidence > 0 && confidence < 1) || !(per_sample > 0) || !(base_units > 0) ||
	    !(new_units > 0))
		return -EINVAL;
	double z = strobe_sig_z(confidence);
	for (size_t i = 0; i < n; i++) {
		strobe_sig_row *o = &out[i];
		double kb = base[i] / per_sample, kn = cur[i] / per_sample;
		o->base_share = base[i] / base_units;
		o->new_share = cur[i] / new_units;
		o->change = o->new_share - o->base_share;
		/* The same conditional test with the units as exposures: given kb + kn, kn is
		 * binomial with p = new_units / (base_units + new_units) at equal cost per unit. */
		o->p = strobe_sig_binom_p(kb, base_units, kn, new_units);
		/* Poisson variances of the two rates, back in value units. */
		double v = (kb / (base_units * base_units) + kn / (new_units * new_units)) *
			   per_sample * per_sample;
		o->lo = o->change - z * sqrt(v);
		o->hi = o->change + z * sqrt(v);
	}
	return correct(out, n, confidence);
}
