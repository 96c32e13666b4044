// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the PGO writers (lib/pgo.c, lib/autofdo.c, lib/pgo_go.c, lib/bolt_fdata.c) on a
 * profile built by hand, so that every count in the expected text is known: line offsets from
 * start lines, inlined callees nested, call targets at caller lines, linkage names, the refusals
 * (empty, not CPU, unsymbolized, no start lines), Go's trimming and BOLT's per-address sums.
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
#include "strobe/pgo.h"
#include "strobe/pprof_view.h"

static uint32_t fn(strobe_profile *p, const char *name, const char *sys, int64_t start)
{
	strobe_function f = {.name = strobe_str_intern0(p, name),
			     .system_name = strobe_str_intern0(p, sys ? sys : name),
			     .filename = strobe_str_intern0(p, "x.cc"),
			     .start_line = start};
	return strobe_function_intern(p, &f);
}

/* main (start 100) calls _Z4workv (start 10) at line 105; work's line 12 inlines helper (start
 * 50) whose line 52 is the leaf of 7 samples; 3 samples on work's own line 15; 2 samples in main
 * at line 0 (no line: not counted at a line). */
static strobe_profile *sample_profile(const char *type, const char *unit, bool lines)
{
	strobe_profile *p = strobe_profile_new();
	assert_non_null(p);
	assert_int_equal(strobe_profile_add_type(p, type, unit), 0);
	uint32_t m = strobe_mapping_intern(p, &(strobe_mapping){.start = 0x400000, .limit = 0x500000,
								.filename = strobe_str_intern0(p, "/bin/x")});
	uint32_t fmain = fn(p, "main", NULL, lines ? 100 : 0);
	uint32_t fwork = fn(p, "work()", "_Z4workv", lines ? 10 : 0);
	uint32_t fhelp = fn(p, "helper", NULL, lines ? 50 : 0);
	strobe_line lmain = {.function = fmain, .line = lines ? 105 : 0};
	strobe_line linl[2] = {{.function = fhelp, .line = lines ? 52 : 0},
			       {.function = fwork, .line = lines ? 12 : 0}};
	strobe_line lwork = {.function = fwork, .line = lines ? 15 : 0};
	strobe_line lmain0 = {.function = fmain, .line = 0};
	uint32_t caller = strobe_location_intern(p, m, 0x401005, &lmain, 1, false);
	uint32_t leaf1 = strobe_location_intern(p, m, 0x402010, linl, 2, false);
	uint32_t leaf2 = strobe_location_intern(p, m, 0x402020, &lwork, 1, false);
	uint32_t leaf3 = strobe_location_intern(p, m, 0x401002, &lmain0, 1, false);
	uint32_t sm = strobe_stack_push(p, 0, caller);
	int64_t v7 = 7, v3 = 3, v2 = 2;
	assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, sm, leaf1), 0, &v7), 0);
	assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, sm, leaf2), 0, &v3), 0);
	assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, 0, leaf3), 0, &v2), 0);
	return p;
}

/* Writes p's AutoFDO text for sample type t, checks it is want, and gives back the stats. */
static strobe_pgo_stats expect_autofdo(const strobe_profile *p, int t, const char *want)
{
	strobe_err err = {{0}};
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	strobe_pgo_stats st;
	assert_int_equal(strobe_autofdo_write(p, t, &b, &st, &err), 0);
	assert_string_equal(b.p, want);
	strobe_buf_free(&b);
	return st;
}

static void autofdo_text(void **state)
{
	(void)state;
	strobe_profile *p = sample_profile("samples", "count", true);
	strobe_err err = {{0}};
	int t = strobe_pgo_type(p, &err);
	assert_int_equal(t, 0);
	/* main: 10 at its call line 5 (target _Z4workv), main's line-0 samples nowhere;
	 * _Z4workv: 3 at offset 5, helper inlined at offset 2 with 7 at offset 2; head = 10 */
	strobe_pgo_stats st = expect_autofdo(p, t, "_Z4workv:10:10\n"
						   " 2: helper:7\n"
						   "  2: 7\n"
						   " 5: 3\n"
						   "main:10:0\n"
						   " 5: 10 _Z4workv:10\n");
	assert_int_equal(st.total, 12);
	assert_int_equal(st.used, 10);
	assert_int_equal(st.records, 2);
	strobe_profile_free(p);
}

/* LLVM's prefix encoding, decoded: the vectors are what LLVM 14's DILocation::encodeDiscriminator
 * (base, duplication factor, copy id) returned, and getBaseDiscriminatorFromDiscriminator gave
 * back the base of each. */
static void base_discriminator(void **state)
{
	(void)state;
	assert_int_equal(strobe_autofdo_base_discriminator(0), 0);
	assert_int_equal(strobe_autofdo_base_discriminator(2), 1);       /* base 1 */
	assert_int_equal(strobe_autofdo_base_discriminator(62), 31);     /* base 31: 5 bits */
	assert_int_equal(strobe_autofdo_base_discriminator(192), 32);    /* base 32: 12 bits */
	assert_int_equal(strobe_autofdo_base_discriminator(16382), 4095); /* the largest base */
	assert_int_equal(strobe_autofdo_base_discriminator(1026), 1);    /* base 1, factor 4 */
	assert_int_equal(strobe_autofdo_base_discriminator(17), 0);      /* base 0, factor 4 */
	assert_int_equal(strobe_autofdo_base_discriminator(98826), 5);   /* base 5, factor 2, copy 3 */
}

/* Discriminators: work() (start 10) has two blocks on line 15, discriminators 0 and 2 (LLVM's
 * encoding of base 1) with 4 and 3 samples, and one with factor 4 on top of base 1 (1026), 5
 * samples, which LLVM's loader looks up at 5.1 too; helper is inlined at line 12 from a call
 * whose discriminator is 4 (base 2). The line-0 sample counts nowhere but in the stats. */
static void autofdo_discriminators(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	assert_non_null(p);
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	uint32_t m = strobe_mapping_intern(p, &(strobe_mapping){.start = 0x400000, .limit = 0x500000,
								.filename = strobe_str_intern0(p, "/bin/x")});
	uint32_t fwork = fn(p, "work()", "_Z4workv", 10);
	uint32_t fhelp = fn(p, "helper", NULL, 50);
	strobe_line a = {.function = fwork, .line = 15};
	strobe_line b = {.function = fwork, .line = 15, .discriminator = 2};
	strobe_line c = {.function = fwork, .line = 15, .discriminator = 1026};
	strobe_line inl[2] = {{.function = fhelp, .line = 52, .discriminator = 0},
			      {.function = fwork, .line = 12, .discriminator = 4}};
	strobe_line z = {.function = fwork, .line = 0, .discriminator = 6};
	struct { strobe_line *l; uint32_t n; uint64_t addr; int64_t v; } s[] = {
		{&a, 1, 0x401000, 4}, {&b, 1, 0x401010, 3}, {&c, 1, 0x401020, 5},
		{inl, 2, 0x401030, 7}, {&z, 1, 0x401040, 1}};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		uint32_t l = strobe_location_intern(p, m, s[i].addr, s[i].l, s[i].n, false);
		assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, 0, l), 0, &s[i].v), 0);
	}
	strobe_pgo_stats st = expect_autofdo(p, 0, "_Z4workv:19:0\n"
						   " 2.2: helper:7\n"
						   "  2: 7\n"
						   " 5: 4\n"
						   " 5.1: 8\n");
	assert_int_equal(st.total, 20);
	assert_int_equal(st.used, 19);
	assert_int_equal(st.line0, 1);
	assert_int_equal(st.discriminated, 8);
	strobe_profile_free(p);
}

/* The discriminator survives pprof (strobe's Line field 100): the encoder writes it, and the
 * decoder, the view's own reader and protobuf-c's unpacking all read it back. */
static void pprof_discriminator(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	uint32_t m = strobe_mapping_intern(p, &(strobe_mapping){.start = 0x400000, .limit = 0x500000});
	strobe_line ln[2] = {{.function = fn(p, "helper", NULL, 50), .line = 52, .discriminator = 98826},
			     {.function = fn(p, "work()", "_Z4workv", 10), .line = 12, .discriminator = 4}};
	uint32_t l = strobe_location_intern(p, m, 0x401030, ln, 2, false);
	int64_t v = 3;
	assert_int_equal(strobe_sample_add(p, strobe_stack_push(p, 0, l), 0, &v), 0);
	uint8_t *gz = NULL, *raw = NULL;
	size_t gzlen = 0, rawlen = 0;
	assert_int_equal(strobe_pprof_encode(p, &gz, &gzlen), 0);
	strobe_err err = {{0}};
	assert_int_equal(strobe_gunzip(gz, gzlen, &raw, &rawlen, &err), 0);
	strobe_profile *q = NULL;
	assert_int_equal(strobe_pprof_decode(raw, rawlen, "x", &q, &err), 0);
	const strobe_location *lq = strobe_location_get(q, 1);
	assert_int_equal(lq->nline, 2);
	assert_int_equal(lq->line[0].discriminator, 98826);
	assert_int_equal(lq->line[1].discriminator, 4);
	for (int pbc = 0; pbc < 2; pbc++) {
		strobe_pprof_view *vw =
			(pbc ? strobe_pprof_view_open_pbc : strobe_pprof_view_open)(raw, rawlen);
		assert_non_null(vw);
		assert_int_equal(vw->nloc, 1);
		assert_int_equal(vw->lines[0].discriminator, 98826);
		assert_int_equal(vw->lines[1].discriminator, 4);
		strobe_pprof_view_free(vw);
	}
	free(gz);
	free(raw);
	strobe_profile_free(q);
	strobe_profile_free(p);
}

static void refusals(void **state)
{
	(void)state;
	strobe_err err = {{0}};
	/* not CPU */
	strobe_profile *p = sample_profile("alloc_space", "bytes", true);
	assert_int_equal(strobe_pgo_type(p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "alloc_space/bytes"));
	strobe_profile_free(p);
	/* empty */
	p = strobe_profile_new();
	strobe_profile_add_type(p, "cpu", "nanoseconds");
	assert_int_equal(strobe_pgo_type(p, &err), -ENODATA);
	assert_non_null(strstr(err.msg, "no samples"));
	strobe_profile_free(p);
	/* unsymbolized: a bare address */
	p = strobe_profile_new();
	strobe_profile_add_type(p, "samples", "count");
	uint32_t m = strobe_mapping_intern(p, &(strobe_mapping){.start = 1, .limit = 100});
	uint32_t l = strobe_location_intern(p, m, 5, NULL, 0, false);
	int64_t v = 4;
	strobe_sample_add(p, strobe_stack_push(p, 0, l), 0, &v);
	assert_int_equal(strobe_pgo_type(p, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "symbolized"));
	strobe_profile_free(p);
	/* named but no lines or start lines: AutoFDO and Go refuse, saying what is missing */
	p = sample_profile("samples", "count", false);
	assert_int_equal(strobe_pgo_type(p, &err), 0);
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	assert_int_equal(strobe_autofdo_write(p, 0, &b, NULL, &err), -ENODATA);
	assert_non_null(strstr(err.msg, "start line"));
	assert_int_equal(strobe_pgo_go_write(p, 0, NULL, &b, NULL, &err), -ENODATA);
	assert_non_null(strstr(err.msg, "start_line"));
	assert_int_equal(b.len, 0);
	strobe_buf_free(&b);
	strobe_profile_free(p);
}

static void go_profile(void **state)
{
	(void)state;
	strobe_profile *p = sample_profile("cpu", "nanoseconds", true);
	strobe_err err = {{0}};
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	strobe_pgo_stats st;
	/* keep 2 frames: the inlined pair stays whole (one location), main is cut off */
	strobe_pgo_go_opts o = {.keep_frames = 2, .keep_share = 1};
	assert_int_equal(strobe_pgo_go_write(p, 0, &o, &b, &st, &err), 0);
	uint8_t *raw;
	size_t rawlen;
	assert_int_equal(strobe_gunzip((uint8_t *)b.p, b.len, &raw, &rawlen, &err), 0);
	strobe_profile *q;
	assert_int_equal(strobe_pprof_decode(raw, rawlen, "go", &q, &err), 0);
	assert_int_equal(q->ntypes, 1);
	assert_string_equal(strobe_str(q, q->types[0].type), "cpu");
	assert_int_equal(strobe_nsamples(q), 2); /* the line-0 leaf sample is dropped */
	for (uint32_t s = 1; s <= strobe_nsamples(q); s++) {
		const strobe_stack_node *n = strobe_stack_get(q, strobe_sample(q, s)->stack);
		const strobe_location *l = strobe_location_get(q, n->location);
		assert_true(l->nline >= 1);
		for (uint32_t i = 0; i < l->nline; i++)
			assert_true(strobe_function_get(q, l->line[i].function)->start_line > 0);
		/* 2 frames kept: the [helper, work] location alone, or work then main */
		assert_int_equal(strobe_stack_depth(q, strobe_sample(q, s)->stack),
				 l->nline == 2 ? 1 : 2);
	}
	assert_int_equal(st.total, 12);
	assert_int_equal(st.used, 10);
	free(raw);
	strobe_profile_free(q);
	strobe_buf_free(&b);
	strobe_profile_free(p);
}

static int fake_resolve(void *ctx, const strobe_profile *p, const strobe_location *loc,
			const char **sym, uint64_t *off)
{
	(void)ctx;
	(void)p;
	if (loc->address < 0x402000) {
		*sym = "main";
		*off = loc->address - 0x401000;
		return 1;
	}
	*sym = "_Z4workv/1";
	*off = loc->address - 0x402000;
	return 1;
}

static void bolt_fdata(void **state)
{
	(void)state;
	strobe_profile *p = sample_profile("samples", "count", true);
	strobe_err err = {{0}};
	strobe_buf b;
	strobe_buf_init(&b, 1 << 20);
	assert_int_equal(strobe_bolt_fdata_write(p, 0, fake_resolve, NULL, &b, NULL, &err), 0);
	/* leaf addresses only: main's caller address 0x401005 gets nothing */
	assert_string_equal(b.p, "no_lbr cycles:\n"
				 "1 _Z4workv/1 10 7\n"
				 "1 _Z4workv/1 20 3\n"
				 "1 main 2 2\n");
	strobe_buf_free(&b);
	strobe_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(autofdo_text),
		cmocka_unit_test(base_discriminator),
		cmocka_unit_test(autofdo_discriminators),
		cmocka_unit_test(pprof_discriminator),
		cmocka_unit_test(refusals),
		cmocka_unit_test(go_profile),
		cmocka_unit_test(bolt_fdata),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
