// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of "a;b;c" -> stack (lib/stack_text.c): frames root first, the same text gives the
 * same stack id with or without the previous line's prefix reused, empty frames, the caps on a
 * frame name and on depth with their messages, and max_depth raised by one.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/codec.h"
#include "strobe/stack_text.h"

/* The frame names of stack st, root first, joined by '|'. */
static void names(const strobe_profile *p, uint32_t st, char *buf, size_t cap)
{
	uint32_t locs[64], n = 0;
	for (; st && n < 64; st = strobe_stack_get(p, st)->parent)
		locs[n++] = strobe_stack_get(p, st)->location;
	size_t o = 0;
	buf[0] = 0;
	for (uint32_t i = n; i-- > 0;) {
		const strobe_location *l = strobe_location_get(p, locs[i]);
		const char *nm = strobe_str(p, strobe_function_get(p, l->line[0].function)->name);
		o += (size_t)snprintf(buf + o, cap - o, "%s%s", i + 1 < n ? "|" : "", nm);
	}
}

static uint32_t parse(strobe_stack_parser *sp, const char *s)
{
	uint32_t st = UINT32_MAX;
	strobe_err err = {{0}};
	int r = strobe_stack_parse(sp, s, strlen(s), "t", 1, &st, &err);
	if (r < 0)
		fail_msg("%s: %s", s, err.msg);
	return st;
}

static void test_frames_and_prefix(void **state)
{
	(void)state;
	const char *lines[] = {"main;work;hash", "main;work;sort", "main;idle", "main;work;hash",
			       "main;worker;hash", "x", ";a;;b;"};
	const char *want[] = {"main|work|hash", "main|work|sort", "main|idle", "main|work|hash",
			      "main|worker|hash", "x", "|a||b|"};
	strobe_profile *p1 = strobe_profile_new(), *p2 = strobe_profile_new();
	strobe_stack_parser a, b;
	assert_int_equal(strobe_stack_parser_init(&a, p1, true), 0);
	assert_int_equal(strobe_stack_parser_init(&b, p2, false), 0);
	/* the lines live in one buffer, as a decoder's input does */
	char buf[256];
	size_t off[7], o = 0;
	for (size_t i = 0; i < 7; i++) {
		off[i] = o;
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s", lines[i]) + 1;
	}
	uint32_t ids[7];
	for (size_t i = 0; i < 7; i++) {
		ids[i] = parse(&a, buf + off[i]);
		assert_int_equal(parse(&b, buf + off[i]), ids[i]);
		char got[128];
		names(p1, ids[i], got, sizeof(got));
		assert_string_equal(got, want[i]);
	}
	assert_int_equal(ids[0], ids[3]);
	assert_int_not_equal(ids[0], ids[4]);
	/* the same name is one location wherever it appears */
	assert_int_equal(strobe_stack_get(p1, ids[0])->location,
			 strobe_stack_get(p1, ids[4])->location);
	strobe_stack_parser_free(&a);
	strobe_stack_parser_free(&b);
	strobe_profile_free(p1);
	strobe_profile_free(p2);
}

static void test_caps(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	strobe_stack_parser sp;
	assert_int_equal(strobe_stack_parser_init(&sp, p, true), 0);
	strobe_err err = {{0}};
	uint32_t st;
	size_t big = STROBE_MAX_NAME + 1;
	char *s = malloc(big + 3);
	memcpy(s, "a;", 2);
	memset(s + 2, 'x', big);
	assert_int_equal(strobe_stack_parse(&sp, s, big + 2, "body", 7, &st, &err), -EINVAL);
	assert_string_equal(err.msg, "body:7: frame name of 65537 bytes exceeds the 65536-byte limit");
	assert_int_equal(strobe_stack_parse(&sp, s, big + 1, "body", 7, &st, &err), 0);
	/* STROBE_MAX_DEPTH frames pass, one more does not (the previous text stays valid: the
	 * parser reads it again) */
	char *name = s;
	size_t n = STROBE_MAX_DEPTH + 1;
	s = malloc(2 * n);
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = 'f';
		s[2 * i + 1] = ';';
	}
	assert_int_equal(strobe_stack_parse(&sp, s, 2 * (n - 1) - 1, "f", 2, &st, &err), 0);
	assert_int_equal(strobe_stack_depth(p, st), STROBE_MAX_DEPTH);
	assert_int_equal(strobe_stack_parse(&sp, s, 2 * n - 1, "f", 3, &st, &err), -EINVAL);
	assert_string_equal(err.msg, "f:3: stack deeper than 4096 frames");
	sp.max_depth = STROBE_MAX_DEPTH + 1;
	assert_int_equal(strobe_stack_parse(&sp, s, 2 * n - 1, "f", 3, &st, &err), 0);
	assert_int_equal(strobe_stack_depth(p, st), STROBE_MAX_DEPTH + 1);
	free(s);
	free(name);
	strobe_stack_parser_free(&sp);
	strobe_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_and_prefix),
		cmocka_unit_test(test_caps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
