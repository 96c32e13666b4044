// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of lib/significance.c: binomial tails and the conditional test against p-values
 * computed by hand, Benjamini-Hochberg on a known vector, the normal quantile, the profile-set
 * bootstrap (reproducible, and wider than the counting noise when runs vary), and the
 * validation the issue asks for on seeded synthetic profiles (tests/unit/sig_synth.h):
 * A/A flags at most 1 % of functions at 99 %, A/B finds a planted +2-point change at 20k
 * samples a side in at least 95 % of trials with no other function flagged.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sig_synth.h"
#include "strobe/significance.h"

#define near(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void test_binomial_tails(void **state)
{
	(void)state;
	/* X ~ Bin(10, 1/2): P(X >= 9) = (10 + 1) / 1024, P(X <= 9) = 1023 / 1024. */
	near(strobe_sig_binom_sf(9, 10, 0.5), 11.0 / 1024, 1e-12);
	near(strobe_sig_binom_cdf(9, 10, 0.5), 1023.0 / 1024, 1e-12);
	/* Bin(3, 2/3): P(X <= 2) = 1 - 8/27. */
	near(strobe_sig_binom_cdf(2, 3, 2.0 / 3), 19.0 / 27, 1e-12);
	near(strobe_sig_binom_sf(0, 3, 0.3), 1, 0);
	near(strobe_sig_binom_cdf(3, 3, 0.3), 1, 0);
	/* 1 of 100 in base, 9 of 100 in new: 10 samples, each new with p 1/2; doubled tail. */
	near(strobe_sig_binom_p(1, 100, 9, 100), 22.0 / 1024, 1e-12);
	/* Unequal totals: 0 of 100 and 3 of 200: P(X >= 3 | 3, 2/3) = 8/27, doubled. */
	near(strobe_sig_binom_p(0, 100, 3, 200), 16.0 / 27, 1e-12);
	/* No change, and nothing to test. */
	near(strobe_sig_binom_p(5, 100, 5, 100), 1, 0);
	near(strobe_sig_binom_p(0, 100, 0, 100), 1, 0);
	/* Large counts go through the normal approximation: 150000 vs 152000 of 1e7 each:
	 * z = (1000 - 0.5) / sqrt(302000 / 4) = 3.6376..., p = erfc(z / sqrt 2). */
	near(strobe_sig_binom_p(150000, 1e7, 152000, 1e7), erfc(999.5 / sqrt(75500.0) / M_SQRT2),
	     1e-12);
	/* The exact path agrees with the normal one near the switch. */
	double pe = strobe_sig_binom_p(9500, 1e6, 10000, 1e6);
	double z = (250 - 0.5) / sqrt(19500.0 / 4);
	near(pe, erfc(z / M_SQRT2), 0.05 * pe);
}

static void test_bh_known(void **state)
{
	(void)state;
	/* Sorted: .005 .01 .03 .04 .5; p*m/rank: .025 .025 .05 .05 .5; running minimum from the
	 * top gives the same here. The NaN is outside the family (m = 5). */
	double p[] = {0.01, 0.04, 0.03, 0.005, 0.5, NAN}, q[6];
	assert_int_equal(strobe_sig_bh(p, 6, q), 0);
	near(q[0], 0.025, 1e-15);
	near(q[1], 0.05, 1e-15);
	near(q[2], 0.05, 1e-15);
	near(q[3], 0.025, 1e-15);
	near(q[4], 0.5, 1e-15);
	assert_true(isnan(q[5]));
	/* The running minimum matters: .02 at rank 2 of 3 (.03) is beaten by .025*3/3. */
	double p2[] = {0.001, 0.02, 0.025}, q2[3];
	assert_int_equal(strobe_sig_bh(p2, 3, q2), 0);
	near(q2[0], 0.003, 1e-15);
	near(q2[1], 0.025, 1e-15);
	near(q2[2], 0.025, 1e-15);
	assert_int_equal(strobe_sig_bh(p2, 0, q2), 0);
}

static void test_z(void **state)
{
	(void)state;
	near(strobe_sig_z(0.95), 1.959963984540054, 1e-9);
	near(strobe_sig_z(0.99), 2.5758293035489, 1e-9);
}

static void test_counts_rows(void **state)
{
	(void)state;
	/* Values in nanoseconds with a 10 ms period: the test sees 1 vs 9 samples of 100. */
	double base[] = {1e7, 50e7}, cur[] = {9e7, 50e7};
	strobe_sig_row r[2];
	assert_int_equal(strobe_sig_counts(base, cur, 2, 100e7, 100e7, 1e7, 0.95, r), 0);
	near(r[0].base_share, 0.01, 1e-15);
	near(r[0].new_share, 0.09, 1e-15);
	near(r[0].change, 0.08, 1e-15);
	near(r[0].p, 22.0 / 1024, 1e-12);
	near(r[1].p, 1, 0);
	/* BH over 2: q = p * 2 / 1. */
	near(r[0].q, 44.0 / 1024, 1e-12);
	assert_true(r[0].significant);  /* q .043 <= .05 */
	assert_false(r[1].significant);
	assert_true(r[0].lo > 0 && r[0].hi > r[0].lo);
	/* At 99 % the same change is noise. */
	assert_int_equal(strobe_sig_counts(base, cur, 2, 100e7, 100e7, 1e7, 0.99, r), 0);
	assert_false(r[0].significant);
	assert_int_equal(strobe_sig_counts(base, cur, 2, 100e7, 100e7, 1e7, 1.0, r), -EINVAL);
	assert_int_equal(strobe_sig_counts(base, cur, 2, 100e7, 100e7, 0, 0.99, r), -EINVAL);
}

/* Six profiles a side of 1000 samples whose share of f alternates .1/.3 (base) and .15/.35
 * (new): pooled 20 % -> 25 %, which the counting test calls certain (z = 6.5) but the runs
 * themselves vary by 10 points. */
static void test_sets_between_run_variation(void **state)
{
	(void)state;
	double bv[6], nv[6], tot[6];
	for (int j = 0; j < 6; j++) {
		tot[j] = 1000;
		bv[j] = j % 2 ? 300 : 100;
		nv[j] = j % 2 ? 350 : 150;
	}
	strobe_sig_set b = {bv, tot, 6}, n = {nv, tot, 6};
	strobe_sig_row r, r2, c;
	assert_int_equal(strobe_sig_sets(&b, &n, 1, 1, 0.99, 42, &r), 0);
	near(r.change, 0.05, 1e-12);
	assert_true(r.p > 0.1);
	assert_false(r.significant);
	assert_true(r.lo < 0 && r.hi > 0.05);
	/* Same seed, same answer. */
	assert_int_equal(strobe_sig_sets(&b, &n, 1, 1, 0.99, 42, &r2), 0);
	assert_true(r.p == r2.p && r.lo == r2.lo);
	/* The counting test on the pooled counts says otherwise. */
	double pb = 1200, pn = 1500;
	assert_int_equal(strobe_sig_counts(&pb, &pn, 1, 6000, 6000, 1, 0.99, &c), 0);
	assert_true(c.p < 1e-7 && c.significant);
	/* Identical profiles a side: the bootstrap sees no variation; the counting floor keeps
	 * the error bar honest (z = .05 / sqrt(.225 * .775 * 2 / 6000) = 6.5). */
	for (int j = 0; j < 6; j++)
		bv[j] = 200, nv[j] = 250;
	assert_int_equal(strobe_sig_sets(&b, &n, 1, 1, 0.99, 42, &r), 0);
	near(r.p, erfc(0.05 / sqrt(0.225 * 0.775 * 2 / 6000) / M_SQRT2), 1e-12);
	assert_true(r.significant);
	strobe_sig_set one = {bv, tot, 1};
	assert_int_equal(strobe_sig_sets(&one, &n, 1, 1, 0.99, 42, &r), -EINVAL);
}

/* Per unit of work: 1 and 9 samples (10 ms each) over 1000 requests a side: 1e4 -> 9e4 ns per
 * request, the same conditional p as counts of 100 (22/1024); 2 and 18 samples over 1000 and
 * 2000 requests are the same cost per request: no change. */
static void test_rates(void **state)
{
	(void)state;
	double b[] = {1e7, 2e7}, n[] = {9e7, 36e7};
	strobe_sig_row r[2];
	assert_int_equal(strobe_sig_rates(b, n, 1, 1000, 1000, 1e7, 0.95, r), 0);
	near(r[0].base_share, 1e4, 1e-9);
	near(r[0].new_share, 9e4, 1e-9);
	near(r[0].p, 22.0 / 1024, 1e-12);
	assert_true(r[0].significant);
	double b2 = 18e7, n2 = 36e7;
	assert_int_equal(strobe_sig_rates(&b2, &n2, 1, 1000, 2000, 1e7, 0.95, r), 0);
	near(r[0].change, 0, 1e-9);
	assert_true(r[0].p > 0.5 && !r[0].significant);
	assert_int_equal(strobe_sig_rates(b, n, 1, 0, 1000, 1e7, 0.95, r), -EINVAL);
}

enum { NF = 100, NS = 20000, PLANT = 3 };

/* One trial of the two-profile test: flags counted; *hit when the planted function is among
 * them. */
static size_t trial_counts(synth *s, size_t planted, double plant, bool *hit, size_t *others)
{
	double b[NF] = {0}, n[NF] = {0};
	strobe_sig_row r[NF];
	synth_profile(s, b, 1, NS, SIZE_MAX, 0, 0);
	synth_profile(s, n, 1, NS, planted, plant, 0);
	assert_int_equal(strobe_sig_counts(b, n, NF, NS, NS, 1, 0.99, r), 0);
	size_t flagged = 0;
	*hit = false;
	*others = 0;
	for (size_t i = 0; i < NF; i++) {
		flagged += r[i].significant;
		if (r[i].significant && i == planted)
			*hit = true;
		else if (r[i].significant)
			(*others)++;
	}
	return flagged;
}

static void test_aa_ab_counts(void **state)
{
	(void)state;
	synth s;
	assert_int_equal(synth_init(&s, NF, 2024), 0);
	size_t flagged = 0, trials = 300, hits = 0, clean = 0, others;
	bool hit;
	for (size_t t = 0; t < trials; t++)
		flagged += trial_counts(&s, SIZE_MAX, 0, &hit, &others);
	print_message("A/A counts: %zu of %zu function tests flagged\n", flagged, trials * NF);
	assert_true(flagged <= trials * NF / 100);
	for (size_t t = 0; t < trials; t++) {
		trial_counts(&s, PLANT, 0.02, &hit, &others);
		hits += hit;
		clean += others == 0;
	}
	print_message("A/B counts: +2 points found in %zu of %zu, no other flag in %zu\n", hits,
		      trials, clean);
	assert_true(hits * 100 >= trials * 95);
	assert_true(clean * 100 >= trials * 95);
	synth_free(&s);
}

/* The profile-set test on 20 pushes of 1000 samples a side whose shares jitter 10 % from run to
 * run: A/A stays quiet, A/B still finds +2 points. */
enum { NP = 20, PS = 1000 };

static void trial_sets(synth *s, double plant, size_t *flag_other, bool *hit)
{
	static double bv[NF * NP], nv[NF * NP], tot[NP];
	strobe_sig_row r[NF];
	memset(bv, 0, sizeof(bv));
	memset(nv, 0, sizeof(nv));
	for (size_t j = 0; j < NP; j++) {
		tot[j] = PS;
		synth_profile(s, bv + j, NP, PS, SIZE_MAX, 0, 0.1);
		synth_profile(s, nv + j, NP, PS, plant > 0 ? PLANT : SIZE_MAX, plant, 0.1);
	}
	strobe_sig_set b = {bv, tot, NP}, n = {nv, tot, NP};
	assert_int_equal(strobe_sig_sets(&b, &n, NF, 1, 0.99, 7, r), 0);
	*flag_other = 0;
	*hit = false;
	for (size_t i = 0; i < NF; i++) {
		if (r[i].significant && plant > 0 && i == PLANT)
			*hit = true;
		else if (r[i].significant)
			(*flag_other)++;
	}
}

static void test_aa_ab_sets(void **state)
{
	(void)state;
	synth s;
	assert_int_equal(synth_init(&s, NF, 77), 0);
	size_t trials = 60, flagged = 0, hits = 0, clean = 0, o;
	bool hit;
	for (size_t t = 0; t < trials; t++) {
		trial_sets(&s, 0, &o, &hit);
		flagged += o;
	}
	print_message("A/A sets: %zu of %zu function tests flagged\n", flagged, trials * NF);
	assert_true(flagged <= trials * NF / 100);
	for (size_t t = 0; t < trials; t++) {
		trial_sets(&s, 0.02, &o, &hit);
		hits += hit;
		clean += o == 0;
	}
	print_message("A/B sets: +2 points found in %zu of %zu, no other flag in %zu\n", hits,
		      trials, clean);
	assert_true(hits * 100 >= trials * 95);
	assert_true(clean * 100 >= trials * 95);
	synth_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binomial_tails),
		cmocka_unit_test(test_bh_known),
		cmocka_unit_test(test_z),
		cmocka_unit_test(test_counts_rows),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_sets_between_run_variation),
		cmocka_unit_test(test_aa_ab_counts),
		cmocka_unit_test(test_aa_ab_sets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
