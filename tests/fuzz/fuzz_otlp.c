// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the OTLP profiles decoder (lib/otlp.c), which reads what any exporter
 * sends to POST /v1development/profiles. Any input either decodes or is refused with a message;
 * the input is read both as protobuf and, when it looks like JSON, as OTLP/JSON. What decodes
 * must encode, and decode again to the same series: the same sample types and the same total
 * for each (the encoder writes every sample with a value, so nothing may be lost or invented).
 * The server's fast path (strobe_otlp_limits.views) must agree with the model: the same verdict,
 * the same series, the same totals per type, and every id of a view inside its table (the
 * store indexes its tables with them unchecked).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/otlp.h"
#include "strobe/pprof_view.h"

static void check(const strobe_otlp_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		const strobe_profile *p = b->s[i].profile;
		if (!p)
			continue;
		uint8_t *buf;
		size_t len;
		if (strobe_otlp_encode(p, b->s[i].labels, b->s[i].nlabels, &buf, &len) < 0)
			continue; /* out of memory only */
		strobe_otlp_batch b2;
		strobe_err err = {{0}};
		int r = strobe_otlp_decode(buf, len, NULL, &b2, &err);
		free(buf);
		if (r < 0) {
			fprintf(stderr, "our own encoding does not decode: %s\n", err.msg);
			abort();
		}
		/* one series back (labels included), or none when p had no sample types */
		if (p->ntypes && (b2.n != 1 || b2.s[0].profile->ntypes != p->ntypes))
			abort();
		for (uint32_t t = 0; p->ntypes && t < p->ntypes; t++)
			if (strobe_total(p, (int)t) != strobe_total(b2.s[0].profile, (int)t))
				abort();
		strobe_otlp_batch_free(&b2);
	}
}

/* Every id a view holds, against its tables. */
static void view_ids(const strobe_pprof_view *v)
{
	for (uint32_t i = 0; i < v->nfn; i++)
		if (v->fns[i].name >= v->nstr || v->fns[i].system_name >= v->nstr ||
		    v->fns[i].filename >= v->nstr)
			abort();
	for (uint32_t i = 0; i < v->nmap; i++)
		if (v->maps[i].filename >= v->nstr || v->maps[i].build_id >= v->nstr)
			abort();
	for (uint32_t i = 0; i < v->nloc; i++) {
		if (v->locs[i].mapping > v->nmap)
			abort();
		for (uint32_t k = 0; k < v->locs[i].nline; k++)
			if (v->lines[v->locs[i].line0 + k].function > v->nfn)
				abort();
	}
	for (uint32_t i = 0; i < v->nsamples; i++) {
		if (v->soff[i + 1] < v->soff[i] || v->soff[i + 1] - v->soff[i] > 4096)
			abort();
		for (uint32_t k = v->soff[i]; k < v->soff[i + 1]; k++)
			if (!v->sloc[k] || v->sloc[k] > v->nloc)
				abort();
	}
}

/* The views' decoding of the same bytes against the model's (b, r). */
static void against_views(const uint8_t *data, size_t size, const strobe_otlp_limits *lim,
			  const strobe_otlp_batch *b, int r)
{
	strobe_otlp_limits lv = *lim;
	lv.views = true;
	strobe_otlp_batch bv;
	strobe_err err = {{0}};
	int rv = strobe_otlp_decode(data, size, &lv, &bv, &err);
	if ((rv == 0) != (r == 0))
		abort();
	if (rv < 0)
		return;
	if (bv.n != b->n)
		abort();
	for (size_t i = 0; i < bv.n; i++) {
		const strobe_otlp_series *sv = &bv.s[i], *sm = &b->s[i];
		if (sv->nlabels != sm->nlabels)
			abort();
		for (size_t k = 0; k < sv->nlabels; k++)
			if (strcmp(sv->labels[k].name, sm->labels[k].name) ||
			    strcmp(sv->labels[k].value, sm->labels[k].value))
				abort();
		if (!sv->view)
			continue; /* the model, as sm */
		const strobe_pprof_view *v = sv->view;
		view_ids(v);
		if (!sm->profile || v->hdr->ntypes != sm->profile->ntypes)
			abort();
		for (uint32_t t = 0; t < v->hdr->ntypes; t++) {
			uint64_t a = 0, m = 0; /* wrapping sums: hostile values may overflow */
			for (uint32_t k = 0; k < v->nsamples; k++)
				a += (uint64_t)v->values[(size_t)k * v->hdr->ntypes + t];
			for (uint32_t id = 1; id <= strobe_nsamples(sm->profile); id++)
				m += (uint64_t)strobe_sample_values(sm->profile, id)[t];
			if (a != m)
				abort();
		}
	}
	strobe_otlp_batch_free(&bv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	strobe_otlp_limits lim = {.max_profiles = 64, .max_labels = 32};
	int r = strobe_otlp_decode(data, size, &lim, &b, &err);
	against_views(data, size, &lim, &b, r);
	if (r == 0) {
		check(&b);
		strobe_otlp_batch_free(&b);
	} else if (!err.msg[0]) {
		abort(); /* refused without saying why */
	}
	if (size && data[0] == '{') {
		err.msg[0] = 0;
		r = strobe_otlp_decode_json((const char *)data, size, &lim, &b, &err);
		if (r == 0) {
			check(&b);
			strobe_otlp_batch_free(&b);
		} else if (!err.msg[0]) {
			abort();
		}
	}
	return 0;
}
