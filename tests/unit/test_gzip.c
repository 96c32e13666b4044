// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the one gunzip (lib/gzip.c): a single member (libdeflate's path), concatenated
 * members as one stream (zlib's path), a zlib stream, the cap at exactly cap bytes and one more,
 * a trailer that lies about the size, truncated and corrupt data with their messages, and the
 * file wrapper strobe_gunzip's -EFBIG.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "strobe/codec.h"

/* gzip (wbits 31) or zlib (wbits 15) of n bytes. */
static uint8_t *deflate_buf(const uint8_t *in, size_t n, int wbits, size_t *outlen)
{
	z_stream z = {0};
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	size_t cap = deflateBound(&z, n) + 64;
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

static uint8_t *pattern(size_t n)
{
	uint8_t *b = malloc(n ? n : 1);
	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)("abcab;cdd\n"[i % 10] + (i / 977) % 3);
	return b;
}

static void test_one_member(void **state)
{
	(void)state;
	size_t n = 100000, gl, ol;
	uint8_t *plain = pattern(n), *gz = deflate_buf(plain, n, 31, &gl), *out;
	assert_int_equal(strobe_gunzip_capped(gz, gl, n, &out, &ol, "x", NULL), 0);
	assert_int_equal(ol, n);
	assert_memory_equal(out, plain, n);
	assert_int_equal(out[n], 0);
	free(out);
	/* zlib's format too */
	free(gz);
	gz = deflate_buf(plain, n, 15, &gl);
	assert_int_equal(strobe_gunzip_capped(gz, gl, n, &out, &ol, "x", NULL), 0);
	assert_int_equal(ol, n);
	assert_memory_equal(out, plain, n);
	free(out);
	free(gz);
	free(plain);
}

static void test_concatenated_members(void **state)
{
	(void)state;
	size_t n1 = 5000, n2 = 70000, g1, g2, ol;
	uint8_t *a = pattern(n1), *b = pattern(n2);
	memset(b, 'z', 100);
	uint8_t *ga = deflate_buf(a, n1, 31, &g1), *gb = deflate_buf(b, n2, 31, &g2);
	uint8_t *cat = malloc(g1 + g2), *out;
	memcpy(cat, ga, g1);
	memcpy(cat + g1, gb, g2);
	assert_int_equal(strobe_gunzip_capped(cat, g1 + g2, 1 << 20, &out, &ol, NULL, NULL), 0);
	assert_int_equal(ol, n1 + n2);
	assert_memory_equal(out, a, n1);
	assert_memory_equal(out + n1, b, n2);
	free(out);
	/* Two members of one size: the last trailer's ISIZE is the first member's size too, and
	 * must not pass for the whole. */
	memcpy(cat + g1, ga, g1);
	assert_int_equal(strobe_gunzip_capped(cat, 2 * g1, 1 << 20, &out, &ol, NULL, NULL), 0);
	assert_int_equal(ol, 2 * n1);
	assert_memory_equal(out + n1, a, n1);
	free(out);
	memcpy(cat + g1, gb, g2);
	/* the cap counts both members */
	strobe_err err = {{0}};
	assert_int_equal(strobe_gunzip_capped(cat, g1 + g2, n1 + n2 - 1, &out, &ol, "body", &err),
			 -E2BIG);
	assert_null(out);
	assert_non_null(strstr(err.msg, "body: more than"));
	free(cat);
	free(ga);
	free(gb);
	free(a);
	free(b);
}

static void test_cap(void **state)
{
	(void)state;
	size_t n = 300000, gl, ol;
	uint8_t *plain = pattern(n), *gz = deflate_buf(plain, n, 31, &gl), *out;
	strobe_err err = {{0}};
	assert_int_equal(strobe_gunzip_capped(gz, gl, n, &out, &ol, "b", &err), 0);
	free(out);
	assert_int_equal(strobe_gunzip_capped(gz, gl, n - 1, &out, &ol, "b", &err), -E2BIG);
	assert_null(out);
	assert_string_equal(err.msg, "b: more than 299999 bytes after gunzip");
	/* A trailer that claims a small size must not fool the cap (zlib's path decides). */
	gz[gl - 4] = 10;
	gz[gl - 3] = gz[gl - 2] = gz[gl - 1] = 0;
	assert_int_equal(strobe_gunzip_capped(gz, gl, 1000, &out, &ol, "b", &err), -E2BIG);
	/* ... and within the cap zlib's length check finds the lie. */
	assert_int_equal(strobe_gunzip_capped(gz, gl, n, &out, &ol, "b", &err), -EINVAL);
	assert_null(out);
	assert_non_null(strstr(err.msg, "incorrect length check"));
	free(gz);
	free(plain);
}

static void test_truncated_and_corrupt(void **state)
{
	(void)state;
	size_t n = 20000, gl, ol;
	uint8_t *plain = pattern(n), *gz = deflate_buf(plain, n, 31, &gl), *out;
	strobe_err err = {{0}};
	assert_int_equal(strobe_gunzip_capped(gz, gl / 2, n, &out, &ol, NULL, &err), -EINVAL);
	assert_null(out);
	char want[160];
	snprintf(want, sizeof(want),
		 "truncated gzip data (input ends at byte %zu before the end of the compressed "
		 "stream)",
		 gl / 2);
	assert_string_equal(err.msg, want);
	assert_int_equal(strobe_gunzip_capped(gz, 0, n, &out, &ol, "e", &err), -EINVAL);
	assert_int_equal(strncmp(err.msg, "e: truncated gzip data", 22), 0);
	gz[3] = 0xff; /* reserved flag bits */
	assert_int_equal(strobe_gunzip_capped(gz, gl, n, &out, &ol, "c", &err), -EINVAL);
	assert_int_equal(strncmp(err.msg, "c: corrupt gzip data near byte", 30), 0);
	free(gz);
	free(plain);
}

static void test_file_wrapper(void **state)
{
	(void)state;
	size_t gl, ol;
	uint8_t *gz = deflate_buf((const uint8_t *)"a;b 1\n", 6, 31, &gl), *out;
	assert_int_equal(strobe_gunzip(gz, gl, &out, &ol, NULL), 0);
	assert_int_equal(ol, 6);
	assert_string_equal((char *)out, "a;b 1\n");
	free(out);
	free(gz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_member),
		cmocka_unit_test(test_concatenated_members),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_truncated_and_corrupt),
		cmocka_unit_test(test_file_wrapper),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
