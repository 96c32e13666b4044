// SPDX-License-Identifier: Apache-2.0
/*
 * GET /api/v1/regressions: the functions whose normalised cost grew significantly between two
 * releases (by=LABEL&base=V1&new=V2 over one window) or two windows (base_from/base_to,
 * new_from/new_to), ranked by what the growth costs in NEW, each with the team that owns it
 * (the config's "owners", server/owners.c).
 *
 * Normalised by total (the function's share) unless the caller gives the work each side did
 * (base_units=, new_units=: requests, say): then by value per unit, so that a release that
 * serves more traffic is not a regression, and one that does more work per request is. The
 * test is lib/significance.c's, as /api/v1/diff uses it (diff_sets.c): the bootstrap over
 * window slices where each side has enough of them, the counting test otherwise, the per-unit
 * counting test with units. Functions are judged on their flat (self) value: a callee that got
 * slower makes all its callers' cumulative values grow, and the regression is the callee.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff_sets.h"

enum { REG_LIMIT_DEFAULT = 100, REG_LIMIT_MAX = 10000, REG_VALUE_MAX = 256 };

/* A label name as selectors take them: [A-Za-z_][A-Za-z0-9_]*, at most REG_VALUE_MAX bytes. */
static bool label_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > REG_VALUE_MAX || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
					 *s == '_'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* units=N: a positive finite number; 0 when absent. -1 after a 400. */
static int units_arg(srv_req *r, const char *name, double *out)
{
	const char *v = srv_arg(r, name);
	*out = 0;
	if (!v)
		return 0;
	char *end;
	double d = strtod(v, &end);
	if (!*v || *end || !(d > 0) || !isfinite(d) || d > 1e18) {
		srv_error(r, 400, "%s must be a positive number (the work that side did, e.g. its "
				  "request count), not '%.64s'", name, v);
		return -1;
	}
	*out = d;
	return 0;
}

typedef struct reg {
	size_t i;
	double cost;
} reg;

static int by_cost(const void *a, const void *b)
{
	const reg *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int query_side(srv_req *r, srv_sig_side *s, const char *what)
{
	strobe_query q = {r->tenant, s->sel, s->from, s->to};
	strobe_err err = {{0}};
	int rc = strobe_store_query(r->srv->store, &q, &s->p, &err);
	if (rc < 0) {
		srv_fail(r, rc, &err);
		return -1;
	}
	if (srv_name_late(r, &s->p) < 0)
		return -1;
	if (!s->p->ntypes || strobe_total(s->p, 0) <= 0) {
		srv_error(r, 422, "%s: no samples for the selector in its window; nothing to compare",
			  what);
		return -1;
	}
	return 0;
}

int srv_regressions(srv_req *r)
{
	strobe_selector bsel = {0}, nsel = {0};
	srv_sig_side b = {&bsel, 0, 0, NULL, 0}, nw = {&nsel, 0, 0, NULL, 0};
	srv_sig_result res = {0};
	reg *regs = NULL;
	double conf;
	const char *by = srv_arg(r, "by"), *bv = srv_arg(r, "base"), *nv = srv_arg(r, "new");
	const char *lim = srv_arg(r, "limit"), *fmt = srv_arg(r, "format");
	long limit = REG_LIMIT_DEFAULT;
	if (fmt && strcmp(fmt, "json") && strcmp(fmt, "text"))
		return srv_error(r, 400, "format must be json or text");
	if (lim) {
		char *end;
		limit = strtol(lim, &end, 10);
		if (!*lim || *end || limit < 1 || limit > REG_LIMIT_MAX)
			return srv_error(r, 400, "limit must be an integer from 1 to %d", REG_LIMIT_MAX);
	}
	if (srv_confidence(r, &conf) < 0 || units_arg(r, "base_units", &b.units) < 0 ||
	    units_arg(r, "new_units", &nw.units) < 0)
		return 0;
	if ((b.units > 0) != (nw.units > 0))
		return srv_error(r, 400, "base_units and new_units go together: give both or neither");
	if (srv_selector(r, "query", true, &bsel) < 0)
		return 0;
	if (!bsel.type) {
		strobe_selector_free(&bsel);
		return srv_error(r, 400, "query: the selector needs a profile type");
	}
	if (srv_selector(r, "query", true, &nsel) < 0)
		goto out;
	if (by) {
		if (!label_name_ok(by)) {
			srv_error(r, 400, "by must be a label name ([A-Za-z_][A-Za-z0-9_]*, at most %d "
					  "bytes), e.g. by=version", REG_VALUE_MAX);
			goto out;
		}
		if (!bv || !nv || !*bv || !*nv || strlen(bv) > REG_VALUE_MAX ||
		    strlen(nv) > REG_VALUE_MAX) {
			srv_error(r, 400, "by=%s needs base= and new=, the two values of %s to compare "
					  "(1 to %d bytes each)", by, by, REG_VALUE_MAX);
			goto out;
		}
		/* One window for both (a canary beside the release), or each its own (v1 last
		 * week, v2 today): base_from/base_to and new_from/new_to override from/to. */
		bool bw = srv_arg(r, "base_from") || srv_arg(r, "base_to"),
		     nwin = srv_arg(r, "new_from") || srv_arg(r, "new_to");
		if (srv_window(r, bw ? "base_from" : "from", bw ? "base_to" : "to", &b.from,
			       &b.to) < 0 ||
		    srv_window(r, nwin ? "new_from" : "from", nwin ? "new_to" : "to", &nw.from,
			       &nw.to) < 0)
			goto out;
		if (strobe_selector_add_eq(&bsel, by, bv) < 0 || strobe_selector_add_eq(&nsel, by, nv) < 0) {
			srv_error(r, 500, "out of memory");
			goto out;
		}
	} else {
		if (bv || nv) {
			srv_error(r, 400, "base= and new= name label values: they need by=LABEL (or "
					  "compare two windows with base_from/base_to and new_from/new_to)");
			goto out;
		}
		if (!srv_arg(r, "base_from") || !srv_arg(r, "new_from")) {
			srv_error(r, 400, "give by=LABEL&base=V1&new=V2, or two windows: base_from, "
					  "base_to, new_from, new_to");
			goto out;
		}
		if (srv_window(r, "base_from", "base_to", &b.from, &b.to) < 0 ||
		    srv_window(r, "new_from", "new_to", &nw.from, &nw.to) < 0)
			goto out;
	}
	if (query_side(r, &b, "base") < 0 || query_side(r, &nw, "new") < 0)
		goto out;
	int rc = srv_sig_functions(r, &b, &nw, conf, &res);
	if (rc < 0) {
		strobe_err err = {{0}};
		srv_fail(r, rc, &err);
		goto out;
	}
	/* The owner: the first equality matcher of the query whose label and value the config
	 * maps (service_name="checkout" -> payments). */
	const char *names[64], *values[64], *olabel = NULL;
	size_t nm = 0;
	for (size_t i = 0; i < nsel.n && nm < 64; i++)
		if (nsel.m[i].op == STROBE_MATCH_EQ && (!by || strcmp(nsel.m[i].name, by))) {
			names[nm] = nsel.m[i].name;
			values[nm++] = nsel.m[i].value;
		}
	char *team = srv_owner_of(&r->srv->cfg, names, values, nm, &olabel);
	size_t n = res.n, nreg = 0;
	regs = malloc((n ? n : 1) * sizeof(*regs));
	if (!regs) {
		free(team);
		srv_error(r, 500, "out of memory");
		goto out;
	}
	/* The cost of a growth: the value NEW spent on it beyond BASE's rate, in NEW's units. */
	double scale = nw.units > 0 ? nw.units : (double)res.tot[0];
	for (size_t i = 0; i < n; i++)
		if (res.rows[i].significant && res.rows[i].change > 0)
			regs[nreg++] = (reg){i, res.rows[i].change * scale};
	if (nreg)
		qsort(regs, nreg, sizeof(*regs), by_cost);
	const char *type = strobe_str(nw.p, nw.p->types[0].type),
		   *unit = strobe_str(nw.p, nw.p->types[0].unit);
	char *buf = NULL;
	size_t len = 0;
	if (fmt && strcmp(fmt, "text") == 0) {
		FILE *f = open_memstream(&buf, &len);
		if (f) {
			fprintf(f, "%zu regression%s (%s, %g%% confidence, normalised by %s)%s%s\n",
				nreg, nreg == 1 ? "" : "s", res.method, 100 * conf,
				nw.units > 0 ? "units" : "total", team ? "; team " : "",
				team ? team : "");
			fprintf(f, "%12s %12s %9s %12s %10s  %s\n", by ? bv : "base", by ? nv : "new",
				"change", "cost", "q", "function");
			for (size_t k = 0; k < nreg && k < (size_t)limit; k++) {
				const strobe_sig_row *s = &res.rows[regs[k].i];
				char c[32];
				strobe_format_value(c, sizeof(c), (int64_t)llround(regs[k].cost), unit);
				if (nw.units > 0)
					fprintf(f, "%12.4g %12.4g %+8.1f%% %12s %10.2g  %s\n",
						s->base_share, s->new_share,
						s->base_share > 0 ? 100 * s->change / s->base_share
								  : 100.0,
						c, s->q, res.c[regs[k].i].name);
				else
					fprintf(f, "%11.2f%% %11.2f%% %+8.2fpp %11s %10.2g  %s\n",
						100 * s->base_share, 100 * s->new_share,
						100 * s->change, c, s->q, res.c[regs[k].i].name);
			}
			fclose(f);
		}
	} else {
		json_t *arr = json_array();
		for (size_t k = 0; arr && k < nreg && k < (size_t)limit; k++) {
			size_t i = regs[k].i;
			json_array_append_new(
				arr, json_pack("{s:s, s:I, s:I, s:f, s:o, s:o, s:s?}", "function",
					       res.c[i].name, "base_value",
					       (json_int_t)res.c[i].flat[1], "new_value",
					       (json_int_t)res.c[i].flat[0], "cost", regs[k].cost,
					       "self", srv_sig_row_json(&res.rows[i]), "total",
					       srv_sig_row_json(&res.rows[n + i]), "team", team));
		}
		json_t *j = json_pack(
			"{s:s, s:s, s:s, s:s?, s:{s:s?, s:I, s:I, s:I, s:f}, s:{s:s?, s:I, s:I, s:I, s:f},"
			" s:s, s:f, s:s, s:s?, s:s?, s:I, s:o}",
			"query", srv_arg(r, "query"), "type", type, "unit", unit, "by", by, "base",
			"value", bv, "from_ms", (json_int_t)(b.from / 1000000), "to_ms",
			(json_int_t)(b.to / 1000000), "total", (json_int_t)res.tot[1], "units", b.units,
			"new", "value", nv, "from_ms", (json_int_t)(nw.from / 1000000), "to_ms",
			(json_int_t)(nw.to / 1000000), "total", (json_int_t)res.tot[0], "units",
			nw.units, "method", res.method, "confidence", conf, "normalised_by",
			nw.units > 0 ? "units" : "total", "team", team, "owner_label", olabel,
			"count", (json_int_t)nreg, "regressions", arr);
		buf = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		len = buf ? strlen(buf) : 0;
		json_decref(j);
	}
	free(team);
	if (!buf)
		srv_error(r, 500, "out of memory");
	else
		srv_reply(r, 200,
			  fmt && !strcmp(fmt, "text") ? "text/plain; charset=utf-8" : "application/json",
			  buf, len);
out:
	free(regs);
	srv_sig_result_free(&res);
	strobe_profile_free(b.p);
	strobe_profile_free(nw.p);
	strobe_selector_free(&bsel);
	strobe_selector_free(&nsel);
	return 0;
}
