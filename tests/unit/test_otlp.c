// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the OTLP profiles codec (lib/otlp.c). Requests are built here as protobuf-c
 * structs (each case changes one thing of a small valid request) and packed, so the decoder
 * sees real bytes: the mapping of stacks, lines and values; resource, scope and profile
 * attributes to series labels (service.name -> service_name, dots to '_', non-string values,
 * a later level overriding); several sample types of one scope becoming one profile with
 * several types, and different labels becoming different series; index 0 as "none" in every
 * table; every out-of-range index refused with a message naming it; timestamps-only samples;
 * sample attributes and links as sample labels; encode -> decode keeping every total; and the
 * server's fast path (strobe_otlp_limits.views): the same series as pprof views, the model
 * where a view cannot say the same, the model's errors.
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

#include "otlp_profiles_service.pb-c.h"
#include "strobe/codec.h"
#include "strobe/otlp.h"
#include "strobe/pprof_view.h"

typedef Opentelemetry__Proto__Profiles__V1development__Profile Prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample Sample;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType VT;
typedef Opentelemetry__Proto__Profiles__V1development__Location Loc;
typedef Opentelemetry__Proto__Profiles__V1development__Line Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function Fn;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping Map;
typedef Opentelemetry__Proto__Profiles__V1development__Stack Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Link Link;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit KVU;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles SP;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles RP;
typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Common__V1__AnyValue AV;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Res;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest Req;

/* A small valid request, its parts open to each test: strings "", cpu, nanoseconds, samples,
 * count, main, work, hash, /bin/app, thread.name, w1; functions main/work/hash; mapping 1
 * /bin/app; locations 1..3 (hash has two lines: hash inlined into work); stacks 1 = hash;work;main
 * (leaf first), 2 = work;main. Profile 0 (cpu): stack 1 = 600, stack 2 = 300. */
typedef struct fx {
	char *strs[16];
	Fn fn[4];
	Fn *fnp[4];
	Map map[2];
	Map *mapp[2];
	Line line[5];
	Line *linep[5];
	Loc loc[4];
	Loc *locp[4];
	int32_t st1[3], st2[2];
	Stack stk[3];
	Stack *stkp[3];
	Link link[2];
	Link *linkp[2];
	uint8_t trace[16], span[8];
	AV av[4];
	KVU attr[3];
	KVU *attrp[3];
	Dict dict;
	VT vt[2];
	Sample smp[4];
	Sample *smpp[4];
	int64_t vals[4][2];
	int32_t sattr[1];
	Prof prof[2];
	Prof *profp[2];
	int32_t pattr[1];
	Scope scope;
	KV skv[1];
	AV sav[1];
	KV *skvp[1];
	SP sp;
	SP *spp[1];
	KV rkv[3];
	AV rav[3];
	KV *rkvp[3];
	Res res;
	RP rp;
	RP *rpp[1];
	Req req;
} fx;

static void fx_init(fx *f)
{
	memset(f, 0, sizeof(*f));
	const char *s[] = {"", "cpu", "nanoseconds", "samples", "count", "main", "work", "hash",
			   "/bin/app", "thread.name", "w1", "env"};
	for (size_t i = 0; i < sizeof(s) / sizeof(*s); i++)
		f->strs[i] = (char *)s[i];
	Dict *d = &f->dict;
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
	d->string_table = f->strs;
	d->n_string_table = sizeof(s) / sizeof(*s);
	for (int i = 0; i < 4; i++) {
		opentelemetry__proto__profiles__v1development__function__init(&f->fn[i]);
		f->fn[i].name_strindex = i ? 4 + i : 0;
		f->fnp[i] = &f->fn[i];
	}
	d->function_table = f->fnp;
	d->n_function_table = 4;
	for (int i = 0; i < 2; i++) {
		opentelemetry__proto__profiles__v1development__mapping__init(&f->map[i]);
		f->mapp[i] = &f->map[i];
	}
	f->map[1].memory_start = 0x1000;
	f->map[1].memory_limit = 0x9000;
	f->map[1].filename_strindex = 8;
	d->mapping_table = f->mapp;
	d->n_mapping_table = 2;
	for (int i = 0; i < 5; i++) {
		opentelemetry__proto__profiles__v1development__line__init(&f->line[i]);
		f->linep[i] = &f->line[i];
	}
	/* loc1 main (line 1), loc2 work (line 2), loc3 hash inlined into work (lines 3, 4) */
	f->line[1].function_index = 1;
	f->line[1].line = 10;
	f->line[2].function_index = 2;
	f->line[2].line = 20;
	f->line[3].function_index = 3;
	f->line[3].line = 30;
	f->line[4].function_index = 2;
	f->line[4].line = 21;
	for (int i = 0; i < 4; i++) {
		opentelemetry__proto__profiles__v1development__location__init(&f->loc[i]);
		f->locp[i] = &f->loc[i];
	}
	f->loc[1].lines = &f->linep[1];
	f->loc[1].n_lines = 1;
	f->loc[1].mapping_index = 1;
	f->loc[1].address = 0x1100;
	f->loc[2].lines = &f->linep[2];
	f->loc[2].n_lines = 1;
	f->loc[2].mapping_index = 1;
	f->loc[3].lines = &f->linep[3];
	f->loc[3].n_lines = 2;
	d->location_table = f->locp;
	d->n_location_table = 4;
	f->st1[0] = 3, f->st1[1] = 2, f->st1[2] = 1;
	f->st2[0] = 2, f->st2[1] = 1;
	for (int i = 0; i < 3; i++) {
		opentelemetry__proto__profiles__v1development__stack__init(&f->stk[i]);
		f->stkp[i] = &f->stk[i];
	}
	f->stk[1].location_indices = f->st1;
	f->stk[1].n_location_indices = 3;
	f->stk[2].location_indices = f->st2;
	f->stk[2].n_location_indices = 2;
	d->stack_table = f->stkp;
	d->n_stack_table = 3;
	for (int i = 0; i < 2; i++) {
		opentelemetry__proto__profiles__v1development__link__init(&f->link[i]);
		f->linkp[i] = &f->link[i];
	}
	for (int i = 0; i < 16; i++)
		f->trace[i] = (uint8_t)(i + 1);
	for (int i = 0; i < 8; i++)
		f->span[i] = (uint8_t)(0xa0 + i);
	f->link[1].trace_id = (ProtobufCBinaryData){16, f->trace};
	f->link[1].span_id = (ProtobufCBinaryData){8, f->span};
	d->link_table = f->linkp;
	d->n_link_table = 2;
	for (int i = 0; i < 4; i++)
		opentelemetry__proto__common__v1__any_value__init(&f->av[i]);
	for (int i = 0; i < 3; i++) {
		opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&f->attr[i]);
		f->attrp[i] = &f->attr[i];
	}
	/* attr 1: thread.name = w1 (sample); attr 2: env = staging (profile) */
	f->attr[1].key_strindex = 9;
	f->av[1].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
	f->av[1].string_value_strindex = 10;
	f->attr[1].value = &f->av[1];
	f->attr[2].key_strindex = 11;
	f->av[2].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	f->av[2].string_value = (char *)"staging";
	f->attr[2].value = &f->av[2];
	d->attribute_table = f->attrp;
	d->n_attribute_table = 3;

	for (int i = 0; i < 2; i++)
		opentelemetry__proto__profiles__v1development__value_type__init(&f->vt[i]);
	f->vt[0].type_strindex = 1, f->vt[0].unit_strindex = 2;
	f->vt[1].type_strindex = 3, f->vt[1].unit_strindex = 4;
	for (int i = 0; i < 4; i++) {
		opentelemetry__proto__profiles__v1development__sample__init(&f->smp[i]);
		f->smpp[i] = &f->smp[i];
		f->smp[i].values = f->vals[i];
		f->smp[i].n_values = 1;
	}
	f->smp[0].stack_index = 1, f->vals[0][0] = 600;
	f->smp[1].stack_index = 2, f->vals[1][0] = 300;
	f->smp[2].stack_index = 1, f->vals[2][0] = 6;
	f->smp[3].stack_index = 2, f->vals[3][0] = 3;
	for (int i = 0; i < 2; i++) {
		opentelemetry__proto__profiles__v1development__profile__init(&f->prof[i]);
		f->profp[i] = &f->prof[i];
		f->prof[i].sample_type = &f->vt[i];
		f->prof[i].samples = &f->smpp[2 * i];
		f->prof[i].n_samples = 2;
		f->prof[i].time_unix_nano = 1700000000000000000ull;
		f->prof[i].duration_nano = 10000000000ull;
	}
	opentelemetry__proto__common__v1__instrumentation_scope__init(&f->scope);
	opentelemetry__proto__common__v1__key_value__init(&f->skv[0]);
	opentelemetry__proto__common__v1__any_value__init(&f->sav[0]);
	f->skv[0].key = (char *)"team";
	f->sav[0].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	f->sav[0].string_value = (char *)"payments";
	f->skv[0].value = &f->sav[0];
	f->skvp[0] = &f->skv[0];
	f->scope.name = (char *)"test";
	f->scope.attributes = f->skvp;
	f->scope.n_attributes = 1;
	opentelemetry__proto__profiles__v1development__scope_profiles__init(&f->sp);
	f->sp.scope = &f->scope;
	f->sp.profiles = f->profp;
	f->sp.n_profiles = 1; /* cpu only unless a test says */
	f->spp[0] = &f->sp;
	const char *rk[] = {"service.name", "k8s.pod.name", "host.cpus"};
	for (int i = 0; i < 3; i++) {
		opentelemetry__proto__common__v1__key_value__init(&f->rkv[i]);
		opentelemetry__proto__common__v1__any_value__init(&f->rav[i]);
		f->rkv[i].key = (char *)rk[i];
		f->rkv[i].value = &f->rav[i];
		f->rkvp[i] = &f->rkv[i];
		f->rav[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	}
	f->rav[0].string_value = (char *)"checkout";
	f->rav[1].string_value = (char *)"pod-1";
	f->rav[2].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	f->rav[2].int_value = 8;
	opentelemetry__proto__resource__v1__resource__init(&f->res);
	f->res.attributes = f->rkvp;
	f->res.n_attributes = 3;
	opentelemetry__proto__profiles__v1development__resource_profiles__init(&f->rp);
	f->rp.resource = &f->res;
	f->rp.scope_profiles = f->spp;
	f->rp.n_scope_profiles = 1;
	f->rpp[0] = &f->rp;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
		&f->req);
	f->req.resource_profiles = f->rpp;
	f->req.n_resource_profiles = 1;
	f->req.dictionary = &f->dict;
}

/* Packs the request and decodes the bytes. */
static int decode(fx *f, strobe_otlp_batch *b, strobe_err *err)
{
	size_t n = protobuf_c_message_get_packed_size(&f->req.base);
	uint8_t *buf = malloc(n + 1);
	assert_non_null(buf);
	protobuf_c_message_pack(&f->req.base, buf);
	int r = strobe_otlp_decode(buf, n, NULL, b, err);
	free(buf);
	return r;
}

static const char *label(const strobe_otlp_series *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return NULL;
}

/* The folded text of one type of p, lines sorted by the writer's order. */
static char *folded(strobe_profile *p, int type)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(strobe_folded_write(f, p, type, STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	return buf;
}

static void test_mapping(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 1);
	assert_int_equal(b.nprofiles, 1);
	strobe_profile *p = b.s[0].profile;
	assert_non_null(p);
	assert_int_equal(p->ntypes, 1);
	assert_string_equal(strobe_str(p, p->types[0].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[0].unit), "nanoseconds");
	assert_int_equal(strobe_total(p, 0), 900);
	assert_int_equal(p->time_nanos, 1700000000000000000ll);
	assert_int_equal(p->duration_nanos, 10000000000ll);
	char *fo = folded(p, 0);
	/* hash inlined into work: the location shows both, leaf first */
	assert_string_equal(fo, "main;work 300\nmain;work;work;hash 600\n");
	free(fo);
	/* the mapping and the address came through */
	uint32_t found = 0;
	for (uint32_t i = 1; i < p->locations.n; i++) {
		const strobe_location *l = strobe_location_get(p, i);
		if (l->address == 0x1100) {
			assert_int_equal(l->mapping, 1);
			const strobe_mapping *m = strobe_mapping_get(p, l->mapping);
			assert_int_equal(m->start, 0x1000);
			assert_string_equal(strobe_str(p, m->filename), "/bin/app");
			assert_int_equal(l->line[0].line, 10);
			found++;
		}
	}
	assert_int_equal(found, 1);
	strobe_otlp_batch_free(&b);
}

static void test_labels(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.prof[0].attribute_indices = f.pattr;
	f.pattr[0] = 2; /* env=staging on the profile */
	f.prof[0].n_attribute_indices = 1;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 1);
	const strobe_otlp_series *s = &b.s[0];
	assert_string_equal(label(s, "service_name"), "checkout");
	assert_string_equal(label(s, "k8s_pod_name"), "pod-1");
	assert_string_equal(label(s, "host_cpus"), "8");
	assert_string_equal(label(s, "team"), "payments");
	assert_string_equal(label(s, "env"), "staging");
	assert_null(label(s, "service.name"));
	assert_int_equal(s->nlabels, 5);
	for (size_t i = 1; i < s->nlabels; i++) /* sorted */
		assert_true(strcmp(s->labels[i - 1].name, s->labels[i].name) < 0);
	strobe_otlp_batch_free(&b);

	/* the scope overrides the resource; no service.name at all: unknown_service */
	fx_init(&f);
	f.skv[0].key = (char *)"k8s.pod.name";
	f.res.n_attributes = 0;
	f.res.attributes = NULL;
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_string_equal(label(&b.s[0], "k8s_pod_name"), "payments");
	assert_string_equal(label(&b.s[0], "service_name"), "unknown_service");
	strobe_otlp_batch_free(&b);

	/* a process's attributes on the resource take the sample label names (pid, exe...) */
	fx_init(&f);
	f.rkv[1].key = (char *)"process.pid";
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_string_equal(label(&b.s[0], "pid"), "pod-1");
	assert_null(label(&b.s[0], "process_pid"));
	strobe_otlp_batch_free(&b);
}

static void test_several_types(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.sp.n_profiles = 2;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 1); /* one series, two sample types */
	assert_int_equal(b.s[0].nprofiles, 2);
	strobe_profile *p = b.s[0].profile;
	assert_int_equal(p->ntypes, 2);
	assert_string_equal(strobe_str(p, p->types[1].type), "samples");
	assert_int_equal(strobe_total(p, 0), 900);
	assert_int_equal(strobe_total(p, 1), 9);
	strobe_otlp_batch_free(&b);

	/* the second profile with other labels: two series of one type each */
	f.prof[1].attribute_indices = f.pattr;
	f.pattr[0] = 2;
	f.prof[1].n_attribute_indices = 1;
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 2);
	assert_int_equal(b.s[0].profile->ntypes, 1);
	assert_int_equal(b.s[1].profile->ntypes, 1);
	assert_int_equal(strobe_total(b.s[1].profile, 0), 9);
	assert_string_equal(label(&b.s[1], "env"), "staging");
	assert_null(label(&b.s[0], "env"));
	strobe_otlp_batch_free(&b);

	/* two profiles of the same type and labels: two series, not summed into one column */
	fx_init(&f);
	f.sp.n_profiles = 2;
	f.prof[1].sample_type = &f.vt[0];
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 2);
	assert_int_equal(strobe_total(b.s[0].profile, 0) + strobe_total(b.s[1].profile, 0), 909);
	strobe_otlp_batch_free(&b);

	/* an empty type is read as samples/count: beside a samples/count profile, two series (the
	 * fuzzer found them merged into one profile with the type twice) */
	fx_init(&f);
	f.sp.n_profiles = 2;
	f.vt[0].type_strindex = 0;
	f.vt[0].unit_strindex = 0;
	assert_int_equal(decode(&f, &b, &err), 0);
	assert_int_equal(b.n, 2);
	assert_string_equal(strobe_str(b.s[0].profile, b.s[0].profile->types[0].type), "samples");
	strobe_otlp_batch_free(&b);
}

static void test_index_zero(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	/* stack 0: the empty stack (a root sample); location 0 in a stack: skipped; mapping 0 and
	 * function 0: none */
	f.smp[1].stack_index = 0;
	f.st1[0] = 0; /* hash's location replaced by the zero location */
	f.loc[1].mapping_index = 0;
	f.line[2].function_index = 0;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	strobe_profile *p = b.s[0].profile;
	assert_int_equal(strobe_total(p, 0), 900);
	uint32_t roots = 0, depth2 = 0;
	for (uint32_t id = 1; id <= strobe_nsamples(p); id++) {
		const strobe_sample_key *k = strobe_sample(p, id);
		if (k->stack == 0)
			roots++, assert_int_equal(strobe_sample_values(p, id)[0], 300);
		else
			depth2 += strobe_stack_depth(p, k->stack) == 2;
	}
	assert_int_equal(roots, 1);
	assert_int_equal(depth2, 1);
	for (uint32_t i = 1; i < p->locations.n; i++) {
		const strobe_location *l = strobe_location_get(p, i);
		if (l->address == 0x1100)
			assert_int_equal(l->mapping, 0);
	}
	strobe_otlp_batch_free(&b);
}

static void expect_bad(fx *f, const char *what)
{
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	int r = decode(f, &b, &err);
	assert_true(r == -EINVAL || r == -E2BIG);
	if (!strstr(err.msg, what))
		fail_msg("message '%s' does not name '%s'", err.msg, what);
	assert_int_equal(b.n, 0);
	assert_null(b.s);
}

static void test_bad_indices(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.smp[0].stack_index = 3;
	expect_bad(&f, "stack index 3");
	fx_init(&f);
	f.smp[0].stack_index = -1;
	expect_bad(&f, "stack index -1");
	fx_init(&f);
	f.st1[1] = 4;
	expect_bad(&f, "location index 4");
	fx_init(&f);
	f.loc[2].mapping_index = 2;
	expect_bad(&f, "mapping index 2");
	fx_init(&f);
	f.line[3].function_index = 9;
	expect_bad(&f, "function index 9");
	fx_init(&f);
	f.fn[2].name_strindex = 12;
	expect_bad(&f, "string index 12");
	fx_init(&f);
	f.vt[0].type_strindex = 100;
	expect_bad(&f, "string index 100");
	fx_init(&f);
	f.smp[0].attribute_indices = f.sattr;
	f.smp[0].n_attribute_indices = 1;
	f.sattr[0] = 3;
	expect_bad(&f, "attribute index 3");
	fx_init(&f);
	f.smp[0].attribute_indices = f.sattr;
	f.smp[0].n_attribute_indices = 1;
	f.sattr[0] = 0; /* the reserved zero attribute is no attribute to name */
	expect_bad(&f, "attribute index 0");
	fx_init(&f);
	f.smp[0].link_index = 2;
	expect_bad(&f, "link index 2");
	fx_init(&f);
	f.strs[0] = (char *)"x";
	expect_bad(&f, "string_table[0]");
	fx_init(&f);
	f.vals[0][0] = INT64_MAX;
	f.smp[0].n_values = 2;
	f.vals[0][1] = 1;
	expect_bad(&f, "overflow");
	/* not a request at all */
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	const uint8_t junk[] = {0x0a, 0x05, 0x01};
	assert_int_equal(strobe_otlp_decode(junk, sizeof(junk), NULL, &b, &err), -EINVAL);
}

static void test_caps(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.sp.n_profiles = 2;
	size_t n = protobuf_c_message_get_packed_size(&f.req.base);
	uint8_t *buf = malloc(n);
	protobuf_c_message_pack(&f.req.base, buf);
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	strobe_otlp_limits lim = {.max_profiles = 1};
	assert_int_equal(strobe_otlp_decode(buf, n, &lim, &b, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "max_profiles_per_push"));
	lim = (strobe_otlp_limits){.max_labels = 3}; /* 4 labels + unknown */
	assert_int_equal(strobe_otlp_decode(buf, n, &lim, &b, &err), -E2BIG);
	free(buf);
	/* a stack deeper than STROBE_MAX_DEPTH */
	fx_init(&f);
	int32_t *deep = malloc((STROBE_MAX_DEPTH + 1) * sizeof(*deep));
	for (uint32_t i = 0; i <= STROBE_MAX_DEPTH; i++)
		deep[i] = 1;
	f.stk[1].location_indices = deep;
	f.stk[1].n_location_indices = STROBE_MAX_DEPTH + 1;
	expect_bad(&f, "frames, at most");
	free(deep);
}

static void test_sample_labels_and_timestamps(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.smp[0].attribute_indices = f.sattr;
	f.smp[0].n_attribute_indices = 1;
	f.sattr[0] = 1; /* thread.name = w1 */
	f.smp[0].link_index = 1;
	uint64_t ts[5] = {1, 2, 3, 4, 5};
	f.smp[1].n_values = 0; /* timestamps only: each counts 1 */
	f.smp[1].timestamps_unix_nano = ts;
	f.smp[1].n_timestamps_unix_nano = 5;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	strobe_profile *p = b.s[0].profile;
	assert_int_equal(strobe_total(p, 0), 605);
	bool seen = false;
	for (uint32_t id = 1; id <= strobe_nsamples(p); id++) {
		const strobe_sample_key *k = strobe_sample(p, id);
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, k->labels, &n);
		if (!n)
			continue;
		assert_int_equal(n, 3);
		for (uint32_t i = 0; i < n; i++) {
			const char *key = strobe_str(p, l[i].key), *v = strobe_str(p, l[i].str);
			if (strcmp(key, "thread") == 0)
				assert_string_equal(v, "w1");
			else if (strcmp(key, "trace_id") == 0)
				assert_string_equal(v, "0102030405060708090a0b0c0d0e0f10");
			else if (strcmp(key, "span_id") == 0)
				assert_string_equal(v, "a0a1a2a3a4a5a6a7");
			else
				fail_msg("unexpected label %s", key);
		}
		assert_int_equal(strobe_sample_values(p, id)[0], 600);
		seen = true;
	}
	assert_true(seen);
	strobe_otlp_batch_free(&b);
}

/* As decode, with the server's fast path: series as pprof views where they can be. */
static int decode_v(fx *f, strobe_otlp_batch *b, strobe_err *err)
{
	size_t n = protobuf_c_message_get_packed_size(&f->req.base);
	uint8_t *buf = malloc(n + 1);
	assert_non_null(buf);
	protobuf_c_message_pack(&f->req.base, buf);
	strobe_otlp_limits lim = {.views = true};
	int r = strobe_otlp_decode(buf, n, &lim, b, err);
	free(buf);
	return r;
}

static int64_t view_total(const strobe_pprof_view *v, uint32_t t)
{
	int64_t s = 0;
	for (uint32_t i = 0; i < v->nsamples; i++)
		s += v->values[(size_t)i * v->hdr->ntypes + t];
	return s;
}

/* The name of view function id fn ("" for none). */
static const char *vfn(const strobe_pprof_view *v, uint32_t fn)
{
	static char nm[64];
	if (!fn)
		return "";
	const strobe_pprof_str *s = &v->str[v->fns[fn - 1].name];
	snprintf(nm, sizeof(nm), "%.*s", (int)s->len, s->p);
	return nm;
}

static void test_view(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.sp.n_profiles = 2;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode_v(&f, &b, &err), 0);
	assert_int_equal(b.n, 1);
	const strobe_pprof_view *v = b.s[0].view;
	assert_non_null(v);
	assert_null(b.s[0].profile);
	assert_true(v->simple);
	/* the header a model would have: two types, time, labels as the model path's */
	assert_int_equal(v->hdr->ntypes, 2);
	assert_string_equal(strobe_str(v->hdr, v->hdr->types[1].type), "samples");
	assert_int_equal(v->hdr->time_nanos, 1700000000000000000ll);
	assert_string_equal(label(&b.s[0], "service_name"), "checkout");
	/* one view sample per distinct stack, both types' values in it */
	assert_int_equal(v->nsamples, 2);
	assert_int_equal(view_total(v, 0), 900);
	assert_int_equal(view_total(v, 1), 9);
	bool deep = false;
	for (uint32_t i = 0; i < v->nsamples; i++) {
		uint32_t n = v->soff[i + 1] - v->soff[i];
		const uint32_t *fr = v->sloc + v->soff[i];
		if (n != 3)
			continue;
		deep = true;
		/* leaf first: hash (inlined into work: two lines), work, main */
		const strobe_pprof_loc *leaf = &v->locs[fr[0] - 1];
		assert_int_equal(leaf->nline, 2);
		assert_string_equal(vfn(v, v->lines[leaf->line0].function), "hash");
		assert_string_equal(vfn(v, v->lines[leaf->line0 + 1].function), "work");
		assert_int_equal(v->lines[leaf->line0].line, 30);
		const strobe_pprof_loc *root = &v->locs[fr[2] - 1];
		assert_string_equal(vfn(v, v->lines[root->line0].function), "main");
		assert_int_equal(root->address, 0x1100);
		assert_int_equal(root->mapping, 1);
		const strobe_pprof_str *fnm = &v->str[v->maps[root->mapping - 1].filename];
		assert_int_equal(fnm->len, 8);
		assert_memory_equal(fnm->p, "/bin/app", 8);
		assert_int_equal(v->values[(size_t)i * 2], 600);
		assert_int_equal(v->values[(size_t)i * 2 + 1], 6);
	}
	assert_true(deep);
	strobe_otlp_batch_free(&b);

	/* index 0: the empty stack is a sample without frames, the zero location is skipped,
	 * function 0 is none */
	fx_init(&f);
	f.smp[1].stack_index = 0;
	f.st1[0] = 0;
	f.line[2].function_index = 0;
	assert_int_equal(decode_v(&f, &b, &err), 0);
	v = b.s[0].view;
	assert_non_null(v);
	assert_int_equal(view_total(v, 0), 900);
	uint32_t roots = 0, two = 0;
	for (uint32_t i = 0; i < v->nsamples; i++) {
		uint32_t n = v->soff[i + 1] - v->soff[i];
		roots += n == 0 && v->values[i] == 300;
		if (n == 2) {
			two++;
			const strobe_pprof_loc *l = &v->locs[v->sloc[v->soff[i]] - 1];
			assert_int_equal(v->lines[l->line0].function, 0);
		}
	}
	assert_int_equal(roots, 1);
	assert_int_equal(two, 1);
	strobe_otlp_batch_free(&b);

	/* a sample with attributes (sample labels): the model, as without views */
	fx_init(&f);
	f.smp[0].attribute_indices = f.sattr;
	f.smp[0].n_attribute_indices = 1;
	f.sattr[0] = 1;
	assert_int_equal(decode_v(&f, &b, &err), 0);
	assert_null(b.s[0].view);
	assert_non_null(b.s[0].profile);
	assert_int_equal(strobe_total(b.s[0].profile, 0), 900);
	strobe_otlp_batch_free(&b);

	/* a bad index: the model's refusal and message, not the view's */
	fx_init(&f);
	f.smp[1].stack_index = 7;
	assert_int_equal(decode_v(&f, &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stack index 7 outside the table of 3"));
	fx_init(&f);
	f.line[2].function_index = 9;
	assert_int_equal(decode_v(&f, &b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "function index 9"));
	assert_int_equal(b.n, 0);
}

static void test_encode_roundtrip(void **state)
{
	(void)state;
	fx f;
	fx_init(&f);
	f.sp.n_profiles = 2;
	f.smp[0].attribute_indices = f.sattr;
	f.smp[0].n_attribute_indices = 1;
	f.sattr[0] = 1;
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	assert_int_equal(decode(&f, &b, &err), 0);
	strobe_profile *p = b.s[0].profile;
	strobe_otlp_label ls[] = {{(char *)"service_name", (char *)"svc"},
				  {(char *)"region", (char *)"eu"}};
	uint8_t *buf;
	size_t len;
	assert_int_equal(strobe_otlp_encode(p, ls, 2, &buf, &len), 0);
	/* what we wrote is detected as OTLP, not pprof */
	assert_int_equal(strobe_detect(buf, len), STROBE_FMT_OTLP);
	strobe_otlp_batch b2;
	assert_int_equal(strobe_otlp_decode(buf, len, NULL, &b2, &err), 0);
	free(buf);
	assert_int_equal(b2.n, 1);
	assert_int_equal(b2.nprofiles, 2);
	strobe_profile *q = b2.s[0].profile;
	assert_string_equal(label(&b2.s[0], "service_name"), "svc");
	assert_string_equal(label(&b2.s[0], "region"), "eu");
	assert_int_equal(q->ntypes, 2);
	for (int t = 0; t < 2; t++) {
		assert_int_equal(strobe_total(q, t), strobe_total(p, t));
		char *a = folded(p, t), *c = folded(q, t);
		assert_string_equal(a, c);
		free(a);
		free(c);
	}
	assert_int_equal(q->time_nanos, p->time_nanos);
	assert_int_equal(strobe_nsamples(q), strobe_nsamples(p));
	strobe_otlp_batch_free(&b2);
	strobe_otlp_batch_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mapping),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_several_types),
		cmocka_unit_test(test_index_zero),
		cmocka_unit_test(test_bad_indices),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_sample_labels_and_timestamps),
		cmocka_unit_test(test_encode_roundtrip),
		cmocka_unit_test(test_view),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
