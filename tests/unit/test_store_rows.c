// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of store/rows.c's two small codecs, the ones its readers trust with bytes read back
 * from the database (a file that may be damaged): a minute's list of points (store_pts_entry /
 * store_pts_next: offset, count and a zigzag total per point, appended by SQLite) round-trips
 * every value, negative and extreme totals included, and a truncated or over-long entry is -EIO
 * rather than a wrong value; a point's sample labels (store_slabels_decode) come back as written
 * and a list without its terminators, or with more pairs than the caller has room for, is -EIO.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../store/store_impl.h"

static void test_pts_roundtrip(void **state)
{
	(void)state;
	static const int64_t v[][3] = {
		{0, 1, 0},
		{59999999999LL, 3, -1},
		{1, 127, 128},
		{12345, 1LL << 40, -(1LL << 50)},
		{0, INT64_MAX, INT64_MAX},
		{0, 0, INT64_MIN},
	};
	const size_t nv = sizeof(v) / sizeof(v[0]);
	uint8_t list[sizeof(v) / sizeof(v[0]) * STORE_PTS_ENTRY_MAX];
	size_t len = 0;
	for (size_t i = 0; i < nv; i++) {
		size_t k = store_pts_entry(list + len, v[i][0], v[i][1], v[i][2]);
		assert_true(k >= 3 && k <= STORE_PTS_ENTRY_MAX);
		len += k;
	}
	size_t pos = 0;
	for (size_t i = 0; i < nv; i++) {
		int64_t off, n, total;
		assert_int_equal(store_pts_next(list, len, &pos, &off, &n, &total), 0);
		assert_true(off == v[i][0]);
		assert_true(n == v[i][1]);
		assert_true(total == v[i][2]);
	}
	assert_int_equal(pos, len);
	/* The bytes are protobuf varints: a total of -1 is zigzag 1, one byte. */
	uint8_t e[STORE_PTS_ENTRY_MAX];
	assert_int_equal(store_pts_entry(e, 300, 1, -1), 4);
	static const uint8_t want[] = {0xac, 0x02, 0x01, 0x01};
	assert_memory_equal(e, want, sizeof(want));
}

static void test_pts_malformed(void **state)
{
	(void)state;
	uint8_t e[STORE_PTS_ENTRY_MAX];
	size_t k = store_pts_entry(e, 1000, 2, 5000);
	int64_t off, n, total;
	/* Every cut short of the whole entry is refused, whatever was read before the cut. */
	for (size_t cut = 0; cut < k; cut++) {
		size_t pos = 0;
		assert_int_equal(store_pts_next(e, cut, &pos, &off, &n, &total), -EIO);
	}
	/* A position past the end (a reader's bug or a corrupt length) is refused, not read. */
	size_t pos = k + 1;
	assert_int_equal(store_pts_next(e, k, &pos, &off, &n, &total), -EIO);
	/* Eleven continuation bytes: no varint is that long. */
	uint8_t bad[12];
	memset(bad, 0xff, sizeof(bad));
	pos = 0;
	assert_int_equal(store_pts_next(bad, sizeof(bad), &pos, &off, &n, &total), -EIO);
	/* A tenth byte above 1 overflows 64 bits: refused, not wrapped into a wrong offset. */
	uint8_t over[12] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x01, 0x01};
	pos = 0;
	assert_int_equal(store_pts_next(over, sizeof(over), &pos, &off, &n, &total), -EIO);
}

static void test_slabels(void **state)
{
	(void)state;
	static const char in[] = "pid\0" "42\0" "thread\0" "main\0";
	strobe_labelpair l[4];
	assert_int_equal(store_slabels_decode(in, sizeof(in) - 1, l, 4), 2);
	assert_string_equal(l[0].name, "pid");
	assert_string_equal(l[0].value, "42");
	assert_string_equal(l[1].name, "thread");
	assert_string_equal(l[1].value, "main");
	assert_int_equal(store_slabels_decode(in, 0, l, 4), 0);
	/* More pairs than room: refused, nothing written past l[cap - 1]. */
	assert_int_equal(store_slabels_decode(in, sizeof(in) - 1, l, 1), -EIO);
	/* A value without its NUL, a name without a value. */
	assert_int_equal(store_slabels_decode(in, sizeof(in) - 2, l, 4), -EIO);
	assert_int_equal(store_slabels_decode(in, 4, l, 4), -EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pts_roundtrip),
		cmocka_unit_test(test_pts_malformed),
		cmocka_unit_test(test_slabels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
