/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the sampler's benchmarks (bench/sampler_export.c, bench/sampler_feed.c) share: the CPU
 * time of this process, which a shared, busy machine disturbs less than wall time does, and
 * the median of the runs (sorts them in place).
 */
#ifndef STROBE_BENCH_UTIL_H
#define STROBE_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* CPU milliseconds this process has used. */
static inline double bench_cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline int bench_by_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n > 0; v is sorted). */
static inline double bench_median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), bench_by_double);
	return v[n / 2];
}

#endif
