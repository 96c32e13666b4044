// SPDX-License-Identifier: Apache-2.0
/*
 * The server's naming cache (server/name_cache.c): frames round-trip through the stored blob
 * (inlined frames, absent strings, system names), the table keeps at most max_rows rows (the
 * oldest dropped), forgetting a build ID drops only that tenant's rows of it, a damaged blob
 * reads as a miss, and a damaged file is started again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../server/server_impl.h"

static char *tmpdir(void)
{
	char tpl[] = "/tmp/strobe-namecache-XXXXXX";
	char *d = mkdtemp(tpl);
	assert_non_null(d);
	char *sub = NULL;
	assert_true(asprintf(&sub, "%s/debuginfo", d) > 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	free(sub);
	return strdup(d);
}

static void rmtree(const char *d)
{
	char *cmd = NULL;
	assert_true(asprintf(&cmd, "rm -rf '%s'", d) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static char buf[1 << 16];

static void put_one(srv_name_cache *c, const char *tenant, const char *bid, uint64_t addr,
		    const strobe_sym_frame *fr, int n)
{
	srv_name_row row = {.build_id = bid, .addr = addr};
	row.blob = srv_name_cache_encode(fr, n, &row.len);
	assert_non_null(row.blob);
	assert_int_equal(srv_name_cache_put(c, tenant, &row, 1), 0);
	free(row.blob);
}

static void roundtrip(void **state)
{
	(void)state;
	char *d = tmpdir();
	srv_name_cache *c = srv_name_cache_open(d, 100);
	assert_non_null(c);
	static const char fn[] = "leaf_inl";
	strobe_sym_frame in[2] = {
		{.function = fn, .system_name = fn, .file = "/src/a.c", .line = 4, .column = 9,
		 .start_line = 2},
		{.function = "ns::burn", .system_name = "_ZN2ns4burnEv", .file = NULL, .line = 10},
	};
	put_one(c, "t", "ab01", 0x1190, in, 2);
	put_one(c, "t", "ab01", 0x1200, in, 0); /* found the object, nothing there */
	strobe_sym_frame out[8];
	assert_int_equal(srv_name_cache_get(c, "t", "ab01", 0x1190, out, 8, buf, sizeof buf), 2);
	assert_string_equal(out[0].function, "leaf_inl");
	assert_ptr_equal(out[0].system_name, out[0].function); /* alike: one pointer, as given */
	assert_string_equal(out[0].file, "/src/a.c");
	assert_int_equal(out[0].line, 4);
	assert_int_equal(out[0].column, 9);
	assert_int_equal(out[0].start_line, 2);
	assert_string_equal(out[1].function, "ns::burn");
	assert_string_equal(out[1].system_name, "_ZN2ns4burnEv");
	assert_null(out[1].file);
	assert_int_equal(out[1].line, 10);
	assert_int_equal(srv_name_cache_get(c, "t", "ab01", 0x1200, out, 8, buf, sizeof buf), 0);
	assert_int_equal(srv_name_cache_get(c, "t", "ab01", 0x1191, out, 8, buf, sizeof buf), -ENOENT);
	assert_int_equal(srv_name_cache_get(c, "u", "ab01", 0x1190, out, 8, buf, sizeof buf), -ENOENT);
	assert_int_equal(srv_name_cache_get(c, "t", "ab01", 0x1190, out, 1, buf, sizeof buf), -ENOENT); /* no room */
	assert_true(srv_name_cache_has(c, "t", "ab01"));
	assert_false(srv_name_cache_has(c, "t", "ab02"));
	srv_name_cache_close(c);
	/* Kept across a reopen (a restart). */
	c = srv_name_cache_open(d, 100);
	assert_int_equal(srv_name_cache_get(c, "t", "ab01", 0x1190, out, 8, buf, sizeof buf), 2);
	srv_name_cache_close(c);
	rmtree(d);
	free(d);
}

static void bounded(void **state)
{
	(void)state;
	char *d = tmpdir();
	srv_name_cache *c = srv_name_cache_open(d, 3);
	assert_non_null(c);
	strobe_sym_frame f = {.function = "f", .system_name = "f"};
	for (uint64_t a = 1; a <= 5; a++)
		put_one(c, "t", "cd", a, &f, 1);
	strobe_sym_frame out[4];
	for (uint64_t a = 1; a <= 5; a++)
		assert_int_equal(srv_name_cache_get(c, "t", "cd", a, out, 4, buf, sizeof buf), a <= 2 ? -ENOENT : 1);
	srv_name_cache_stats st;
	srv_name_cache_counts(c, &st);
	assert_int_equal(st.stored, 5);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.misses, 2);
	srv_name_cache_close(c);
	rmtree(d);
	free(d);
}

static void forget(void **state)
{
	(void)state;
	char *d = tmpdir();
	srv_name_cache *c = srv_name_cache_open(d, 100);
	strobe_sym_frame f = {.function = "f", .system_name = "f"};
	put_one(c, "t", "aa", 1, &f, 1);
	put_one(c, "t", "bb", 1, &f, 1);
	put_one(c, "u", "aa", 1, &f, 1);
	assert_int_equal(srv_name_cache_forget(c, "t", "aa"), 0);
	strobe_sym_frame out[4];
	assert_int_equal(srv_name_cache_get(c, "t", "aa", 1, out, 4, buf, sizeof buf), -ENOENT);
	assert_int_equal(srv_name_cache_get(c, "t", "bb", 1, out, 4, buf, sizeof buf), 1);
	assert_int_equal(srv_name_cache_get(c, "u", "aa", 1, out, 4, buf, sizeof buf), 1);
	srv_name_cache_close(c);
	rmtree(d);
	free(d);
}

static void damaged(void **state)
{
	(void)state;
	strobe_sym_frame f = {.function = "function", .system_name = "function", .file = "f.c"};
	size_t len;
	unsigned char *b = srv_name_cache_encode(&f, 1, &len);
	assert_non_null(b);
	strobe_sym_frame out[4];
	assert_int_equal(srv_name_cache_decode(b, len, buf, out, 4), 1);
	for (size_t cut = 0; cut < len; cut++) /* every truncation is refused */
		assert_int_equal(srv_name_cache_decode(b, cut, buf, out, 4), -1);
	b[2 + 24] = 0xfe; /* the function name's length past the end */
	assert_int_equal(srv_name_cache_decode(b, len, buf, out, 4), -1);
	b[0] = 9; /* another version */
	assert_int_equal(srv_name_cache_decode(b, len, buf, out, 4), -1);
	free(b);
	/* A file that is not a database: started again, empty. */
	char *d = tmpdir();
	char *p = NULL;
	assert_true(asprintf(&p, "%s/debuginfo/names.sqlite", d) > 0);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fputs("this is not a SQLite database, but long enough to have a header..................."
	      "..................................................................................",
	      fp);
	fclose(fp);
	srv_name_cache *c = srv_name_cache_open(d, 10);
	assert_non_null(c);
	put_one(c, "t", "aa", 1, &f, 1);
	assert_int_equal(srv_name_cache_get(c, "t", "aa", 1, out, 4, buf, sizeof buf), 1);
	srv_name_cache_close(c);
	free(p);
	rmtree(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip),
		cmocka_unit_test(bounded),
		cmocka_unit_test(forget),
		cmocka_unit_test(damaged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
