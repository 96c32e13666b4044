// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP profiles codec (opentelemetry.proto.profiles.v1development, proto/otlp_*.proto): an
 * ExportProfilesServiceRequest <-> series of the profile model, through protobuf-c.
 *
 * Decoding trusts nothing. protobuf-c unpacks into an allocator with a budget (a small body of
 * empty repeated messages would otherwise expand a hundredfold in memory); then every index a
 * message holds is checked against its dictionary table before it is used, and index 0, which
 * the spec reserves for the zero value of each table, means "none" (no mapping, no function, the
 * empty stack, no link). Stacks, locations, functions, mappings and strings are converted at most
 * once per series: caches indexed by the dictionary index hold the model id with a generation
 * stamp, so a request whose samples all name one deep stack costs the stack once, not once per
 * sample.
 *
 * Encoding writes the model's tables as the dictionary's (model id i is dictionary index i, and
 * both reserve 0), one OTLP profile per sample type, only the stacks samples use.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_profiles_service.pb-c.h"
#include "strobe/codec.h"
#include "strobe/otlp.h"
#include "strobe/pbjson.h"
#include "otlp_view.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	otlp_req;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary otlp_dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles otlp_rp;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles otlp_sp;
typedef Opentelemetry__Proto__Profiles__V1development__Profile otlp_prof;
typedef Opentelemetry__Proto__Profiles__V1development__Sample otlp_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping otlp_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location otlp_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line otlp_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function otlp_function;
typedef Opentelemetry__Proto__Profiles__V1development__Stack otlp_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Link otlp_link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType otlp_vt;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit otlp_kvu;
typedef Opentelemetry__Proto__Common__V1__KeyValue otlp_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue otlp_any;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope otlp_scope;
typedef Opentelemetry__Proto__Resource__V1__Resource otlp_resource;

#define REQ_DESC opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor

/* A sample's attributes, and a series' labels from one level (resource, scope, profile). */
#define ATTRS_MAX 64u

/* ---- an arena with a budget, for unpacking untrusted bytes -------------------------------- */

/* protobuf-c allocates every sub-message, line and string on its own; from an arena they come
 * out of a few large blocks freed at once (a third of the decoding time went to malloc and free
 * before), and the arena stops at its budget, so that a body of empty messages (2 bytes each on
 * the wire, ~60 in memory) cannot expand without bound. */
typedef struct arena_blk {
	struct arena_blk *next;
	size_t used, cap;
	_Alignas(16) unsigned char mem[];
} arena_blk;

typedef struct budget {
	arena_blk *head;
	size_t next_cap, left;
} budget;

static void *budget_alloc(void *ctx, size_t size)
{
	budget *a = ctx;
	size = (size + 15) & ~(size_t)15;
	arena_blk *b = a->head;
	if (!b || b->cap - b->used < size) {
		size_t cap = a->next_cap > size ? a->next_cap : size;
		if (cap > a->left)
			return NULL;
		if (!(b = malloc(sizeof(*b) + cap)))
			return NULL;
		a->left -= cap;
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
		if (a->next_cap < ((size_t)16 << 20))
			a->next_cap *= 2;
	}
	void *p = b->mem + b->used;
	b->used += size;
	return p;
}

static void budget_free(void *ctx, void *ptr)
{
	(void)ctx;
	(void)ptr; /* all at once in budget_release */
}

static void budget_release(budget *a)
{
	while (a->head) {
		arena_blk *n = a->head->next;
		free(a->head);
		a->head = n;
	}
}

/* ---- labels ---------------------------------------------------------------------------------- */

/* A label name from an attribute key: every character a label name cannot hold ([A-Za-z0-9_],
 * not starting with a digit) becomes '_', so service.name is service_name. */
static char *label_name(const char *key)
{
	size_t n = strlen(key);
	char *s = malloc(n + 2), *o = s;
	if (!s)
		return NULL;
	if (key[0] >= '0' && key[0] <= '9')
		*o++ = '_';
	for (size_t i = 0; i < n; i++) {
		char c = key[i];
		*o++ = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
			       ? c
			       : '_';
	}
	*o = 0;
	return s;
}

/* Semantic-convention attributes of a sample that name a process or a thread: they go under the
 * names strobe's samples carry (so selectors on pid, tid... find them, and they stay off the
 * series). */
static const char *const sample_names[][2] = {
	{"process.pid", "pid"},
	{"thread.id", "tid"},
	{"thread.name", "thread"},
	{"process.executable.name", "comm"},
	{"process.executable.path", "exe"},
};

typedef struct dec {
	const otlp_dict *d;
	strobe_otlp_limits lim;
	strobe_err *err;
	strobe_profile *p; /* the series being built */
	uint32_t gen;      /* of p: cache entries of another generation are stale */
	uint64_t *str_c, *fn_c, *map_c, *loc_c, *stk_c;
	strobe_label *lab;
	/* (parent model stack << 32 | model location) -> model stack, for the current series: most
	 * frames of most stacks are nodes another stack made already, and this table finds them
	 * for a fraction of what interning them again costs (it was a quarter of the request) */
	uint64_t *nk;
	uint32_t *nv, ncap, nn;
	/* lim.views: the dictionary as view tables (lib/otlp_view.c), made for the first series
	 * and handed to the batch, which the views point into; vd_bad once they cannot be */
	otlp_vdict *vd;
	bool vd_bad;
} dec;

static size_t nstr(const dec *d) { return d->d ? d->d->n_string_table : 0; }

/* The dictionary string at idx ("" for 0), or NULL after an error. */
static const char *dstr(dec *d, int32_t idx, const char *what)
{
	if (idx == 0 && !nstr(d))
		return "";
	if (idx < 0 || (size_t)idx >= nstr(d)) {
		strobe_errf(d->err, -EINVAL, "%s: string index %" PRId32 " outside the table of %zu",
			    what, idx, nstr(d));
		return NULL;
	}
	return d->d->string_table[idx];
}

/* An attribute value as a label value (malloc'd); NULL with *skip for kinds a label cannot
 * hold (arrays, maps, bytes, none). */
static char *any_text(dec *d, const otlp_any *v, bool *skip, const char *what)
{
	char buf[64];
	*skip = false;
	if (!v) {
		*skip = true;
		return NULL;
	}
	switch (v->value_case) {
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
		return strdup(v->string_value);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX: {
		const char *s = dstr(d, v->string_value_strindex, what);
		return s ? strdup(s) : NULL;
	}
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
		return strdup(v->bool_value ? "true" : "false");
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
		snprintf(buf, sizeof(buf), "%" PRId64, v->int_value);
		return strdup(buf);
	case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
		snprintf(buf, sizeof(buf), "%.17g", v->double_value);
		return strdup(buf);
	default:
		*skip = true;
		return NULL;
	}
}

typedef struct lset {
	strobe_otlp_label *l;
	size_t n;
} lset;

static void lset_free(lset *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->l[i].name);
		free(s->l[i].value);
	}
	free(s->l);
	s->l = NULL;
	s->n = 0;
}

/* Sets name=value (both malloc'd, taken over), a later level overriding an earlier one. */
static int lset_put(lset *s, char *name, char *value, uint32_t max)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->l[i].name, name) == 0) {
			free(name);
			free(s->l[i].value);
			s->l[i].value = value;
			return 0;
		}
	if (s->n >= max) {
		free(name);
		free(value);
		return -E2BIG;
	}
	strobe_otlp_label *nl = realloc(s->l, (s->n + 1) * sizeof(*nl));
	if (!nl) {
		free(name);
		free(value);
		return -ENOMEM;
	}
	s->l = nl;
	s->l[s->n++] = (strobe_otlp_label){name, value};
	return 0;
}

static int lset_copy(lset *dst, const lset *src)
{
	dst->l = calloc(src->n ? src->n : 1, sizeof(*dst->l));
	dst->n = 0;
	if (!dst->l)
		return -ENOMEM;
	for (size_t i = 0; i < src->n; i++) {
		dst->l[i].name = strdup(src->l[i].name);
		dst->l[i].value = strdup(src->l[i].value);
		dst->n++;
		if (!dst->l[i].name || !dst->l[i].value)
			return -ENOMEM;
	}
	return 0;
}

/* One attribute onto a label set: key and value as found (a key may be a string index). */
static int put_attr(dec *d, lset *s, const char *key, const otlp_any *v, const char *what)
{
	if (!key)
		return -EINVAL;
	if (!*key)
		return 0; /* nameless: nothing a label can be */
	bool skip;
	char *val = any_text(d, v, &skip, what);
	if (skip)
		return 0;
	if (!val)
		return d->err && d->err->msg[0] ? -EINVAL : -ENOMEM;
	if (!*val) {
		free(val);
		return 0; /* an empty value is no label, as in Prometheus */
	}
	/* process.pid on a resource names a process as much as on a sample: pid, which the server
	 * keeps on the samples, not on the series (cardinality) */
	const char *nm = NULL;
	for (size_t k = 0; k < sizeof(sample_names) / sizeof(*sample_names) && !nm; k++)
		if (strcmp(key, sample_names[k][0]) == 0)
			nm = sample_names[k][1];
	char *name = nm ? strdup(nm) : label_name(key);
	if (!name) {
		free(val);
		return -ENOMEM;
	}
	int r = lset_put(s, name, val, d->lim.max_labels);
	if (r == -E2BIG)
		return strobe_errf(d->err, -E2BIG, "%s: more than %u labels", what,
				   d->lim.max_labels);
	return r;
}

static int put_kvs(dec *d, lset *s, otlp_kv *const *kv, size_t n, const char *what)
{
	if (n > ATTRS_MAX)
		return strobe_errf(d->err, -E2BIG, "%s: %zu attributes, at most %u", what, n,
				   ATTRS_MAX);
	for (size_t i = 0; i < n; i++) {
		const char *key = kv[i]->key;
		if ((!key || !*key) && kv[i]->key_strindex &&
		    !(key = dstr(d, kv[i]->key_strindex, what)))
			return -EINVAL;
		int r = put_attr(d, s, key, kv[i]->value, what);
		if (r < 0)
			return r;
	}
	return 0;
}

/* attribute_indices into the dictionary's attribute_table, checked. */
static const otlp_kvu *attr_at(dec *d, int32_t idx, const char *what)
{
	size_t n = d->d ? d->d->n_attribute_table : 0;
	if (idx <= 0 || (size_t)idx >= n) {
		strobe_errf(d->err, -EINVAL, "%s: attribute index %" PRId32 " outside the table of %zu "
				"(0 is reserved)", what, idx, n);
		return NULL;
	}
	return d->d->attribute_table[idx];
}

static int put_indexed(dec *d, lset *s, const int32_t *idx, size_t n, const char *what)
{
	if (n > ATTRS_MAX)
		return strobe_errf(d->err, -E2BIG, "%s: %zu attributes, at most %u", what, n,
				   ATTRS_MAX);
	for (size_t i = 0; i < n; i++) {
		const otlp_kvu *a = attr_at(d, idx[i], what);
		const char *key = a ? dstr(d, a->key_strindex, what) : NULL;
		if (!key)
			return -EINVAL;
		int r = put_attr(d, s, key, a->value, what);
		if (r < 0)
			return r;
	}
	return 0;
}

static int cmp_olabel(const void *a, const void *b)
{
	return strcmp(((const strobe_otlp_label *)a)->name, ((const strobe_otlp_label *)b)->name);
}

/* ---- model entities from dictionary indices --------------------------------------------------- */

/* cache[idx] holds (gen << 32 | model id) once idx was converted for the current series. */
#define CACHED(c, i) ((c)[i] >> 32 == d->gen)
#define CSET(c, i, id) ((c)[i] = (uint64_t)d->gen << 32 | (id))

static uint32_t mstr(dec *d, int32_t idx, const char *what)
{
	const char *s = dstr(d, idx, what);
	if (!s)
		return UINT32_MAX;
	if (!nstr(d))
		return 0;
	if (CACHED(d->str_c, idx))
		return (uint32_t)d->str_c[idx];
	uint32_t id = strobe_str_intern0(d->p, s);
	if (id == UINT32_MAX)
		strobe_errf(d->err, -ENOMEM, "out of memory");
	else
		CSET(d->str_c, idx, id);
	return id;
}

static uint32_t mfunc(dec *d, int32_t idx)
{
	size_t n = d->d ? d->d->n_function_table : 0;
	if (idx == 0)
		return 0;
	if (idx < 0 || (size_t)idx >= n) {
		strobe_errf(d->err, -EINVAL, "line: function index %" PRId32 " outside the table of %zu",
			    idx, n);
		return UINT32_MAX;
	}
	if (CACHED(d->fn_c, idx))
		return (uint32_t)d->fn_c[idx];
	const otlp_function *f = d->d->function_table[idx];
	strobe_function m = {0};
	if ((m.name = mstr(d, f->name_strindex, "function")) == UINT32_MAX ||
	    (m.system_name = mstr(d, f->system_name_strindex, "function")) == UINT32_MAX ||
	    (m.filename = mstr(d, f->filename_strindex, "function")) == UINT32_MAX)
		return UINT32_MAX;
	m.start_line = f->start_line;
	uint32_t id = strobe_function_intern(d->p, &m);
	if (id != UINT32_MAX)
		CSET(d->fn_c, idx, id);
	return id;
}

static uint32_t mmap_(dec *d, int32_t idx)
{
	size_t n = d->d ? d->d->n_mapping_table : 0;
	if (idx == 0)
		return 0;
	if (idx < 0 || (size_t)idx >= n) {
		strobe_errf(d->err, -EINVAL, "location: mapping index %" PRId32
				" outside the table of %zu", idx, n);
		return UINT32_MAX;
	}
	if (CACHED(d->map_c, idx))
		return (uint32_t)d->map_c[idx];
	const otlp_mapping *mp = d->d->mapping_table[idx];
	strobe_mapping m = {0};
	m.start = mp->memory_start;
	m.limit = mp->memory_limit;
	m.offset = mp->file_offset;
	if ((m.filename = mstr(d, mp->filename_strindex, "mapping")) == UINT32_MAX)
		return UINT32_MAX;
	/* The build id travels as an attribute (process.executable.build_id.*). */
	for (size_t i = 0; i < mp->n_attribute_indices && i < ATTRS_MAX; i++) {
		const otlp_kvu *a = attr_at(d, mp->attribute_indices[i], "mapping");
		const char *k = a ? dstr(d, a->key_strindex, "mapping") : NULL;
		if (!k)
			return UINT32_MAX;
		if (strncmp(k, "process.executable.build_id.", 28) == 0 && a->value &&
		    a->value->value_case ==
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
		    !m.build_id)
			m.build_id = strobe_str_intern0(d->p, a->value->string_value);
	}
	m.has_functions = 1; /* OTLP has no such flags any more: say what the lines say */
	uint32_t id = strobe_mapping_intern(d->p, &m);
	if (id != UINT32_MAX)
		CSET(d->map_c, idx, id);
	return id;
}

static uint32_t mloc(dec *d, int32_t idx)
{
	size_t n = d->d ? d->d->n_location_table : 0;
	if (idx == 0)
		return 0; /* the zero Location: nothing to show, skipped */
	if (idx < 0 || (size_t)idx >= n) {
		strobe_errf(d->err, -EINVAL, "stack: location index %" PRId32
				" outside the table of %zu", idx, n);
		return UINT32_MAX;
	}
	if (CACHED(d->loc_c, idx))
		return (uint32_t)d->loc_c[idx];
	const otlp_location *l = d->d->location_table[idx];
	if (l->n_lines > STROBE_MAX_DEPTH) {
		strobe_errf(d->err, -E2BIG, "location %" PRId32 ": %zu lines, at most %u", idx,
			    l->n_lines, STROBE_MAX_DEPTH);
		return UINT32_MAX;
	}
	uint32_t map = mmap_(d, l->mapping_index);
	if (map == UINT32_MAX)
		return UINT32_MAX;
	strobe_line lines[64], *lp = lines;
	if (l->n_lines > 64 && !(lp = malloc(l->n_lines * sizeof(*lp)))) {
		strobe_errf(d->err, -ENOMEM, "out of memory");
		return UINT32_MAX;
	}
	uint32_t id = UINT32_MAX;
	size_t i;
	for (i = 0; i < l->n_lines; i++) {
		lp[i] = (strobe_line){0};
		if ((lp[i].function = mfunc(d, l->lines[i]->function_index)) == UINT32_MAX)
			break;
		lp[i].line = l->lines[i]->line;
		lp[i].column = l->lines[i]->column;
	}
	if (i == l->n_lines &&
	    (id = strobe_location_intern(d->p, map, l->address, lp, (uint32_t)l->n_lines, false)) !=
		    UINT32_MAX)
		CSET(d->loc_c, idx, id);
	if (lp != lines)
		free(lp);
	return id;
}

static bool node_put(dec *d, uint64_t key, uint32_t val)
{
	if (2 * (d->nn + 1) > d->ncap) {
		uint32_t nc = d->ncap ? 2 * d->ncap : 4096;
		uint64_t *nk = calloc(nc, sizeof(*nk));
		uint32_t *nv = malloc(nc * sizeof(*nv));
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return false;
		}
		for (uint32_t i = 0; i < d->ncap; i++) {
			if (!d->nk[i])
				continue;
			uint32_t h = (uint32_t)((d->nk[i] * 0x9e3779b97f4a7c15ull) >> 32) & (nc - 1);
			while (nk[h])
				h = (h + 1) & (nc - 1);
			nk[h] = d->nk[i];
			nv[h] = d->nv[i];
		}
		free(d->nk);
		free(d->nv);
		d->nk = nk;
		d->nv = nv;
		d->ncap = nc;
	}
	uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (d->ncap - 1);
	while (d->nk[h])
		h = (h + 1) & (d->ncap - 1);
	d->nk[h] = key;
	d->nv[h] = val;
	d->nn++;
	return true;
}

/* The model stack of location loc under parent, interned when new. UINT32_MAX on ENOMEM. */
static uint32_t node(dec *d, uint32_t parent, uint32_t loc)
{
	uint64_t key = (uint64_t)parent << 32 | loc; /* loc != 0: never the empty key */
	if (d->ncap) {
		uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (d->ncap - 1);
		for (; d->nk[h]; h = (h + 1) & (d->ncap - 1))
			if (d->nk[h] == key)
				return d->nv[h];
	}
	uint32_t st = strobe_stack_push(d->p, parent, loc);
	if (st != UINT32_MAX && !node_put(d, key, st))
		return UINT32_MAX;
	return st;
}

static uint32_t mstack(dec *d, int32_t idx)
{
	size_t n = d->d ? d->d->n_stack_table : 0;
	if (idx == 0)
		return 0;
	if (idx < 0 || (size_t)idx >= n) {
		strobe_errf(d->err, -EINVAL, "sample: stack index %" PRId32 " outside the table of %zu",
			    idx, n);
		return UINT32_MAX;
	}
	if (CACHED(d->stk_c, idx))
		return (uint32_t)d->stk_c[idx];
	const otlp_stack *s = d->d->stack_table[idx];
	if (s->n_location_indices > STROBE_MAX_DEPTH) {
		strobe_errf(d->err, -E2BIG, "stack %" PRId32 ": %zu frames, at most %u", idx,
			    s->n_location_indices, STROBE_MAX_DEPTH);
		return UINT32_MAX;
	}
	uint32_t st = 0;
	for (size_t i = s->n_location_indices; i-- > 0;) { /* leaf first: push from the root */
		uint32_t loc = mloc(d, s->location_indices[i]);
		if (loc == UINT32_MAX)
			return UINT32_MAX;
		if (loc && (st = node(d, st, loc)) == UINT32_MAX) {
			strobe_errf(d->err, -ENOMEM, "out of memory");
			return UINT32_MAX;
		}
	}
	CSET(d->stk_c, idx, st);
	return st;
}

static void hex(char *o, const uint8_t *b, size_t n)
{
	static const char h[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		o[2 * i] = h[b[i] >> 4];
		o[2 * i + 1] = h[b[i] & 15];
	}
	o[2 * n] = 0;
}

static bool all_zero(const ProtobufCBinaryData *b)
{
	for (size_t i = 0; i < b->len; i++)
		if (b->data[i])
			return false;
	return true;
}

/* A sample's attributes and link as one model label set (string labels). */
static uint32_t msample_labels(dec *d, const otlp_sample *s)
{
	if (s->n_attribute_indices > ATTRS_MAX) {
		strobe_errf(d->err, -E2BIG, "sample: %zu attributes, at most %u",
			    s->n_attribute_indices, ATTRS_MAX);
		return UINT32_MAX;
	}
	uint32_t n = 0;
	for (size_t i = 0; i < s->n_attribute_indices; i++) {
		const otlp_kvu *a = attr_at(d, s->attribute_indices[i], "sample");
		const char *key = a ? dstr(d, a->key_strindex, "sample") : NULL;
		if (!key)
			return UINT32_MAX;
		bool skip;
		char *val = any_text(d, a->value, &skip, "sample");
		if (skip || (val && !*val) || !*key) {
			free(val);
			continue;
		}
		if (!val)
			return UINT32_MAX;
		const char *nm = NULL;
		for (size_t k = 0; k < sizeof(sample_names) / sizeof(*sample_names) && !nm; k++)
			if (strcmp(key, sample_names[k][0]) == 0)
				nm = sample_names[k][1];
		char *own = nm ? NULL : label_name(key);
		uint32_t ks = own || nm ? strobe_str_intern0(d->p, nm ? nm : own) : UINT32_MAX;
		uint32_t vs = strobe_str_intern0(d->p, val);
		free(own);
		free(val);
		if (ks == UINT32_MAX || vs == UINT32_MAX) {
			strobe_errf(d->err, -ENOMEM, "out of memory");
			return UINT32_MAX;
		}
		d->lab[n++] = (strobe_label){.key = ks, .str = vs};
	}
	if (s->link_index) {
		size_t nl = d->d ? d->d->n_link_table : 0;
		if (s->link_index < 0 || (size_t)s->link_index >= nl) {
			strobe_errf(d->err, -EINVAL, "sample: link index %" PRId32
					" outside the table of %zu", s->link_index, nl);
			return UINT32_MAX;
		}
		const otlp_link *l = d->d->link_table[s->link_index];
		const ProtobufCBinaryData *ids[2] = {&l->trace_id, &l->span_id};
		const char *names[2] = {"trace_id", "span_id"};
		for (int k = 0; k < 2; k++) {
			char h[2 * 16 + 1];
			if (!ids[k]->len || ids[k]->len > 16 || all_zero(ids[k]))
				continue;
			hex(h, ids[k]->data, ids[k]->len);
			uint32_t ks = strobe_str_intern0(d->p, names[k]);
			uint32_t vs = strobe_str_intern0(d->p, h);
			if (ks == UINT32_MAX || vs == UINT32_MAX)
				return UINT32_MAX;
			d->lab[n++] = (strobe_label){.key = ks, .str = vs};
		}
	}
	if (!n)
		return 0;
	/* A later duplicate key would make two labels of one name: keep the first. */
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < k && !dup; j++)
			dup = d->lab[j].key == d->lab[i].key;
		if (!dup)
			d->lab[k++] = d->lab[i];
	}
	uint32_t id = strobe_labelset_intern(d->p, d->lab, k);
	if (id == UINT32_MAX)
		strobe_errf(d->err, -ENOMEM, "out of memory");
	return id;
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* OTLP profiles of one scope that become one series: same labels, time and duration; each adds
 * its sample type as a column. */
typedef struct group {
	lset labels;
	char *key; /* labels as name\1value\1..., for finding the group */
	uint64_t time, duration;
	const otlp_prof **profs;
	uint32_t n;
} group;

static char *lset_key(lset *s)
{
	qsort(s->l, s->n, sizeof(*s->l), cmp_olabel);
	size_t len = 1;
	for (size_t i = 0; i < s->n; i++)
		len += strlen(s->l[i].name) + strlen(s->l[i].value) + 2;
	char *k = malloc(len), *o = k;
	if (!k)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		o += sprintf(o, "%s\1%s\1", s->l[i].name, s->l[i].value);
	*o = 0;
	return k;
}

static bool same_type(dec *d, const otlp_prof *a, const otlp_prof *b)
{
	int32_t ta = a->sample_type ? a->sample_type->type_strindex : 0;
	int32_t ua = a->sample_type ? a->sample_type->unit_strindex : 0;
	int32_t tb = b->sample_type ? b->sample_type->type_strindex : 0;
	int32_t ub = b->sample_type ? b->sample_type->unit_strindex : 0;
	const char *sta = dstr(d, ta, "profile"), *sua = dstr(d, ua, "profile");
	const char *stb = dstr(d, tb, "profile"), *sub = dstr(d, ub, "profile");
	if (!sta || !sua || !stb || !sub)
		return false;
	/* as build() names them: an empty type is "samples", an empty unit "count" */
	return strcmp(*sta ? sta : "samples", *stb ? stb : "samples") == 0 &&
	       strcmp(*sua ? sua : "count", *sub ? sub : "count") == 0;
}

static int series_add(strobe_otlp_batch *b, group *g)
{
	strobe_otlp_series *ns = realloc(b->s, (b->n + 1) * sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	b->s = ns;
	b->s[b->n++] = (strobe_otlp_series){.labels = g->labels.l, .nlabels = g->labels.n,
					    .nprofiles = g->n};
	g->labels.l = NULL;
	g->labels.n = 0;
	return 0;
}

/* The group's profiles as one model profile (the last series of b). */
static int build(dec *d, strobe_otlp_series *se, const group *g)
{
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return -ENOMEM;
	se->profile = p;
	d->p = p;
	d->gen++;
	if (d->nn) { /* the nodes were the previous series' */
		memset(d->nk, 0, d->ncap * sizeof(*d->nk));
		d->nn = 0;
	}
	for (uint32_t t = 0; t < g->n; t++) {
		const otlp_vt *vt = g->profs[t]->sample_type;
		const char *ty = dstr(d, vt ? vt->type_strindex : 0, "profile sample_type");
		const char *un = dstr(d, vt ? vt->unit_strindex : 0, "profile sample_type");
		if (!ty || !un)
			return -EINVAL;
		if (strobe_profile_add_type(p, *ty ? ty : "samples", *un ? un : "count") < 0)
			return -ENOMEM;
	}
	const otlp_prof *f = g->profs[0];
	p->time_nanos = (int64_t)(f->time_unix_nano > INT64_MAX ? 0 : f->time_unix_nano);
	p->duration_nanos = (int64_t)(f->duration_nano > INT64_MAX ? 0 : f->duration_nano);
	p->period = f->period;
	if (f->period_type) {
		uint32_t ty = mstr(d, f->period_type->type_strindex, "profile period_type");
		uint32_t un = mstr(d, f->period_type->unit_strindex, "profile period_type");
		if (ty == UINT32_MAX || un == UINT32_MAX)
			return -EINVAL;
		p->period_type = (strobe_value_type){ty, un};
	}
	if (d->lim.views && !d->vd_bad) { /* the fast path, when it can say the same */
		int r = d->vd ? 0 : otlp_vdict_open(d->d, &d->vd);
		if (r == 0 && (r = otlp_view_build(d->vd, g->profs, g->n, p, &se->view)) == 0) {
			se->profile = NULL; /* the view's header now */
			return 0;
		}
		if (r != -EINVAL)
			return r;
		d->vd_bad = !d->vd; /* the dictionary itself: no view for any series */
	}
	int64_t vals[64];
	if (g->n > 64)
		return strobe_errf(d->err, -E2BIG, "more than 64 sample types in one series");
	for (uint32_t t = 0; t < g->n; t++) {
		const otlp_prof *op = g->profs[t];
		for (size_t i = 0; i < op->n_samples; i++) {
			const otlp_sample *s = op->samples[i];
			int64_t v = 0;
			if (s->n_values) {
				for (size_t k = 0; k < s->n_values; k++)
					if (__builtin_add_overflow(v, s->values[k], &v))
						return strobe_errf(d->err, -EINVAL,
								   "sample %zu: values overflow", i);
			} else {
				v = (int64_t)(s->n_timestamps_unix_nano); /* each counts 1 */
			}
			if (!v)
				continue;
			uint32_t st = mstack(d, s->stack_index);
			uint32_t ls = st == UINT32_MAX ? UINT32_MAX : msample_labels(d, s);
			if (ls == UINT32_MAX)
				return d->err && d->err->msg[0] ? -EINVAL : -ENOMEM;
			memset(vals, 0, g->n * sizeof(*vals));
			vals[t] = v;
			int r = strobe_sample_add(p, st, ls, vals);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static void groups_free(group *gs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		lset_free(&gs[i].labels);
		free(gs[i].key);
		free(gs[i].profs);
	}
	free(gs);
}

/* One scope's profiles into series of b; base: the resource's and the scope's labels. */
static int decode_scope(dec *d, const otlp_sp *sp, const lset *base, strobe_otlp_batch *b)
{
	group *gs = NULL;
	size_t ng = 0;
	int r = 0;
	for (size_t j = 0; j < sp->n_profiles && r == 0; j++) {
		const otlp_prof *op = sp->profiles[j];
		lset ls = {0};
		if ((r = lset_copy(&ls, base)) < 0 ||
		    (r = put_indexed(d, &ls, op->attribute_indices, op->n_attribute_indices,
				     "profile")) < 0) {
			lset_free(&ls);
			break;
		}
		char *key = lset_key(&ls);
		if (!key) {
			lset_free(&ls);
			r = -ENOMEM;
			break;
		}
		size_t gi;
		for (gi = 0; gi < ng; gi++) {
			group *g = &gs[gi];
			if (g->time != op->time_unix_nano || g->duration != op->duration_nano ||
			    strcmp(g->key, key))
				continue;
			bool dup = false;
			for (uint32_t t = 0; t < g->n && !dup; t++)
				dup = same_type(d, g->profs[t], op);
			if (d->err && d->err->msg[0]) {
				r = -EINVAL;
				break;
			}
			if (!dup)
				break;
		}
		if (r < 0) {
			lset_free(&ls);
			free(key);
			break;
		}
		if (gi == ng) {
			group *ngs = realloc(gs, (ng + 1) * sizeof(*ngs));
			if (!ngs) {
				lset_free(&ls);
				free(key);
				r = -ENOMEM;
				break;
			}
			gs = ngs;
			gs[ng++] = (group){.labels = ls, .key = key, .time = op->time_unix_nano,
					   .duration = op->duration_nano};
		} else {
			lset_free(&ls);
			free(key);
		}
		group *g = &gs[gi];
		const otlp_prof **np = realloc(g->profs, (g->n + 1) * sizeof(*np));
		if (!np) {
			r = -ENOMEM;
			break;
		}
		g->profs = np;
		g->profs[g->n++] = op;
	}
	for (size_t gi = 0; gi < ng && r == 0; gi++) {
		if ((r = series_add(b, &gs[gi])) < 0)
			break;
		r = build(d, &b->s[b->n - 1], &gs[gi]);
	}
	groups_free(gs, ng);
	return r;
}

/* What a batch of views keeps alive: the dictionary's view tables and the unpacked message
 * (arena) that their strings point into. */
typedef struct batch_priv {
	otlp_vdict *vd;
	budget bg;              /* strobe_otlp_decode's arena */
	ProtobufCMessage *msg; /* strobe_otlp_decode_json's message */
} batch_priv;

void strobe_otlp_batch_free(strobe_otlp_batch *b)
{
	for (size_t i = 0; b && i < b->n; i++) {
		lset ls = {b->s[i].labels, b->s[i].nlabels};
		lset_free(&ls);
		strobe_profile_free(b->s[i].profile);
		otlp_view_free(b->s[i].view);
		free(b->s[i].refused);
	}
	if (b && b->priv_) {
		batch_priv *bp = b->priv_;
		otlp_vdict_free(bp->vd);
		budget_release(&bp->bg);
		if (bp->msg)
			protobuf_c_message_free_unpacked(bp->msg, NULL);
		free(bp);
	}
	if (b) {
		free(b->s);
		*b = (strobe_otlp_batch){0};
	}
}

static bool has_label(const lset *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->l[i].name, name) == 0)
			return true;
	return false;
}

int strobe_otlp_decode_msg(const ProtobufCMessage *msg, const strobe_otlp_limits *lim,
			   strobe_otlp_batch *out, strobe_err *err)
{
	*out = (strobe_otlp_batch){0};
	strobe_err local; /* the walk tells errors by a message having been set */
	if (!err)
		err = &local;
	err->msg[0] = 0;
	if (!msg || msg->descriptor != &REQ_DESC)
		return strobe_errf(err, -EINVAL, "not an ExportProfilesServiceRequest");
	const otlp_req *rq = (const otlp_req *)msg;
	dec d = {.d = rq->dictionary, .err = err};
	if (lim)
		d.lim = *lim;
	if (!d.lim.max_profiles)
		d.lim.max_profiles = 10000;
	if (!d.lim.max_labels)
		d.lim.max_labels = 64;
	const otlp_dict *dc = rq->dictionary;
	if (dc && dc->n_string_table && dc->string_table[0][0])
		return strobe_errf(err, -EINVAL, "dictionary: string_table[0] must be \"\"");
	uint32_t nprof = 0;
	for (size_t i = 0; i < rq->n_resource_profiles; i++)
		for (size_t j = 0; j < rq->resource_profiles[i]->n_scope_profiles; j++) {
			size_t k = rq->resource_profiles[i]->scope_profiles[j]->n_profiles;
			if (k > d.lim.max_profiles || nprof + k > d.lim.max_profiles)
				return strobe_errf(err, -E2BIG, "limit max_profiles_per_push: more "
						   "than %u profiles", d.lim.max_profiles);
			nprof += (uint32_t)k;
		}
	size_t n[5] = {dc ? dc->n_string_table : 0, dc ? dc->n_function_table : 0,
		       dc ? dc->n_mapping_table : 0, dc ? dc->n_location_table : 0,
		       dc ? dc->n_stack_table : 0};
	uint64_t **c[5] = {&d.str_c, &d.fn_c, &d.map_c, &d.loc_c, &d.stk_c};
	int r = 0;
	for (int i = 0; i < 5; i++)
		if (!(*c[i] = calloc(n[i] ? n[i] : 1, sizeof(uint64_t))))
			r = -ENOMEM;
	d.lab = malloc((ATTRS_MAX + 2) * sizeof(*d.lab));
	if (!d.lab)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < rq->n_resource_profiles; i++) {
		const otlp_rp *rp = rq->resource_profiles[i];
		lset rl = {0};
		if (rp->resource)
			r = put_kvs(&d, &rl, rp->resource->attributes, rp->resource->n_attributes,
				    "resource");
		/* OpenTelemetry's rule for a resource that does not say: unknown_service. */
		if (r == 0 && !has_label(&rl, "service_name")) {
			char *nm = strdup("service_name"), *v = strdup("unknown_service");
			r = nm && v ? lset_put(&rl, nm, v, d.lim.max_labels + 1) : -ENOMEM;
			if (r < 0 && (!nm || !v)) {
				free(nm);
				free(v);
			}
		}
		for (size_t j = 0; r == 0 && j < rp->n_scope_profiles; j++) {
			const otlp_sp *sp = rp->scope_profiles[j];
			lset sl = {0};
			r = lset_copy(&sl, &rl);
			if (r == 0 && sp->scope)
				r = put_kvs(&d, &sl, sp->scope->attributes, sp->scope->n_attributes,
					    "scope");
			if (r == 0)
				r = decode_scope(&d, sp, &sl, out);
			lset_free(&sl);
		}
		lset_free(&rl);
	}
	for (int i = 0; i < 5; i++)
		free(*c[i]);
	if (d.vd && r == 0) { /* the views point into it: the batch keeps it */
		batch_priv *bp = calloc(1, sizeof(*bp));
		if (bp) {
			bp->vd = d.vd;
			out->priv_ = bp;
		} else {
			r = -ENOMEM;
		}
	}
	if (!out->priv_)
		otlp_vdict_free(d.vd);
	free(d.lab);
	free(d.nk);
	free(d.nv);
	out->nprofiles = nprof;
	if (r < 0) {
		strobe_otlp_batch_free(out);
		if (r == -ENOMEM && err && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		else if (err && !err->msg[0])
			strobe_errf(err, r, "malformed OTLP request");
	}
	return r;
}

int strobe_otlp_decode(const uint8_t *buf, size_t len, const strobe_otlp_limits *lim,
		       strobe_otlp_batch *out, strobe_err *err)
{
	*out = (strobe_otlp_batch){0};
	/* Unpacked, a message takes several times its wire size; empty sub-messages (2 bytes on the
	 * wire, ~60 in memory) are the worst case. The budget allows that and no more. */
	budget bg = {NULL, len * 4 + 4096,
		     len > SIZE_MAX / 48 - (64u << 20) ? SIZE_MAX : 48 * len + (64u << 20)};
	ProtobufCAllocator a = {budget_alloc, budget_free, &bg};
	ProtobufCMessage *m = protobuf_c_message_unpack(&REQ_DESC, &a, len, buf);
	if (!m) {
		budget_release(&bg);
		return strobe_errf(err, -EINVAL, "not a valid OTLP ExportProfilesServiceRequest "
				   "(protobuf)");
	}
	int r = strobe_otlp_decode_msg(m, lim, out, err);
	if (r == 0 && out->priv_) /* views point into the unpacked message: it lives as long */
		((batch_priv *)out->priv_)->bg = bg;
	else
		budget_release(&bg); /* the unpacked message */
	return r;
}

int strobe_otlp_batch_merge(strobe_otlp_batch *b, strobe_profile **out, strobe_err *err)
{
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return strobe_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < b->n; i++) {
		if (!b->s[i].profile)
			continue;
		int r = strobe_profile_merge(p, b->s[i].profile, err);
		if (r < 0) {
			strobe_profile_free(p);
			return r;
		}
		if (!p->time_nanos || (b->s[i].profile->time_nanos &&
				       b->s[i].profile->time_nanos < p->time_nanos))
			p->time_nanos = b->s[i].profile->time_nanos;
		if (!p->period) {
			p->period = b->s[i].profile->period;
			if (b->s[i].profile->period_type.type) {
				const strobe_profile *s = b->s[i].profile;
				p->period_type.type =
					strobe_str_intern0(p, strobe_str(s, s->period_type.type));
				p->period_type.unit =
					strobe_str_intern0(p, strobe_str(s, s->period_type.unit));
			}
		}
		if (b->s[i].profile->duration_nanos > p->duration_nanos)
			p->duration_nanos = b->s[i].profile->duration_nanos;
	}
	*out = p;
	return 0;
}

/* ---- encode ---------------------------------------------------------------------------------- */

typedef Opentelemetry__Proto__Resource__V1__Resource otlp_res;

/* Everything the request points to, freed at once. */
typedef struct enc {
	void **blocks;
	size_t n, cap;
	bool oom;
} enc;

static void *ealloc(enc *e, size_t size)
{
	if (e->oom)
		return NULL;
	if (e->n == e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 32;
		void **nb = realloc(e->blocks, nc * sizeof(*nb));
		if (!nb) {
			e->oom = true;
			return NULL;
		}
		e->blocks = nb;
		e->cap = nc;
	}
	void *p = calloc(1, size ? size : 1);
	if (!p) {
		e->oom = true;
		return NULL;
	}
	e->blocks[e->n++] = p;
	return p;
}

static void enc_free(enc *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->blocks[i]);
	free(e->blocks);
}

/* The dictionary's attribute for a model label, found or added (itab: label -> index - 1). */
static int32_t enc_attr(enc *e, strobe_itab *seen, otlp_kvu ***tab, size_t *n, size_t *cap,
			const strobe_label *l)
{
	uint32_t id;
	bool added;
	if (strobe_itab_intern(seen, l, sizeof(*l), &id, &added) < 0) {
		e->oom = true;
		return 0;
	}
	if (!added)
		return (int32_t)id + 1;
	if (*n == *cap) {
		size_t nc = *cap * 2;
		otlp_kvu **nt = realloc(*tab, nc * sizeof(*nt));
		if (!nt) {
			e->oom = true;
			return 0;
		}
		*tab = nt;
		*cap = nc;
	}
	otlp_kvu *a = ealloc(e, sizeof(*a));
	otlp_any *v = ealloc(e, sizeof(*v));
	if (!a || !v)
		return 0;
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
	opentelemetry__proto__common__v1__any_value__init(v);
	a->key_strindex = (int32_t)l->key;
	if (l->str) {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX;
		v->string_value_strindex = (int32_t)l->str;
	} else {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = l->num;
		a->unit_strindex = (int32_t)l->num_unit;
	}
	a->value = v;
	(*tab)[(*n)++] = a;
	return (int32_t)(*n - 1);
}

int strobe_otlp_encode(const strobe_profile *p, const strobe_otlp_label *labels, size_t nlabels,
		       uint8_t **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	if (p->strings.n > INT32_MAX || p->locations.n > INT32_MAX || p->stacks.n > INT32_MAX)
		return -E2BIG;
	enc e = {0};
	strobe_itab seen = {0};
	otlp_kvu **attrs = malloc(16 * sizeof(*attrs));
	size_t nattrs = 0, capattrs = 16;
	uint32_t *sidx = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*sidx));
	otlp_stack **stacks = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*stacks));
	size_t nstacks = 1;
	int rc = -ENOMEM;
	if (!attrs || !sidx || !stacks)
		goto done;
	seen.fixed = sizeof(strobe_label);
	otlp_kvu *a0 = ealloc(&e, sizeof(*a0));
	if (!a0)
		goto done;
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a0);
	attrs[nattrs++] = a0;

	otlp_dict *dc = ealloc(&e, sizeof(*dc));
	if (!dc)
		goto done;
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(dc);
	/* strings: the model's, in id order (0 is "" in both) */
	dc->n_string_table = p->strings.n;
	dc->string_table = ealloc(&e, p->strings.n * sizeof(char *));
	for (uint32_t i = 0; dc->string_table && i < p->strings.n; i++)
		dc->string_table[i] = (char *)strobe_str(p, i);
	/* functions, mappings, locations: model id i is index i, 0 the zero value */
	dc->n_function_table = p->functions.n;
	dc->function_table = ealloc(&e, p->functions.n * sizeof(otlp_function *));
	otlp_function *fs = ealloc(&e, p->functions.n * sizeof(*fs));
	for (uint32_t i = 0; fs && dc->function_table && i < p->functions.n; i++) {
		opentelemetry__proto__profiles__v1development__function__init(&fs[i]);
		if (i) {
			const strobe_function *f = strobe_function_get(p, i);
			fs[i].name_strindex = (int32_t)f->name;
			fs[i].system_name_strindex = (int32_t)f->system_name;
			fs[i].filename_strindex = (int32_t)f->filename;
			fs[i].start_line = f->start_line;
		}
		dc->function_table[i] = &fs[i];
	}
	dc->n_mapping_table = p->mappings.n;
	dc->mapping_table = ealloc(&e, p->mappings.n * sizeof(otlp_mapping *));
	otlp_mapping *ms = ealloc(&e, p->mappings.n * sizeof(*ms));
	for (uint32_t i = 0; ms && dc->mapping_table && i < p->mappings.n; i++) {
		opentelemetry__proto__profiles__v1development__mapping__init(&ms[i]);
		if (i) {
			const strobe_mapping *m = strobe_mapping_get(p, i);
			ms[i].memory_start = m->start;
			ms[i].memory_limit = m->limit;
			ms[i].file_offset = m->offset;
			ms[i].filename_strindex = (int32_t)m->filename;
			/* the build id has no field of its own any more (an attribute would need a
			 * key string the model lacks): it is not written */
		}
		dc->mapping_table[i] = &ms[i];
	}
	size_t nlines = 0;
	for (uint32_t i = 1; i < p->locations.n; i++)
		nlines += strobe_location_get(p, i)->nline;
	dc->n_location_table = p->locations.n;
	dc->location_table = ealloc(&e, p->locations.n * sizeof(otlp_location *));
	otlp_location *ls = ealloc(&e, p->locations.n * sizeof(*ls));
	otlp_line *lns = ealloc(&e, nlines * sizeof(*lns));
	otlp_line **lnp = ealloc(&e, nlines * sizeof(*lnp));
	size_t li = 0;
	for (uint32_t i = 0; ls && lns && lnp && dc->location_table && i < p->locations.n; i++) {
		opentelemetry__proto__profiles__v1development__location__init(&ls[i]);
		if (i) {
			const strobe_location *l = strobe_location_get(p, i);
			ls[i].mapping_index = (int32_t)l->mapping;
			ls[i].address = l->address;
			ls[i].n_lines = l->nline;
			ls[i].lines = &lnp[li];
			for (uint32_t k = 0; k < l->nline; k++, li++) {
				opentelemetry__proto__profiles__v1development__line__init(&lns[li]);
				lns[li].function_index = (int32_t)l->line[k].function;
				lns[li].line = l->line[k].line;
				lns[li].column = l->line[k].column;
				lnp[li] = &lns[li];
			}
		}
		dc->location_table[i] = &ls[i];
	}
	otlp_link *lk0 = ealloc(&e, sizeof(*lk0));
	otlp_link **lkt = ealloc(&e, sizeof(*lkt));
	if (lk0 && lkt) {
		opentelemetry__proto__profiles__v1development__link__init(lk0);
		lkt[0] = lk0;
		dc->link_table = lkt;
		dc->n_link_table = 1;
	}
	otlp_stack *s0 = ealloc(&e, sizeof(*s0));
	if (!s0 || e.oom)
		goto done;
	opentelemetry__proto__profiles__v1development__stack__init(s0);
	stacks[0] = s0;

	/* one OTLP profile per sample type */
	uint32_t ns = strobe_nsamples(p);
	otlp_prof **profs = ealloc(&e, (p->ntypes ? p->ntypes : 1) * sizeof(*profs));
	otlp_sample *samples = ealloc(&e, (size_t)ns * (p->ntypes ? p->ntypes : 1) * sizeof(*samples));
	otlp_sample **sp = ealloc(&e, (size_t)ns * (p->ntypes ? p->ntypes : 1) * sizeof(*sp));
	if (!profs || !samples || !sp)
		goto done;
	/* a sample's attribute indices, once per sample id (shared by its types) */
	int32_t **sai = ealloc(&e, ((size_t)ns + 1) * sizeof(*sai));
	uint32_t *nsai = ealloc(&e, ((size_t)ns + 1) * sizeof(*nsai));
	if (!sai || !nsai)
		goto done;
	for (uint32_t id = 1; id <= ns; id++) {
		const strobe_sample_key *k = strobe_sample(p, id);
		uint32_t nl;
		const strobe_label *l = strobe_labelset_get(p, k->labels, &nl);
		if (k->labels && nl) {
			sai[id] = ealloc(&e, nl * sizeof(int32_t));
			if (!sai[id])
				goto done;
			for (uint32_t j = 0; j < nl; j++)
				sai[id][j] = enc_attr(&e, &seen, &attrs, &nattrs, &capattrs, &l[j]);
			nsai[id] = nl;
		}
		if (k->stack && !sidx[k->stack]) {
			uint32_t depth = strobe_stack_depth(p, k->stack);
			otlp_stack *st = ealloc(&e, sizeof(*st));
			int32_t *li2 = ealloc(&e, depth * sizeof(*li2));
			if (!st || !li2)
				goto done;
			opentelemetry__proto__profiles__v1development__stack__init(st);
			uint32_t s = k->stack, d2 = 0;
			while (s && d2 < depth) { /* leaf first, as the node chain runs */
				const strobe_stack_node *nd = strobe_stack_get(p, s);
				li2[d2++] = (int32_t)nd->location;
				s = nd->parent;
			}
			st->location_indices = li2;
			st->n_location_indices = d2;
			sidx[k->stack] = (uint32_t)nstacks;
			stacks[nstacks++] = st;
		}
	}
	if (e.oom)
		goto done;
	dc->stack_table = stacks;
	dc->n_stack_table = nstacks;
	dc->attribute_table = attrs;
	dc->n_attribute_table = nattrs;

	size_t si = 0;
	for (uint32_t t = 0; t < p->ntypes; t++) {
		otlp_prof *op = ealloc(&e, sizeof(*op));
		otlp_vt *vt = ealloc(&e, sizeof(*vt));
		otlp_vt *pt = ealloc(&e, sizeof(*pt));
		int64_t *vals = ealloc(&e, (size_t)ns * sizeof(*vals));
		if (!op || !vt || !pt || !vals)
			goto done;
		opentelemetry__proto__profiles__v1development__profile__init(op);
		opentelemetry__proto__profiles__v1development__value_type__init(vt);
		opentelemetry__proto__profiles__v1development__value_type__init(pt);
		vt->type_strindex = (int32_t)p->types[t].type;
		vt->unit_strindex = (int32_t)p->types[t].unit;
		op->sample_type = vt;
		if (p->period_type.type || p->period_type.unit) {
			pt->type_strindex = (int32_t)p->period_type.type;
			pt->unit_strindex = (int32_t)p->period_type.unit;
			op->period_type = pt;
		}
		op->period = p->period;
		op->time_unix_nano = p->time_nanos > 0 ? (uint64_t)p->time_nanos : 0;
		op->duration_nano = p->duration_nanos > 0 ? (uint64_t)p->duration_nanos : 0;
		op->samples = &sp[si];
		for (uint32_t id = 1; id <= ns; id++) {
			int64_t v = strobe_sample_values(p, id)[t];
			if (!v)
				continue;
			const strobe_sample_key *k = strobe_sample(p, id);
			otlp_sample *s = &samples[si];
			opentelemetry__proto__profiles__v1development__sample__init(s);
			s->stack_index = (int32_t)sidx[k->stack];
			s->attribute_indices = sai[id];
			s->n_attribute_indices = nsai[id];
			vals[id - 1] = v;
			s->values = &vals[id - 1];
			s->n_values = 1;
			sp[si++] = s;
			op->n_samples++;
		}
		profs[t] = op;
	}

	/* resource: the labels (service_name as service.name), scope strobe */
	otlp_kv **rkv = ealloc(&e, (nlabels ? nlabels : 1) * sizeof(*rkv));
	otlp_kv *kvs = ealloc(&e, (nlabels ? nlabels : 1) * sizeof(*kvs));
	otlp_any *avs = ealloc(&e, (nlabels ? nlabels : 1) * sizeof(*avs));
	otlp_res *res = ealloc(&e, sizeof(*res));
	otlp_scope *sc = ealloc(&e, sizeof(*sc));
	otlp_sp *spr = ealloc(&e, sizeof(*spr));
	otlp_sp **sprs = ealloc(&e, sizeof(*sprs));
	otlp_rp *rp = ealloc(&e, sizeof(*rp));
	otlp_rp **rps = ealloc(&e, sizeof(*rps));
	otlp_req *rq = ealloc(&e, sizeof(*rq));
	if (e.oom)
		goto done;
	opentelemetry__proto__resource__v1__resource__init(res);
	for (size_t i = 0; i < nlabels; i++) {
		opentelemetry__proto__common__v1__key_value__init(&kvs[i]);
		opentelemetry__proto__common__v1__any_value__init(&avs[i]);
		kvs[i].key = strcmp(labels[i].name, "service_name") == 0 ? (char *)"service.name"
									   : labels[i].name;
		avs[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		avs[i].string_value = labels[i].value;
		kvs[i].value = &avs[i];
		rkv[i] = &kvs[i];
	}
	res->attributes = rkv;
	res->n_attributes = nlabels;
	opentelemetry__proto__common__v1__instrumentation_scope__init(sc);
	sc->name = (char *)"strobe";
	opentelemetry__proto__profiles__v1development__scope_profiles__init(spr);
	spr->scope = sc;
	spr->profiles = profs;
	spr->n_profiles = p->ntypes;
	sprs[0] = spr;
	opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
	rp->resource = res;
	rp->scope_profiles = sprs;
	rp->n_scope_profiles = 1;
	rps[0] = rp;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
		rq);
	rq->resource_profiles = rps;
	rq->n_resource_profiles = 1;
	rq->dictionary = dc;
	size_t sz = protobuf_c_message_get_packed_size(&rq->base);
	uint8_t *buf = malloc(sz ? sz : 1);
	if (!buf)
		goto done;
	*len = protobuf_c_message_pack(&rq->base, buf);
	*out = buf;
	rc = 0;
done:
	enc_free(&e);
	strobe_itab_free(&seen);
	free(attrs);
	free(sidx);
	free(stacks);
	return rc;
}

int strobe_otlp_decode_json(const char *json, size_t len, const strobe_otlp_limits *lim,
			    strobe_otlp_batch *out, strobe_err *err)
{
	*out = (strobe_otlp_batch){0};
	ProtobufCMessage *m = NULL;
	/* OTLP/JSON is proto3 JSON with trace and span ids as hex: lib/pbjson.c does both. */
	int r = strobe_pbjson_decode(&REQ_DESC, json, len, &m, err);
	if (r < 0)
		return r;
	r = strobe_otlp_decode_msg(m, lim, out, err);
	if (r == 0 && out->priv_) /* views point into the message: it lives as long */
		((batch_priv *)out->priv_)->msg = m;
	else
		protobuf_c_message_free_unpacked(m, NULL);
	return r;
}
