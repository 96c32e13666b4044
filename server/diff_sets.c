// SPDX-License-Identifier: Apache-2.0
/*
 * The per-function significance of /api/v1/diff (format=top and format=functions). The server
 * holds many pushes per window, so where it can it uses the profile-set test: each window is
 * cut into SRV_SIG_SLICES equal slices, each slice queried on its own (one "profile" of the
 * set), and the change of each function's pooled share is judged against the variation
 * between slices (a bootstrap over slices, lib/significance.c). Slices, not pushes: a slice
 * is what the store can return without a new API, and it holds whatever pushes fell into it,
 * so between-slice variation contains the between-run variation the test exists for. With
 * fewer than SRV_SIG_MIN_SLICES non-empty slices on a side (a short window, a single push)
 * the two merged profiles go to the counting test instead. The answer names the method used.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff_sets.h"
#include "strobe/diffsig.h"
#include "strobe/transform.h"

enum { SRV_SIG_SLICES = 12, SRV_SIG_MIN_SLICES = 4 };

/* One side's slices: per slice the functions' flat and cum values, matched to the comparison's
 * function ids through names (ids absent from the comparison are impossible: the comparison
 * merged the same data). vals is 2n x k (flat rows then cum rows), totals k. */
typedef struct side {
	double *vals, *totals;
	size_t k;
} side;

static int slice_side(srv_req *r, const srv_sig_side *sd, const strobe_itab *names, size_t n,
		      side *out, strobe_err *err)
{
	int64_t from = sd->from, to = sd->to;
	out->k = 0;
	double *v = calloc(2 * n * SRV_SIG_SLICES + 1, sizeof(*v));
	double *tot = calloc(SRV_SIG_SLICES, sizeof(*tot));
	int rc = v && tot ? 0 : -ENOMEM;
	size_t k = 0;
	for (int i = 0; rc == 0 && i < SRV_SIG_SLICES; i++) {
		int64_t a = from + (int64_t)((double)(to - from) * i / SRV_SIG_SLICES),
			b = from + (int64_t)((double)(to - from) * (i + 1) / SRV_SIG_SLICES);
		if (b <= a)
			continue;
		strobe_query q = {r->tenant, sd->sel, a, b};
		strobe_profile *p = NULL;
		if ((rc = strobe_store_query(r->srv->store, &q, &p, err)) < 0)
			break;
		/* Names as the merged profile got them, so the slices match it by name. */
		if (srv_name_late(r, &p) < 0) {
			strobe_profile_free(p);
			rc = -EIO;
			break;
		}
		int64_t t = p->ntypes ? strobe_total(p, 0) : 0;
		strobe_fnstat *st = NULL;
		size_t ns = 0;
		if (t > 0 && (rc = strobe_fnstats(p, 0, STROBE_GRAN_FUNCTIONS, &st, &ns)) == 0) {
			tot[k] = (double)t;
			for (size_t j = 0; j < ns; j++) {
				uint32_t id = strobe_itab_find(names, st[j].name, strlen(st[j].name));
				if (id == UINT32_MAX || id >= n)
					continue;
				/* column k of the 2n x SLICES matrix, compacted below */
				v[(size_t)id * SRV_SIG_SLICES + k] += (double)st[j].flat;
				v[(n + id) * SRV_SIG_SLICES + k] += (double)st[j].cum;
			}
			k++;
		}
		free(st);
		strobe_profile_free(p);
	}
	if (rc == 0 && k) {
		/* Rows of k columns, as strobe_sig_set wants them. */
		for (size_t f = 0; f < 2 * n; f++)
			memmove(v + f * k, v + f * SRV_SIG_SLICES, k * sizeof(*v));
	}
	if (rc < 0) {
		free(v);
		free(tot);
		return rc;
	}
	*out = (side){v, tot, k};
	return 0;
}

json_t *srv_sig_row_json(const strobe_sig_row *s)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "base_share", s->base_share,
			 "new_share", s->new_share, "change", s->change, "lo", s->lo, "hi", s->hi,
			 "p", s->p, "q", s->q, "significant", s->significant);
}

void srv_sig_result_free(srv_sig_result *res)
{
	strobe_fncmp_free(res->c, res->n);
	free(res->rows);
	memset(res, 0, sizeof(*res));
}

int srv_sig_functions(srv_req *r, const srv_sig_side *b, const srv_sig_side *nw, double conf,
		      srv_sig_result *out)
{
	memset(out, 0, sizeof(*out));
	strobe_err err = {{0}};
	int rc = strobe_fncompare(b->p, 0, nw->p, 0, STROBE_GRAN_FUNCTIONS, false, &out->c,
				  &out->n, out->tot);
	if (rc < 0)
		return rc;
	size_t n = out->n;
	strobe_itab names = {0};
	side sb = {0}, sn = {0};
	out->rows = malloc((n ? n : 1) * 2 * sizeof(*out->rows));
	out->method = "binomial count test";
	out->kb = out->kn = 1;
	out->per_sample = strobe_sig_per_sample(nw->p, 0);
	double ps = out->per_sample;
	rc = out->rows ? 0 : -ENOMEM;
	if (rc == 0 && b->units > 0 && nw->units > 0) {
		/* Per unit of work: the units belong to the whole windows, not to slices. */
		double *v = malloc((n ? n : 1) * 4 * sizeof(*v));
		rc = v ? 0 : -ENOMEM;
		for (size_t i = 0; rc == 0 && i < n; i++) {
			v[i] = (double)out->c[i].flat[1];
			v[2 * n + i] = (double)out->c[i].flat[0];
			v[n + i] = (double)out->c[i].cum[1];
			v[3 * n + i] = (double)out->c[i].cum[0];
		}
		if (rc == 0)
			rc = strobe_sig_rates(v, v + 2 * n, 2 * n, b->units, nw->units, ps, conf,
					      out->rows);
		out->method = "binomial count test per unit";
		free(v);
		goto done;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint32_t id;
		rc = strobe_itab_intern(&names, out->c[i].name, strlen(out->c[i].name), &id, NULL);
	}
	if (rc == 0 && (rc = slice_side(r, b, &names, n, &sb, &err)) == 0 &&
	    (rc = slice_side(r, nw, &names, n, &sn, &err)) == 0) {
		if (sb.k >= SRV_SIG_MIN_SLICES && sn.k >= SRV_SIG_MIN_SLICES) {
			strobe_sig_set bs = {sb.vals, sb.totals, sb.k}, ns = {sn.vals, sn.totals, sn.k};
			rc = strobe_sig_sets(&bs, &ns, 2 * n, ps, conf, 1, out->rows);
			out->method = "bootstrap over window slices";
			out->kb = sb.k;
			out->kn = sn.k;
		} else {
			rc = strobe_fncmp_significance(out->c, n, out->tot, ps, conf, out->rows,
						       out->rows + n);
		}
	}
done:
	free(sb.vals);
	free(sb.totals);
	free(sn.vals);
	free(sn.totals);
	strobe_itab_free(&names);
	if (rc < 0)
		srv_sig_result_free(out);
	return rc;
}

int srv_confidence(srv_req *r, double *out)
{
	const char *c = srv_arg(r, "confidence");
	*out = 0.99;
	if (!c)
		return 0;
	char *end;
	double v = strtod(c, &end);
	if (!*c || *end || !(v >= 0.5 && v < 1)) {
		srv_error(r, 400, "confidence must be a number from 0.5 to below 1 (e.g. 0.99)");
		return -1;
	}
	*out = v;
	return 0;
}

static int by_change(const void *a, const void *b, void *rows)
{
	const strobe_sig_row *s = rows;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	double dx = fabs(s[x].change), dy = fabs(s[y].change);
	if (dx != dy)
		return dx > dy ? -1 : 1;
	return x < y ? -1 : x > y;
}

int srv_diff_functions(srv_req *r, strobe_profile *base, strobe_profile *cur, bool norm,
		       size_t limit, double conf, bool json, FILE *f)
{
	strobe_selector bsel, nsel;
	srv_sig_side b = {&bsel, 0, 0, base, 0}, nw = {&nsel, 0, 0, cur, 0};
	/* Parsed already by the caller's queries of the whole windows: these cannot fail now. */
	if (srv_selector(r, "base", true, &bsel) < 0)
		return -EINVAL;
	if (srv_selector(r, "new", true, &nsel) < 0) {
		strobe_selector_free(&bsel);
		return -EINVAL;
	}
	srv_sig_result res;
	int rc = srv_window(r, "base_from", "base_to", &b.from, &b.to) < 0 ||
			 srv_window(r, "new_from", "new_to", &nw.from, &nw.to) < 0
		 ? -EINVAL
		 : srv_sig_functions(r, &b, &nw, conf, &res);
	strobe_selector_free(&bsel);
	strobe_selector_free(&nsel);
	if (rc < 0)
		return rc;
	size_t n = res.n, *order = NULL;
	strobe_fncmp *c = res.c;
	strobe_sig_row *rows = res.rows;
	if (!json) {
		strobe_diff_top_in in = {
			.c = c, .n = n, .totals = {res.tot[0], res.tot[1]}, .flat = rows,
			.cum = rows + n, .type = strobe_str(cur, cur->types[0].type),
			.unit = strobe_str(cur, cur->types[0].unit), .norm = norm, .limit = limit,
			.confidence = conf, .method = res.method};
		rc = strobe_diff_top_rows_write(f, &in);
	} else {
		order = malloc((n ? n : 1) * sizeof(*order));
		json_t *fns = json_array();
		rc = order && fns ? 0 : -ENOMEM;
		for (size_t i = 0; rc == 0 && i < n; i++)
			order[i] = i;
		if (rc == 0 && n)
			qsort_r(order, n, sizeof(*order), by_change, rows);
		for (size_t k = 0; rc == 0 && k < n && (!limit || k < limit); k++) {
			size_t i = order[k];
			json_array_append_new(
				fns, json_pack("{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:b}", "name",
					       c[i].name, "base_flat", (json_int_t)c[i].flat[1],
					       "new_flat", (json_int_t)c[i].flat[0], "base_cum",
					       (json_int_t)c[i].cum[1], "new_cum",
					       (json_int_t)c[i].cum[0], "flat", srv_sig_row_json(&rows[i]),
					       "cum", srv_sig_row_json(&rows[n + i]), "noise",
					       !rows[i].significant && !rows[n + i].significant));
		}
		json_t *j = json_pack("{s:s, s:s, s:s, s:f, s:I, s:I, s:I, s:I, s:o}", "type",
				      strobe_str(cur, cur->types[0].type), "unit",
				      strobe_str(cur, cur->types[0].unit), "method", res.method,
				      "confidence", conf, "base_total", (json_int_t)res.tot[1],
				      "new_total", (json_int_t)res.tot[0], "base_profiles",
				      (json_int_t)res.kb, "new_profiles", (json_int_t)res.kn,
				      "functions", fns);
		if (rc == 0 && (!j || json_dumpf(j, f, JSON_COMPACT | JSON_ENSURE_ASCII) < 0))
			rc = -ENOMEM;
		json_decref(j);
	}
	free(order);
	srv_sig_result_free(&res);
	return rc;
}
