// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the pprof codec: real Go profiles decode to the totals and sample counts
 * `go tool pprof -raw` reports; decode-encode-decode is the identity on the model (every table,
 * byte for byte) and encoding is a fixpoint; a hand-built profile with everything pprof can say
 * (sparse ids, inlined lines, columns, string and numeric labels with units, mapping flags and
 * build ids, comments, drop/keep frames, a default sample type, a string with a NUL byte) keeps
 * all of it; and each kind of corruption is rejected with -EINVAL and a message naming it.
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

#include "fixtures.h"

#include "profile.pb-c.h"
#include "strobe/codec.h"

/* Through strobe_slurp (which gunzips) and the raw decoder, as the brief of the codec has it. */
static strobe_profile *load_path(const char *path)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	uint8_t *buf;
	size_t len;
	if (strobe_slurp(path, &buf, &len, &err) < 0)
		fail_msg("%s", err.msg);
	if (strobe_pprof_decode(buf, len, path, &p, &err) < 0)
		fail_msg("%s", err.msg);
	free(buf);
	return p;
}

/* encode, gunzip, decode. *raw_out (optional) receives the serialized protobuf. */
static strobe_profile *reencode(const strobe_profile *p, uint8_t **raw_out, size_t *rawlen_out)
{
	uint8_t *gz, *raw;
	size_t gzlen, rawlen;
	strobe_profile *q = NULL;
	strobe_err err = {{0}};
	assert_int_equal(strobe_pprof_encode(p, &gz, &gzlen), 0);
	assert_true(gzlen > 2 && gz[0] == 0x1f && gz[1] == 0x8b); /* gzipped, as pprof files are */
	assert_int_equal(strobe_gunzip(gz, gzlen, &raw, &rawlen, NULL), 0);
	if (strobe_pprof_decode(raw, rawlen, "re-encoded", &q, &err) < 0)
		fail_msg("%s", err.msg);
	free(gz);
	if (raw_out) {
		*raw_out = raw;
		*rawlen_out = rawlen;
	} else {
		free(raw);
	}
	return q;
}

static void same_table(const strobe_itab *a, const strobe_itab *b, const char *what)
{
	if (a->n != b->n)
		fail_msg("%s: %u entries vs %u", what, a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++) {
		size_t la, lb;
		const void *x = strobe_itab_get(a, i, &la), *y = strobe_itab_get(b, i, &lb);
		if (la != lb || memcmp(x, y, la) != 0)
			fail_msg("%s: entry %u differs", what, i);
	}
}

/* p and q are the same model: same tables with the same ids, same values and header. */
static void assert_same_profile(const strobe_profile *p, const strobe_profile *q)
{
	same_table(&p->strings, &q->strings, "strings");
	same_table(&p->functions, &q->functions, "functions");
	same_table(&p->mappings, &q->mappings, "mappings");
	same_table(&p->locations, &q->locations, "locations");
	same_table(&p->stacks, &q->stacks, "stacks");
	same_table(&p->labelsets, &q->labelsets, "label sets");
	same_table(&p->samples, &q->samples, "samples");
	assert_int_equal(q->ntypes, p->ntypes);
	assert_memory_equal(q->types, p->types, p->ntypes * sizeof(*p->types));
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		assert_memory_equal(strobe_sample_values(q, s), strobe_sample_values(p, s),
				    p->ntypes * sizeof(int64_t));
	assert_int_equal(q->default_type, p->default_type);
	assert_memory_equal(&q->period_type, &p->period_type, sizeof(p->period_type));
	assert_int_equal(q->period, p->period);
	assert_int_equal(q->time_nanos, p->time_nanos);
	assert_int_equal(q->duration_nanos, p->duration_nanos);
	assert_int_equal(q->ncomments, p->ncomments);
	if (p->ncomments)
		assert_memory_equal(q->comments, p->comments, p->ncomments * sizeof(uint32_t));
	assert_int_equal(q->drop_frames, p->drop_frames);
	assert_int_equal(q->keep_frames, p->keep_frames);
}

/* ---- real profiles ------------------------------------------------------------------------- */

/* The external vector pprof/NAME (../shared/testdata): its contents are pinned below. */
static char ext_path[4096];
static strobe_profile *load(const char *name)
{
	snprintf(ext_path, sizeof(ext_path), "pprof/%s", name);
	const char *path = external_fixture(ext_path);
	if (!path)
		fail_msg("%s: %s", ext_path, EXTERNAL_MISSING);
	return load_path(path);
}

/* What go1.19.8's `go tool pprof -raw FILE` reports for each external test profile: `total` is the sum
 * of each value column of its Samples section, `samples` the number of sample lines there (it,
 * like strobe, merges samples with the same stack and labels: go_cpu.pb.gz holds 358 raw
 * samples, 309 distinct), `dflt` the type marked [dflt] (-1: none marked, so the last). -raw
 * also leaves out samples whose values are all zero, which strobe keeps (they still name their
 * stacks): `zero` counts them, and the location and mapping counts are those of the file
 * itself (both counted with protobuf-c's unpack in a scratch program: -raw lists only the
 * locations and mappings that samples use). */
static const struct real {
	const char *file;
	uint32_t ntypes;
	const char *types[4];
	int64_t total[4];
	uint32_t samples, zero, locations, mappings;
	int dflt;
	int64_t period;
} real[] = {
	{"go_cpu.pb.gz", 2, {"samples", "cpu"}, {370, 3700000000LL}, 309, 0, 488, 3, -1, 10000000},
	{"go_heap.pb.gz", 4, {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"},
	 {2708481, 424676540, 6708, 677278}, 42, 8, 98, 3, -1, 65536},
	{"go_allocs.pb.gz", 4, {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"},
	 {2708481, 424676540, 6708, 677278}, 42, 14, 107, 3, 1, 65536},
	{"go_block.pb.gz", 2, {"contentions", "delay"}, {128, 2386495368LL}, 3, 0, 8, 3, -1, 1},
	{"go_mutex.pb.gz", 2, {"contentions", "delay"}, {137, 150576234}, 1, 0, 2, 3, -1, 1},
	{"go_goroutine.pb.gz", 1, {"goroutine"}, {1}, 1, 0, 7, 3, -1, 1},
};

static void test_real_profiles(void **state)
{
	(void)state;
	if (!external_fixture("pprof/go_cpu.pb.gz"))
		SKIP_CASE(EXTERNAL_MISSING);
	for (size_t k = 0; k < sizeof(real) / sizeof(real[0]); k++) {
		const struct real *r = &real[k];
		strobe_profile *p = load(r->file);
		assert_int_equal(p->ntypes, r->ntypes);
		for (uint32_t t = 0; t < r->ntypes; t++) {
			assert_string_equal(strobe_str(p, p->types[t].type), r->types[t]);
			if (strobe_total(p, (int)t) != r->total[t])
				fail_msg("%s type %s: total %lld, go tool pprof says %lld", r->file,
					 r->types[t], (long long)strobe_total(p, (int)t),
					 (long long)r->total[t]);
		}
		assert_int_equal(strobe_nsamples(p), r->samples + r->zero);
		uint32_t zero = 0;
		for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
			bool all = true;
			for (uint32_t t = 0; t < p->ntypes; t++)
				all = all && strobe_sample_values(p, s)[t] == 0;
			zero += all;
		}
		assert_int_equal(zero, r->zero);
		assert_int_equal(p->locations.n - 1, r->locations);
		assert_int_equal(p->mappings.n - 1, r->mappings);
		assert_int_equal(p->default_type, r->dflt);
		assert_int_equal(p->period, r->period);
		strobe_profile_free(p);
	}

	/* Details of the CPU profile: period type, mappings, duration, pprof.Do labels. */
	strobe_profile *p = load("go_cpu.pb.gz");
	assert_string_equal(strobe_str(p, p->types[1].unit), "nanoseconds");
	assert_string_equal(strobe_str(p, p->period_type.type), "cpu");
	assert_string_equal(strobe_str(p, strobe_mapping_get(p, 1)->filename), "/tmp/gw/gowork");
	assert_int_equal(strobe_mapping_get(p, 1)->start, 0x400000);
	assert_int_equal(strobe_mapping_get(p, 1)->limit, 0x4e9000);
	assert_true(strobe_mapping_get(p, 1)->has_functions);
	assert_true(p->duration_nanos > 2000000000LL && p->duration_nanos < 2200000000LL);
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
	/* go tool pprof -raw: the first sample is "1 10000000: 1 2 3 4 5 6 7 8 9", location 1
	 * being 0x4e7bdd... the leaf. The model's stack for it is rooted at location 9. */
	const strobe_stack_node *leaf = strobe_stack_get(p, strobe_sample(p, 1)->stack);
	assert_int_equal(leaf->location, 1);
	assert_int_equal(strobe_stack_depth(p, strobe_sample(p, 1)->stack), 9);
	strobe_profile_free(p);

	/* Heap profiles carry numeric labels with units ("bytes"): they survive. */
	p = load("go_heap.pb.gz");
	found = false;
	for (uint32_t s = 1; s <= strobe_nsamples(p) && !found; s++) {
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, strobe_sample(p, s)->labels, &n);
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(strobe_str(p, l[i].key), "bytes") && l[i].str == 0 && l[i].num > 0)
				found = true;
	}
	assert_true(found);
	strobe_profile_free(p);
}

static void test_round_trip_is_identity(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(real) / sizeof(real[0]); k++) {
		/* The project's own profiles of the same names (goservice.go), whatever they hold. */
		if (access(go_fixture(real[k].file), R_OK) != 0)
			SKIP_CASE(GO_FIXTURE_MISSING);
		strobe_profile *p = load_path(go_fixture(real[k].file));
		uint8_t *raw1, *raw2;
		size_t len1, len2;
		strobe_profile *q = reencode(p, &raw1, &len1);
		assert_same_profile(p, q);
		/* And encoding what was decoded from strobe's own output gives the same bytes. */
		strobe_profile *r = reencode(q, &raw2, &len2);
		assert_int_equal(len1, len2);
		assert_memory_equal(raw1, raw2, len1);
		free(raw1);
		free(raw2);
		strobe_profile_free(p);
		strobe_profile_free(q);
		strobe_profile_free(r);
	}
}

/* ---- a hand-built profile ------------------------------------------------------------------ */

/* A small valid profile as protobuf-c structs, to corrupt field by field. Ids are sparse and
 * out of order on purpose: pprof ids are arbitrary. */
enum { S_EMPTY, S_SAMPLES, S_COUNT, S_MAIN, S_K, S_CPU, S_NS, S_WORK, S_FILE, S_BIN, S_BUILD,
       S_BYTES, S_VAL, S_NUL, S_MAIN2, S_NOTE, S_DROP, S_KEEP, S_N };

typedef struct tiny {
	Perftools__Profiles__Profile pb;
	Perftools__Profiles__ValueType vt[2], *vtp[2], period_type;
	Perftools__Profiles__Function fn[3], *fnp[3];
	Perftools__Profiles__Mapping map, *mapp[1];
	Perftools__Profiles__Line line[3], *linep[3];
	Perftools__Profiles__Location loc[2], *locp[2];
	Perftools__Profiles__Sample s[2], *sp[2];
	Perftools__Profiles__Label lab[3], *labp[3];
	uint64_t locids[2], locids1[1];
	int64_t values[2], values1[2], comments[2];
	char *strings[S_N];
} tiny;

static void tiny_init(tiny *t)
{
	memset(t, 0, sizeof(*t));
	perftools__profiles__profile__init(&t->pb);
	static const char *const str[S_N] = {
		[S_EMPTY] = "", [S_SAMPLES] = "samples", [S_COUNT] = "count", [S_MAIN] = "main",
		[S_K] = "k", [S_CPU] = "cpu", [S_NS] = "nanoseconds", [S_WORK] = "work",
		[S_FILE] = "main.c", [S_BIN] = "/usr/bin/app", [S_BUILD] = "abc123",
		[S_BYTES] = "bytes", [S_VAL] = "v1",
		[S_NUL] = "a#b", /* the # becomes a NUL byte in the packed bytes (pack_tiny) */
		[S_MAIN2] = "main", /* a duplicate entry: pprof allows it, the model interns it */
		[S_NOTE] = "a comment", [S_DROP] = "^runtime\\.", [S_KEEP] = "^main\\."};
	for (int i = 0; i < S_N; i++)
		t->strings[i] = (char *)str[i];
	t->pb.n_string_table = S_N;
	t->pb.string_table = t->strings;
	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&t->vt[i]);
		t->vtp[i] = &t->vt[i];
	}
	t->vt[0].type = S_SAMPLES;
	t->vt[0].unit = S_COUNT;
	t->vt[1].type = S_CPU;
	t->vt[1].unit = S_NS;
	t->pb.n_sample_type = 2;
	t->pb.sample_type = t->vtp;
	perftools__profiles__value_type__init(&t->period_type);
	t->period_type.type = S_CPU;
	t->period_type.unit = S_NS;
	t->pb.period_type = &t->period_type;
	t->pb.period = 10000000;
	t->pb.time_nanos = 1700000000123456789LL;
	t->pb.duration_nanos = 2500000000LL;
	t->pb.default_sample_type = S_CPU;
	t->comments[0] = S_NOTE;
	t->comments[1] = S_NUL;
	t->pb.n_comment = 2;
	t->pb.comment = t->comments;
	t->pb.drop_frames = S_DROP;
	t->pb.keep_frames = S_KEEP;

	for (int i = 0; i < 3; i++) {
		perftools__profiles__function__init(&t->fn[i]);
		t->fnp[i] = &t->fn[i];
	}
	t->fn[0].id = 7;
	t->fn[0].name = S_MAIN;
	t->fn[0].filename = S_FILE;
	t->fn[0].start_line = 10;
	t->fn[1].id = 1000;
	t->fn[1].name = S_WORK;
	t->fn[1].system_name = S_WORK;
	t->fn[1].filename = S_FILE;
	t->fn[1].start_line = 40;
	t->fn[2].id = 3;
	t->fn[2].name = S_MAIN2; /* same as fn 7 but for start_line: a distinct function */
	t->pb.n_function = 3;
	t->pb.function = t->fnp;

	perftools__profiles__mapping__init(&t->map);
	t->map.id = 12345678901ULL;
	t->map.memory_start = 0x400000;
	t->map.memory_limit = 0x500000;
	t->map.file_offset = 0x1000;
	t->map.filename = S_BIN;
	t->map.build_id = S_BUILD;
	t->map.has_functions = 1;
	t->map.has_line_numbers = 1;
	t->map.has_inline_frames = 1;
	t->mapp[0] = &t->map;
	t->pb.n_mapping = 1;
	t->pb.mapping = t->mapp;

	for (int i = 0; i < 3; i++) {
		perftools__profiles__line__init(&t->line[i]);
		t->linep[i] = &t->line[i];
	}
	/* Location 42: work() inlined into main() (leaf-first lines). Location 1<<40: main(). */
	t->line[0].function_id = 1000;
	t->line[0].line = 44;
	t->line[0].column = 5;
	t->line[1].function_id = 7;
	t->line[1].line = 12;
	t->line[2].function_id = 7;
	t->line[2].line = 11;
	for (int i = 0; i < 2; i++) {
		perftools__profiles__location__init(&t->loc[i]);
		t->locp[i] = &t->loc[i];
		t->loc[i].mapping_id = 12345678901ULL;
	}
	t->loc[0].id = 42;
	t->loc[0].address = 0x401234;
	t->loc[0].n_line = 2;
	t->loc[0].line = &t->linep[0];
	t->loc[1].id = 1ULL << 40;
	t->loc[1].address = 0x400100;
	t->loc[1].is_folded = 1;
	t->loc[1].n_line = 1;
	t->loc[1].line = &t->linep[2];
	t->pb.n_location = 2;
	t->pb.location = t->locp;

	for (int i = 0; i < 3; i++) {
		perftools__profiles__label__init(&t->lab[i]);
		t->labp[i] = &t->lab[i];
	}
	t->lab[0].key = S_K; /* numeric, no unit */
	t->lab[0].num = 9;
	t->lab[1].key = S_BYTES; /* numeric with unit */
	t->lab[1].num = 1024;
	t->lab[1].num_unit = S_BYTES;
	t->lab[2].key = S_K; /* string, with a NUL inside */
	t->lab[2].str = S_NUL;
	for (int i = 0; i < 2; i++) {
		perftools__profiles__sample__init(&t->s[i]);
		t->sp[i] = &t->s[i];
		t->s[i].n_value = 2;
	}
	/* Sample 0: main -> work (leaf first: 42, then 1<<40), labels k=9, bytes=1024 bytes. */
	t->locids[0] = 42;
	t->locids[1] = 1ULL << 40;
	t->values[0] = 5;
	t->values[1] = 50000000;
	t->s[0].n_location_id = 2;
	t->s[0].location_id = t->locids;
	t->s[0].value = t->values;
	t->s[0].n_label = 2;
	t->s[0].label = &t->labp[0];
	/* Sample 1: main alone, label k="a\0b". */
	t->locids1[0] = 1ULL << 40;
	t->values1[0] = 2;
	t->values1[1] = 20000000;
	t->s[1].n_location_id = 1;
	t->s[1].location_id = t->locids1;
	t->s[1].value = t->values1;
	t->s[1].n_label = 1;
	t->s[1].label = &t->labp[2];
	t->pb.n_sample = 2;
	t->pb.sample = t->sp;
}

static uint8_t *pack_tiny(tiny *t, size_t *len)
{
	*len = perftools__profiles__profile__get_packed_size(&t->pb);
	uint8_t *buf = malloc(*len + 1);
	perftools__profiles__profile__pack(&t->pb, buf);
	uint8_t *hit = memmem(buf, *len, "a#b", 3);
	if (hit)
		hit[1] = '\0';
	return buf;
}

static int decode_tiny(tiny *t, strobe_profile **out, strobe_err *err)
{
	size_t len;
	uint8_t *buf = pack_tiny(t, &len);
	strobe_profile *p = (strobe_profile *)1;
	memset(err, 0, sizeof(*err));
	int r = strobe_pprof_decode(buf, len, "t.pb", &p, err);
	free(buf);
	if (r == 0) {
		assert_int_equal(strobe_total(p, 0), 7);
		if (out)
			*out = p;
		else
			strobe_profile_free(p);
	} else {
		assert_null(p);
	}
	return r;
}

static uint32_t str_id(const strobe_profile *p, const char *s, size_t len)
{
	char key[64];
	memcpy(key, s, len);
	key[len] = 0;
	uint32_t id = strobe_itab_find(&p->strings, key, len + 1);
	assert_int_not_equal(id, UINT32_MAX);
	return id;
}

/* Checks that p holds exactly what tiny_init describes. */
static void check_tiny_model(const strobe_profile *p)
{
	assert_int_equal(p->ntypes, 2);
	assert_string_equal(strobe_str(p, p->types[1].type), "cpu");
	assert_string_equal(strobe_str(p, p->types[1].unit), "nanoseconds");
	assert_int_equal(p->default_type, 1);
	assert_string_equal(strobe_str(p, p->period_type.type), "cpu");
	assert_int_equal(p->period, 10000000);
	assert_int_equal(p->time_nanos, 1700000000123456789LL);
	assert_int_equal(p->duration_nanos, 2500000000LL);
	assert_int_equal(p->ncomments, 2);
	assert_string_equal(strobe_str(p, p->comments[0]), "a comment");
	assert_int_equal(p->comments[1], str_id(p, "a\0b", 3));
	assert_int_equal(strobe_str_len(p, p->comments[1]), 3);
	assert_string_equal(strobe_str(p, p->drop_frames), "^runtime\\.");
	assert_string_equal(strobe_str(p, p->keep_frames), "^main\\.");
	assert_int_equal(p->functions.n - 1, 3);
	assert_int_equal(p->mappings.n - 1, 1);
	assert_int_equal(p->locations.n - 1, 2);
	assert_int_equal(strobe_nsamples(p), 2);
	assert_int_equal(strobe_total(p, 1), 70000000);

	const strobe_mapping *m = strobe_mapping_get(p, 1);
	assert_int_equal(m->start, 0x400000);
	assert_int_equal(m->limit, 0x500000);
	assert_int_equal(m->offset, 0x1000);
	assert_string_equal(strobe_str(p, m->filename), "/usr/bin/app");
	assert_string_equal(strobe_str(p, m->build_id), "abc123");
	assert_true(m->has_functions && !m->has_filenames && m->has_line_numbers &&
		    m->has_inline_frames);

	/* Sample 1 (the first): stack root main@0x400100 -> leaf 0x401234 with work inlined. */
	const strobe_sample_key *k = strobe_sample(p, 1);
	assert_int_equal(strobe_stack_depth(p, k->stack), 2);
	const strobe_stack_node *leaf = strobe_stack_get(p, k->stack);
	const strobe_location *l = strobe_location_get(p, leaf->location);
	assert_int_equal(l->address, 0x401234);
	assert_int_equal(l->mapping, 1);
	assert_false(l->is_folded);
	assert_int_equal(l->nline, 2);
	const strobe_function *f = strobe_function_get(p, l->line[0].function);
	assert_string_equal(strobe_str(p, f->name), "work"); /* innermost first */
	assert_string_equal(strobe_str(p, f->system_name), "work");
	assert_string_equal(strobe_str(p, f->filename), "main.c");
	assert_int_equal(f->start_line, 40);
	assert_int_equal(l->line[0].line, 44);
	assert_int_equal(l->line[0].column, 5);
	assert_string_equal(strobe_str(p, strobe_function_get(p, l->line[1].function)->name),
			    "main");
	assert_int_equal(l->line[1].line, 12);
	const strobe_location *root = strobe_location_get(
		p, strobe_stack_get(p, leaf->parent)->location);
	assert_int_equal(root->address, 0x400100);
	assert_true(root->is_folded);
	assert_int_equal(strobe_stack_get(p, leaf->parent)->parent, 0);
	assert_int_equal(strobe_sample_values(p, 1)[0], 5);
	assert_int_equal(strobe_sample_values(p, 1)[1], 50000000);
	uint32_t n;
	const strobe_label *lab = strobe_labelset_get(p, k->labels, &n);
	assert_int_equal(n, 2);
	for (uint32_t i = 0; i < n; i++) {
		if (!strcmp(strobe_str(p, lab[i].key), "k")) {
			assert_int_equal(lab[i].str, 0);
			assert_int_equal(lab[i].num, 9);
			assert_int_equal(lab[i].num_unit, 0);
		} else {
			assert_string_equal(strobe_str(p, lab[i].key), "bytes");
			assert_int_equal(lab[i].num, 1024);
			assert_string_equal(strobe_str(p, lab[i].num_unit), "bytes");
		}
	}
	/* Sample 2: main alone, k = "a\0b" with its NUL. */
	k = strobe_sample(p, 2);
	assert_int_equal(strobe_stack_depth(p, k->stack), 1);
	lab = strobe_labelset_get(p, k->labels, &n);
	assert_int_equal(n, 1);
	assert_int_equal(lab[0].str, str_id(p, "a\0b", 3));
}

static void test_everything_pprof_can_say_survives(void **state)
{
	(void)state;
	tiny t;
	strobe_err err;
	strobe_profile *p = NULL;
	tiny_init(&t);
	if (decode_tiny(&t, &p, &err) < 0)
		fail_msg("%s", err.msg);
	check_tiny_model(p);

	uint8_t *raw;
	size_t rawlen;
	strobe_profile *q = reencode(p, &raw, &rawlen);
	check_tiny_model(q);
	assert_same_profile(p, q);

	/* The wire form: dense ids from 1, leaf-first location lists, "" first, exact strings. */
	Perftools__Profiles__Profile *pb = perftools__profiles__profile__unpack(NULL, rawlen, raw);
	assert_non_null(pb);
	assert_string_equal(pb->string_table[0], "");
	assert_non_null(memmem(raw, rawlen, "a\0b", 3));
	for (size_t i = 0; i < pb->n_function; i++)
		assert_int_equal(pb->function[i]->id, i + 1);
	for (size_t i = 0; i < pb->n_location; i++) {
		assert_int_equal(pb->location[i]->id, i + 1);
		assert_int_equal(pb->location[i]->mapping_id, 1);
	}
	assert_int_equal(pb->mapping[0]->id, 1);
	assert_int_equal(pb->n_sample, 2);
	assert_int_equal(pb->sample[0]->n_location_id, 2);
	const Perftools__Profiles__Location *leaf = pb->location[pb->sample[0]->location_id[0] - 1];
	assert_int_equal(leaf->address, 0x401234);
	assert_int_equal(leaf->n_line, 2);
	assert_string_equal(pb->string_table[pb->function[leaf->line[0]->function_id - 1]->name],
			    "work");
	assert_string_equal(pb->string_table[pb->default_sample_type], "cpu");
	bool unit = false;
	for (size_t i = 0; i < pb->sample[0]->n_label; i++)
		if (pb->sample[0]->label[i]->num_unit)
			unit = !strcmp(pb->string_table[pb->sample[0]->label[i]->num_unit], "bytes");
	assert_true(unit);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	free(raw);
	strobe_profile_free(p);
	strobe_profile_free(q);
}

static void test_default_type_and_empty_profile(void **state)
{
	(void)state;
	tiny t;
	strobe_err err;
	strobe_profile *p;
	/* A default_sample_type no type has is no default: pprof falls back to the last type. */
	tiny_init(&t);
	t.pb.default_sample_type = S_MAIN;
	assert_int_equal(decode_tiny(&t, &p, &err), 0);
	assert_int_equal(p->default_type, -1);
	assert_int_equal(strobe_default_type_index(p), 1);
	strobe_profile_free(p);
	tiny_init(&t);
	t.pb.default_sample_type = 0;
	assert_int_equal(decode_tiny(&t, &p, &err), 0);
	assert_int_equal(p->default_type, -1);
	strobe_profile_free(p);

	/* No samples at all: valid, and stays so through the encoder. */
	tiny_init(&t);
	t.pb.n_sample = 0;
	size_t len;
	uint8_t *buf = pack_tiny(&t, &len);
	assert_int_equal(strobe_pprof_decode(buf, len, "empty", &p, &err), 0);
	free(buf);
	assert_int_equal(strobe_nsamples(p), 0);
	strobe_profile *q = reencode(p, NULL, NULL);
	assert_same_profile(p, q);
	strobe_profile_free(p);
	strobe_profile_free(q);
}

/* A profile built through the API (as the folded and perf decoders do) encodes to pprof that
 * decodes to the same totals; a line without a function, which only the API can make and Go's
 * reader would reject, is left out. */
static void test_encode_api_profile(void **state)
{
	(void)state;
	strobe_profile *p = strobe_profile_new();
	assert_non_null(p);
	assert_int_equal(strobe_profile_add_type(p, "samples", "count"), 0);
	uint32_t a = strobe_location_for_name(p, "main", 4);
	uint32_t b = strobe_location_for_name(p, "work", 4);
	strobe_line nofn = {.line = 3};
	uint32_t c = strobe_location_intern(p, 0, 0x1234, &nofn, 1, false);
	uint32_t s1 = strobe_stack_push(p, strobe_stack_push(p, 0, a), b);
	uint32_t s2 = strobe_stack_push(p, strobe_stack_push(p, 0, a), c);
	int64_t v = 60;
	assert_int_equal(strobe_sample_add(p, s1, 0, &v), 0);
	v = 40;
	assert_int_equal(strobe_sample_add(p, s2, 0, &v), 0);
	assert_int_equal(strobe_sample_add(p, 0, 0, &v), 0); /* an empty stack is a sample too */
	strobe_profile *q = reencode(p, NULL, NULL);
	assert_int_equal(strobe_total(q, 0), 140);
	assert_int_equal(strobe_nsamples(q), 3);
	assert_int_equal(strobe_location_get(q, c)->nline, 0);
	assert_int_equal(strobe_location_get(q, c)->address, 0x1234);
	assert_string_equal(
		strobe_str(q, strobe_function_get(q, strobe_location_get(q, b)->line[0].function)
				      ->name),
		"work");
	assert_int_equal(strobe_stack_depth(q, strobe_sample(q, 3)->stack), 0);
	strobe_profile_free(p);
	strobe_profile_free(q);
}

/* ---- corruption ---------------------------------------------------------------------------- */

static void expect_error(tiny *t, const char *needle)
{
	strobe_err err;
	assert_int_equal(decode_tiny(t, NULL, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("message '%s' does not mention '%s'", err.msg, needle);
	if (strncmp(err.msg, "t.pb: ", 6) != 0)
		fail_msg("message '%s' does not start with the input's name", err.msg);
}

static void test_corruptions_are_named(void **state)
{
	(void)state;
	tiny t;
	strobe_err err;
	tiny_init(&t);
	assert_int_equal(decode_tiny(&t, NULL, &err), 0);

	/* Strings. */
	tiny_init(&t);
	t.fn[1].name = 99;
	expect_error(&t, "function 1 refers to string 99 (name), outside the string table of 18");
	tiny_init(&t);
	t.lab[0].key = -1;
	expect_error(&t, "sample 0 refers to string -1 (label key)");
	tiny_init(&t);
	t.lab[1].num_unit = S_N;
	expect_error(&t, "sample 0 refers to string 18 (label num_unit)");
	tiny_init(&t);
	t.map.build_id = 1000;
	expect_error(&t, "mapping 0 refers to string 1000 (build_id)");
	tiny_init(&t);
	t.vt[1].unit = 50;
	expect_error(&t, "sample_type 1 refers to string 50 (unit)");
	tiny_init(&t);
	t.comments[1] = 77;
	expect_error(&t, "comment 1 refers to string 77");
	tiny_init(&t);
	t.pb.default_sample_type = -5;
	expect_error(&t, "refers to string -5 (default_sample_type)");
	tiny_init(&t);
	t.period_type.type = 18;
	expect_error(&t, "period_type 0 refers to string 18 (type)");
	tiny_init(&t);
	t.strings[0] = "x";
	expect_error(&t, "string_table[0] must be the empty string");
	tiny_init(&t);
	t.pb.n_string_table = 0;
	expect_error(&t, "the string table is empty");

	/* Ids: dangling, zero, repeated. */
	tiny_init(&t);
	t.locids[0] = 43;
	expect_error(&t, "sample 0 refers to location id 43 that does not exist");
	tiny_init(&t);
	t.locids1[0] = 0;
	expect_error(&t, "sample 1 refers to location id 0");
	tiny_init(&t);
	t.line[1].function_id = 8;
	expect_error(&t, "location 0 refers to function id 8 that does not exist");
	tiny_init(&t);
	t.line[2].function_id = 0;
	expect_error(&t, "location 1 line 0 has no function (function id 0)");
	tiny_init(&t);
	t.loc[1].mapping_id = 5;
	expect_error(&t, "location 1 refers to mapping id 5 that does not exist");
	tiny_init(&t);
	t.fn[2].id = 7;
	expect_error(&t, "function 2 repeats id 7");
	tiny_init(&t);
	t.loc[1].id = 42;
	expect_error(&t, "location 1 repeats id 42");
	tiny_init(&t);
	t.fn[0].id = 0;
	expect_error(&t, "function 0 has id 0");
	tiny_init(&t);
	t.map.id = 0;
	expect_error(&t, "mapping 0 has id 0");
	tiny_init(&t);
	t.loc[0].id = 0;
	expect_error(&t, "location 0 has id 0");

	/* Ids numbered 1..n (the common case, read without hashing) and a numbering that stops
	 * being dense part-way: references resolve, repeats and strays are still caught. */
	tiny_init(&t);
	t.fn[0].id = 1;
	t.fn[1].id = 2;
	t.fn[2].id = 3;
	t.line[0].function_id = 2;
	t.line[1].function_id = 1;
	t.line[2].function_id = 1;
	t.loc[0].id = 1;
	t.loc[1].id = 2;
	t.locids[0] = 1;
	t.locids[1] = 2;
	t.locids1[0] = 2;
	t.map.id = 1;
	t.loc[0].mapping_id = t.loc[1].mapping_id = 1;
	strobe_profile *dense = NULL;
	assert_int_equal(decode_tiny(&t, &dense, &err), 0);
	check_tiny_model(dense);
	strobe_profile_free(dense);
	t.locids1[0] = 3;
	expect_error(&t, "sample 1 refers to location id 3 that does not exist");
	t.locids1[0] = 2;
	t.fn[2].id = 1;
	expect_error(&t, "function 2 repeats id 1");
	t.fn[2].id = 2;
	expect_error(&t, "function 2 repeats id 2");
	t.fn[2].id = 0;
	expect_error(&t, "function 2 has id 0");
	t.fn[1].id = 77; /* dense, then not */
	t.line[0].function_id = 77;
	t.fn[2].id = 2;
	assert_int_equal(decode_tiny(&t, &dense, &err), 0);
	check_tiny_model(dense);
	strobe_profile_free(dense);
	t.line[0].function_id = 2;
	t.line[1].function_id = 3;
	expect_error(&t, "location 0 refers to function id 3 that does not exist");

	/* Values and shapes. */
	tiny_init(&t);
	t.s[1].n_value = 1;
	expect_error(&t, "sample 1 has 1 values for 2 sample types");
	tiny_init(&t);
	int64_t three[3] = {1, 2, 3};
	t.s[0].n_value = 3;
	t.s[0].value = three;
	expect_error(&t, "sample 0 has 3 values for 2 sample types");
	tiny_init(&t);
	t.pb.n_sample_type = 0;
	expect_error(&t, "2 samples but no sample types");
	tiny_init(&t);
	uint64_t *deep = malloc((STROBE_MAX_DEPTH + 1) * sizeof(*deep));
	for (size_t i = 0; i <= STROBE_MAX_DEPTH; i++)
		deep[i] = 42;
	t.s[0].n_location_id = STROBE_MAX_DEPTH + 1;
	t.s[0].location_id = deep;
	expect_error(&t, "sample 0 is 4097 frames deep (limit 4096)");
	free(deep);

	/* Not protobuf at all, truncated protobuf. */
	strobe_profile *p = (strobe_profile *)1;
	const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(strobe_pprof_decode(junk, sizeof(junk), "j", &p, &err), -EINVAL);
	assert_null(p);
	assert_string_equal(err.msg, "j: not a valid pprof profile (protobuf decode failed)");
	/* A cut inside a field breaks the protobuf; a cut at a field boundary leaves a shorter
	 * message that may be valid (the last fields are scalars): either way no crash, and a
	 * rejection says why. The last field is default_sample_type (tag, value: 2 bytes). */
	tiny_init(&t);
	size_t len;
	uint8_t *buf = pack_tiny(&t, &len);
	p = (strobe_profile *)1;
	assert_int_equal(strobe_pprof_decode(buf, len - 1, "cut", &p, &err), -EINVAL);
	assert_null(p);
	assert_string_equal(err.msg, "cut: not a valid pprof profile (protobuf decode failed)");
	for (size_t cut = 1; cut < len; cut++) {
		memset(&err, 0, sizeof(err));
		int r = strobe_pprof_decode(buf, len - cut, "cut", &p, &err);
		if (r == 0) {
			strobe_profile_free(p);
			continue;
		}
		assert_int_equal(r, -EINVAL);
		assert_null(p);
		assert_non_null(strstr(err.msg, "cut: "));
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_profiles),
		cmocka_unit_test(test_round_trip_is_identity),
		cmocka_unit_test(test_everything_pprof_can_say_survives),
		cmocka_unit_test(test_default_type_and_empty_profile),
		cmocka_unit_test(test_encode_api_profile),
		cmocka_unit_test(test_corruptions_are_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
