// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the output-format dispatcher (lib/writer.c): each format's writer is the one
 * chosen (the bytes start as that format does), pprof round-trips, top honours its row limit,
 * formats that cannot be written are refused, "flat" and "top" are output names only, and each
 * format's Content-Type.
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

#include "strobe/writer.h"

static strobe_profile *sample(void)
{
	const char *text = "main;work;hash 30\nmain;work;sort 20\nmain;idle 5\n";
	strobe_profile *p = NULL;
	assert_int_equal(strobe_folded_decode(text, strlen(text), "t", &p, NULL), 0);
	return p;
}

static char *written(strobe_profile *p, strobe_format fmt, const strobe_write_opts *o, int *rc,
		     size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	assert_non_null(f);
	*rc = strobe_write_profile(f, p, fmt, 0, STROBE_GRAN_FUNCTIONS, o);
	fclose(f);
	return buf;
}

static void test_formats(void **state)
{
	(void)state;
	strobe_profile *p = sample();
	int rc;
	size_t len;
	char *b = written(p, STROBE_FMT_FOLDED, NULL, &rc, &len);
	assert_int_equal(rc, 0);
	assert_string_equal(b, "main;idle 5\nmain;work;hash 30\nmain;work;sort 20\n");
	free(b);
	b = written(p, STROBE_FMT_SVG, NULL, &rc, &len);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(b, "<svg"));
	assert_non_null(strstr(b, "samples"));
	free(b);
	b = written(p, STROBE_FMT_JSON, NULL, &rc, &len);
	assert_int_equal(rc, 0);
	assert_int_equal(b[0], '{');
	assert_null(strstr(b, "\"stride\""));
	free(b);
	b = written(p, STROBE_FMT_FLAT, NULL, &rc, &len);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(b, "\"stride\""));
	free(b);
	b = written(p, STROBE_FMT_TOP, &(strobe_write_opts){.top_rows = 1}, &rc, &len);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(b, "hash"));
	assert_null(strstr(b, "sort"));
	free(b);
	b = written(p, STROBE_FMT_SPEEDSCOPE, &(strobe_write_opts){.name = "x.json"}, &rc, &len);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(b, "speedscope"));
	free(b);
	b = written(p, STROBE_FMT_PPROF, NULL, &rc, &len);
	assert_int_equal(rc, 0);
	uint8_t *raw;
	size_t rawlen;
	assert_int_equal(strobe_gunzip((uint8_t *)b, len, &raw, &rawlen, NULL), 0);
	strobe_profile *q = NULL;
	assert_int_equal(strobe_pprof_decode(raw, rawlen, "t", &q, NULL), 0);
	assert_int_equal(strobe_total(q, 0), 55);
	strobe_profile_free(q);
	free(raw);
	free(b);
	b = written(p, STROBE_FMT_PERF_SCRIPT, NULL, &rc, &len);
	assert_int_equal(rc, -EINVAL);
	free(b);
	b = written(p, STROBE_FMT_UNKNOWN, NULL, &rc, &len);
	assert_int_equal(rc, -EINVAL);
	free(b);
	strobe_profile_free(p);
}

static void test_names_and_mime(void **state)
{
	(void)state;
	assert_int_equal(strobe_output_parse("top"), STROBE_FMT_TOP);
	assert_int_equal(strobe_output_parse("flat"), STROBE_FMT_FLAT);
	assert_int_equal(strobe_output_parse("svg"), STROBE_FMT_SVG);
	assert_int_equal(strobe_output_parse("perf-script"), STROBE_FMT_PERF_SCRIPT);
	assert_int_equal(strobe_format_parse("top"), STROBE_FMT_UNKNOWN);
	assert_int_equal(strobe_format_parse("flat"), STROBE_FMT_UNKNOWN);
	assert_string_equal(strobe_format_name(STROBE_FMT_TOP), "top");
	assert_string_equal(strobe_format_mime(STROBE_FMT_PPROF), "application/octet-stream");
	assert_string_equal(strobe_format_mime(STROBE_FMT_FLAT), "application/json");
	assert_string_equal(strobe_format_mime(STROBE_FMT_SVG), "image/svg+xml");
	assert_string_equal(strobe_format_mime(STROBE_FMT_TOP), "text/plain; charset=utf-8");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_names_and_mime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
