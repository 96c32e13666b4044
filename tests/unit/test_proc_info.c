// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/proc_info.c's one cleaning rule for text a process controls (its
 * environment, comm, executable path, or what its preloaded library wrote) before it becomes a
 * label value: control characters (NUL and DEL among them), quotes and backslashes become '_',
 * everything else is kept byte for byte, the copy stops at len and at cap - 1 and is always
 * NUL-terminated. The service-name rules that use it are tested in test_agent.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/proc_info.h"

static void test_clean(void **state)
{
	(void)state;
	char out[32];
	static const char dirty[] = "a\"b\\c\td\x7f" "e\nf\x01g h-é";
	proc_info_clean(out, sizeof(out), dirty, strlen(dirty));
	assert_string_equal(out, "a_b_c_d_e_f_g h-é");
	/* A NUL inside len is a control character like any other. */
	proc_info_clean(out, sizeof(out), "ab\0cd", 5);
	assert_string_equal(out, "ab_cd");
	/* len stops the copy before the string's end. */
	proc_info_clean(out, sizeof(out), "service-name", 7);
	assert_string_equal(out, "service");
}

static void test_capped(void **state)
{
	(void)state;
	char out[8];
	memset(out, 'x', sizeof(out));
	proc_info_clean(out, sizeof(out), "0123456789", 10);
	assert_string_equal(out, "0123456");
	char one[1] = {'x'};
	proc_info_clean(one, sizeof(one), "abc", 3);
	assert_int_equal(one[0], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
