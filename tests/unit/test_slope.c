// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the trend statistics (lib/slope.c) against answers worked by hand: the
 * Theil–Sen slope, Sen's interval and intercept of y = x^2 (every pairwise slope is i + j, so
 * the ranks can be counted), the Mann–Kendall S, variance and p of a monotone series with an
 * outlier the slope must ignore, ties, and Benjamini–Hochberg as R's p.adjust gives it.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strobe/slope.h"

static void test_outlier_ignored(void **state)
{
	(void)state;
	/* Pairwise slopes: six of 1, and 24.75, 32.7, 48.5, 97 through the outlier; median 1.
	 * Least squares would give 19.8. */
	double x[] = {1, 2, 3, 4, 5}, y[] = {1, 2, 3, 4, 100};
	strobe_slope s;
	assert_int_equal(strobe_theil_sen(x, y, 5, 0.95, &s), 0);
	assert_float_equal(s.slope, 1.0, 1e-12);
	assert_float_equal(s.intercept, 0.0, 1e-12);
	assert_float_equal(s.s, 10.0, 0);
	assert_float_equal(s.var_s, 5.0 * 4 * 15 / 18, 1e-9);
	assert_float_equal(s.tau, 1.0, 1e-12);
	/* z = (10 - 1) / sqrt(16.667) = 2.2045; one-sided p 0.01374, two-sided 0.02749 */
	assert_float_equal(s.z, 2.20454, 1e-4);
	assert_float_equal(s.p_up, 0.013745, 1e-5);
	assert_float_equal(s.p, 0.027489, 1e-5);
	assert_int_equal(s.n, 5);
	assert_int_equal(s.npairs, 10);
}

static void test_sen_interval(void **state)
{
	(void)state;
	/* y = x^2, x = 1..10: the slope of pair (i, j) is i + j. 45 slopes; the median (rank 23) is
	 * 11. At 95 %: Var S = 10*9*25/18 = 125, C = 1.95996 * 11.18 = 21.91, so the ends are the
	 * slopes of ranks 11.54 (both neighbours are 8) and 34.46 (both 14). Intercept: median of
	 * x^2 - 11x = -24. Given in reverse order: the order of the points must not matter. */
	double x[10], y[10];
	for (int i = 0; i < 10; i++) {
		x[i] = 10 - i;
		y[i] = x[i] * x[i];
	}
	strobe_slope s;
	assert_int_equal(strobe_theil_sen(x, y, 10, 0.95, &s), 0);
	assert_float_equal(s.slope, 11.0, 1e-12);
	assert_float_equal(s.lo, 8.0, 1e-12);
	assert_float_equal(s.hi, 14.0, 1e-12);
	assert_float_equal(s.intercept, -24.0, 1e-12);
	assert_float_equal(s.s, 45.0, 0);
	/* At 99.99 % the interval's ranks leave the 45 slopes: unbounded. */
	assert_int_equal(strobe_theil_sen(x, y, 10, 0.9999, &s), 0);
	assert_true(isinf(s.lo) && s.lo < 0);
	assert_true(isinf(s.hi) && s.hi > 0);
}

static void test_falling_and_flat(void **state)
{
	(void)state;
	double x[] = {0, 1, 2, 3, 4, 5}, y[] = {50, 40, 30, 20, 10, 0}, flat[] = {7, 7, 7, 7, 7, 7};
	strobe_slope s;
	assert_int_equal(strobe_theil_sen(x, y, 6, 0.99, &s), 0);
	assert_float_equal(s.slope, -10.0, 1e-12);
	assert_true(s.z < 0);
	assert_true(s.p_up > 0.99);
	/* All y tied: S = 0 and the tie correction takes Var S to 0; no trend, p = 1. */
	assert_int_equal(strobe_theil_sen(x, flat, 6, 0.99, &s), 0);
	assert_float_equal(s.slope, 0.0, 0);
	assert_float_equal(s.s, 0.0, 0);
	assert_float_equal(s.var_s, 0.0, 1e-9);
	assert_float_equal(s.p, 1.0, 0);
}

static void test_ties_in_y(void **state)
{
	(void)state;
	/* y = 1 1 2 2 3 3 over x = 1..6: a tie group of 2 three times takes 3 * 2*1*9 = 54 off
	 * n(n-1)(2n+5) = 510, Var S = 456/18; S = 15 - 3 tied pairs = 12. */
	double x[] = {1, 2, 3, 4, 5, 6}, y[] = {1, 1, 2, 2, 3, 3};
	strobe_slope s;
	assert_int_equal(strobe_theil_sen(x, y, 6, 0.9, &s), 0);
	assert_float_equal(s.s, 12.0, 0);
	assert_float_equal(s.var_s, 456.0 / 18, 1e-9);
}

static void test_bad_input(void **state)
{
	(void)state;
	double x[] = {1, 1, 1}, y[] = {1, 2, 3}, xs[] = {1, 2, 3};
	strobe_slope s;
	assert_int_equal(strobe_theil_sen(x, y, 3, 0.9, &s), -EINVAL); /* no distinct x */
	assert_int_equal(strobe_theil_sen(xs, y, 2, 0.9, &s), -EINVAL);
	assert_int_equal(strobe_theil_sen(xs, y, 3, 1.0, &s), -EINVAL);
	assert_int_equal(strobe_theil_sen(xs, y, 3, 0.0, &s), -EINVAL);
	double yn[] = {1, NAN, 3};
	assert_int_equal(strobe_theil_sen(xs, yn, 3, 0.9, &s), -EINVAL);
	assert_int_equal(strobe_theil_sen(xs, y, STROBE_SLOPE_MAX_POINTS + 1, 0.9, &s), -E2BIG);
}

static void test_quantile(void **state)
{
	(void)state;
	assert_float_equal(strobe_normal_quantile(0.975), 1.959964, 1e-6);
	assert_float_equal(strobe_normal_quantile(0.995), 2.575829, 1e-6);
	assert_float_equal(strobe_normal_quantile(0.5), 0.0, 1e-12);
	assert_float_equal(strobe_normal_quantile(0.05), -1.644854, 1e-6);
	assert_true(isnan(strobe_normal_quantile(1.0)));
}

static void test_bh(void **state)
{
	(void)state;
	/* R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") = 0.02 0.04 0.04 0.02 */
	double p[] = {0.01, 0.04, 0.03, 0.005}, q[4];
	assert_int_equal(strobe_bh_adjust(p, q, 4), 0);
	assert_float_equal(q[0], 0.02, 1e-12);
	assert_float_equal(q[1], 0.04, 1e-12);
	assert_float_equal(q[2], 0.04, 1e-12);
	assert_float_equal(q[3], 0.02, 1e-12);
	/* p.adjust(c(0.5, 0.9, 0.001), "BH") = 0.75 0.90 0.003 */
	double p2[] = {0.5, 0.9, 0.001}, q2[3];
	assert_int_equal(strobe_bh_adjust(p2, q2, 3), 0);
	assert_float_equal(q2[0], 0.75, 1e-12);
	assert_float_equal(q2[1], 0.9, 1e-12);
	assert_float_equal(q2[2], 0.003, 1e-12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outlier_ignored), cmocka_unit_test(test_sen_interval),
		cmocka_unit_test(test_falling_and_flat), cmocka_unit_test(test_ties_in_y),
		cmocka_unit_test(test_bad_input),       cmocka_unit_test(test_quantile),
		cmocka_unit_test(test_bh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
