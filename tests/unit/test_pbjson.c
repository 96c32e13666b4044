// SPDX-License-Identifier: Apache-2.0
/*
 * lib/pbjson.c, the proto3 JSON mapping over protobuf-c descriptors, on a message holding every
 * kind of field (tests/unit/proto/pbjson_test.proto): what the JSON looks like, that decoding
 * gives back the same message byte for byte on the wire, the spellings protojson accepts, and
 * that bad input is refused with the field named (ASan checks nothing leaks on the way out).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pbjson_test.pb-c.h"
#include "strobe/pbjson.h"

static uint8_t *packed(const ProtobufCMessage *m, size_t *n)
{
	*n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(*n + 1);
	assert_non_null(b);
	protobuf_c_message_pack(m, b);
	return b;
}

static void test_round_trip(void **state)
{
	(void)state;
	Strobe__Test__All a = STROBE__TEST__ALL__INIT;
	Strobe__Test__Inner in = STROBE__TEST__INNER__INIT, in2 = STROBE__TEST__INNER__INIT;
	in.name = "main";
	in.n = -7;
	in2.name = "b\"q";
	in2.n = 9007199254740993LL; /* not exact as a double: must travel as a string */
	Strobe__Test__Inner *ins[] = {&in, &in2};
	int64_t nums[] = {1, -2, INT64_MAX};
	char *names[] = {"x", "", "ü"};
	uint8_t raw[] = {0xfb, 0xff, 0x00, 'a'};
	uint8_t tid[] = {0x01, 0xab};
	Strobe__Test__All__CountsEntry ce = STROBE__TEST__ALL__COUNTS_ENTRY__INIT;
	ce.key = "cpu";
	ce.value = 42;
	Strobe__Test__All__CountsEntry *ces[] = {&ce};
	Strobe__Test__All__ByIdEntry be = STROBE__TEST__ALL__BY_ID_ENTRY__INIT;
	be.key = -3;
	be.value = "three";
	Strobe__Test__All__ByIdEntry *bes[] = {&be};
	Strobe__Test__Color colors[] = {STROBE__TEST__COLOR__GREEN, STROBE__TEST__COLOR__RED};

	a.i32 = -5;
	a.u32 = 4000000000u;
	a.i64 = INT64_MIN;
	a.u64 = UINT64_MAX;
	a.dbl = 2.5;
	a.flt = 0.25f;
	a.flag = 1;
	a.str = "hello";
	a.raw = (ProtobufCBinaryData){sizeof raw, raw};
	a.trace_id = (ProtobufCBinaryData){sizeof tid, tid};
	a.color = STROBE__TEST__COLOR__GREEN;
	a.inner = &in;
	a.n_inners = 2;
	a.inners = ins;
	a.n_nums = 3;
	a.nums = nums;
	a.n_names = 3;
	a.names = names;
	a.n_counts = 1;
	a.counts = ces;
	a.n_by_id = 1;
	a.by_id = bes;
	a.choice_case = STROBE__TEST__ALL__CHOICE_AS_TEXT;
	a.as_text = "picked";
	a.zig = -99;
	a.f64 = 77;
	a.n_colors = 2;
	a.colors = colors;

	char *js = NULL;
	size_t jl = 0;
	assert_int_equal(strobe_pbjson_encode(&a.base, &js, &jl), 0);
	assert_int_equal(strlen(js), jl);
	/* The mapping's visible rules. */
	assert_non_null(strstr(js, "\"i64\":\"-9223372036854775808\""));
	assert_non_null(strstr(js, "\"u64\":\"18446744073709551615\""));
	assert_non_null(strstr(js, "\"u32\":4000000000"));
	assert_non_null(strstr(js, "\"raw\":\"+/8AYQ==\""));
	assert_non_null(strstr(js, "\"traceId\":\"01ab\""));
	assert_non_null(strstr(js, "\"color\":\"GREEN\""));
	assert_non_null(strstr(js, "\"colors\":[\"GREEN\",\"RED\"]"));
	assert_non_null(strstr(js, "\"counts\":{\"cpu\":\"42\"}"));
	assert_non_null(strstr(js, "\"byId\":{\"-3\":\"three\"}"));
	assert_non_null(strstr(js, "\"asText\":\"picked\""));
	assert_null(strstr(js, "asInner"));
	assert_non_null(strstr(js, "\"n\":\"9007199254740993\""));

	ProtobufCMessage *back = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_pbjson_decode(&strobe__test__all__descriptor, js, jl, &back, &err), 0);
	size_t n1, n2;
	uint8_t *p1 = packed(&a.base, &n1), *p2 = packed(back, &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(p1, p2, n1);
	free(p1);
	free(p2);
	protobuf_c_message_free_unpacked(back, NULL);
	free(js);
}

static void test_defaults_omitted(void **state)
{
	(void)state;
	Strobe__Test__All a = STROBE__TEST__ALL__INIT;
	char *js = NULL;
	size_t jl = 0;
	assert_int_equal(strobe_pbjson_encode(&a.base, &js, &jl), 0);
	assert_string_equal(js, "{}");
	free(js);
}

static Strobe__Test__All *dec_ok(const char *js)
{
	ProtobufCMessage *m = NULL;
	strobe_err err = {{0}};
	int r = strobe_pbjson_decode(&strobe__test__all__descriptor, js, strlen(js), &m, &err);
	if (r)
		fail_msg("decoding %s: %s", js, err.msg);
	return (Strobe__Test__All *)m;
}

static void test_accepted_spellings(void **state)
{
	(void)state;
	/* proto names and JSON names; numbers for 64-bit, strings for 32-bit; enum numbers; URL-safe
	 * base64 without padding; null for absent; unknown fields ignored. */
	Strobe__Test__All *a = dec_ok("{\"i64\": 12, \"u32\": \"7\", \"trace_id\": \"FF00\","
				      " \"color\": 1, \"raw\": \"-_8\", \"inner\": null, \"unknownField\": [1,{}],"
				      " \"as_inner\": {\"name\": \"n\"}, \"dbl\": \"NaN\", \"flt\": 1e2,"
				      " \"nums\": [\"1\", 2, 3e0], \"by_id\": {\"5\": \"five\"}}");
	assert_int_equal(a->i64, 12);
	assert_int_equal(a->u32, 7);
	assert_int_equal(a->trace_id.len, 2);
	assert_int_equal(a->trace_id.data[0], 0xff);
	assert_int_equal(a->color, STROBE__TEST__COLOR__RED);
	assert_int_equal(a->raw.len, 2);
	assert_int_equal(a->raw.data[0], 0xfb);
	assert_int_equal(a->raw.data[1], 0xff);
	assert_null(a->inner);
	assert_int_equal(a->choice_case, STROBE__TEST__ALL__CHOICE_AS_INNER);
	assert_string_equal(a->as_inner->name, "n");
	assert_true(a->dbl != a->dbl);
	assert_true(a->flt == 100.0f);
	assert_int_equal(a->n_nums, 3);
	assert_int_equal(a->nums[2], 3);
	assert_int_equal(a->n_by_id, 1);
	assert_int_equal(a->by_id[0]->key, 5);
	assert_string_equal(a->by_id[0]->value, "five");
	protobuf_c_message_free_unpacked(&a->base, NULL);
}

static void refused(const char *js, const char *want)
{
	ProtobufCMessage *m = (ProtobufCMessage *)1;
	strobe_err err = {{0}};
	int r = strobe_pbjson_decode(&strobe__test__all__descriptor, js, strlen(js), &m, &err);
	if (r != -EINVAL)
		fail_msg("%s: accepted (%d)", js, r);
	assert_null(m);
	if (!strstr(err.msg, want))
		fail_msg("%s: message '%s' lacks '%s'", js, err.msg, want);
}

static void test_refused(void **state)
{
	(void)state;
	refused("{\"i32\": 2147483648}", "i32: out of range for int32");
	refused("{\"u64\": -1}", "u64: a negative value");
	refused("{\"u64\": \"-1\"}", "u64: a negative value");
	refused("{\"i64\": \"12x\"}", "i64: not an integer");
	refused("{\"i64\": 1.5}", "i64: not an integer");
	refused("{\"raw\": \"a\"}", "raw: not base64");
	refused("{\"raw\": \"ab!c\"}", "raw: not base64");
	refused("{\"traceId\": \"abc\"}", "traceId: not hex");
	refused("{\"color\": \"BLUE\"}", "color: not a value of the enum");
	refused("{\"inners\": [{\"name\": \"ok\"}, {\"n\": true}]}", "inners.n: expected an integer");
	refused("{\"inner\": [1]}", "inner: expected an object");
	refused("{\"inner\": {\"name\": 5}}", "inner.name: expected a string");
	refused("{\"asInner\": {\"n\": {}}}", "asInner.n: expected an integer");
	refused("{\"names\": \"x\"}", "names: expected an array");
	refused("{\"names\": [\"a\", null]}", "names: null inside an array");
	refused("{\"counts\": []}", "counts: expected an object");
	refused("{\"asText\": \"a\", \"asInner\": {}}", "more than one member of a oneof");
	refused("{\"str\": \"a\", \"str\": \"b\"}", "duplicate");
	refused("{\"str\": \"a\", \"STR\": 1, \"str\": \"b\"}", "duplicate");
	refused("{\"trace_id\": \"00\", \"traceId\": \"01\"}", "given twice");
	refused("{\"str\": \"a\\u0000b\"}", "NUL");
	refused("{\"flag\": 1}", "flag: expected true or false");
	refused("[1]", "expected an object");
	refused("{\"i32\": ", "not JSON");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_defaults_omitted),
		cmocka_unit_test(test_accepted_spellings),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
