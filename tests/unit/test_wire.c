// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the protobuf wire reader (include/strobe/wire.h): varints round-trip at every
 * length, a value past 64 bits and a varint cut short are refused, keys and lengths longer than
 * 5 bytes are refused (protobuf-c's rule, which the hand-written readers must share), fields of
 * each wire type are read or skipped, a length past the window is refused, and zigzag coding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/wire.h"

static void test_varint_roundtrip(void **state)
{
	(void)state;
	const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)1 << 63,
				 UINT64_MAX};
	for (size_t i = 0; i < sizeof(vals) / sizeof(*vals); i++) {
		uint8_t b[16];
		uint8_t *e = strobe_wire_put_varint(b, vals[i]);
		assert_int_equal((size_t)(e - b), strobe_wire_varint_size(vals[i]));
		strobe_wire r = {b, e};
		uint64_t v = 0;
		assert_true(strobe_wire_varint(&r, &v));
		assert_true(v == vals[i]);
		assert_ptr_equal(r.p, e);
		/* one byte short: refused, and the reader has not moved */
		strobe_wire s = {b, e - 1};
		assert_false(strobe_wire_varint(&s, &v));
		assert_ptr_equal(s.p, b);
	}
	assert_int_equal(strobe_wire_varint_size(UINT64_MAX), 10);
}

static void test_varint_overflow(void **state)
{
	(void)state;
	uint8_t b[11];
	memset(b, 0xff, 9);
	b[9] = 0x01; /* UINT64_MAX */
	strobe_wire r = {b, b + 10};
	uint64_t v;
	assert_true(strobe_wire_varint(&r, &v));
	b[9] = 0x02; /* 2^64: does not fit */
	r = (strobe_wire){b, b + 10};
	assert_false(strobe_wire_varint(&r, &v));
	b[9] = 0x81; /* an 11th byte */
	b[10] = 0x00;
	r = (strobe_wire){b, b + 11};
	assert_false(strobe_wire_varint(&r, &v));
}

static void test_key_five_bytes(void **state)
{
	(void)state;
	/* A length of 0 written in 6 bytes: a valid varint, not a valid protobuf-c length. */
	const uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
	strobe_wire r = {six, six + 6}, sub;
	uint64_t v;
	assert_true(strobe_wire_varint(&r, &v));
	assert_true(v == 0);
	r = (strobe_wire){six, six + 6};
	assert_false(strobe_wire_key(&r, &v));
	assert_false(strobe_wire_bytes(&r, &sub));
	const uint8_t five[] = {0x80, 0x80, 0x80, 0x80, 0x00};
	r = (strobe_wire){five, five + 5};
	assert_true(strobe_wire_key(&r, &v));
	assert_true(v == 0);
}

static void test_fields(void **state)
{
	(void)state;
	/* 1: varint 150; 2: fixed64; 3: bytes "abc"; 4: fixed32; 5: varint 1 */
	const uint8_t m[] = {0x08, 0x96, 0x01, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 3, 'a', 'b', 'c',
			     0x25, 1, 2, 3, 4, 0x28, 0x01};
	strobe_wire r = {m, m + sizeof(m)}, sub = {0};
	uint32_t num, wt;
	uint64_t v;
	assert_true(strobe_wire_field(&r, &num, &wt, &v, &sub));
	assert_int_equal(num, 1);
	assert_int_equal(wt, STROBE_WIRE_VARINT);
	assert_int_equal(v, 150);
	assert_true(strobe_wire_field(&r, &num, &wt, &v, &sub));
	assert_int_equal(num, 2);
	assert_int_equal(wt, STROBE_WIRE_I64);
	assert_true(strobe_wire_field(&r, &num, &wt, &v, &sub));
	assert_int_equal(num, 3);
	assert_int_equal(wt, STROBE_WIRE_LEN);
	assert_int_equal(v, 3);
	assert_memory_equal(sub.p, "abc", 3);
	assert_ptr_equal(sub.end, sub.p + 3);
	assert_true(strobe_wire_field(&r, &num, &wt, &v, &sub));
	assert_int_equal(num, 4);
	assert_int_equal(wt, STROBE_WIRE_I32);
	assert_true(strobe_wire_field(&r, &num, &wt, &v, &sub));
	assert_int_equal(num, 5);
	assert_int_equal(v, 1);
	assert_ptr_equal(r.p, r.end);
	/* a length past the window, a fixed64 cut short, a group */
	const uint8_t bad1[] = {0x1a, 4, 'a', 'b', 'c'}, bad2[] = {0x11, 1, 2, 3}, bad3[] = {0x0b};
	r = (strobe_wire){bad1, bad1 + sizeof(bad1)};
	assert_false(strobe_wire_field(&r, &num, &wt, &v, &sub));
	r = (strobe_wire){bad2, bad2 + sizeof(bad2)};
	assert_false(strobe_wire_field(&r, &num, &wt, &v, &sub));
	r = (strobe_wire){bad3, bad3 + sizeof(bad3)};
	assert_false(strobe_wire_field(&r, &num, &wt, &v, &sub));
}

static void test_zigzag(void **state)
{
	(void)state;
	assert_true(strobe_wire_zigzag(0) == 0);
	assert_true(strobe_wire_zigzag(-1) == 1);
	assert_true(strobe_wire_zigzag(1) == 2);
	assert_true(strobe_wire_zigzag(INT64_MIN) == UINT64_MAX);
	const int64_t vals[] = {0, -1, 1, 12345, -98765, INT64_MAX, INT64_MIN};
	for (size_t i = 0; i < sizeof(vals) / sizeof(*vals); i++)
		assert_true(strobe_wire_unzigzag(strobe_wire_zigzag(vals[i])) == vals[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint_roundtrip), cmocka_unit_test(test_varint_overflow),
		cmocka_unit_test(test_key_five_bytes),	 cmocka_unit_test(test_fields),
		cmocka_unit_test(test_zigzag),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
