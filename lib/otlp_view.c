// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP series as pprof views (lib/otlp_view.h): the server's fast path for OTLP ingest.
 *
 * The model path (lib/otlp.c build()) interns every string, function, mapping, location and
 * stack node of a series into the model's hash tables, and the store then maps the model into
 * its own tables: two rounds of hashing for every entity, and a hash probe per frame of every
 * stack. The dictionary is already what a view is made of (flat tables, index 0 reserved), so a
 * view only needs it checked once per request: view id i of a function, mapping or location is
 * dictionary index i, and strings are the string table itself. Per series, each distinct stack
 * index becomes one view sample (its frames the dictionary's location indices, leaf first) with
 * one value column per OTLP profile, so the store hashes each stack once per series.
 *
 * Nothing here is the reference for what a request means: whatever the view cannot say exactly
 * as the model says it (sample attributes and links, which make sample labels; a type whose
 * profile name is guessed from the leaves; any index outside its table, any overflow) answers
 * -EINVAL, and the caller builds the model, whose result and error messages are the reference.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_view.h"
#include "strobe/codec.h"

typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary otlp_dict;
typedef Opentelemetry__Proto__Profiles__V1development__Profile otlp_prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample otlp_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack otlp_stack;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit otlp_kvu;

/* as lib/otlp.c reads a mapping's attributes */
#define ATTRS_MAX 64u

struct otlp_vdict {
	const otlp_dict *d;
	strobe_pprof_str *str; /* the string table, then the mappings' build ids */
	strobe_function *fns;  /* fns[i - 1]: dictionary function i, string ids as the table's */
	strobe_mapping *maps;
	strobe_pprof_loc *locs;
	strobe_line *lines;
	uint32_t nstr, nfn, nmap, nloc;
	uint64_t *stk; /* per stack index: gen << 32 | view sample + 1, for the current view */
	uint32_t gen;
};

typedef struct vbox {
	strobe_pprof_view v; /* first: a view's address is its box's */
	uint32_t *soff, *sloc;
	int64_t *values;
} vbox;

void otlp_vdict_free(otlp_vdict *vd)
{
	if (!vd)
		return;
	free(vd->str);
	free(vd->fns);
	free(vd->maps);
	free(vd->locs);
	free(vd->lines);
	free(vd->stk);
	free(vd);
}

/* A dictionary string index as a view string id; false when outside the table (as dstr). */
static bool sidx(const otlp_dict *d, int32_t idx, uint32_t *out)
{
	size_t n = d->n_string_table;
	if (idx == 0) {
		*out = 0;
		return true;
	}
	if (idx < 0 || (size_t)idx >= n)
		return false;
	*out = (uint32_t)idx;
	return true;
}

static int vdict_tables(otlp_vdict *vd)
{
	const otlp_dict *d = vd->d;
	/* strings: the table (one "" when it is empty), then room for a build id per mapping */
	size_t ns = d->n_string_table ? d->n_string_table : 1;
	size_t nf = d->n_function_table > 1 ? d->n_function_table - 1 : 0;
	size_t nm = d->n_mapping_table > 1 ? d->n_mapping_table - 1 : 0;
	size_t nl = d->n_location_table > 1 ? d->n_location_table - 1 : 0;
	if (ns + nm > UINT32_MAX / 2 || nf > UINT32_MAX / 2 || nl > UINT32_MAX / 2)
		return -EINVAL;
	vd->str = malloc((ns + nm) * sizeof(*vd->str));
	vd->fns = calloc(nf ? nf : 1, sizeof(*vd->fns));
	vd->maps = calloc(nm ? nm : 1, sizeof(*vd->maps));
	vd->locs = calloc(nl ? nl : 1, sizeof(*vd->locs));
	vd->stk = calloc(d->n_stack_table ? d->n_stack_table : 1, sizeof(*vd->stk));
	if (!vd->str || !vd->fns || !vd->maps || !vd->locs || !vd->stk)
		return -ENOMEM;
	vd->str[0] = (strobe_pprof_str){"", 0};
	for (size_t i = 0; i < d->n_string_table; i++) {
		size_t l = strlen(d->string_table[i]);
		if (l > UINT32_MAX)
			return -EINVAL;
		vd->str[i] = (strobe_pprof_str){d->string_table[i], (uint32_t)l};
	}
	vd->nstr = (uint32_t)ns;
	for (size_t i = 0; i < nf; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Function *f =
			d->function_table[i + 1];
		strobe_function *o = &vd->fns[i];
		if (!sidx(d, f->name_strindex, &o->name) ||
		    !sidx(d, f->system_name_strindex, &o->system_name) ||
		    !sidx(d, f->filename_strindex, &o->filename))
			return -EINVAL;
		o->start_line = f->start_line;
	}
	vd->nfn = (uint32_t)nf;
	for (size_t i = 0; i < nm; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Mapping *mp =
			d->mapping_table[i + 1];
		strobe_mapping *o = &vd->maps[i];
		o->start = mp->memory_start;
		o->limit = mp->memory_limit;
		o->offset = mp->file_offset;
		o->has_functions = 1; /* as the model: OTLP has no such flags any more */
		if (!sidx(d, mp->filename_strindex, &o->filename))
			return -EINVAL;
		/* the build id, as the model takes it: the first non-empty string attribute
		 * process.executable.build_id.* */
		for (size_t k = 0; k < mp->n_attribute_indices && k < ATTRS_MAX; k++) {
			int32_t ai = mp->attribute_indices[k];
			uint32_t key;
			if (ai <= 0 || (size_t)ai >= d->n_attribute_table)
				return -EINVAL;
			const otlp_kvu *a = d->attribute_table[ai];
			if (!sidx(d, a->key_strindex, &key))
				return -EINVAL;
			if (o->build_id || strncmp(vd->str[key].p, "process.executable.build_id.", 28) ||
			    !a->value ||
			    a->value->value_case !=
				    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE ||
			    !a->value->string_value[0])
				continue;
			size_t l = strlen(a->value->string_value);
			if (l > UINT32_MAX)
				return -EINVAL;
			vd->str[vd->nstr] = (strobe_pprof_str){a->value->string_value, (uint32_t)l};
			o->build_id = vd->nstr++;
		}
	}
	vd->nmap = (uint32_t)nm;
	size_t nlines = 0;
	for (size_t i = 0; i < nl; i++) {
		size_t k = d->location_table[i + 1]->n_lines;
		if (k > STROBE_MAX_DEPTH)
			return -EINVAL;
		nlines += k;
	}
	if (nlines > UINT32_MAX / 2 || !(vd->lines = malloc((nlines ? nlines : 1) * sizeof(*vd->lines))))
		return nlines > UINT32_MAX / 2 ? -EINVAL : -ENOMEM;
	uint32_t w = 0;
	for (size_t i = 0; i < nl; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Location *l =
			d->location_table[i + 1];
		strobe_pprof_loc *o = &vd->locs[i];
		if (l->mapping_index < 0 || (size_t)l->mapping_index >= d->n_mapping_table)
			return -EINVAL;
		o->address = l->address;
		o->mapping = (uint32_t)l->mapping_index;
		o->line0 = w;
		o->nline = (uint32_t)l->n_lines;
		for (size_t k = 0; k < l->n_lines; k++) {
			int32_t fi = l->lines[k]->function_index;
			if (fi < 0 || (size_t)fi >= d->n_function_table)
				return -EINVAL;
			vd->lines[w++] = (strobe_line){.function = (uint32_t)fi,
						       .line = l->lines[k]->line,
						       .column = l->lines[k]->column};
		}
	}
	vd->nloc = (uint32_t)nl;
	return 0;
}

int otlp_vdict_open(const otlp_dict *d, otlp_vdict **out)
{
	static const otlp_dict empty =
		OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	otlp_vdict *vd = calloc(1, sizeof(*vd));
	if (!vd)
		return -ENOMEM;
	vd->d = d ? d : &empty;
	int r = vdict_tables(vd);
	if (r < 0) {
		otlp_vdict_free(vd);
		return r;
	}
	*out = vd;
	return 0;
}

void otlp_view_free(strobe_pprof_view *v)
{
	if (!v)
		return;
	vbox *b = (vbox *)v;
	strobe_profile_free(v->hdr);
	free(b->soff);
	free(b->sloc);
	free(b->values);
	free(b);
}

/* A sample's value as the model counts it: the sum of its values, or its timestamps. */
static bool sample_value(const otlp_sample *s, int64_t *v)
{
	*v = 0;
	if (!s->n_values) {
		*v = (int64_t)s->n_timestamps_unix_nano;
		return true;
	}
	for (size_t k = 0; k < s->n_values; k++)
		if (__builtin_add_overflow(*v, s->values[k], v))
			return false;
	return true;
}

/* The view sample of stack index idx, made (its frames appended) the first time. */
static int view_sample(otlp_vdict *vd, vbox *b, int32_t idx, uint32_t nt, size_t *slcap,
		       uint32_t *sid)
{
	const otlp_dict *d = vd->d;
	if (idx < 0 || (size_t)idx >= (d->n_stack_table ? d->n_stack_table : 1))
		return -EINVAL;
	uint64_t *c = d->n_stack_table ? &vd->stk[idx] : NULL;
	if (c && *c >> 32 == vd->gen) {
		*sid = (uint32_t)*c - 1;
		return 0;
	}
	const otlp_stack *st = idx ? d->stack_table[idx] : NULL;
	size_t nf = st ? st->n_location_indices : 0;
	if (nf > STROBE_MAX_DEPTH)
		return -EINVAL;
	strobe_pprof_view *v = &b->v;
	uint32_t k = b->soff[v->nsamples];
	if (k + nf > *slcap) {
		size_t nc = *slcap * 2 > k + nf ? *slcap * 2 : k + nf + 1024;
		uint32_t *ns = realloc(b->sloc, nc * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		b->sloc = ns;
		*slcap = nc;
	}
	for (size_t i = 0; i < nf; i++) {
		int32_t li = st->location_indices[i];
		if (li == 0)
			continue; /* the zero Location: nothing to show, as the model skips it */
		if (li < 0 || (size_t)li >= d->n_location_table)
			return -EINVAL;
		b->sloc[k++] = (uint32_t)li; /* view location li is dictionary location li */
	}
	*sid = v->nsamples++;
	b->soff[v->nsamples] = k;
	memset(b->values + (size_t)*sid * nt, 0, nt * sizeof(*b->values));
	if (c)
		*c = (uint64_t)vd->gen << 32 | (*sid + 1);
	return 0;
}

static int view_fill(otlp_vdict *vd, const otlp_prof *const *profs, uint32_t nt, vbox *b)
{
	size_t total = 0;
	for (uint32_t t = 0; t < nt; t++) {
		const otlp_prof *op = profs[t];
		for (size_t i = 0; i < op->n_samples; i++) /* attributes and links: the model's */
			if (op->samples[i]->n_attribute_indices || op->samples[i]->link_index)
				return -EINVAL;
		total += op->n_samples;
	}
	if (total >= UINT32_MAX / 2)
		return -EINVAL;
	size_t slcap = 4 * total + 16;
	b->soff = malloc((total + 2) * sizeof(*b->soff));
	b->sloc = malloc(slcap * sizeof(*b->sloc));
	b->values = malloc(((total + 1) * nt) * sizeof(*b->values));
	if (!b->soff || !b->sloc || !b->values)
		return -ENOMEM;
	b->soff[0] = 0;
	if (++vd->gen == 0) { /* stamps wrapped: forget them all */
		memset(vd->stk, 0, (vd->d->n_stack_table ? vd->d->n_stack_table : 1) * sizeof(*vd->stk));
		vd->gen = 1;
	}
	for (uint32_t t = 0; t < nt; t++) {
		const otlp_prof *op = profs[t];
		for (size_t i = 0; i < op->n_samples; i++) {
			const otlp_sample *s = op->samples[i];
			int64_t v;
			uint32_t sid;
			if (!sample_value(s, &v))
				return -EINVAL;
			if (!v)
				continue;
			int r = view_sample(vd, b, s->stack_index, nt, &slcap, &sid);
			if (r < 0)
				return r;
			int64_t *x = &b->values[(size_t)sid * nt + t];
			*x = (int64_t)((uint64_t)*x + (uint64_t)v); /* as the store sums them */
		}
	}
	return 0;
}

int otlp_view_build(otlp_vdict *vd, const otlp_prof *const *profs, uint32_t n,
		    strobe_profile *hdr, strobe_pprof_view **out)
{
	/* Go's mutex and block profiles are told apart by their leaves: the model's. */
	for (uint32_t t = 0; t < hdr->ntypes; t++) {
		const char *st = strobe_str(hdr, hdr->types[t].type);
		if (!strcmp(st, "contentions") || !strcmp(st, "delay"))
			return -EINVAL;
	}
	vbox *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	int r = view_fill(vd, profs, n, b);
	if (r < 0) {
		free(b->soff);
		free(b->sloc);
		free(b->values);
		free(b);
		return r;
	}
	strobe_pprof_view *v = &b->v;
	v->hdr = hdr;
	v->simple = true;
	v->nstr = vd->nstr;
	v->nfn = vd->nfn;
	v->nmap = vd->nmap;
	v->nloc = vd->nloc;
	v->str = vd->str;
	v->fns = vd->fns;
	v->maps = vd->maps;
	v->locs = vd->locs;
	v->lines = vd->lines;
	v->soff = b->soff;
	v->sloc = b->sloc;
	v->values = b->values;
	*out = v;
	return 0;
}
