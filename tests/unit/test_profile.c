// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the profile model: interning, samples summing by (stack, labels), merging with
 * remapping and type checks, scaling, cloning, default sample type, and the folded codec and
 * call tree built on it.
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
#include "strobe/tree.h"

static strobe_profile *folded(const char *text)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	int r = strobe_folded_decode(text, strlen(text), "t", &p, &err);
	if (r < 0)
		fail_msg("decode failed: %s", err.msg);
	return p;
}

static char *folded_text(strobe_profile *p, int type)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_folded_write(f, p, type, STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	return buf;
}

static void test_itab_dense_ids(void **state)
{
	(void)state;
	strobe_itab t = {0};
	uint32_t id;
	bool added;
	char key[16];
	for (int i = 0; i < 10000; i++) {
		int n = snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(strobe_itab_intern(&t, key, (size_t)n, &id, &added), 0);
		assert_true(added);
		assert_int_equal(id, (uint32_t)i);
	}
	assert_int_equal(strobe_itab_intern(&t, "k4242", 5, &id, &added), 0);
	assert_false(added);
	assert_int_equal(id, 4242);
	assert_int_equal(strobe_itab_find(&t, "k9999", 5), 9999);
	assert_int_equal(strobe_itab_find(&t, "nope", 4), UINT32_MAX);
	size_t len;
	assert_memory_equal(strobe_itab_get(&t, 77, &len), "k77", 3);
	assert_int_equal(len, 3);
	strobe_itab_free(&t);
}

static void test_reserved_zero_ids(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	assert_non_null(p);
	assert_string_equal(strobe_str(p, 0), "");
	assert_int_equal(strobe_str_intern0(p, ""), 0);
	assert_int_equal(strobe_nsamples(p), 0);
	assert_int_equal(strobe_stack_depth(p, 0), 0);
	assert_int_equal(strobe_labelset_intern(p, NULL, 0), 0);
	strobe_profile_free(p);
}

static void test_samples_sum_by_stack_and_labels(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	assert_int_equal(strobe_profile_add_type(p, "cpu", "nanoseconds"), 0);
	uint32_t a = strobe_location_for_name(p, "a", 1), b = strobe_location_for_name(p, "b", 1);
	assert_int_equal(strobe_location_for_name(p, "a", 1), a);
	uint32_t s = strobe_stack_push(p, strobe_stack_push(p, 0, a), b);
	assert_int_equal(strobe_stack_depth(p, s), 2);
	strobe_label l1[2] = {{.key = strobe_str_intern0(p, "k"), .str = strobe_str_intern0(p, "v")},
			      {.key = strobe_str_intern0(p, "bytes"), .num = 64}};
	strobe_label l2[2] = {l1[1], l1[0]}; /* same set, other order */
	uint32_t ls1 = strobe_labelset_intern(p, l1, 2), ls2 = strobe_labelset_intern(p, l2, 2);
	assert_int_equal(ls1, ls2);
	int64_t v[2] = {1, 10000000};
	assert_int_equal(strobe_sample_add(p, s, ls1, v), 0);
	assert_int_equal(strobe_sample_add(p, s, ls2, v), 0);
	assert_int_equal(strobe_sample_add(p, s, 0, v), 0);
	assert_int_equal(strobe_nsamples(p), 2);
	assert_int_equal(strobe_total(p, 0), 3);
	assert_int_equal(strobe_total(p, 1), 30000000);
	assert_int_equal(strobe_type_index(p, "cpu"), 1);
	assert_int_equal(strobe_type_index(p, "0"), 0);
	assert_int_equal(strobe_type_index(p, "wall"), -1);
	assert_int_equal(strobe_default_type_index(p), 1); /* the last, as pprof */
	p->default_type = 0;
	assert_int_equal(strobe_default_type_index(p), 0);
	/* Types are fixed once samples exist. */
	assert_int_equal(strobe_profile_add_type(p, "x", "y"), -EBUSY);
	strobe_profile_free(p);
}

static void test_empty_stack_and_zero_location_are_real(void **state)
{
	(void)state;
	/* Regression (found by fuzz_pprof): an all-zero location or an empty-stack sample must
	 * not collide with the reserved id-0 entries. */
	strobe_profile *p = strobe_profile_new();
	strobe_profile_add_type(p, "samples", "count");
	uint32_t loc = strobe_location_intern(p, 0, 0, NULL, 0, false);
	assert_int_not_equal(loc, 0);
	int64_t v = 3;
	assert_int_equal(strobe_sample_add(p, 0, 0, &v), 0);
	assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, 0, loc), 0, &v), 0);
	assert_int_equal(strobe_nsamples(p), 2);
	assert_int_equal(strobe_total(p, 0), 6);
	strobe_function f = {0};
	assert_int_not_equal(strobe_function_intern(p, &f), 0);
	strobe_profile_free(p);
}

static void test_merge_sums_and_remaps(void **state)
{
	(void)state;
	strobe_profile *a = folded("main;x;y 3\nmain;z 1\n");
	strobe_profile *b = folded("other 5\nmain;z 2\nmain;x;y 1\n");
	assert_int_equal(strobe_profile_merge(a, b, NULL), 0);
	char *t = folded_text(a, 0);
	assert_string_equal(t, "main;x;y 4\nmain;z 3\nother 5\n");
	free(t);
	/* The source is untouched. */
	assert_int_equal(strobe_total(b, 0), 8);
	strobe_profile_free(a);
	strobe_profile_free(b);
}

/* A namer for test_merge_named: names bare addresses in the mapping with build ID "b1d" as two
 * frames (an inlined "inner" in "outer_<address>"), leaves the rest; fails on address 0xdead. */
static int name_b1d(void *ctx, strobe_profile *dst, const strobe_profile *src, uint32_t id,
		    const strobe_location *l, strobe_line *out, uint32_t max)
{
	assert_ptr_equal(strobe_location_get(src, id), l);
	int *calls = ctx;
	(*calls)++;
	assert_true(max >= 2);
	if (l->address == 0xdead)
		return -ENOMEM;
	const strobe_mapping *m = strobe_mapping_get(src, l->mapping);
	if (strcmp(strobe_str(src, m->build_id), "b1d") != 0)
		return 0;
	char outer[32];
	snprintf(outer, sizeof outer, "outer_%llx", (unsigned long long)l->address);
	strobe_function fi = {.name = strobe_str_intern(dst, "inner", 5)};
	strobe_function fo = {.name = strobe_str_intern(dst, outer, strlen(outer))};
	out[0] = (strobe_line){.function = strobe_function_intern(dst, &fi), .line = 7};
	out[1] = (strobe_line){.function = strobe_function_intern(dst, &fo), .line = 3};
	return 2;
}

static void test_merge_named(void **state)
{
	(void)state;
	strobe_profile *src = folded("main 1\n");
	strobe_mapping mb = {.start = 0x1000, .limit = 0x2000, .build_id = strobe_str_intern(src, "b1d", 3),
			     .filename = strobe_str_intern(src, "/bin/x", 6)};
	strobe_mapping mo = {.start = 0x5000, .limit = 0x6000, .build_id = strobe_str_intern(src, "0ther", 5)};
	uint32_t idb = strobe_mapping_intern(src, &mb), ido = strobe_mapping_intern(src, &mo);
	uint32_t lb = strobe_location_intern(src, idb, 0x1234, NULL, 0, false);
	uint32_t lo = strobe_location_intern(src, ido, 0x5678, NULL, 0, false);
	int64_t v = 5;
	uint32_t root = strobe_stack_get(src, 1)->location; /* "main", named by the folded text */
	uint32_t s1 = strobe_stack_push(src, strobe_stack_push(src, 0, root), lb);
	uint32_t s2 = strobe_stack_push(src, strobe_stack_push(src, 0, root), lo);
	assert_int_equal(strobe_sample_add(src, s1, 0, &v), 0);
	assert_int_equal(strobe_sample_add(src, s2, 0, &v), 0);

	strobe_profile *dst = strobe_profile_new();
	int calls = 0;
	assert_int_equal(strobe_profile_merge_named(dst, src, name_b1d, &calls, NULL), 0);
	assert_int_equal(calls, 2); /* the two bare locations; "main" has lines already */
	assert_int_equal(strobe_total(dst, 0), 11);
	char *t = folded_text(dst, 0);
	/* The named one reads as its two frames; the other stays an address; main is untouched. */
	assert_non_null(strstr(t, "main;outer_1234;inner 5\n"));
	assert_non_null(strstr(t, "main;0x5678 5\n"));
	assert_null(strstr(t, "outer_5678"));
	free(t);
	strobe_profile_free(dst);

	/* A namer's error stops the merge with it. */
	uint32_t ld = strobe_location_intern(src, idb, 0xdead, NULL, 0, false);
	assert_int_equal(strobe_sample_add(src, strobe_stack_push(src, 0, ld), 0, &v), 0);
	dst = strobe_profile_new();
	assert_int_equal(strobe_profile_merge_named(dst, src, name_b1d, &calls, NULL), -ENOMEM);
	strobe_profile_free(dst);
	strobe_profile_free(src);
}

static void test_merge_type_mismatch_names_both(void **state)
{
	(void)state;
	strobe_profile *a = folded("a 1\n");
	strobe_profile *b = strobe_profile_new();
	strobe_profile_add_type(b, "alloc_space", "bytes");
	strobe_err err = {{0}};
	assert_int_equal(strobe_profile_merge(a, b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "samples/count"));
	assert_non_null(strstr(err.msg, "alloc_space/bytes"));
	strobe_profile_free(a);
	strobe_profile_free(b);
}

static void test_scale_and_clone(void **state)
{
	(void)state;
	strobe_profile *a = folded("a;b 10\nc 3\n");
	strobe_profile *c = strobe_profile_clone(a);
	strobe_profile_scale(a, 0.5);
	char *t = folded_text(a, 0);
	assert_string_equal(t, "a;b 5\nc 2\n"); /* 1.5 rounds to 2 */
	free(t);
	t = folded_text(c, 0);
	assert_string_equal(t, "a;b 10\nc 3\n");
	free(t);
	strobe_profile_free(a);
	strobe_profile_free(c);
}

static void test_folded_errors(void **state)
{
	(void)state;
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	const char *nocount = "a;b 1\na;b;c\n";
	assert_int_equal(strobe_folded_decode(nocount, strlen(nocount), "x.folded", &p, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "x.folded:2:"));
	assert_null(p);
	assert_int_equal(strobe_folded_decode("", 0, "e", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no stacks"));
	size_t big = 10u << 20;
	char *huge = malloc(big + 8);
	memset(huge, 'f', big);
	memcpy(huge + big, " 1\n", 4);
	assert_int_equal(strobe_folded_decode(huge, big + 3, "h", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "h:1:"));
	assert_non_null(strstr(err.msg, "limit"));
	free(huge);
}

static void test_folded_two_counts_and_comments(void **state)
{
	(void)state;
	strobe_profile *p = folded("# comment\n\na;b 3 5\na;c 2 0\n");
	assert_int_equal(p->ntypes, 2);
	assert_string_equal(strobe_str(p, p->types[0].type), "base");
	assert_int_equal(strobe_total(p, 0), 5);
	assert_int_equal(strobe_total(p, 1), 5);
	char *t = folded_text(p, 1);
	assert_string_equal(t, "a;b 5\n"); /* zero values are left out */
	free(t);
	strobe_profile_free(p);
	/* A frame named like a number, in a one-count file. */
	p = folded("a 1\nb;42 7\n");
	t = folded_text(p, 0);
	assert_string_equal(t, "a 1\nb;42 7\n");
	free(t);
	strobe_profile_free(p);
}

static void test_tree_totals_and_diff_columns(void **state)
{
	(void)state;
	strobe_profile *base = folded("m;a 10\nm;b 10\n");
	strobe_profile *cur = folded("m;a 30\nm;c 10\n");
	strobe_tree *t = strobe_tree_new();
	assert_int_equal(strobe_tree_add(t, cur, 0, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0), 0);
	assert_int_equal(strobe_tree_add(t, base, 0, STROBE_GRAN_FUNCTIONS, 1, 2.0, 0), 0);
	assert_int_equal(strobe_tree_sort(t), 0);
	assert_int_equal(t->nodes[0].total[0], 40);
	assert_int_equal(t->nodes[0].total[1], 40);
	uint32_t m = t->nodes[0].first_child;
	assert_string_equal(strobe_tree_name(t, m), "m");
	const char *want[] = {"a", "b", "c"};
	int64_t newv[] = {30, 0, 10}, basev[] = {20, 20, 0};
	int i = 0;
	for (uint32_t c = t->nodes[m].first_child; c; c = t->nodes[c].next_sibling, i++) {
		assert_string_equal(strobe_tree_name(t, c), want[i]);
		assert_int_equal(t->nodes[c].self[0], newv[i]);
		assert_int_equal(t->nodes[c].self[1], basev[i]);
	}
	assert_int_equal(i, 3);
	strobe_tree_free(t);
	strobe_profile_free(base);
	strobe_profile_free(cur);
}

static void test_gunzip_truncated_and_detect(void **state)
{
	(void)state;
	const char *text = "main;f 1\n";
	uint8_t *gz, *out;
	size_t gzlen, outlen;
	assert_int_equal(strobe_gzip((const uint8_t *)text, strlen(text), &gz, &gzlen), 0);
	assert_int_equal(strobe_gunzip(gz, gzlen, &out, &outlen, NULL), 0);
	assert_int_equal(outlen, strlen(text));
	assert_memory_equal(out, text, outlen);
	free(out);
	strobe_err err = {{0}};
	assert_int_equal(strobe_gunzip(gz, gzlen - 6, &out, &outlen, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "truncated"));
	free(gz);
	assert_int_equal(strobe_detect((const uint8_t *)text, strlen(text)), STROBE_FMT_FOLDED);
	const char *perf = "prog 12 1.0: cpu-clock:\n\t4005d0 main+0x10 (/bin/prog)\n\n";
	assert_int_equal(strobe_detect((const uint8_t *)perf, strlen(perf)), STROBE_FMT_PERF_SCRIPT);
	const uint8_t pb[] = {0x0a, 0x04, 0x08, 0x01, 0x10, 0x02};
	assert_int_equal(strobe_detect(pb, sizeof(pb)), STROBE_FMT_PPROF);
	assert_int_equal(strobe_detect((const uint8_t *)"  \n", 3), STROBE_FMT_UNKNOWN);
}

/* strobe_gzip_level: each level round-trips, the levels differ (the agent pushes at 1, the
 * default is 6), and a level libdeflate does not have is refused. */
static void test_gzip_levels(void **state)
{
	(void)state;
	static const char *const words[] = {"main", "burn_60", "libc.so.6", "0x7f3a", "[kernel]",
					    "std::vector", "malloc", "pthread_mutex_lock"};
	size_t n = 64 << 10, len = 0;
	char *in = malloc(n);
	assert_non_null(in);
	uint32_t x = 12345;
	while (len + 32 < n) { /* compressible, but not a single repeat */
		x = x * 1103515245u + 12345u;
		len += (size_t)snprintf(in + len, n - len, "%s;%s %u\n", words[(x >> 8) % 8],
					words[(x >> 16) % 8], (x >> 20) % 1000);
	}
	size_t size[13] = {0};
	static const int levels[] = {1, 6, 12};
	for (size_t i = 0; i < 3; i++) {
		uint8_t *gz, *out;
		size_t gzlen, outlen;
		assert_int_equal(strobe_gzip_level((const uint8_t *)in, len, levels[i], &gz, &gzlen), 0);
		assert_int_equal(strobe_gunzip(gz, gzlen, &out, &outlen, NULL), 0);
		assert_int_equal(outlen, len);
		assert_memory_equal(out, in, len);
		size[levels[i]] = gzlen;
		free(out);
		free(gz);
	}
	assert_true(size[12] < size[1]);
	uint8_t *gz;
	size_t gzlen;
	assert_int_equal(strobe_gzip((const uint8_t *)in, len, &gz, &gzlen), 0);
	assert_int_equal(gzlen, size[6]);
	free(gz);
	assert_int_equal(strobe_gzip_level((const uint8_t *)in, len, 0, &gz, &gzlen), -EINVAL);
	assert_int_equal(strobe_gzip_level((const uint8_t *)in, len, 13, &gz, &gzlen), -EINVAL);
	free(in);
}

/* strobe_pprof_encode_level: level 0 is the serialized protobuf (no gzip header), a level
 * from 1 gzip; both decode to the same profile. */
static void test_pprof_encode_levels(void **state)
{
	(void)state;
	strobe_profile *p = folded("main;a;b 3\nmain;c 5\n");
	static const int levels[] = {0, 1, 12};
	for (size_t i = 0; i < 3; i++) {
		uint8_t *b;
		size_t len;
		assert_int_equal(strobe_pprof_encode_level(p, levels[i], &b, &len), 0);
		assert_true(len > 2);
		bool gz = b[0] == 0x1f && b[1] == 0x8b;
		assert_int_equal(gz, levels[i] != 0);
		strobe_profile *q = NULL;
		strobe_err err = {{0}};
		if (gz) { /* (the decoders take what gunzip gives) */
			uint8_t *raw;
			assert_int_equal(strobe_gunzip(b, len, &raw, &len, NULL), 0);
			free(b);
			b = raw;
		}
		if (strobe_decode_profile(b, len, "t", &q, &err) < 0)
			fail_msg("level %d: %s", levels[i], err.msg);
		assert_int_equal(strobe_total(q, 0), 8);
		assert_int_equal(strobe_nsamples(q), 2);
		strobe_profile_free(q);
		free(b);
	}
	uint8_t *b;
	size_t len;
	assert_int_equal(strobe_pprof_encode_level(p, 13, &b, &len), -EINVAL);
	strobe_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_encode_levels),
		cmocka_unit_test(test_gzip_levels),
		cmocka_unit_test(test_itab_dense_ids),
		cmocka_unit_test(test_reserved_zero_ids),
		cmocka_unit_test(test_samples_sum_by_stack_and_labels),
		cmocka_unit_test(test_empty_stack_and_zero_location_are_real),
		cmocka_unit_test(test_merge_sums_and_remaps),
		cmocka_unit_test(test_merge_named),
		cmocka_unit_test(test_merge_type_mismatch_names_both),
		cmocka_unit_test(test_scale_and_clone),
		cmocka_unit_test(test_folded_errors),
		cmocka_unit_test(test_folded_two_counts_and_comments),
		cmocka_unit_test(test_tree_totals_and_diff_columns),
		cmocka_unit_test(test_gunzip_truncated_and_detect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
