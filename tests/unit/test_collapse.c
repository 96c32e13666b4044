// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the perf script collapser's rules, each a case where a simpler parser would
 * differ from stackcollapse-perf.pl.
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
#include "strobe/collapse.h"

static int to_text(const char *stack, size_t len, uint64_t count, void *ctx)
{
	fprintf(ctx, "%.*s %llu\n", (int)len, stack, (unsigned long long)count);
	return 0;
}

static char *run(const char *in, strobe_collapse_opts o)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	strobe_err err = {{0}};
	int r = strobe_collapse(in, strlen(in), "t", &o, to_text, f, &err);
	fclose(f);
	if (r < 0)
		fail_msg("collapse: %s", err.msg);
	return buf;
}

static void check(const char *in, strobe_collapse_opts o, const char *want)
{
	char *got = run(in, o);
	assert_string_equal(got, want);
	free(got);
}

static void test_comm_with_spaces_and_tid(void **state)
{
	(void)state;
	const char *in = "V8 WorkerThread 24636/25607 [000] 94564.109216: 100 cycles: \n"
			 "\t7f1 leaf+0x10 (/bin/node)\n\t7f2 root (/bin/node)\n\n";
	check(in, (strobe_collapse_opts){0}, "V8_WorkerThread;root;leaf 100\n");
	check(in, (strobe_collapse_opts){.tid = true}, "V8_WorkerThread-24636/25607;root;leaf 100\n");
	/* No slash: the number is the TID and the PID is unknown. */
	const char *in2 = "java 12688 6544038.708352: 7 cpu-clock:\n\t1 f (/x)\n\n";
	check(in2, (strobe_collapse_opts){.pid = true}, "java-?;f 7\n");
}

static void test_first_event_type_only(void **state)
{
	(void)state;
	const char *in = "ab 1 1.0: 5 cycles:\n\t1 f (/x)\n\n"
			 "ab 1 1.1: 9 instructions:\n\t1 g (/x)\n\n"
			 "ab 1 1.2: 2 cycles:\n\t1 f (/x)\n\n";
	check(in, (strobe_collapse_opts){0}, "ab;f 7\n");
	check(in, (strobe_collapse_opts){.event_filter = "instructions"}, "ab;g 9\n");
}

static void test_names_tidied_and_annotated(void **state)
{
	(void)state;
	const char *in = "pp 1 1.0: 1 cpu-clock:\n"
			 "\t1 ns::f(int)+0x1a (/bin/p)\n"                /* args and offset cut */
			 "\t2 net/http.(*Client).Do (/bin/p)\n"           /* Go method kept */
			 "\t3 in1->in2 (/bin/p)\n"                        /* inlined chain */
			 "\t4 [unknown] (/usr/lib/libz.so.1)\n"           /* module name */
			 "\tffffffff81000000 sys_read ([kernel.kallsyms])\n\n";
	check(in, (strobe_collapse_opts){.all = true},
	      "pp;sys_read_[k];[libz.so.1];in1;in2_[i];net/http.(*Client).Do;ns::f 1\n");
	check(in, (strobe_collapse_opts){.addrs = true},
	      "pp;sys_read;[libz.so.1 <4>];in1;in2_[i];net/http.(*Client).Do;ns::f 1\n");
}

static void test_unterminated_sample_not_counted(void **state)
{
	(void)state;
	/* stackcollapse-perf.pl counts a sample at the blank line after it. */
	check("ab 1 1.0: 3 cycles:\n\t1 f (/x)\n\na 1 1.1: 4 cycles:\n\t1 g (/x)\n",
	      (strobe_collapse_opts){0}, "ab;f 3\n");
}

static void test_one_letter_comm_quirk(void **state)
{
	(void)state;
	/* The perl regex wants a comm of two characters or more, so "a" swallows the rest of the
	 * header up to the period; byte-for-byte parity keeps that. */
	check("a 1 1.0: 3 cycles:\n\t1 f (/x)\n\n", (strobe_collapse_opts){0}, "a_1_1.0:;f 3\n");
}

static void test_limits(void **state)
{
	(void)state;
	strobe_err err = {{0}};
	size_t big = STROBE_MAX_NAME + 10;
	char *in = malloc(big + 64);
	int n = sprintf(in, "ab 1 1.0: 1 c:\n\t1 ");
	memset(in + n, 'x', big);
	strcpy(in + n + big, " (/x)\n\n");
	strobe_collapse_opts o = {0};
	assert_int_equal(strobe_collapse(in, strlen(in), "big.perf", &o, to_text, stdout, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "big.perf:2:"));
	free(in);
}

static void test_zero_tid_is_no_tid(void **state)
{
	(void)state;
	/* perl: `if (not $tid)`; "0" is false, so the idle task "swapper 0/0" has pid "?". */
	const char *in = "swapper     0/0     [000]  7.5: cpu-clock: \n\tffff1 do_idle ([kernel.kallsyms])\n\n"
			 "ab 7/00 [000] 7.6: cpu-clock: \n\t1 f (/x)\n\n";
	check(in, (strobe_collapse_opts){.tid = true}, "ab-7/00;f 1\nswapper-?/0;do_idle 1\n");
}

static void test_period_truth(void **state)
{
	(void)state;
	/* A period of "0" counts 1 (perl's `if (not $period)`), "00" is true and counts 0. */
	check("ab 1 1.0: 0 c:\n\t1 f (/x)\n\nab 1 1.0: 00 c:\n\t1 g (/x)\n\n",
	      (strobe_collapse_opts){0}, "ab;f 1\nab;g 0\n");
}

static void test_srcline(void **state)
{
	(void)state;
	/* Every frame but an unknown one takes the next line, "[...]" removed and trimmed; an
	 * empty one adds nothing. */
	const char *in = "ab 1 1.0: 1 c:\n"
			 "\t1 leaf+0x8 (/bin/a)\n  leaf.c:12\n"
			 "\t2 [unknown] ([unknown])\n"
			 "\t3 main (/bin/a)\n  libc.so.6[27b25]\n\n";
	check(in, (strobe_collapse_opts){.srcline = true}, "ab;main:libc.so.6;[unknown];leaf:leaf.c:12 1\n");
}

static int to_text2(const char *stack, size_t len, uint64_t count, void *ctx)
{
	return to_text(stack, len, count, ctx);
}

static void test_pieces_equal_whole(void **state)
{
	(void)state;
	/* Fed one byte at a time, the streaming form gives what the one-shot call gives. */
	const char *in = "V8 Worker 1/2 [0] 1.0: 3 cycles:\n\t7f1 a->b (/x)\n\t7f2 main (/x)\n\n"
			 "ab 1 1.1: 4 cycles:\n\tffff k ([kernel.kallsyms])\n\n#c\nab 1 1.2: 2 cycles:\n"
			 "\t1 f (/x)\n\n";
	strobe_collapse_opts o = {.all = true};
	char *whole = run(in, o);
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	strobe_err err = {{0}};
	strobe_collapser *c = strobe_collapser_new("t", &o);
	assert_non_null(c);
	for (size_t i = 0; in[i]; i++)
		assert_int_equal(strobe_collapser_feed(c, in + i, 1, &err), 0);
	assert_int_equal(strobe_collapser_finish(c, to_text2, f, &err), 0);
	strobe_collapser_free(c);
	fclose(f);
	assert_string_equal(buf, whole);
	assert_string_equal(whole, "V8_Worker;main;a;b_[i] 3\nab;f 2\nab;k_[k] 4\n");
	free(buf);
	free(whole);
}

static void test_inline_refused_context_accepted(void **state)
{
	(void)state;
	strobe_err err = {{0}};
	strobe_collapse_opts o = {.inline_ = true};
	const char *in = "ab 1 1.0: 1 c:\n\t1 f (/x)\n\n";
	assert_int_equal(strobe_collapse(in, strlen(in), "t", &o, to_text, stdout, &err), -ENOTSUP);
	assert_non_null(strstr(err.msg, "--inline"));
	check(in, (strobe_collapse_opts){.context = true}, "ab;f 1\n");
}

static void test_deep_stack_is_an_error(void **state)
{
	(void)state;
	size_t n = STROBE_MAX_DEPTH + 1;
	char *in = malloc(64 + n * 16);
	size_t w = (size_t)sprintf(in, "ab 1 1.0: 1 c:\n");
	for (size_t i = 0; i < n; i++)
		w += (size_t)sprintf(in + w, "\t%zx f (/x)\n", i);
	strcpy(in + w, "\n");
	strobe_err err = {{0}};
	strobe_collapse_opts o = {0};
	assert_int_equal(strobe_collapse(in, strlen(in), "deep.perf", &o, to_text, stdout, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "deep.perf:4098: stack deeper than 4096 frames"));
	free(in);
}

static void test_perf_script_decode(void **state)
{
	(void)state;
	const char *in = "ab 1 1.0: 5 c:\n\t1 leaf (/x)\n\t2 main (/x)\n\n";
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_perf_script_decode(in, strlen(in), "t", &p, &err), 0);
	assert_int_equal(strobe_nsamples(p), 1);
	const strobe_sample_key *k = strobe_sample(p, 1);
	assert_int_equal(strobe_stack_depth(p, k->stack), 3); /* ab;main;leaf */
	assert_int_equal(strobe_sample_values(p, 1)[0], 5);
	uint32_t nl;
	const strobe_label *l = strobe_labelset_get(p, k->labels, &nl);
	assert_int_equal(nl, 1);
	assert_string_equal(strobe_str(p, l[0].key), "comm");
	assert_string_equal(strobe_str(p, l[0].str), "ab");
	strobe_profile_free(p);
	assert_int_equal(strobe_perf_script_decode("garbage\n", 8, "g", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "g: no samples"));
}

static void test_perf_script_type_named_after_event(void **state)
{
	(void)state;
	const char *clk = "ab 1 1.0: 250000 cpu-clock:pppH:\n\t1 f (/x)\n\n";
	const char *cyc = "ab 1 1.0: 7 cycles:\n\t1 f (/x)\n\n";
	strobe_profile *p = NULL;
	assert_int_equal(strobe_perf_script_decode(clk, strlen(clk), "c", &p, NULL), 0);
	assert_string_equal(strobe_str(p, p->types[0].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[0].unit), "nanoseconds");
	assert_int_equal(strobe_total(p, 0), 250000);
	strobe_profile_free(p);
	assert_int_equal(strobe_perf_script_decode(cyc, strlen(cyc), "c", &p, NULL), 0);
	assert_string_equal(strobe_str(p, p->types[0].type), "cycles");
	assert_string_equal(strobe_str(p, p->types[0].unit), "count");
	strobe_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perf_script_type_named_after_event),
		cmocka_unit_test(test_comm_with_spaces_and_tid),
		cmocka_unit_test(test_first_event_type_only),
		cmocka_unit_test(test_names_tidied_and_annotated),
		cmocka_unit_test(test_unterminated_sample_not_counted),
		cmocka_unit_test(test_one_letter_comm_quirk),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_zero_tid_is_no_tid),
		cmocka_unit_test(test_period_truth),
		cmocka_unit_test(test_srcline),
		cmocka_unit_test(test_pieces_equal_whole),
		cmocka_unit_test(test_inline_refused_context_accepted),
		cmocka_unit_test(test_deep_stack_is_an_error),
		cmocka_unit_test(test_perf_script_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
