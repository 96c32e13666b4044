/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the store's unit tests share: a store opened in the test's temporary directory (include
 * unit_tmpdir.h first, for `dir`), a profile made from folded text with one sample type, and a
 * range answered two ways and compared.
 */
#ifndef STROBE_UNIT_STORE_FIXTURE_H
#define STROBE_UNIT_STORE_FIXTURE_H

#include <string.h>

#include "strobe/codec.h"
#include "strobe/store.h"

/* A store in dir keeping retention_ns of data (0: the default); fails the test when it cannot. */
static inline strobe_store *fixture_store(int64_t retention_ns)
{
	strobe_store_opts o = {.dir = dir, .retention_ns = retention_ns};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	if (!s)
		fail_msg("open: %s", err.msg);
	return s;
}

/* Folded text as a profile of sample type type/unit; its period type is cpu/nanoseconds for
 * cpu, else space/bytes. */
static inline strobe_profile *fixture_profile(const char *text, const char *type, const char *unit)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0)
		fail_msg("%s", err.msg);
	bool cpu = strcmp(type, "cpu") == 0;
	p->types[0].type = strobe_str_intern0(p, type);
	p->types[0].unit = strobe_str_intern0(p, unit);
	p->period_type.type = strobe_str_intern0(p, cpu ? "cpu" : "space");
	p->period_type.unit = strobe_str_intern0(p, cpu ? "nanoseconds" : "bytes");
	return p;
}

static inline strobe_profile *fixture_cpu(const char *text)
{
	return fixture_profile(text, "cpu", "nanoseconds");
}

/* The range of sel (tenant ten) over [from, to) by step, grouped by group or not, answered with
 * use(s, true) and with use(s, false) (a fast path and the path it must equal): equal group by
 * group (names, order, group-by values) and step by step. Returns the sum of every value, for
 * the callers' own checks. */
static inline int64_t fixture_same_range(strobe_store *s, void (*use)(strobe_store *, bool),
					 const char *ten, const char *sel, int64_t from, int64_t to,
					 int64_t step, const char *group)
{
	const int64_t ns = 1000000000;
	strobe_err err = {{0}};
	strobe_selector se;
	if (strobe_selector_parse(sel, strlen(sel), &se, &err) < 0)
		fail_msg("%s: %s", sel, err.msg);
	strobe_query q = {ten, &se, from, to};
	strobe_range_result a, b;
	use(s, true);
	if (strobe_store_range(s, &q, step, group, NULL, &a, &err) < 0)
		fail_msg("range: %s", err.msg);
	use(s, false);
	if (strobe_store_range(s, &q, step, group, NULL, &b, &err) < 0)
		fail_msg("range: %s", err.msg);
	use(s, true);
	assert_int_equal(a.n, b.n);
	assert_int_equal(a.nsteps, b.nsteps);
	int64_t sum = 0;
	for (size_t g = 0; g < a.n; g++) {
		assert_string_equal(a.g[g].value, b.g[g].value);
		assert_int_equal(a.g[g].nby, b.g[g].nby);
		for (size_t k = 0; k < a.nsteps; k++) {
			if (a.g[g].values[k] != b.g[g].values[k])
				fail_msg("%s %s from %lld.%09lld to %lld.%09lld step %lld ns by %s, "
					 "group '%s' step %zu: fast path %lld, the other %lld",
					 ten, sel, (long long)(from / ns), (long long)(from % ns),
					 (long long)(to / ns), (long long)(to % ns), (long long)step,
					 group ? group : "-", a.g[g].value, k,
					 (long long)a.g[g].values[k], (long long)b.g[g].values[k]);
			sum += a.g[g].values[k];
		}
	}
	strobe_range_result_free(&a);
	strobe_range_result_free(&b);
	strobe_selector_free(&se);
	return sum;
}
#endif
