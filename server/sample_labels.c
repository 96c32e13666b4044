// SPDX-License-Identifier: Apache-2.0
/*
 * Per-sample labels as series labels. A Go program that tags its work with pprof.Do (labels
 * such as endpoint="/checkout") writes those labels on each sample of its profiles; Pyroscope
 * makes every distinct set of them a series of its own, so `{endpoint="/checkout"}` selects that
 * work. This groups a profile's samples by their string labels for the push, /ingest and the
 * scraper: each group becomes a store item with the group's labels added to the request's, all
 * stored in the push's one transaction.
 *
 * The labels follow the push's rules (name charset, lengths, labels per series, UTF-8): a label
 * that breaks one refuses the push with the limit named, as a push label would. A request label
 * wins over a sample label of the same name (the sample cannot move itself to another service).
 * Numeric labels (Go heap profiles' bytes=) stay on the samples and are merged as before. The
 * labels that name a process, a thread or a request (pid, comm, exe, span_id...:
 * strobe_sample_label_name) make no series either: a series names a service, and one per
 * process or request would exhaust the cardinality. Each group carries them as its sample labels,
 * stored with its point, so that selectors can still pick them at query time.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

#define MAX_GROUPS 1024u /* distinct sample label sets in one profile */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const strobe_labelpair *)a)->name, ((const strobe_labelpair *)b)->name);
}

static bool in_base(const strobe_labelpair *base, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(base[i].name, name) == 0)
			return true;
	return false;
}

void srv_label_groups_free(srv_label_groups *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free(g->g[i].labels);
		free(g->g[i].slabels);
		free(g->g[i].samples);
	}
	free(g->g);
	memset(g, 0, sizeof(*g));
}

/* The series labels of label set `ls`, sorted by name, into *out (malloc'd; *n may be 0), and its
 * sample labels with the request's (rsl, which win) into *sout, *sn. */
static int set_labels(const strobe_profile *p, uint32_t ls, const strobe_server_config *c,
		      const strobe_labelpair *base, size_t nbase, const strobe_labelpair *rsl,
		      size_t nrsl, strobe_labelpair **out, size_t *n, strobe_labelpair **sout,
		      size_t *sn, strobe_err *err)
{
	uint32_t nl;
	const strobe_label *l = strobe_labelset_get(p, ls, &nl);
	strobe_labelpair *v = malloc((nl ? nl : 1) * sizeof(*v));
	strobe_labelpair *sv = malloc((nl + nrsl + 1) * sizeof(*sv));
	if (!v || !sv) {
		free(v);
		free(sv);
		return -ENOMEM;
	}
	size_t k = 0, sk = 0;
	for (size_t i = 0; i < nrsl; i++)
		sv[sk++] = rsl[i];
	for (uint32_t i = 0; i < nl; i++) {
		if (!l[i].str)
			continue;
		const char *name = strobe_str(p, l[i].key), *value = strobe_str(p, l[i].str);
		bool on_sample = strobe_sample_label_name(name);
		if (in_base(base, nbase, name) || (on_sample && in_base(sv, sk, name)))
			continue; /* a request label, or a key given twice: the first value */
		bool dup = false;
		for (size_t j = 0; j < k && !dup; j++)
			dup = strcmp(v[j].name, name) == 0;
		if (dup)
			continue;
		const char *bad = NULL;
		if (!srv_label_name_ok(name, c->max_label_name_len))
			bad = "is not a valid label name ([a-zA-Z_][a-zA-Z0-9_.]*, not __) or is "
			      "longer than max_label_name_length";
		else if (strlen(value) > c->max_label_value_len)
			bad = "has a value longer than max_label_value_length";
		else {
			json_t *js = json_string(value); /* NULL: not valid UTF-8 */
			if (!js)
				bad = "has a value that is not UTF-8";
			json_decref(js);
		}
		if (bad) {
			free(v);
			free(sv);
			return strobe_errf(err, -EINVAL, "sample label '%.128s' %s", name, bad);
		}
		if (on_sample)
			sv[sk++] = (strobe_labelpair){name, value};
		else
			v[k++] = (strobe_labelpair){name, value};
	}
	if (sk > STROBE_SAMPLE_LABELS_MAX) {
		free(v);
		free(sv);
		return strobe_errf(err, -EINVAL,
				   "limit max_labels: %zu sample labels (pid, comm...) on a sample, "
				   "at most %d",
				   sk, STROBE_SAMPLE_LABELS_MAX);
	}
	if (nbase + k > c->max_labels) {
		free(v);
		free(sv);
		return strobe_errf(err, -EINVAL,
				   "limit max_labels: %zu series labels with the sample labels, at "
				   "most %u",
				   nbase + k, c->max_labels);
	}
	qsort(v, k, sizeof(*v), cmp_name);
	qsort(sv, sk, sizeof(*sv), cmp_name);
	*out = v;
	*n = k;
	*sout = sv;
	*sn = sk;
	return 0;
}

int srv_sample_groups(const strobe_profile *p, const strobe_server_config *c,
		      const strobe_labelpair *base, size_t nbase, const strobe_labelpair *rsl,
		      size_t nrsl, srv_label_groups *out, strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	uint32_t ns = strobe_nsamples(p), nsets = p->labelsets.n;
	bool any = false;
	for (uint32_t i = 1; i <= ns && !any; i++)
		any = strobe_sample(p, i)->labels != 0;
	if (!any) { /* the common case: one group, every sample, no labels */
		if (!(out->g = calloc(1, sizeof(*out->g))))
			return -ENOMEM;
		out->n = 1;
		if (nrsl) {
			if (!(out->g->slabels = malloc(nrsl * sizeof(*rsl)))) {
				srv_label_groups_free(out);
				return -ENOMEM;
			}
			memcpy(out->g->slabels, rsl, nrsl * sizeof(*rsl));
			out->g->nslabels = nrsl;
			qsort(out->g->slabels, nrsl, sizeof(*rsl), cmp_name);
		}
		return 0;
	}
	/* Label set id -> group index + 1 (0 = not seen yet); groups found by their labels. */
	uint32_t *gof = calloc(nsets ? nsets : 1, sizeof(*gof));
	strobe_itab keys = {0};
	size_t cap = 0;
	int r = gof ? 0 : -ENOMEM;
	for (uint32_t i = 1; r == 0 && i <= ns; i++) {
		uint32_t ls = strobe_sample(p, i)->labels;
		if (ls >= nsets) {
			r = strobe_errf(err, -EINVAL, "sample %u has no such label set", i);
			break;
		}
		if (!gof[ls]) {
			strobe_labelpair *l = NULL, *sl = NULL;
			size_t nl = 0, nsl = 0;
			if ((r = set_labels(p, ls, c, base, nbase, rsl, nrsl, &l, &nl, &sl, &nsl,
					    err)) < 0)
				break;
			/* series labels, a 1 byte, sample labels: names never hold a 1 */
			size_t klen = 2;
			for (size_t k = 0; k < nl; k++)
				klen += strlen(l[k].name) + strlen(l[k].value) + 2;
			for (size_t k = 0; k < nsl; k++)
				klen += strlen(sl[k].name) + strlen(sl[k].value) + 2;
			char *key = malloc(klen), *q = key;
			if (!key) {
				free(l);
				free(sl);
				r = -ENOMEM;
				break;
			}
			for (size_t k = 0; k < nl; k++) {
				q = stpcpy(q, l[k].name) + 1;
				q = stpcpy(q, l[k].value) + 1;
			}
			*q++ = 1;
			for (size_t k = 0; k < nsl; k++) {
				q = stpcpy(q, sl[k].name) + 1;
				q = stpcpy(q, sl[k].value) + 1;
			}
			*q = 0;
			uint32_t gid;
			bool added;
			r = strobe_itab_intern(&keys, key, klen, &gid, &added);
			free(key);
			if (r == 0 && added && out->n >= MAX_GROUPS)
				r = strobe_errf(err, -EDQUOT,
						"limit max_sample_label_sets: more than %u distinct "
						"sample label sets in one profile",
						MAX_GROUPS);
			if (r == 0 && added) {
				if (out->n == cap) {
					cap = cap ? cap * 2 : 8;
					srv_label_group *ng = realloc(out->g, cap * sizeof(*ng));
					if (!ng)
						r = -ENOMEM;
					else
						out->g = ng;
				}
				if (r == 0) {
					out->g[out->n++] =
						(srv_label_group){l, nl, sl, nsl, NULL, 0, 0};
					l = NULL;
					sl = NULL;
				}
			}
			free(l);
			free(sl);
			if (r < 0)
				break;
			gof[ls] = gid + 1;
		}
		srv_label_group *g = &out->g[gof[ls] - 1];
		if (g->nsamples == g->cap) {
			uint32_t nc = g->cap ? g->cap * 2 : 16;
			uint32_t *nv = realloc(g->samples, nc * sizeof(*nv));
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			g->samples = nv;
			g->cap = nc;
		}
		g->samples[g->nsamples++] = i;
	}
	free(gof);
	strobe_itab_free(&keys);
	if (r < 0) {
		srv_label_groups_free(out);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
	}
	return r;
}
