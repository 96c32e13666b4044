// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the pprof codec. Any input either decodes or is rejected with a message.
 * What decodes must encode, and that encoding must decode again to the very same model (every
 * table entry, every value, the header: strobe writes its tables as they are and reads them
 * back in the same order) and encode to the very same bytes: a reader and a writer that agree
 * on everything the model holds.
 *
 * The streaming reader behind `top` (strobe_pprof_fnstats) is fuzzed on the same input: it must
 * never crash, and when both it and the full decoder accept the input they must agree on every
 * function's flat and cumulative value. So is the server's ingest form, the view: it accepts
 * exactly what the decoder accepts and agrees with it on the header and the totals.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/pprof_view.h"
#include "strobe/transform.h"

static int same_table(const strobe_itab *a, const strobe_itab *b)
{
	if (a->n != b->n)
		return 0;
	for (uint32_t i = 0; i < a->n; i++) {
		size_t la, lb;
		const void *x = strobe_itab_get(a, i, &la), *y = strobe_itab_get(b, i, &lb);
		if (la != lb || memcmp(x, y, la) != 0)
			return 0;
	}
	return 1;
}

static int same_profile(const strobe_profile *p, const strobe_profile *q)
{
	if (!same_table(&p->strings, &q->strings) || !same_table(&p->functions, &q->functions) ||
	    !same_table(&p->mappings, &q->mappings) || !same_table(&p->locations, &q->locations) ||
	    !same_table(&p->stacks, &q->stacks) || !same_table(&p->labelsets, &q->labelsets) ||
	    !same_table(&p->samples, &q->samples) || p->ntypes != q->ntypes)
		return 0;
	if (p->ntypes && memcmp(p->types, q->types, p->ntypes * sizeof(*p->types)) != 0)
		return 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		if (memcmp(strobe_sample_values(p, s), strobe_sample_values(q, s),
			   p->ntypes * sizeof(int64_t)) != 0)
			return 0;
	if (p->ncomments != q->ncomments ||
	    (p->ncomments &&
	     memcmp(p->comments, q->comments, p->ncomments * sizeof(*p->comments)) != 0))
		return 0;
	return p->default_type == q->default_type && p->period == q->period &&
	       p->time_nanos == q->time_nanos && p->duration_nanos == q->duration_nanos &&
	       p->period_type.type == q->period_type.type &&
	       p->period_type.unit == q->period_type.unit && p->drop_frames == q->drop_frames &&
	       p->keep_frames == q->keep_frames;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const strobe_fnstat *)a)->name, ((const strobe_fnstat *)b)->name);
}

/* The streaming statistics against the model's, for the default sample type. */
static void check_fnstats(const uint8_t *data, size_t size, strobe_profile *p)
{
	strobe_fnstat *a, *b;
	size_t na, nb;
	char *arena;
	strobe_top_info info;
	int r = strobe_pprof_fnstats(data, size, NULL, &a, &na, &arena, &info);
	if (r < 0)
		return;
	if (!p) { /* the full decoder refused it: nothing to compare with */
		free(a);
		free(arena);
		return;
	}
	int t = strobe_default_type_index(p);
	if (t < 0 || strobe_fnstats(p, t, STROBE_GRAN_FUNCTIONS, &b, &nb) < 0)
		abort();
	/* Names the model could not keep apart (a name with a NUL byte) are not comparable. */
	bool comparable = true;
	for (uint32_t i = 1; i < p->strings.n; i++)
		if (strlen(strobe_str(p, i)) != strobe_str_len(p, i))
			comparable = false;
	if (comparable) {
		qsort(a, na, sizeof(*a), by_name);
		qsort(b, nb, sizeof(*b), by_name);
		if (na != nb || info.total != strobe_total(p, t))
			abort();
		for (size_t i = 0; i < na; i++)
			if (strcmp(a[i].name, b[i].name) || a[i].flat != b[i].flat || a[i].cum != b[i].cum)
				abort();
	}
	free(a);
	free(b);
	free(arena);
}

/* The server's ingest form (strobe/pprof_view.h) accepts exactly what the decoder accepts, and
 * then agrees with it on the header and on every type's total (sums wrap the same way). */
static void check_view(const uint8_t *data, size_t size, const strobe_profile *p)
{
	strobe_pprof_view *v = strobe_pprof_view_open(data, size);
	int r = v ? 0 : -errno;
	if (r == -ENOMEM)
		return;
	if ((r == 0) != (p != NULL)) {
		fprintf(stderr, "the view %s what the decoder %s\n", r ? "refused" : "accepted",
			r ? "accepted" : "refused");
		abort();
	}
	if (!p)
		return;
	/* The view's own protobuf reader against protobuf-c's unpacking: the same view, entity
	 * by entity. */
	strobe_pprof_view *w = strobe_pprof_view_open_pbc(data, size);
	if (!w)
		abort();
	if (v->nstr != w->nstr || v->nfn != w->nfn || v->nmap != w->nmap || v->nloc != w->nloc ||
	    v->nsamples != w->nsamples || v->simple != w->simple ||
	    v->soff[v->nsamples] != w->soff[w->nsamples] ||
	    memcmp(v->fns, w->fns, v->nfn * sizeof(*v->fns)) ||
	    memcmp(v->maps, w->maps, v->nmap * sizeof(*v->maps)) ||
	    memcmp(v->soff, w->soff, (v->nsamples + 1) * sizeof(*v->soff)) ||
	    memcmp(v->sloc, w->sloc, v->soff[v->nsamples] * sizeof(*v->sloc)) ||
	    memcmp(v->values, w->values, (size_t)v->nsamples * p->ntypes * sizeof(*v->values)))
		abort();
	for (uint32_t i = 0; i < v->nstr; i++)
		if (v->str[i].len != w->str[i].len || memcmp(v->str[i].p, w->str[i].p, v->str[i].len))
			abort();
	for (uint32_t i = 0; i < v->nloc; i++) {
		const strobe_pprof_loc *a = &v->locs[i], *b = &w->locs[i];
		if (a->address != b->address || a->mapping != b->mapping || a->nline != b->nline ||
		    a->is_folded != b->is_folded ||
		    memcmp(v->lines + a->line0, w->lines + b->line0, a->nline * sizeof(*v->lines)))
			abort();
	}
	strobe_pprof_view_free(w);
	const strobe_profile *h = v->hdr;
	if (h->ntypes != p->ntypes || h->period != p->period || h->time_nanos != p->time_nanos ||
	    h->duration_nanos != p->duration_nanos || h->default_type != p->default_type ||
	    strcmp(strobe_str(h, h->period_type.type), strobe_str(p, p->period_type.type)))
		abort();
	for (uint32_t t = 0; t < p->ntypes; t++) {
		if (strcmp(strobe_str(h, h->types[t].type), strobe_str(p, p->types[t].type)) ||
		    strcmp(strobe_str(h, h->types[t].unit), strobe_str(p, p->types[t].unit)))
			abort();
		uint64_t a = 0, b = 0;
		for (uint32_t i = 0; i < v->nsamples; i++)
			a += (uint64_t)v->values[(size_t)i * p->ntypes + t];
		for (uint32_t i = 1; i <= strobe_nsamples(p); i++)
			b += (uint64_t)strobe_sample_values(p, i)[t];
		if (a != b)
			abort();
	}
	strobe_pprof_view_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_profile *p = NULL, *q = NULL;
	strobe_err err = {{0}};
	if (strobe_pprof_decode(data, size, "fuzz", &p, &err) < 0) {
		check_fnstats(data, size, NULL);
		check_view(data, size, NULL);
		if (!err.msg[0] || p)
			abort(); /* every rejection says why, and leaves nothing behind */
		return 0;
	}
	check_fnstats(data, size, p);
	check_view(data, size, p);
	uint8_t *gz, *gz2, *raw;
	size_t gzlen, gzlen2, rawlen;
	if (strobe_pprof_encode(p, &gz, &gzlen) < 0)
		abort();
	if (strobe_gunzip(gz, gzlen, &raw, &rawlen, NULL) < 0 ||
	    strobe_pprof_decode(raw, rawlen, "re", &q, &err) < 0) {
		fprintf(stderr, "re-decoding strobe's own output failed: %s\n", err.msg);
		abort();
	}
	if (!same_profile(p, q)) {
		fprintf(stderr, "decode(encode(p)) != p\n");
		abort();
	}
	if (strobe_pprof_encode(q, &gz2, &gzlen2) < 0 || gzlen2 != gzlen ||
	    memcmp(gz, gz2, gzlen) != 0) {
		fprintf(stderr, "encode(decode(encode(p))) != encode(p)\n");
		abort();
	}
	free(gz);
	free(gz2);
	free(raw);
	strobe_profile_free(p);
	strobe_profile_free(q);
	return 0;
}
