// SPDX-License-Identifier: Apache-2.0
/*
 * The read endpoints over merged profiles: /api/v1/query (one window, any output format),
 * /api/v1/diff (two windows or selectors, normalised as `strobe diff` does) and /api/v1/range
 * (totals per step and group, for timelines). Rendering uses the same library calls as the CLI.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diff_sets.h"
#include "range_json.h"
#include "strobe/codec.h"
#include "strobe/diffsig.h"
#include "strobe/render.h"
#include "strobe/transform.h"
#include "strobe/writer.h"

static int cmp_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x > y ? -1 : x < y;
}

/* Keeps roughly the max_nodes heaviest call-tree nodes: prunes below the total of the
 * max_nodes-th heaviest, as a fraction of the whole (pprof's -nodecount, approximately). */
int srv_trim(strobe_profile *p, size_t max_nodes, strobe_err *err)
{
	strobe_tree *t = strobe_tree_new();
	if (!t)
		return -ENOMEM;
	int r = strobe_tree_add(t, p, 0, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0);
	if (r == 0 && t->n > max_nodes + 1 && t->nodes[0].total[0] > 0) {
		int64_t *v = malloc((t->n - 1) * sizeof(*v));
		if (!v) {
			r = -ENOMEM;
		} else {
			for (uint32_t i = 1; i < t->n; i++)
				v[i - 1] = llabs(t->nodes[i].total[0]);
			qsort(v, t->n - 1, sizeof(*v), cmp_desc);
			double frac = (double)v[max_nodes - 1] / (double)llabs(t->nodes[0].total[0]);
			free(v);
			strobe_filter f = {.prune = frac};
			r = strobe_profile_filter(p, &f, 0, err);
		}
	}
	strobe_tree_free(t);
	return r;
}

/* The window [from, to) in words, for an SVG's second line: "from 2026-11-25 10:00:00 to
 * 11:00:00 UTC" (the date once when both ends share it). */
static void window_words(int64_t from, int64_t to, char *out, size_t cap)
{
	time_t a = (time_t)(from / 1000000000), b = (time_t)(to / 1000000000);
	struct tm ta, tb;
	char fa[32], fb[32];
	gmtime_r(&a, &ta);
	gmtime_r(&b, &tb);
	strftime(fa, sizeof(fa), "%Y-%m-%d %H:%M:%S", &ta);
	bool same_day = ta.tm_year == tb.tm_year && ta.tm_yday == tb.tm_yday;
	strftime(fb, sizeof(fb), same_day ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tb);
	snprintf(out, cap, "from %s to %s UTC", fa, fb);
}

static int query_one(srv_req *r, const char *qname, const char *fname, const char *tname,
		     strobe_profile **out, char *window, size_t wcap)
{
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, qname, true, &sel) < 0)
		return -1;
	if (!sel.type) {
		srv_error(r, 400, "%s: the selector needs a profile type (see /api/v1/profile_types)",
			  qname);
		strobe_selector_free(&sel);
		return -1;
	}
	/* /api/v1/query's span_id=, trace_id= (matchers the span index answers) and
	 * profile_id= (one stored profile, an exemplar's) */
	bool one = strcmp(qname, "query") == 0;
	int64_t pid = 0;
	const char *pa = one ? srv_arg(r, "profile_id") : NULL;
	if (pa) {
		char *end;
		long long v = strtoll(pa, &end, 10);
		if (!*pa || *end || v < 1) {
			strobe_selector_free(&sel);
			srv_error(r, 400, "profile_id must be a positive integer (an exemplar's id)");
			return -1;
		}
		pid = v;
	}
	if ((one && srv_span_args(r, &sel) < 0) || srv_window(r, fname, tname, &from, &to) < 0) {
		strobe_selector_free(&sel);
		return -1;
	}
	window_words(from, to, window, wcap);
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	int rc = pid ? strobe_store_profile_by_id(r->srv->store, &q, pid, out, &err)
		     : strobe_store_query(r->srv->store, &q, out, &err);
	strobe_selector_free(&sel);
	if (rc < 0) {
		srv_fail(r, rc, &err);
		return -1;
	}
	return srv_name_late(r, out);
}

static int max_nodes(srv_req *r, size_t *out)
{
	const char *m = srv_arg(r, "max_nodes");
	*out = 0;
	if (!m)
		return 0;
	char *end;
	unsigned long long v = strtoull(m, &end, 10);
	if (*end || !*m || v < 1 || v > 1000000) {
		srv_error(r, 400, "max_nodes must be an integer from 1 to 1000000");
		return -1;
	}
	*out = (size_t)v;
	return 0;
}

int srv_query(srv_req *r)
{
	const char *fmt = srv_arg(r, "format");
	if (!fmt)
		fmt = "json";
	if (strcmp(fmt, "pprof") && strcmp(fmt, "folded") && strcmp(fmt, "json") &&
	    strcmp(fmt, "flat") && strcmp(fmt, "svg") && strcmp(fmt, "top"))
		return srv_error(r, 400, "format must be pprof, folded, json, flat, svg or top");
	size_t mn;
	strobe_profile *p = NULL;
	char window[96];
	if (max_nodes(r, &mn) < 0 || query_one(r, "query", "from", "to", &p, window, sizeof(window)) < 0)
		return 0;
	strobe_err err = {{0}};
	int rc = mn && strcmp(fmt, "top") ? srv_trim(p, mn, &err) : 0;
	char *buf = NULL;
	size_t len = 0;
	strobe_format of = strobe_output_parse(fmt);
	if (rc == 0) {
		FILE *f = open_memstream(&buf, &len);
		/* an SVG says what it shows: the selector as asked, and the window */
		rc = f ? strobe_write_profile(f, p, of, 0, STROBE_GRAN_FUNCTIONS,
					      &(strobe_write_opts){.top_rows = mn,
								   .title = srv_arg(r, "query"),
								   .subtitle = window})
		       : -ENOMEM;
		if (f && fclose(f) != 0 && rc == 0)
			rc = -ENOMEM;
	}
	strobe_profile_free(p);
	if (rc < 0) {
		free(buf);
		return srv_fail(r, rc, &err);
	}
	srv_reply(r, 200, strobe_format_mime(of), buf, len);
	return 0;
}

int srv_diff(srv_req *r)
{
	const char *fmt = srv_arg(r, "format");
	if (!fmt)
		fmt = "svg";
	bool fns = strcmp(fmt, "functions") == 0;
	if (strcmp(fmt, "svg") && strcmp(fmt, "json") && strcmp(fmt, "flat") && strcmp(fmt, "top") &&
	    !fns)
		return srv_error(r, 400, "format must be svg, json, flat, top or functions");
	const char *nn = srv_arg(r, "normalize");
	bool norm = !nn || strcmp(nn, "false") != 0;
	double conf;
	if (srv_confidence(r, &conf) < 0)
		return 0;
	size_t mn;
	strobe_profile *base = NULL, *cur = NULL;
	char bwin[96], nwin[96];
	if (max_nodes(r, &mn) < 0 ||
	    query_one(r, "base", "base_from", "base_to", &base, bwin, sizeof(bwin)) < 0)
		return 0;
	if (query_one(r, "new", "new_from", "new_to", &cur, nwin, sizeof(nwin)) < 0) {
		strobe_profile_free(base);
		return 0;
	}
	char *buf = NULL;
	size_t len = 0;
	strobe_format of = strobe_output_parse(fns ? "json" : fmt);
	FILE *f = open_memstream(&buf, &len);
	int rc = f ? 0 : -ENOMEM;
	if (rc == 0 && (fns || strcmp(fmt, "top") == 0)) {
		/* per function, with the profile-set test where the windows allow it */
		rc = srv_diff_functions(r, base, cur, norm, mn, conf, fns, f);
	} else if (rc == 0) {
		/* As `strobe diff`: base scaled to the new total, so more traffic is not a
		 * regression. */
		int64_t bt = strobe_total(base, 0), ct = strobe_total(cur, 0);
		double scale = norm && bt ? (double)ct / (double)bt : 1.0;
		strobe_tree *t = strobe_tree_new();
		rc = t ? strobe_tree_add(t, cur, 0, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0) : -ENOMEM;
		if (rc == 0)
			rc = strobe_tree_add(t, base, 0, STROBE_GRAN_FUNCTIONS, 1, scale, 0);
		if (rc == 0)
			rc = strobe_tree_sort(t);
		if (rc == 0) {
			t->diff = true;
			rc = strobe_tree_significance(t, scale, strobe_sig_per_sample(cur, 0), conf);
		}
		if (rc == 0) {
			/* an SVG says what it compares: both selectors and windows */
			char title[512], sub[256];
			snprintf(title, sizeof(title), "Differential: %s against %s",
				 srv_arg(r, "new"), srv_arg(r, "base"));
			snprintf(sub, sizeof(sub), "%s; baseline %s", nwin, bwin);
			rc = strobe_write_tree(f, t, of, strobe_str(cur, cur->types[0].type),
					       strobe_str(cur, cur->types[0].unit),
					       &(strobe_write_opts){.title = title, .subtitle = sub});
		}
		strobe_tree_free(t);
	}
	if (f)
		fclose(f);
	strobe_profile_free(base);
	strobe_profile_free(cur);
	if (rc < 0) {
		free(buf);
		strobe_err err = {{0}};
		return srv_fail(r, rc, &err);
	}
	srv_reply(r, 200, strobe_format_mime(of), buf, len);
	return 0;
}

/* The most a range's JSON body may take (the steps are capped; the groups are not). */
#define RANGE_JSON_MAX (1 << 30)

int srv_range(srv_req *r)
{
	strobe_selector sel;
	int64_t from, to, step;
	strobe_err err = {{0}};
	if (srv_selector(r, "query", true, &sel) < 0)
		return 0;
	if (!sel.type) {
		strobe_selector_free(&sel);
		return srv_error(r, 400, "query: the selector needs a profile type");
	}
	if (srv_window(r, "from", "to", &from, &to) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	const char *st = srv_arg(r, "step");
	if (!st || strobe_duration_parse(st, &step, &err) < 0) {
		strobe_selector_free(&sel);
		return srv_error(r, 400, "step: %s", st ? err.msg : "missing (e.g. step=15s)");
	}
	const char *gb = srv_arg(r, "group_by"), *fn = srv_arg(r, "function");
	if (gb && strchr(gb, ',')) { /* the store reads commas as several labels: not here */
		strobe_selector_free(&sel);
		return srv_error(r, 400, "group_by must be one label name");
	}
	const char *ex = srv_arg(r, "exemplars");
	long nex = 0;
	if (ex) {
		char *end;
		nex = strtol(ex, &end, 10);
		if (!*ex || *end || nex < 0 || nex > STROBE_EXEMPLARS_MAX) {
			strobe_selector_free(&sel);
			return srv_error(r, 400, "exemplars must be an integer from 0 to %d (profiles "
						 "per step)",
					 STROBE_EXEMPLARS_MAX);
		}
	}
	if (srv_span_args(r, &sel) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_range_result res;
	strobe_exemplars exs = {0};
	int rc = strobe_store_range(r->srv->store, &q, step, gb, fn, &res, &err);
	if (rc == 0 && nex > 0 &&
	    (rc = strobe_store_exemplars(r->srv->store, &q, step, (size_t)nex, &exs, &err)) < 0)
		strobe_range_result_free(&res);
	if (rc < 0) {
		strobe_selector_free(&sel);
		return srv_fail(r, rc, &err);
	}
	json_t *exj = nex > 0 ? srv_exemplars_json(&exs, from, step) : NULL;
	strobe_buf b;
	strobe_buf_init(&b, RANGE_JSON_MAX);
	rc = srv_range_json(&b, sel.type, from, to, step, gb, &res, exj);
	json_decref(exj);
	strobe_exemplars_free(&exs);
	strobe_range_result_free(&res);
	strobe_selector_free(&sel);
	if (rc < 0) {
		strobe_buf_free(&b);
		return rc == -EINVAL ? srv_error(r, 500, "the answer holds a string that is not UTF-8")
		       : rc == -E2BIG
			       ? srv_error(r, 413, "the answer is over %d MiB; narrow the selector or "
						   "the window, or use a larger step",
					   RANGE_JSON_MAX >> 20)
			       : srv_error(r, 500, "out of memory");
	}
	size_t len;
	char *s = strobe_buf_take(&b, &len);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, len);
	return 0;
}
