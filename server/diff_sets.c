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

#include "server_impl.h"
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

static int slice_side(srv_req *r, const char *qname, const char *fname, const char *tname,
		      const strobe_itab *names, size_t n, side *out, strobe_err *err)
{
	strobe_selector sel;
	int64_t from, to;
	out->k = 0;
	/* Parsed already by the caller's query of the whole window: these cannot fail now. */
	if (srv_selector(r, qname, true, &sel) < 0)
		return -EINVAL;
	if (srv_window(r, fname, tname, &from, &to) < 0) {
		strobe_selector_free(&sel);
		return -EINVAL;
	}
	double *v = calloc(2 * n * SRV_SIG_SLICES + 1, sizeof(*v));
	double *tot = calloc(SRV_SIG_SLICES, sizeof(*tot));
	int rc = v && tot ? 0 : -ENOMEM;
	size_t k = 0;
	for (int i = 0; rc == 0 && i < SRV_SIG_SLICES; i++) {
		int64_t a = from + (int64_t)((double)(to - from) * i / SRV_SIG_SLICES),
			b = from + (int64_t)((double)(to - from) * (i + 1) / SRV_SIG_SLICES);
		if (b <= a)
			continue;
		strobe_query q = {r->tenant, &sel, a, b};
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
	strobe_selector_free(&sel);
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

static json_t *row_json(const strobe_sig_row *s)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "base_share", s->base_share,
			 "new_share", s->new_share, "change", s->change, "lo", s->lo, "hi", s->hi,
			 "p", s->p, "q", s->q, "significant", s->significant);
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
	strobe_fncmp *c = NULL;
	size_t n = 0;
	int64_t tot[2];
	strobe_err err = {{0}};
	int rc = strobe_fncompare(base, 0, cur, 0, STROBE_GRAN_FUNCTIONS, false, &c, &n, tot);
	if (rc < 0)
		return rc;
	strobe_itab names = {0};
	side sb = {0}, sn = {0};
	strobe_sig_row *rows = malloc((n ? n : 1) * 2 * sizeof(*rows));
	size_t *order = NULL;
	const char *method = "binomial count test";
	rc = rows ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		uint32_t id;
		rc = strobe_itab_intern(&names, c[i].name, strlen(c[i].name), &id, NULL);
	}
	double ps = strobe_sig_per_sample(cur, 0);
	if (rc == 0 &&
	    (rc = slice_side(r, "base", "base_from", "base_to", &names, n, &sb, &err)) == 0 &&
	    (rc = slice_side(r, "new", "new_from", "new_to", &names, n, &sn, &err)) == 0) {
		if (sb.k >= SRV_SIG_MIN_SLICES && sn.k >= SRV_SIG_MIN_SLICES) {
			strobe_sig_set b = {sb.vals, sb.totals, sb.k}, nw = {sn.vals, sn.totals, sn.k};
			rc = strobe_sig_sets(&b, &nw, 2 * n, ps, conf, 1, rows);
			method = "bootstrap over window slices";
		} else {
			rc = strobe_fncmp_significance(c, n, tot, ps, conf, rows, rows + n);
		}
	}
	if (rc == 0 && !json) {
		strobe_diff_top_in in = {
			.c = c, .n = n, .totals = {tot[0], tot[1]}, .flat = rows, .cum = rows + n,
			.type = strobe_str(cur, cur->types[0].type),
			.unit = strobe_str(cur, cur->types[0].unit), .norm = norm, .limit = limit,
			.confidence = conf, .method = method};
		rc = strobe_diff_top_rows_write(f, &in);
	} else if (rc == 0) {
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
					       (json_int_t)c[i].cum[0], "flat", row_json(&rows[i]),
					       "cum", row_json(&rows[n + i]), "noise",
					       !rows[i].significant && !rows[n + i].significant));
		}
		json_t *j = json_pack("{s:s, s:s, s:s, s:f, s:I, s:I, s:I, s:I, s:o}", "type",
				      strobe_str(cur, cur->types[0].type), "unit",
				      strobe_str(cur, cur->types[0].unit), "method", method,
				      "confidence", conf, "base_total", (json_int_t)tot[1],
				      "new_total", (json_int_t)tot[0], "base_profiles",
				      (json_int_t)(sb.k >= SRV_SIG_MIN_SLICES ? sb.k : 1),
				      "new_profiles",
				      (json_int_t)(sn.k >= SRV_SIG_MIN_SLICES ? sn.k : 1),
				      "functions", fns);
		if (rc == 0 && (!j || json_dumpf(j, f, JSON_COMPACT | JSON_ENSURE_ASCII) < 0))
			rc = -ENOMEM;
		json_decref(j);
	}
	free(order);
	free(sb.vals);
	free(sb.totals);
	free(sn.vals);
	free(sn.totals);
	free(rows);
	strobe_itab_free(&names);
	strobe_fncmp_free(c, n);
	return rc;
}
