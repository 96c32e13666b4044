// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the growable buffer (lib/buf.c): appending bytes, strings and formatted text
 * (short and longer than the formatting scratch), the NUL after the contents, the maximum
 * (exactly max fits, one byte more fails and empties the buffer, and the allocation never passes
 * max + 1), writing in place with reserve and commit, reset, taking the contents over, and
 * percent-encoding for URL queries.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/buf.h"

static void test_add(void **state)
{
	(void)state;
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	assert_int_equal(strobe_buf_add(&b, "ab", 2), 0);
	assert_int_equal(strobe_buf_adds(&b, "cd"), 0);
	assert_int_equal(strobe_buf_addf(&b, "-%d-%s", 42, "x"), 0);
	assert_int_equal(b.len, 9);
	assert_string_equal(b.p, "abcd-42-x");
	char big[1000];
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(strobe_buf_addf(&b, "[%s]", big), 0);
	assert_int_equal(b.len, 9 + 1001);
	assert_int_equal(b.p[b.len], 0);
	assert_int_equal(b.p[b.len - 1], ']');
	for (int i = 0; i < 10000; i++)
		assert_int_equal(strobe_buf_add(&b, "0123456789", 10), 0);
	assert_int_equal(b.len, 1010 + 100000);
	assert_int_equal(memcmp(b.p + b.len - 10, "0123456789", 10), 0);
	strobe_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.p, "");
	strobe_buf_free(&b);
	assert_null(b.p);
}

static void test_max(void **state)
{
	(void)state;
	strobe_buf b;
	strobe_buf_init(&b, 1000);
	char data[1001];
	memset(data, 'a', sizeof(data));
	assert_int_equal(strobe_buf_add(&b, data, 600), 0);
	assert_int_equal(strobe_buf_add(&b, data, 400), 0); /* exactly max */
	assert_int_equal(b.len, 1000);
	assert_true(b.cap <= 1001);
	assert_int_equal(strobe_buf_add(&b, "x", 1), -E2BIG);
	assert_null(b.p); /* emptied, as dynbuf does */
	assert_int_equal(b.len, 0);
	/* usable again afterwards, with the same maximum */
	assert_int_equal(strobe_buf_add(&b, data, 1000), 0);
	assert_int_equal(strobe_buf_addf(&b, "%s", "y"), -E2BIG);
	assert_int_equal(strobe_buf_add(&b, data, 1001), -E2BIG);
	/* a length that would overflow */
	assert_int_equal(strobe_buf_reserve(&b, SIZE_MAX), -E2BIG);
	strobe_buf_free(&b);
}

static void test_reserve_commit_take(void **state)
{
	(void)state;
	strobe_buf b;
	strobe_buf_init(&b, 64);
	assert_int_equal(strobe_buf_reserve(&b, 5), 0);
	memcpy(b.p + b.len, "hello", 5);
	strobe_buf_commit(&b, 5);
	assert_string_equal(b.p, "hello");
	size_t n = 0;
	char *s = strobe_buf_take(&b, &n);
	assert_int_equal(n, 5);
	assert_string_equal(s, "hello");
	free(s);
	assert_null(b.p);
	/* taking an empty buffer gives an empty string */
	s = strobe_buf_take(&b, &n);
	assert_non_null(s);
	assert_int_equal(n, 0);
	assert_string_equal(s, "");
	free(s);
	strobe_buf_init(&b, 0);
	assert_int_equal(strobe_buf_add(&b, "", 0), 0);
	assert_int_equal(strobe_buf_add(&b, "a", 1), -E2BIG);
	strobe_buf_free(&b);
}

/* Percent-encoding for URL queries: unreserved characters kept, every other byte (a NUL, a
 * space, UTF-8, the query's own & = { } ") as %XX, the bytes libcurl's curl_easy_escape gives;
 * a failure past max empties the buffer as any other add. */
static void test_urlenc(void **state)
{
	(void)state;
	strobe_buf b;
	strobe_buf_init(&b, 1024);
	static const char in[] = "aZ09-._~ &={}\"\\/\0\xc3\xa9";
	assert_int_equal(strobe_buf_add_urlenc(&b, in, sizeof(in) - 1), 0);
	assert_string_equal(b.p, "aZ09-._~%20%26%3D%7B%7D%22%5C%2F%00%C3%A9");
	assert_int_equal(b.len, strlen(b.p));
	assert_int_equal(strobe_buf_add_urlenc(&b, "", 0), 0);
	assert_int_equal(strobe_buf_add_urlenc(&b, "x", 1), 0);
	assert_string_equal(b.p + b.len - 4, "%A9x");
	strobe_buf_free(&b);
	strobe_buf_init(&b, 5);
	assert_int_equal(strobe_buf_add_urlenc(&b, "ab", 2), 0);
	assert_int_equal(strobe_buf_add_urlenc(&b, "c d", 3), -E2BIG);
	assert_int_equal(b.len, 0);
	strobe_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_max),
		cmocka_unit_test(test_reserve_commit_take),
		cmocka_unit_test(test_urlenc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
