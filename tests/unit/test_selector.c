// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the server's parsers: selectors (all four matchers, quoting, escapes, anchored
 * regexes, Prometheus's absent-label rule, and errors with offsets), times and durations.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/server.h"

static int parse(const char *s, strobe_selector *sel, strobe_err *err)
{
	return strobe_selector_parse(s, strlen(s), sel, err);
}

static void test_selector_ok(void **state)
{
	(void)state;
	strobe_selector s;
	strobe_err err = {{0}};
	assert_int_equal(parse(" process_cpu:cpu:nanoseconds:cpu:nanoseconds { service_name = \"api\","
			       " env != 'prod', pod =~ `web-.*`, ver !~ \"v1\\\\..*\", } ",
			       &s, &err),
			 0);
	assert_string_equal(s.type, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
	assert_int_equal(s.n, 4);
	assert_string_equal(s.m[0].name, "service_name");
	assert_int_equal(s.m[0].op, STROBE_MATCH_EQ);
	assert_int_equal(s.m[1].op, STROBE_MATCH_NEQ);
	assert_string_equal(s.m[1].value, "prod");
	assert_int_equal(s.m[2].op, STROBE_MATCH_RE);
	assert_string_equal(s.m[3].value, "v1\\..*");
	strobe_labelpair l[] = {{"env", "dev"}, {"pod", "web-1"}, {"service_name", "api"},
				{"ver", "v2.0"}};
	assert_true(strobe_selector_match_labels(&s, l, 4));
	l[1].value = "xweb-1"; /* anchored: no match */
	assert_false(strobe_selector_match_labels(&s, l, 4));
	l[1].value = "web-1";
	l[3].value = "v1.9";
	assert_false(strobe_selector_match_labels(&s, l, 4));
	strobe_selector_free(&s);

	/* Absent labels are "": {env=""} matches, {env!="x"} matches. */
	assert_int_equal(parse("{env=\"\", zone!=\"x\"}", &s, &err), 0);
	assert_null(s.type);
	assert_true(strobe_selector_match_labels(&s, l, 0));
	strobe_selector_free(&s);
	assert_int_equal(parse("memory:inuse_space:bytes:space:bytes", &s, &err), 0);
	assert_int_equal(s.n, 0);
	strobe_selector_free(&s);
	assert_int_equal(parse("{a=\"q\\\"\\n\\x41\"}", &s, &err), 0);
	assert_string_equal(s.m[0].value, "q\"\nA");
	strobe_selector_free(&s);
}

static void test_selector_errors(void **state)
{
	(void)state;
	static const struct {
		const char *in, *msg;
	} bad[] = {
		{"", "expected a profile type"},
		{"{a=\"x\"", "expected ',' or '}'"},
		{"{a=x}", "expected a quoted value"},
		{"{a==\"x\"}", "expected a quoted value"},
		{"{1a=\"x\"}", "expected a label name"},
		{"{a=\"x}", "unterminated string"},
		{"{a=~\"(\"}", "bad regular expression"},
		{"t{a=\"x\"} junk", "unexpected text"},
		{"{a=\"\\q\"}", "unknown escape"},
		{"{a<\"x\"}", "expected =, !=, =~ or !~"},
		{"{a=~\"x*++++\"}", "stacked repetition"},
		{"{a=~\"((a{200}){2}){2}\"}", "repetition count over 100"},
		{"{a=~\"((a{100}){100}){100}\"}", "product is capped"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		strobe_selector s;
		strobe_err err = {{0}};
		assert_int_equal(parse(bad[i].in, &s, &err), -EINVAL);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("'%s': got '%s', want '%s'", bad[i].in, err.msg, bad[i].msg);
		assert_null(s.type);
		assert_null(s.m);
	}
	/* Offsets are reported. */
	strobe_selector s;
	strobe_err err = {{0}};
	assert_int_equal(parse("{a=\"x\" b=\"y\"}", &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "offset 7"));
	/* Caps. */
	char big[STROBE_SELECTOR_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(parse(big, &s, &err), -EINVAL);
	char many[4096] = "{";
	for (int i = 0; i < 70; i++)
		strcat(many, "a=\"x\",");
	strcat(many, "}");
	assert_int_equal(parse(many, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "too many matchers"));
}

/* A matcher the server adds to a parsed selector narrows it like one the user wrote. */
static void test_selector_add_eq(void **state)
{
	(void)state;
	strobe_selector s;
	strobe_err err = {{0}};
	assert_int_equal(parse("cpu{env=\"dev\"}", &s, &err), 0);
	assert_int_equal(strobe_selector_add_eq(&s, "service_name", "api"), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.m[1].op, STROBE_MATCH_EQ);
	strobe_labelpair l[] = {{"env", "dev"}, {"service_name", "api"}};
	assert_true(strobe_selector_match_labels(&s, l, 2));
	l[1].value = "web";
	assert_false(strobe_selector_match_labels(&s, l, 2));
	strobe_selector_free(&s);
}

static void test_time(void **state)
{
	(void)state;
	const int64_t now = 1795383649123456789LL;
	int64_t t;
	strobe_err err = {{0}};
	assert_int_equal(strobe_time_parse("now", now, &t, &err), 0);
	assert_true(t == now);
	assert_int_equal(strobe_time_parse("now-1h30m", now, &t, &err), 0);
	assert_true(t == now - 5400 * STROBE_NS_PER_S);
	assert_int_equal(strobe_time_parse("now+250ms", now, &t, &err), 0);
	assert_true(t == now + 250000000);
	assert_int_equal(strobe_time_parse("1700000000", now, &t, &err), 0);
	assert_true(t == 1700000000 * STROBE_NS_PER_S);
	assert_int_equal(strobe_time_parse("1700000000123", now, &t, &err), 0);
	assert_true(t == 1700000000123000000LL);
	assert_int_equal(strobe_time_parse("1700000000123456", now, &t, &err), 0);
	assert_true(t == 1700000000123456000LL);
	assert_int_equal(strobe_time_parse("1700000000123456789", now, &t, &err), 0);
	assert_true(t == 1700000000123456789LL);
	assert_int_equal(strobe_time_parse("1700000000.5", now, &t, &err), 0);
	assert_true(t == 1700000000500000000LL);
	assert_int_equal(strobe_time_parse("2023-11-14T22:13:20Z", now, &t, &err), 0);
	assert_true(t == 1700000000 * STROBE_NS_PER_S);
	assert_int_equal(strobe_time_parse("2023-11-15T00:13:20.25+02:00", now, &t, &err), 0);
	assert_true(t == 1700000000250000000LL);
	const char *bad[] = {"", "yesterday", "now-", "now-1x", "2023-13-01T00:00:00Z",
			     "2023-11-14T22:13:20", "12ab", "99999999999999999999999", "1.2.3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (strobe_time_parse(bad[i], now, &t, &err) != -EINVAL)
			fail_msg("'%s' parsed", bad[i]);
	int64_t d;
	assert_int_equal(strobe_duration_parse("1h30m", &d, &err), 0);
	assert_true(d == 5400 * STROBE_NS_PER_S);
	assert_int_equal(strobe_duration_parse("15", &d, &err), 0);
	assert_true(d == 15 * STROBE_NS_PER_S);
	assert_int_equal(strobe_duration_parse("2w", &d, &err), 0);
	assert_true(d == 14 * 86400 * STROBE_NS_PER_S);
	assert_int_equal(strobe_duration_parse("0s", &d, &err), -EINVAL);
	assert_int_equal(strobe_duration_parse("m", &d, &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selector_ok),
		cmocka_unit_test(test_selector_errors),
		cmocka_unit_test(test_selector_add_eq),
		cmocka_unit_test(test_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
