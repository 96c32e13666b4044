// SPDX-License-Identifier: Apache-2.0
/*
 * The profile model's constructors, accessors and whole-profile operations (merge, scale, clone).
 * See include/strobe/profile.h for the shape of the model and its ownership rules.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/profile.h"

int strobe_errf(strobe_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		/* One line, always: a name from the input must not break the message. */
		for (char *c = err->msg; *c; c++)
			if (*c == '\n' || *c == '\r')
				*c = ' ';
	}
	return code;
}

static uint32_t intern_or_max(strobe_itab *t, const void *key, size_t len)
{
	uint32_t id;
	return strobe_itab_intern(t, key, len, &id, NULL) < 0 ? UINT32_MAX : id;
}

strobe_profile *strobe_profile_new(void)
{
	strobe_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->default_type = -1;
	/* The reserved id-0 entries: each table's "none". Their padding bytes are set, which no
	 * interned entity has (interning zeroes padding), so an all-zero function, mapping or
	 * location from the input can never collide with "none"; likewise a sample with an empty
	 * stack and no labels is an ordinary sample, not the reserved key. */
	strobe_function fn0 = {.pad_ = UINT32_MAX};
	strobe_mapping map0 = {.pad_ = UINT32_MAX};
	strobe_location loc0 = {.pad_ = {0xff}};
	strobe_stack_node root = {0, 0};
	strobe_sample_key none = STROBE_SAMPLE_NONE;
	p->functions.fixed = sizeof(strobe_function);
	p->mappings.fixed = sizeof(strobe_mapping);
	p->stacks.fixed = sizeof(strobe_stack_node);
	p->samples.fixed = sizeof(strobe_sample_key);
	if (intern_or_max(&p->strings, "", 1) != 0 ||
	    intern_or_max(&p->functions, &fn0, sizeof(fn0)) != 0 ||
	    intern_or_max(&p->mappings, &map0, sizeof(map0)) != 0 ||
	    intern_or_max(&p->locations, &loc0, sizeof(loc0)) != 0 ||
	    intern_or_max(&p->stacks, &root, sizeof(root)) != 0 ||
	    intern_or_max(&p->labelsets, "", 0) != 0 ||
	    intern_or_max(&p->samples, &none, sizeof(none)) != 0) {
		strobe_profile_free(p);
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void strobe_profile_free(strobe_profile *p)
{
	if (!p)
		return;
	strobe_itab_free(&p->strings);
	strobe_itab_free(&p->functions);
	strobe_itab_free(&p->mappings);
	strobe_itab_free(&p->locations);
	strobe_itab_free(&p->stacks);
	strobe_itab_free(&p->labelsets);
	strobe_itab_free(&p->samples);
	free(p->values);
	free(p->types);
	free(p->comments);
	free(p);
}

int strobe_profile_set_types(strobe_profile *p, const strobe_value_type *types, uint32_t n)
{
	if (strobe_nsamples(p))
		return -EBUSY;
	strobe_value_type *t = malloc((n ? n : 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memcpy(t, types, n * sizeof(*t));
	free(p->types);
	p->types = t;
	p->ntypes = n;
	free(p->values);
	p->values = NULL;
	p->values_cap = 0;
	return 0;
}

int strobe_profile_add_type(strobe_profile *p, const char *type, const char *unit)
{
	if (strobe_nsamples(p))
		return -EBUSY;
	strobe_value_type vt = {strobe_str_intern0(p, type), strobe_str_intern0(p, unit)};
	if (vt.type == UINT32_MAX || vt.unit == UINT32_MAX)
		return -ENOMEM;
	strobe_value_type *t = realloc(p->types, (p->ntypes + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	t[p->ntypes++] = vt;
	p->types = t;
	free(p->values);
	p->values = NULL;
	p->values_cap = 0;
	return 0;
}

uint32_t strobe_str_intern(strobe_profile *p, const char *s, size_t len)
{
	/* Stored with the NUL so strobe_str() hands out C strings; a lookup key therefore needs it
	 * too. Short strings go through the stack; long ones through the heap. */
	char small[256];
	char *k = len < sizeof(small) ? small : malloc(len + 1);
	if (!k)
		return UINT32_MAX;
	memcpy(k, s, len);
	k[len] = 0;
	uint32_t id = intern_or_max(&p->strings, k, len + 1);
	if (k != small)
		free(k);
	return id;
}

uint32_t strobe_function_intern(strobe_profile *p, const strobe_function *f)
{
	strobe_function k = *f;
	k.pad_ = 0;
	return intern_or_max(&p->functions, &k, sizeof(k));
}

uint32_t strobe_mapping_intern(strobe_profile *p, const strobe_mapping *m)
{
	strobe_mapping k = *m;
	k.pad_ = 0;
	return intern_or_max(&p->mappings, &k, sizeof(k));
}

uint32_t strobe_location_intern(strobe_profile *p, uint32_t mapping, uint64_t address,
				const strobe_line *lines, uint32_t nline, bool is_folded)
{
	size_t sz = sizeof(strobe_location) + (size_t)nline * sizeof(strobe_line);
	uint8_t small[sizeof(strobe_location) + 8 * sizeof(strobe_line)];
	strobe_location *l = sz <= sizeof(small) ? (strobe_location *)small : malloc(sz);
	if (!l)
		return UINT32_MAX;
	memset(l, 0, sz);
	l->address = address;
	l->mapping = mapping;
	l->nline = nline;
	l->is_folded = is_folded;
	for (uint32_t i = 0; i < nline; i++) {
		l->line[i].function = lines[i].function;
		l->line[i].discriminator = lines[i].discriminator;
		l->line[i].line = lines[i].line;
		l->line[i].column = lines[i].column;
	}
	uint32_t id = intern_or_max(&p->locations, l, sz);
	if ((uint8_t *)l != small)
		free(l);
	return id;
}

uint32_t strobe_location_for_name(strobe_profile *p, const char *name, size_t len)
{
	strobe_function f = {0};
	f.name = strobe_str_intern(p, name, len);
	if (f.name == UINT32_MAX)
		return UINT32_MAX;
	strobe_line ln = {0};
	ln.function = strobe_function_intern(p, &f);
	if (ln.function == UINT32_MAX)
		return UINT32_MAX;
	return strobe_location_intern(p, 0, 0, &ln, 1, false);
}

uint32_t strobe_stack_push(strobe_profile *p, uint32_t parent, uint32_t location)
{
	strobe_stack_node n = {parent, location};
	return intern_or_max(&p->stacks, &n, sizeof(n));
}

uint32_t strobe_stack_depth(const strobe_profile *p, uint32_t stack)
{
	uint32_t d = 0;
	while (stack) {
		d++;
		stack = strobe_stack_get(p, stack)->parent;
	}
	return d;
}

static int label_cmp(const void *a, const void *b)
{
	const strobe_label *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->str != y->str)
		return x->str < y->str ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	if (x->num_unit != y->num_unit)
		return x->num_unit < y->num_unit ? -1 : 1;
	return 0;
}

uint32_t strobe_labelset_find(const strobe_profile *p, strobe_label *labels, uint32_t n)
{
	if (!n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		labels[i].pad_ = 0;
	qsort(labels, n, sizeof(*labels), label_cmp);
	return strobe_itab_find(&p->labelsets, labels, n * sizeof(*labels));
}

uint32_t strobe_labelset_intern(strobe_profile *p, const strobe_label *labels, uint32_t n)
{
	if (!n)
		return 0;
	strobe_label small[16];
	strobe_label *l = n <= 16 ? small : malloc(n * sizeof(*l));
	if (!l)
		return UINT32_MAX;
	for (uint32_t i = 0; i < n; i++) {
		l[i] = labels[i];
		l[i].pad_ = 0;
	}
	qsort(l, n, sizeof(*l), label_cmp);
	uint32_t id = intern_or_max(&p->labelsets, l, n * sizeof(*l));
	if (l != small)
		free(l);
	return id;
}

int strobe_profile_add_comment(strobe_profile *p, const char *text)
{
	uint32_t id = strobe_str_intern0(p, text);
	uint32_t *cm = id == UINT32_MAX ? NULL
					: realloc(p->comments, (p->ncomments + 1) * sizeof(*cm));
	if (!cm)
		return -ENOMEM;
	p->comments = cm;
	cm[p->ncomments++] = id;
	return 0;
}

int strobe_sample_add(strobe_profile *p, uint32_t stack, uint32_t labels, const int64_t *values)
{
	strobe_sample_key k = {stack, labels};
	uint32_t id;
	bool added;
	int r = strobe_itab_intern(&p->samples, &k, sizeof(k), &id, &added);
	if (r < 0)
		return r;
	if (id >= p->values_cap) {
		size_t nc = p->values_cap ? p->values_cap * 2 : 256;
		while (nc <= id)
			nc *= 2;
		int64_t *v = realloc(p->values, nc * (p->ntypes ? p->ntypes : 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->values = v;
		p->values_cap = nc;
	}
	int64_t *dst = strobe_sample_values(p, id);
	for (uint32_t t = 0; t < p->ntypes; t++)
		/* Unsigned add: overflow of hostile input wraps instead of being undefined. */
		dst[t] = added ? values[t] : (int64_t)((uint64_t)dst[t] + (uint64_t)values[t]);
	return 0;
}

int strobe_type_index(const strobe_profile *p, const char *name)
{
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (strcmp(strobe_str(p, p->types[t].type), name) == 0)
			return (int)t;
	char *end;
	long v = strtol(name, &end, 10);
	if (*name && !*end && v >= 0 && v < (long)p->ntypes)
		return (int)v;
	return -1;
}

int strobe_default_type_index(const strobe_profile *p)
{
	if (p->default_type >= 0 && (uint32_t)p->default_type < p->ntypes)
		return p->default_type;
	return p->ntypes ? (int)p->ntypes - 1 : -1;
}

int64_t strobe_total(const strobe_profile *p, int type)
{
	uint64_t sum = 0;
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		sum += (uint64_t)strobe_sample_values(p, s)[type];
	return (int64_t)sum;
}

/* ---- merge --------------------------------------------------------------------------------- */

static void types_text(const strobe_profile *p, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = 0;
	for (uint32_t t = 0; t < p->ntypes && o < cap; t++)
		o += (size_t)snprintf(buf + o, cap - o, "%s%s/%s", t ? ", " : "",
				      strobe_str(p, p->types[t].type), strobe_str(p, p->types[t].unit));
}

typedef struct remap {
	uint32_t *str, *fn, *map, *loc, *stk, *lab;
} remap;

static uint32_t rs(const remap *m, uint32_t id) { return m->str[id]; }

int strobe_profile_merge(strobe_profile *dst, const strobe_profile *src, strobe_err *err)
{
	return strobe_profile_merge_named(dst, src, NULL, NULL, err);
}

int strobe_profile_merge_named(strobe_profile *dst, const strobe_profile *src,
			       strobe_location_namer namer, void *ctx, strobe_err *err)
{
	if (dst->ntypes == 0 && strobe_nsamples(dst) == 0) {
		for (uint32_t t = 0; t < src->ntypes; t++) {
			int r = strobe_profile_add_type(dst, strobe_str(src, src->types[t].type),
							strobe_str(src, src->types[t].unit));
			if (r < 0)
				return r;
		}
		if (src->default_type >= 0)
			dst->default_type = src->default_type;
	} else {
		bool same = dst->ntypes == src->ntypes;
		for (uint32_t t = 0; same && t < src->ntypes; t++)
			same = strcmp(strobe_str(dst, dst->types[t].type),
				      strobe_str(src, src->types[t].type)) == 0 &&
			       strcmp(strobe_str(dst, dst->types[t].unit),
				      strobe_str(src, src->types[t].unit)) == 0;
		if (!same) {
			char a[200], b[200];
			types_text(dst, a, sizeof(a));
			types_text(src, b, sizeof(b));
			return strobe_errf(err, -EINVAL,
					   "sample types differ: [%s] vs [%s]", a, b);
		}
	}
	int r = -ENOMEM;
	remap m = {0};
	m.str = malloc(src->strings.n * sizeof(uint32_t));
	m.fn = malloc(src->functions.n * sizeof(uint32_t));
	m.map = malloc(src->mappings.n * sizeof(uint32_t));
	m.loc = malloc(src->locations.n * sizeof(uint32_t));
	m.stk = malloc(src->stacks.n * sizeof(uint32_t));
	m.lab = malloc(src->labelsets.n * sizeof(uint32_t));
	strobe_line *lines = NULL;
	strobe_label *labs = NULL;
	size_t lines_cap = 0, labs_cap = 0;
	if (!m.str || !m.fn || !m.map || !m.loc || !m.stk || !m.lab)
		goto out;
	for (uint32_t i = 0; i < src->strings.n; i++)
		if ((m.str[i] = strobe_str_intern(dst, strobe_str(src, i), strobe_str_len(src, i))) ==
		    UINT32_MAX)
			goto out;
	m.fn[0] = 0;
	for (uint32_t i = 1; i < src->functions.n; i++) {
		strobe_function f = *strobe_function_get(src, i);
		f.name = rs(&m, f.name);
		f.system_name = rs(&m, f.system_name);
		f.filename = rs(&m, f.filename);
		if ((m.fn[i] = strobe_function_intern(dst, &f)) == UINT32_MAX)
			goto out;
	}
	m.map[0] = 0;
	for (uint32_t i = 1; i < src->mappings.n; i++) {
		strobe_mapping mp = *strobe_mapping_get(src, i);
		mp.filename = rs(&m, mp.filename);
		mp.build_id = rs(&m, mp.build_id);
		if ((m.map[i] = strobe_mapping_intern(dst, &mp)) == UINT32_MAX)
			goto out;
	}
	m.loc[0] = 0;
	for (uint32_t i = 1; i < src->locations.n; i++) {
		const strobe_location *l = strobe_location_get(src, i);
		if (namer && !l->nline && !l->is_folded) {
			strobe_line named[STROBE_NAMER_MAX_LINES];
			int n = namer(ctx, dst, src, i, l, named, STROBE_NAMER_MAX_LINES);
			if (n < 0) {
				r = n;
				goto out;
			}
			if (n > 0) {
				m.loc[i] = strobe_location_intern(dst, m.map[l->mapping], l->address,
								  named, (uint32_t)n, 0);
				if (m.loc[i] == UINT32_MAX)
					goto out;
				continue;
			}
		}
		if (l->nline > lines_cap) {
			lines_cap = l->nline * 2;
			free(lines);
			if (!(lines = malloc(lines_cap * sizeof(*lines))))
				goto out;
		}
		for (uint32_t j = 0; j < l->nline; j++) {
			lines[j] = l->line[j];
			lines[j].function = m.fn[l->line[j].function];
		}
		if ((m.loc[i] = strobe_location_intern(dst, m.map[l->mapping], l->address, lines,
						       l->nline, l->is_folded)) == UINT32_MAX)
			goto out;
	}
	/* A parent's id is always smaller than its child's (a child is interned after its parent),
	 * so one pass in id order sees every parent first. */
	m.stk[0] = 0;
	for (uint32_t i = 1; i < src->stacks.n; i++) {
		const strobe_stack_node *n = strobe_stack_get(src, i);
		if ((m.stk[i] = strobe_stack_push(dst, m.stk[n->parent], m.loc[n->location])) ==
		    UINT32_MAX)
			goto out;
	}
	m.lab[0] = 0;
	for (uint32_t i = 1; i < src->labelsets.n; i++) {
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(src, i, &n);
		if (n > labs_cap) {
			labs_cap = n * 2;
			free(labs);
			if (!(labs = malloc(labs_cap * sizeof(*labs))))
				goto out;
		}
		for (uint32_t j = 0; j < n; j++) {
			labs[j] = l[j];
			labs[j].key = rs(&m, l[j].key);
			labs[j].str = rs(&m, l[j].str);
			labs[j].num_unit = rs(&m, l[j].num_unit);
		}
		if ((m.lab[i] = strobe_labelset_intern(dst, labs, n)) == UINT32_MAX)
			goto out;
	}
	for (uint32_t s = 1; s <= strobe_nsamples(src); s++) {
		const strobe_sample_key *k = strobe_sample(src, s);
		if ((r = strobe_sample_add(dst, m.stk[k->stack], m.lab[k->labels],
					   strobe_sample_values(src, s))) < 0)
			goto out;
	}
	for (uint32_t c = 0; c < src->ncomments; c++) {
		uint32_t *cm = realloc(dst->comments, (dst->ncomments + 1) * sizeof(*cm));
		if (!cm)
			goto out;
		dst->comments = cm;
		cm[dst->ncomments++] = m.str[src->comments[c]];
	}
	if (!dst->period_type.type && src->period_type.type) {
		dst->period_type.type = m.str[src->period_type.type];
		dst->period_type.unit = m.str[src->period_type.unit];
	}
	if (!dst->period)
		dst->period = src->period;
	if (!dst->drop_frames)
		dst->drop_frames = m.str[src->drop_frames];
	if (!dst->keep_frames)
		dst->keep_frames = m.str[src->keep_frames];
	/* The merged window spans both: earliest start, latest end. */
	if (src->time_nanos) {
		int64_t dend = dst->time_nanos + dst->duration_nanos;
		int64_t send = src->time_nanos + src->duration_nanos;
		if (!dst->time_nanos) {
			dst->time_nanos = src->time_nanos;
			dst->duration_nanos = src->duration_nanos;
		} else {
			int64_t start = dst->time_nanos < src->time_nanos ? dst->time_nanos
									    : src->time_nanos;
			int64_t end = dend > send ? dend : send;
			dst->time_nanos = start;
			dst->duration_nanos = end - start;
		}
	} else if (!dst->time_nanos) {
		dst->duration_nanos += src->duration_nanos;
	}
	r = 0;
out:
	free(m.str);
	free(m.fn);
	free(m.map);
	free(m.loc);
	free(m.stk);
	free(m.lab);
	free(lines);
	free(labs);
	return r;
}

void strobe_profile_scale(strobe_profile *p, double factor)
{
	size_t n = (size_t)(strobe_nsamples(p) + 1) * p->ntypes;
	for (size_t i = p->ntypes; i < n; i++)
		p->values[i] = (int64_t)llround((double)p->values[i] * factor);
}

strobe_profile *strobe_profile_clone(const strobe_profile *p)
{
	strobe_profile *c = strobe_profile_new();
	if (!c)
		return NULL;
	int r = strobe_profile_merge(c, p, NULL);
	if (r < 0) {
		strobe_profile_free(c);
		errno = -r;
		return NULL;
	}
	c->default_type = p->default_type;
	c->period = p->period;
	c->time_nanos = p->time_nanos;
	c->duration_nanos = p->duration_nanos;
	return c;
}
