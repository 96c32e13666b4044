// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the pprof codec: real Go profiles decode to the totals `go tool pprof -raw`
 * reports, a decode-encode-decode round trip keeps everything, and each kind of corruption is
 * rejected with a message naming it.
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

#include "profile.pb-c.h"
#include "strobe/codec.h"

static char path_buf[4096];
static const char *testdata(const char *name)
{
	const char *td = getenv("TESTDATA");
	snprintf(path_buf, sizeof(path_buf), "%s/pprof/%s", td ? td : "../shared/testdata", name);
	return path_buf;
}

static strobe_profile *load(const char *name)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_read_profile(testdata(name), &p, &err) < 0)
		fail_msg("%s", err.msg);
	return p;
}

/* Totals as `go tool pprof -raw` lists them (sum of each value column over its samples). */
static void test_real_profiles_totals(void **state)
{
	(void)state;
	strobe_profile *p = load("go_cpu.pb.gz");
	assert_int_equal(p->ntypes, 2);
	assert_string_equal(strobe_str(p, p->types[1].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[1].unit), "nanoseconds");
	assert_int_equal(strobe_total(p, 0), 370);
	assert_int_equal(strobe_total(p, 1), 3700000000LL);
	assert_int_equal(p->period, 10000000);
	assert_string_equal(strobe_str(p, p->period_type.type), "cpu");
	assert_int_equal(p->locations.n - 1, 488);
	assert_int_equal(p->mappings.n - 1, 3); /* gowork, [vdso], [vsyscall] */
	assert_string_equal(strobe_str(p, strobe_mapping_get(p, 1)->filename), "/tmp/gw/gowork");
	assert_true(p->duration_nanos > 2000000000LL && p->duration_nanos < 2200000000LL);
	/* pprof.Do labels survive. */
	bool found = false;
	for (uint32_t s = 1; s <= strobe_nsamples(p) && !found; s++) {
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, strobe_sample(p, s)->labels, &n);
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(strobe_str(p, l[i].key), "endpoint") &&
			    !strcmp(strobe_str(p, l[i].str), "/checkout"))
				found = true;
	}
	assert_true(found);
	strobe_profile_free(p);

	p = load("go_heap.pb.gz");
	assert_int_equal(p->ntypes, 4);
	assert_int_equal(strobe_total(p, 0), 2708481);
	assert_int_equal(strobe_total(p, 1), 424676540);
	assert_int_equal(strobe_total(p, 2), 6708);
	assert_int_equal(strobe_total(p, 3), 677278);
	assert_int_equal(strobe_default_type_index(p), 3); /* inuse_space: the last */
	strobe_profile_free(p);

	p = load("go_mutex.pb.gz");
	assert_int_equal(strobe_total(p, 0), 137);
	assert_int_equal(strobe_total(p, 1), 150576234);
	strobe_profile_free(p);
}

static void test_round_trip_keeps_everything(void **state)
{
	(void)state;
	const char *names[] = {"go_cpu.pb.gz", "go_heap.pb.gz", "go_block.pb.gz"};
	for (size_t k = 0; k < 3; k++) {
		strobe_profile *p = load(names[k]), *q = NULL;
		uint8_t *gz, *raw;
		size_t gzlen, rawlen;
		assert_int_equal(strobe_pprof_encode(p, &gz, &gzlen), 0);
		assert_int_equal(strobe_gunzip(gz, gzlen, &raw, &rawlen, NULL), 0);
		assert_int_equal(strobe_pprof_decode(raw, rawlen, "rt", &q, NULL), 0);
		assert_int_equal(q->ntypes, p->ntypes);
		for (uint32_t t = 0; t < p->ntypes; t++)
			assert_int_equal(strobe_total(q, (int)t), strobe_total(p, (int)t));
		assert_int_equal(strobe_nsamples(q), strobe_nsamples(p));
		assert_int_equal(q->functions.n, p->functions.n);
		assert_int_equal(q->mappings.n, p->mappings.n);
		assert_int_equal(q->locations.n, p->locations.n);
		assert_int_equal(q->labelsets.n, p->labelsets.n);
		assert_int_equal(q->period, p->period);
		assert_int_equal(q->time_nanos, p->time_nanos);
		assert_int_equal(q->duration_nanos, p->duration_nanos);
		assert_int_equal(strobe_default_type_index(q), strobe_default_type_index(p));
		/* Same ids, same content: the encoder writes the model's tables as they are. */
		for (uint32_t i = 1; i < p->locations.n; i++) {
			const strobe_location *a = strobe_location_get(p, i), *b = strobe_location_get(q, i);
			assert_int_equal(a->address, b->address);
			assert_int_equal(a->nline, b->nline);
			for (uint32_t j = 0; j < a->nline; j++) {
				assert_int_equal(a->line[j].line, b->line[j].line);
				assert_string_equal(
					strobe_str(p, strobe_function_get(p, a->line[j].function)->name),
					strobe_str(q, strobe_function_get(q, b->line[j].function)->name));
			}
		}
		free(gz);
		free(raw);
		strobe_profile_free(p);
		strobe_profile_free(q);
	}
}

/* A small valid profile as a protobuf-c struct, to corrupt field by field. */
typedef struct tiny {
	Perftools__Profiles__Profile pb;
	Perftools__Profiles__ValueType vt, *vtp[1];
	Perftools__Profiles__Function fn, *fnp[1];
	Perftools__Profiles__Line line, *linep[1];
	Perftools__Profiles__Location loc, *locp[1];
	Perftools__Profiles__Sample s, *sp[1];
	Perftools__Profiles__Label lab, *labp[1];
	uint64_t locids[1];
	int64_t values[1];
	char *strings[5];
} tiny;

static void tiny_init(tiny *t)
{
	perftools__profiles__profile__init(&t->pb);
	perftools__profiles__value_type__init(&t->vt);
	perftools__profiles__function__init(&t->fn);
	perftools__profiles__line__init(&t->line);
	perftools__profiles__location__init(&t->loc);
	perftools__profiles__sample__init(&t->s);
	perftools__profiles__label__init(&t->lab);
	t->strings[0] = "";
	t->strings[1] = "samples";
	t->strings[2] = "count";
	t->strings[3] = "main";
	t->strings[4] = "k";
	t->pb.n_string_table = 5;
	t->pb.string_table = t->strings;
	t->vt.type = 1;
	t->vt.unit = 2;
	t->vtp[0] = &t->vt;
	t->pb.n_sample_type = 1;
	t->pb.sample_type = t->vtp;
	t->fn.id = 7;
	t->fn.name = 3;
	t->fnp[0] = &t->fn;
	t->pb.n_function = 1;
	t->pb.function = t->fnp;
	t->line.function_id = 7;
	t->linep[0] = &t->line;
	t->loc.id = 42;
	t->loc.n_line = 1;
	t->loc.line = t->linep;
	t->locp[0] = &t->loc;
	t->pb.n_location = 1;
	t->pb.location = t->locp;
	t->locids[0] = 42;
	t->values[0] = 5;
	t->lab.key = 4;
	t->lab.num = 9;
	t->labp[0] = &t->lab;
	t->s.n_location_id = 1;
	t->s.location_id = t->locids;
	t->s.n_value = 1;
	t->s.value = t->values;
	t->s.n_label = 1;
	t->s.label = t->labp;
	t->sp[0] = &t->s;
	t->pb.n_sample = 1;
	t->pb.sample = t->sp;
}

static int decode_tiny(tiny *t, strobe_err *err)
{
	size_t len = perftools__profiles__profile__get_packed_size(&t->pb);
	uint8_t *buf = malloc(len + 1);
	perftools__profiles__profile__pack(&t->pb, buf);
	strobe_profile *p = NULL;
	memset(err, 0, sizeof(*err));
	int r = strobe_pprof_decode(buf, len, "t.pb", &p, err);
	if (r == 0) {
		assert_int_equal(strobe_total(p, 0), 5);
		strobe_profile_free(p);
	} else {
		assert_null(p);
	}
	free(buf);
	return r;
}

static void expect_error(tiny *t, const char *needle)
{
	strobe_err err;
	assert_int_equal(decode_tiny(t, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("message '%s' does not mention '%s'", err.msg, needle);
	assert_non_null(strstr(err.msg, "t.pb"));
}

static void test_corruptions_are_named(void **state)
{
	(void)state;
	tiny t;
	strobe_err err;
	tiny_init(&t);
	assert_int_equal(decode_tiny(&t, &err), 0);

	tiny_init(&t);
	t.fn.name = 99;
	expect_error(&t, "function 0 refers to string 99");

	tiny_init(&t);
	t.locids[0] = 43;
	expect_error(&t, "sample 0 refers to location id 43 that does not exist");

	tiny_init(&t);
	t.line.function_id = 8;
	expect_error(&t, "location 0 refers to function id 8");

	tiny_init(&t);
	int64_t two[2] = {1, 2};
	t.s.n_value = 2;
	t.s.value = two;
	expect_error(&t, "sample 0 has 2 values for 1 sample types");

	tiny_init(&t);
	t.strings[0] = "x";
	expect_error(&t, "string_table[0] must be the empty string");

	tiny_init(&t);
	t.lab.key = -1;
	expect_error(&t, "refers to string -1");

	/* Not protobuf at all, and a truncated one. */
	strobe_profile *p = NULL;
	const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(strobe_pprof_decode(junk, sizeof(junk), "j", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a valid pprof"));
	tiny_init(&t);
	size_t len = perftools__profiles__profile__get_packed_size(&t.pb);
	uint8_t *buf = malloc(len);
	perftools__profiles__profile__pack(&t.pb, buf);
	assert_int_equal(strobe_pprof_decode(buf, len - 3, "cut", &p, &err), -EINVAL);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_profiles_totals),
		cmocka_unit_test(test_round_trip_keeps_everything),
		cmocka_unit_test(test_corruptions_are_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
