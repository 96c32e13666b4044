// SPDX-License-Identifier: Apache-2.0
/*
 * pprof-style transforms (focus, ignore, hide, show, tag focus/ignore, prune) applied in place on
 * a profile. Matching is decided once per location and cached, so a filter over a large profile
 * costs one regexec per distinct location, not per frame of every sample.
 */
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/transform.h"

enum { M_FOCUS = 1, M_IGNORE = 2, M_HIDE = 4, M_SHOW = 8, M_DONE = 128 };

typedef struct rx {
	regex_t re;
	bool set;
} rx;

static int rx_compile(rx *r, const char *pattern, const char *opt, strobe_err *err)
{
	if (!pattern || !*pattern)
		return 0;
	const char *why = strobe_regex_too_costly(pattern, 1024);
	if (why)
		return strobe_errf(err, -EINVAL, "--%s '%s': refused: %s", opt, pattern, why);
	int e = regcomp(&r->re, pattern, REG_EXTENDED | REG_NOSUB);
	if (e) {
		char msg[128];
		regerror(e, &r->re, msg, sizeof(msg));
		return strobe_errf(err, -EINVAL, "--%s '%s': invalid regular expression: %s", opt,
				   pattern, msg);
	}
	r->set = true;
	return 0;
}

static void rx_free(rx *r)
{
	if (r->set)
		regfree(&r->re);
}

static bool loc_matches(const strobe_profile *p, const strobe_location *l, const rx *r)
{
	for (uint32_t i = 0; i < l->nline; i++) {
		const strobe_function *f = strobe_function_get(p, l->line[i].function);
		if (regexec(&r->re, strobe_str(p, f->name), 0, NULL, 0) == 0)
			return true;
		if (f->system_name && f->system_name != f->name &&
		    regexec(&r->re, strobe_str(p, f->system_name), 0, NULL, 0) == 0)
			return true;
	}
	return false;
}

/* Label filter: "key=RE" matches that key's value; a bare "RE" any label's value. Numeric labels
 * match against their decimal text. */
typedef struct tagrx {
	rx re;
	char *key;
} tagrx;

static int tag_compile(tagrx *t, const char *spec, const char *opt, strobe_err *err)
{
	if (!spec || !*spec)
		return 0;
	const char *eq = strchr(spec, '=');
	if (eq) {
		t->key = strndup(spec, (size_t)(eq - spec));
		if (!t->key)
			return -ENOMEM;
		spec = eq + 1;
	}
	return rx_compile(&t->re, spec, opt, err);
}

static bool tag_matches(const strobe_profile *p, uint32_t labelset, const tagrx *t)
{
	uint32_t n;
	const strobe_label *l = strobe_labelset_get(p, labelset, &n);
	for (uint32_t i = 0; i < n; i++) {
		if (t->key && strcmp(strobe_str(p, l[i].key), t->key) != 0)
			continue;
		char num[32];
		const char *v = l[i].str ? strobe_str(p, l[i].str) : num;
		if (!l[i].str)
			snprintf(num, sizeof(num), "%" PRId64, l[i].num);
		if (regexec(&t->re.re, v, 0, NULL, 0) == 0)
			return true;
	}
	return false;
}

/* Total of `type` under every stack node (inclusive), for pruning. Parents have smaller ids than
 * their children, so one backward pass accumulates children into parents. */
static int64_t *stack_totals(const strobe_profile *p, int type)
{
	int64_t *tot = calloc(p->stacks.n, sizeof(*tot));
	if (!tot)
		return NULL;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		tot[strobe_sample(p, s)->stack] += v < 0 ? -v : v;
	}
	for (uint32_t i = p->stacks.n - 1; i > 0; i--)
		tot[strobe_stack_get(p, i)->parent] += tot[i];
	return tot;
}

int strobe_profile_filter(strobe_profile *p, const strobe_filter *f, int type, strobe_err *err)
{
	rx focus = {0}, ignore = {0}, hide = {0}, show = {0};
	tagrx tf = {0}, ti = {0};
	uint8_t *mark = NULL;
	int64_t *tot = NULL;
	uint32_t *path = NULL;
	size_t path_cap = 0;
	strobe_itab old = p->samples;
	int64_t *old_values = p->values;
	bool swapped = false;
	int r;
	if ((r = rx_compile(&focus, f->focus, "focus", err)) < 0 ||
	    (r = rx_compile(&ignore, f->ignore, "ignore", err)) < 0 ||
	    (r = rx_compile(&hide, f->hide, "hide", err)) < 0 ||
	    (r = rx_compile(&show, f->show, "show", err)) < 0 ||
	    (r = tag_compile(&tf, f->tagfocus, "tagfocus", err)) < 0 ||
	    (r = tag_compile(&ti, f->tagignore, "tagignore", err)) < 0)
		goto out;
	bool any = focus.set || ignore.set || hide.set || show.set || tf.re.set || ti.re.set ||
		   f->prune > 0;
	if (!any)
		goto out;
	r = -ENOMEM;
	if (!(mark = calloc(p->locations.n, 1)))
		goto out;
	int64_t limit = 0;
	if (f->prune > 0 && type >= 0 && (uint32_t)type < p->ntypes) {
		if (!(tot = stack_totals(p, type)))
			goto out;
		limit = (int64_t)((double)tot[0] * f->prune);
	}
	/* Fresh sample table; the stack/location tables are kept and only grow. */
	memset(&p->samples, 0, sizeof(p->samples));
	p->samples.fixed = sizeof(strobe_sample_key);
	p->values = NULL;
	p->values_cap = 0;
	swapped = true;
	strobe_sample_key none = STROBE_SAMPLE_NONE;
	uint32_t id0;
	if ((r = strobe_itab_intern(&p->samples, &none, sizeof(none), &id0, NULL)) < 0)
		goto out;
	for (uint32_t s = 1; s < old.n; s++) {
		const strobe_sample_key *k = (const strobe_sample_key *)strobe_itab_get(&old, s, NULL);
		const int64_t *vals = old_values + (size_t)s * p->ntypes;
		if (tf.re.set && !tag_matches(p, k->labels, &tf))
			continue;
		if (ti.re.set && tag_matches(p, k->labels, &ti))
			continue;
		size_t depth = 0;
		for (uint32_t st = k->stack; st; st = strobe_stack_get(p, st)->parent) {
			if (depth == path_cap) {
				path_cap = path_cap ? path_cap * 2 : 64;
				uint32_t *np = realloc(path, path_cap * sizeof(*np));
				if (!np) {
					r = -ENOMEM;
					goto out;
				}
				path = np;
			}
			path[depth++] = st; /* leaf first */
		}
		bool focused = !focus.set, ignored = false;
		uint32_t nstack = 0;
		for (size_t i = depth; i-- > 0;) { /* root first */
			uint32_t st = path[i];
			if (tot && tot[st] < limit)
				break; /* pruned: the rest is credited to the caller */
			uint32_t loc = strobe_stack_get(p, st)->location;
			if (!(mark[loc] & M_DONE)) {
				const strobe_location *l = strobe_location_get(p, loc);
				mark[loc] = M_DONE | (focus.set && loc_matches(p, l, &focus) ? M_FOCUS : 0) |
					    (ignore.set && loc_matches(p, l, &ignore) ? M_IGNORE : 0) |
					    (hide.set && loc_matches(p, l, &hide) ? M_HIDE : 0) |
					    (show.set && loc_matches(p, l, &show) ? M_SHOW : 0);
			}
			focused |= (mark[loc] & M_FOCUS) != 0;
			ignored |= (mark[loc] & M_IGNORE) != 0;
			if ((mark[loc] & M_HIDE) || (show.set && !(mark[loc] & M_SHOW)))
				continue;
			if ((nstack = strobe_stack_push(p, nstack, loc)) == UINT32_MAX) {
				r = -ENOMEM;
				goto out;
			}
		}
		if (!focused || ignored)
			continue;
		if ((r = strobe_sample_add(p, nstack, k->labels, vals)) < 0)
			goto out;
	}
	r = 0;
out:
	if (swapped) {
		if (r < 0) { /* put the original back: a failed filter changes nothing */
			strobe_itab_free(&p->samples);
			free(p->values);
			p->samples = old;
			p->values = old_values;
			p->values_cap = old.n;
		} else {
			strobe_itab_free(&old);
			free(old_values);
		}
	}
	rx_free(&focus);
	rx_free(&ignore);
	rx_free(&hide);
	rx_free(&show);
	rx_free(&tf.re);
	rx_free(&ti.re);
	free(tf.key);
	free(ti.key);
	free(mark);
	free(tot);
	free(path);
	return r;
}
