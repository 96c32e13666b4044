// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the pprof-style transforms, per-function statistics, the top table and value
 * formatting.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/codec.h"
#include "strobe/transform.h"

static const char *const base_text = "main;parse;lex 40\n"
				     "main;parse;alloc 10\n"
				     "main;run;hash 30\n"
				     "main;run;alloc 15\n"
				     "main 5\n";

static char *run_filter(const char *text, strobe_filter f)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_folded_decode(text, strlen(text), "t", &p, &err), 0);
	int r = strobe_profile_filter(p, &f, 0, &err);
	if (r < 0)
		fail_msg("filter: %s", err.msg);
	char *buf = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&buf, &len);
	assert_int_equal(strobe_folded_write(o, p, 0, STROBE_GRAN_FUNCTIONS), 0);
	fclose(o);
	strobe_profile_free(p);
	return buf;
}

static void check(const char *text, strobe_filter f, const char *want)
{
	char *got = run_filter(text, f);
	assert_string_equal(got, want);
	free(got);
}

static void test_focus_ignore(void **state)
{
	(void)state;
	check(base_text, (strobe_filter){.focus = "^alloc$"},
	      "main;parse;alloc 10\nmain;run;alloc 15\n");
	check(base_text, (strobe_filter){.ignore = "^run$"},
	      "main 5\nmain;parse;alloc 10\nmain;parse;lex 40\n");
	check(base_text, (strobe_filter){.focus = "alloc", .ignore = "run"}, "main;parse;alloc 10\n");
}

static void test_hide_show(void **state)
{
	(void)state;
	/* Hidden frames disappear; their samples stay, merged where stacks become equal. */
	check(base_text, (strobe_filter){.hide = "^(parse|run)$"},
	      "main 5\nmain;alloc 25\nmain;hash 30\nmain;lex 40\n");
	check(base_text, (strobe_filter){.show = "^(main|alloc)$"}, "main 75\nmain;alloc 25\n");
}

static void test_prune(void **state)
{
	(void)state;
	/* Below 12% of 100: parse;alloc (10) folds into parse; main's self (5) stays with main. */
	check(base_text, (strobe_filter){.prune = 0.12},
	      "main 5\nmain;parse 10\nmain;parse;lex 40\nmain;run;alloc 15\nmain;run;hash 30\n");
}

static void test_tagfocus(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	strobe_profile_add_type(p, "samples", "count");
	uint32_t a = strobe_stack_push(p, 0, strobe_location_for_name(p, "a", 1));
	uint32_t b = strobe_stack_push(p, 0, strobe_location_for_name(p, "b", 1));
	strobe_label la = {.key = strobe_str_intern0(p, "endpoint"), .str = strobe_str_intern0(p, "/api")};
	strobe_label lb = {.key = la.key, .str = strobe_str_intern0(p, "/health")};
	int64_t v1 = 7, v2 = 3;
	strobe_sample_add(p, a, strobe_labelset_intern(p, &la, 1), &v1);
	strobe_sample_add(p, b, strobe_labelset_intern(p, &lb, 1), &v2);
	strobe_filter f = {.tagfocus = "endpoint=^/api$"};
	assert_int_equal(strobe_profile_filter(p, &f, 0, NULL), 0);
	assert_int_equal(strobe_total(p, 0), 7);
	f = (strobe_filter){.tagignore = "endpoint=api"};
	assert_int_equal(strobe_profile_filter(p, &f, 0, NULL), 0);
	assert_int_equal(strobe_total(p, 0), 0);
	strobe_err err = {{0}};
	f = (strobe_filter){.focus = "("};
	assert_int_equal(strobe_profile_filter(p, &f, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--focus"));
	strobe_profile_free(p);
}

static void test_fnstats_recursion_counted_once(void **state)
{
	(void)state;
	const char *t = "main;f;f;f 4\nmain;g 6\n";
	strobe_profile *p = NULL;
	assert_int_equal(strobe_folded_decode(t, strlen(t), "t", &p, NULL), 0);
	strobe_fnstat *st;
	size_t n;
	assert_int_equal(strobe_fnstats(p, 0, STROBE_GRAN_FUNCTIONS, &st, &n), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(st[i].name, "f")) {
			assert_int_equal(st[i].flat, 4);
			assert_int_equal(st[i].cum, 4);
		} else if (!strcmp(st[i].name, "main")) {
			assert_int_equal(st[i].flat, 0);
			assert_int_equal(st[i].cum, 10);
		}
	}
	free(st);
	char *buf = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&buf, &len);
	assert_int_equal(strobe_top_write(o, p, 0, STROBE_GRAN_FUNCTIONS, 0, false), 0);
	fclose(o);
	assert_non_null(strstr(buf, "Showing nodes accounting for 10, 100% of 10 total"));
	/* g first (flat 6), then f (4), then main (0 flat, 100% cum). */
	char *g = strstr(buf, "  g\n"), *f = strstr(buf, "  f\n"), *m = strstr(buf, "  main\n");
	assert_true(g && f && m && g < f && f < m);
	assert_non_null(strstr(buf, "6 60.00% 60.00%          6 60.00%  g"));
	free(buf);
	strobe_profile_free(p);
}

static void test_format_value(void **state)
{
	(void)state;
	char b[32];
	strobe_format_value(b, sizeof(b), 1500000000, "nanoseconds");
	assert_string_equal(b, "1.50s");
	strobe_format_value(b, sizeof(b), 10000000, "nanoseconds");
	assert_string_equal(b, "10ms");
	strobe_format_value(b, sizeof(b), 3 * 1048576 + 524288, "bytes");
	assert_string_equal(b, "3.50MB");
	strobe_format_value(b, sizeof(b), 42, "count");
	assert_string_equal(b, "42");
	strobe_format_value(b, sizeof(b), 0, "nanoseconds");
	assert_string_equal(b, "0");
}

static void test_fncompare_normalises(void **state)
{
	(void)state;
	const char *bt = "m;a 50\nm;b 50\n", *nt = "m;a 150\nm;b 50\n";
	strobe_profile *b = NULL, *n = NULL;
	strobe_folded_decode(bt, strlen(bt), "b", &b, NULL);
	strobe_folded_decode(nt, strlen(nt), "n", &n, NULL);
	strobe_fncmp *c;
	size_t cnt;
	int64_t tot[2];
	assert_int_equal(strobe_fncompare(b, 0, n, 0, STROBE_GRAN_FUNCTIONS, true, &c, &cnt, tot), 0);
	assert_int_equal(tot[0], 200);
	assert_int_equal(tot[1], 200);
	for (size_t i = 0; i < cnt; i++)
		if (!strcmp(c[i].name, "a")) {
			assert_int_equal(c[i].flat[0], 150);
			assert_int_equal(c[i].flat[1], 100);
		}
	strobe_fncmp_free(c, cnt);
	strobe_profile_free(b);
	strobe_profile_free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_focus_ignore),
		cmocka_unit_test(test_hide_show),
		cmocka_unit_test(test_prune),
		cmocka_unit_test(test_tagfocus),
		cmocka_unit_test(test_fnstats_recursion_counted_once),
		cmocka_unit_test(test_format_value),
		cmocka_unit_test(test_fncompare_normalises),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
