// SPDX-License-Identifier: Apache-2.0
/*
 * Deltas of cumulative profiles (see include/strobe/delta.h), and the column operations that
 * go with them: keeping one sample type and dropping samples that became all zero.
 *
 * The delta is a copy of cur with prev's values subtracted. To find prev's sample in that copy,
 * every table of prev is translated into the copy's ids by lookup only (strobe_itab_find): an
 * entity that is absent from cur cannot be part of a sample of cur, so its translation is "none"
 * and nothing is added to the copy's tables for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/delta.h"

#define ABSENT UINT32_MAX

static bool same_types(const strobe_profile *a, const strobe_profile *b)
{
	if (a->ntypes != b->ntypes)
		return false;
	for (uint32_t t = 0; t < a->ntypes; t++)
		if (strcmp(strobe_str(a, a->types[t].type), strobe_str(b, b->types[t].type)) != 0 ||
		    strcmp(strobe_str(a, a->types[t].unit), strobe_str(b, b->types[t].unit)) != 0)
			return false;
	return true;
}

/* prev's ids translated into dst's (ABSENT where dst has no equal entity). */
typedef struct xlate {
	uint32_t *str, *fn, *map, *loc, *stk, *lab;
} xlate;

static void xlate_free(xlate *x)
{
	free(x->str);
	free(x->fn);
	free(x->map);
	free(x->loc);
	free(x->stk);
	free(x->lab);
}

static uint32_t xs(const xlate *x, uint32_t id) { return x->str[id]; }

static int xlate_build(xlate *x, const strobe_profile *src, const strobe_profile *dst)
{
	memset(x, 0, sizeof(*x));
	x->str = malloc(src->strings.n * sizeof(uint32_t));
	x->fn = malloc(src->functions.n * sizeof(uint32_t));
	x->map = malloc(src->mappings.n * sizeof(uint32_t));
	x->loc = malloc(src->locations.n * sizeof(uint32_t));
	x->stk = malloc(src->stacks.n * sizeof(uint32_t));
	x->lab = malloc(src->labelsets.n * sizeof(uint32_t));
	strobe_line *lines = NULL;
	strobe_label *labs = NULL;
	uint8_t *lockey = NULL;
	size_t lines_cap = 0, labs_cap = 0;
	if (!x->str || !x->fn || !x->map || !x->loc || !x->stk || !x->lab)
		goto nomem;
	for (uint32_t i = 0; i < src->strings.n; i++) {
		size_t len;
		const void *k = strobe_itab_get(&src->strings, i, &len); /* with its NUL */
		x->str[i] = strobe_itab_find(&dst->strings, k, len);
	}
	x->fn[0] = 0;
	for (uint32_t i = 1; i < src->functions.n; i++) {
		strobe_function f = *strobe_function_get(src, i);
		f.name = xs(x, f.name);
		f.system_name = xs(x, f.system_name);
		f.filename = xs(x, f.filename);
		f.pad_ = 0;
		x->fn[i] = f.name == ABSENT || f.system_name == ABSENT || f.filename == ABSENT
				   ? ABSENT
				   : strobe_itab_find(&dst->functions, &f, sizeof(f));
	}
	x->map[0] = 0;
	for (uint32_t i = 1; i < src->mappings.n; i++) {
		strobe_mapping m = *strobe_mapping_get(src, i);
		m.filename = xs(x, m.filename);
		m.build_id = xs(x, m.build_id);
		m.pad_ = 0;
		x->map[i] = m.filename == ABSENT || m.build_id == ABSENT
				    ? ABSENT
				    : strobe_itab_find(&dst->mappings, &m, sizeof(m));
	}
	x->loc[0] = 0;
	for (uint32_t i = 1; i < src->locations.n; i++) {
		const strobe_location *l = strobe_location_get(src, i);
		size_t sz = sizeof(strobe_location) + (size_t)l->nline * sizeof(strobe_line);
		if (l->nline > lines_cap) {
			lines_cap = (size_t)l->nline * 2;
			free(lines);
			free(lockey);
			lines = malloc(lines_cap * sizeof(*lines));
			lockey = malloc(sizeof(strobe_location) + lines_cap * sizeof(strobe_line));
			if (!lines || !lockey)
				goto nomem;
		} else if (!lockey && !(lockey = malloc(sizeof(strobe_location)))) {
			goto nomem;
		}
		/* The key exactly as strobe_location_intern builds it: zeroed, then the fields. */
		strobe_location *k = (strobe_location *)lockey;
		memset(k, 0, sz);
		k->address = l->address;
		k->mapping = x->map[l->mapping];
		k->nline = l->nline;
		k->is_folded = l->is_folded;
		bool absent = k->mapping == ABSENT;
		for (uint32_t j = 0; j < l->nline && !absent; j++) {
			k->line[j].function = x->fn[l->line[j].function];
			k->line[j].discriminator = l->line[j].discriminator;
			k->line[j].line = l->line[j].line;
			k->line[j].column = l->line[j].column;
			absent = k->line[j].function == ABSENT;
		}
		x->loc[i] = absent ? ABSENT : strobe_itab_find(&dst->locations, k, sz);
	}
	x->stk[0] = 0;
	/* Parents have smaller ids than their children, so one pass in id order suffices. */
	for (uint32_t i = 1; i < src->stacks.n; i++) {
		const strobe_stack_node *n = strobe_stack_get(src, i);
		strobe_stack_node k = {x->stk[n->parent], x->loc[n->location]};
		x->stk[i] = k.parent == ABSENT || k.location == ABSENT
				    ? ABSENT
				    : strobe_itab_find(&dst->stacks, &k, sizeof(k));
	}
	x->lab[0] = 0;
	for (uint32_t i = 1; i < src->labelsets.n; i++) {
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(src, i, &n);
		if (n > labs_cap) {
			labs_cap = (size_t)n * 2;
			free(labs);
			if (!(labs = malloc(labs_cap * sizeof(*labs))))
				goto nomem;
		}
		bool absent = false;
		for (uint32_t j = 0; j < n; j++) {
			labs[j] = l[j];
			labs[j].key = xs(x, l[j].key);
			labs[j].str = xs(x, l[j].str);
			labs[j].num_unit = xs(x, l[j].num_unit);
			labs[j].pad_ = 0;
			absent |= labs[j].key == ABSENT || labs[j].str == ABSENT ||
				  labs[j].num_unit == ABSENT;
		}
		x->lab[i] = absent ? ABSENT : strobe_labelset_find(dst, labs, n);
	}
	free(lines);
	free(labs);
	free(lockey);
	return 0;
nomem:
	free(lines);
	free(labs);
	free(lockey);
	xlate_free(x);
	return -ENOMEM;
}

int strobe_profile_drop_zero(strobe_profile *p)
{
	strobe_itab old = p->samples;
	int64_t *old_values = p->values;
	size_t old_cap = p->values_cap;
	/* A fresh sample table; stacks and the other tables stay as they are. */
	memset(&p->samples, 0, sizeof(p->samples));
	p->samples.fixed = sizeof(strobe_sample_key);
	p->values = NULL;
	p->values_cap = 0;
	strobe_sample_key none = STROBE_SAMPLE_NONE;
	uint32_t id0;
	int r = strobe_itab_intern(&p->samples, &none, sizeof(none), &id0, NULL);
	for (uint32_t s = 1; r == 0 && s < old.n; s++) {
		const strobe_sample_key *k = (const strobe_sample_key *)strobe_itab_get(&old, s, NULL);
		const int64_t *v = old_values + (size_t)s * p->ntypes;
		bool any = false;
		for (uint32_t t = 0; t < p->ntypes && !any; t++)
			any = v[t] != 0;
		if (any)
			r = strobe_sample_add(p, k->stack, k->labels, v);
	}
	if (r < 0) {
		strobe_itab_free(&p->samples);
		free(p->values);
		p->samples = old;
		p->values = old_values;
		p->values_cap = old_cap;
		return r;
	}
	strobe_itab_free(&old);
	free(old_values);
	return 0;
}

int strobe_profile_delta_cols(const strobe_profile *prev, const strobe_profile *cur,
			      const bool *cumulative, strobe_profile **out, bool *reset,
			      strobe_err *err)
{
	*out = NULL;
	if (reset)
		*reset = false;
	if (!same_types(prev, cur))
		return strobe_errf(err, -EINVAL,
				   "cannot diff profiles with different sample types (%u vs %u "
				   "types, or other names/units)",
				   prev->ntypes, cur->ntypes);
	strobe_profile *d = strobe_profile_clone(cur);
	if (!d)
		return -ENOMEM;
	/* A counter that went down overall means the process restarted: what cur holds is the
	 * count since then, which is the best delta there is. */
	for (uint32_t t = 0; t < cur->ntypes; t++) {
		if (cumulative && !cumulative[t])
			continue;
		if (strobe_total(cur, (int)t) < strobe_total(prev, (int)t)) {
			if (reset)
				*reset = true;
			*out = d;
			return 0;
		}
	}
	xlate x;
	int r = xlate_build(&x, prev, d);
	if (r < 0) {
		strobe_profile_free(d);
		return r;
	}
	for (uint32_t s = 1; s <= strobe_nsamples(prev); s++) {
		const strobe_sample_key *k = strobe_sample(prev, s);
		strobe_sample_key key = {x.stk[k->stack], x.lab[k->labels]};
		if (key.stack == ABSENT || key.labels == ABSENT)
			continue;
		uint32_t id = strobe_itab_find(&d->samples, &key, sizeof(key));
		if (id == ABSENT)
			continue;
		const int64_t *pv = strobe_sample_values(prev, s);
		int64_t *dv = strobe_sample_values(d, id);
		for (uint32_t t = 0; t < d->ntypes; t++) {
			if (cumulative && !cumulative[t])
				continue;
			/* Unsigned subtraction: hostile values must not overflow into UB. */
			int64_t v = (int64_t)((uint64_t)dv[t] - (uint64_t)pv[t]);
			dv[t] = dv[t] >= pv[t] ? v : 0;
		}
	}
	xlate_free(&x);
	if ((r = strobe_profile_drop_zero(d)) < 0) {
		strobe_profile_free(d);
		return r;
	}
	if (prev->time_nanos > 0 && cur->time_nanos >= prev->time_nanos) {
		d->time_nanos = prev->time_nanos;
		d->duration_nanos = cur->time_nanos - prev->time_nanos;
	}
	*out = d;
	return 0;
}

int strobe_profile_delta(const strobe_profile *prev, const strobe_profile *cur,
			 strobe_profile **out, strobe_err *err)
{
	return strobe_profile_delta_cols(prev, cur, NULL, out, NULL, err);
}

int strobe_profile_select_type(const strobe_profile *p, uint32_t type, strobe_profile **out)
{
	*out = NULL;
	if (type >= p->ntypes)
		return -EINVAL;
	strobe_profile *c = strobe_profile_clone(p);
	if (!c)
		return -ENOMEM;
	uint32_t n = strobe_nsamples(c);
	int64_t *v = malloc(((size_t)n + 1) * sizeof(*v));
	if (!v) {
		strobe_profile_free(c);
		return -ENOMEM;
	}
	v[0] = 0;
	for (uint32_t s = 1; s <= n; s++)
		v[s] = strobe_sample_values(c, s)[type];
	c->types[0] = c->types[type];
	c->ntypes = 1;
	c->default_type = 0;
	free(c->values);
	c->values = v;
	c->values_cap = (size_t)n + 1;
	int r = strobe_profile_drop_zero(c);
	if (r < 0) {
		strobe_profile_free(c);
		return r;
	}
	*out = c;
	return 0;
}
