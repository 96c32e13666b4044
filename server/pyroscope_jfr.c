// SPDX-License-Identifier: Apache-2.0
/*
 * Pyroscope's JFR ingest (POST /ingest?format=jfr), kept apart from server/pyroscope.c so that
 * the JFR pieces meet the rest of /ingest at one call. It takes the body as pyroscope-java and
 * Pyroscope's own ingest handler do: either the JFR itself, or a multipart/form-data form whose
 * `jfr` part is the recording and whose optional `labels` part is a LabelsSnapshot protobuf
 * (each event's contextId names a set of dynamic labels, which become the samples' labels).
 * Either part may be gzipped. Each column of the decoded JFR (strobe/jfr.h) becomes a
 * single-type profile under the profile type Pyroscope's jfr-parser gives it; cpu and wall
 * samples are worth 1e9/sampleRate nanoseconds each, as there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"
#include "pyroscope_jfr.h"
#include "strobe/codec.h"
#include "strobe/delta.h"
#include "strobe/jfr.h"

#define MAX_PARTS 64u

typedef struct jfr_form {
	const uint8_t *jfr, *labels;
	size_t njfr, nlabels;
	bool has_jfr, has_labels;
} jfr_form;

static int part(void *ctx, const char *name, const uint8_t *data, size_t len)
{
	jfr_form *f = ctx;
	if (!strcmp(name, "jfr") && !f->has_jfr) {
		f->jfr = data;
		f->njfr = len;
		f->has_jfr = true;
	} else if (!strcmp(name, "labels") && !f->has_labels) {
		f->labels = data;
		f->nlabels = len;
		f->has_labels = true;
	}
	return 0;
}

/* Gunzips a part that starts with the gzip magic, up to cap bytes. */
static int plain(const uint8_t **p, size_t *n, size_t cap, const char *what, uint8_t **owned,
		 strobe_err *err)
{
	*owned = NULL;
	if (*n >= 2 && (*p)[0] == 0x1f && (*p)[1] == 0x8b) {
		int r = strobe_gunzip_capped(*p, *n, cap, owned, n, what, err);
		if (r < 0)
			return r;
		*p = *owned;
	} else if (*n > cap) {
		return strobe_errf(err, -E2BIG, "%s: more than %zu bytes", what, cap);
	}
	return 0;
}

void srv_jfr_items_free(srv_jfr_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		strobe_profile_free(items[i].profile);
	free(items);
}

/* Renames the one column of `one` to Pyroscope's sample and period types. */
static int as_pyroscope(strobe_profile *one, const strobe_jfr_kind *k, int64_t period)
{
	uint32_t t = strobe_str_intern0(one, k->type), u = strobe_str_intern0(one, k->unit);
	uint32_t pt = strobe_str_intern0(one, k->period_type);
	uint32_t pu = strobe_str_intern0(one, k->period_unit);
	if (t == UINT32_MAX || u == UINT32_MAX || pt == UINT32_MAX || pu == UINT32_MAX)
		return -ENOMEM;
	one->types[0] = (strobe_value_type){t, u};
	one->period_type = (strobe_value_type){pt, pu};
	one->period = !strcmp(k->metric, "process_cpu") || !strcmp(k->metric, "wall") ? period : 1;
	one->default_type = -1;
	return 0;
}

int srv_pyro_jfr(const char *content_type, const uint8_t *body, size_t len, bool multipart,
		 size_t max_decompressed, int64_t sample_rate, srv_jfr_item **items, size_t *n,
		 int *status, strobe_err *err)
{
	*items = NULL;
	*n = 0;
	*status = 422;
	jfr_form f = {body, NULL, len, 0, true, false};
	uint8_t *ojfr = NULL, *olab = NULL;
	strobe_jfr_labels ls = {0};
	strobe_profile *p = NULL;
	int r;
	if (multipart) {
		memset(&f, 0, sizeof(f));
		if ((r = srv_multipart_parse(content_type, body, len, MAX_PARTS, part, &f, err)) < 0)
			goto out;
		if (!f.has_jfr) {
			r = strobe_errf(err, -EINVAL, "jfr: the form has no part named jfr");
			goto out;
		}
	}
	if ((r = plain(&f.jfr, &f.njfr, max_decompressed, "jfr", &ojfr, err)) < 0)
		goto out;
	if (f.has_labels && f.nlabels &&
	    ((r = plain(&f.labels, &f.nlabels, max_decompressed, "labels", &olab, err)) < 0 ||
	     (r = strobe_jfr_labels_decode(f.labels, f.nlabels, &ls, err)) < 0))
		goto out;
	int64_t period = sample_rate > 0 ? 1000000000 / sample_rate : 10000000;
	if (period <= 0)
		period = 1;
	strobe_jfr_options o = {.period_ns = period, .contexts = ls.contexts, .ncontexts = ls.n,
				.max_memory = max_decompressed * 4};
	if ((r = strobe_jfr_decode(f.jfr, f.njfr, "jfr", &o, &p, err)) < 0)
		goto out;
	if (!(*items = calloc(p->ntypes + 1, sizeof(**items)))) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t t = 0; t < p->ntypes; t++) {
		const strobe_jfr_kind *k = strobe_jfr_kind_of(strobe_str(p, p->types[t].type));
		strobe_profile *one;
		if (!k)
			continue;
		if ((r = strobe_profile_select_type(p, t, &one)) < 0)
			goto out;
		if (!strobe_nsamples(one)) {
			strobe_profile_free(one);
			continue;
		}
		srv_jfr_item *it = &(*items)[(*n)++];
		it->profile = one;
		if ((r = as_pyroscope(one, k, period)) < 0)
			goto out;
		snprintf(it->type, sizeof(it->type), "%s:%s:%s:%s:%s", k->metric, k->type, k->unit,
			 k->period_type, k->period_unit);
	}
	r = 0;
	*status = 200;
out:
	if (r < 0) {
		srv_jfr_items_free(*items, *n);
		*items = NULL;
		*n = 0;
		*status = r == -ENOMEM ? 500 : r == -E2BIG ? 413 : 422;
	}
	strobe_profile_free(p);
	strobe_jfr_labels_free(&ls);
	free(ojfr);
	free(olab);
	return r;
}
