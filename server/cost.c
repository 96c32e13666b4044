// SPDX-License-Identifier: Apache-2.0
/*
 * GET /api/v1/cost: what the CPU time of a selection cost, per value of a label (team,
 * service_name) or per function. CPU time comes from a CPU type's nanoseconds, or from sample
 * counts times the sampling period; a core-second is a second of one core busy. Money is
 * core-hours times the configured price; energy (when watts_per_core is configured) is
 * core-hours times watts times the data centre's PUE; CO2 is energy times the grid's intensity.
 * Every figure is also given per year, scaled from the window asked for (docs/cost-and-leaks.md).
 * The per-group totals are one /api/v1/range step as wide as the window; the per-function figures
 * are lib/top.c's flat and cumulative values of the merged profile.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "server_impl.h"
#include "strobe/transform.h"

json_t *srv_cost_figures(const struct strobe_cost_config *c, double core_seconds, double window_s)
{
	double ch = core_seconds / 3600, year = SRV_SECONDS_PER_YEAR / window_s;
	json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "core_seconds", core_seconds,
			      "core_hours", ch, "cores", core_seconds / window_s, "dollars",
			      ch * c->price_per_core_hour, "core_hours_per_year", ch * year,
			      "dollars_per_year", ch * c->price_per_core_hour * year);
	if (o && c->watts_per_core > 0) {
		double kwh = ch * c->watts_per_core / 1000 * c->pue;
		double co2 = kwh * c->grid_g_co2_per_kwh / 1000;
		json_object_set_new(o, "kwh", json_real(kwh));
		json_object_set_new(o, "kwh_per_year", json_real(kwh * year));
		json_object_set_new(o, "co2_kg", json_real(co2));
		json_object_set_new(o, "co2_kg_per_year", json_real(co2 * year));
	}
	return o;
}

/* How one unit of the type's value converts to core-seconds: 1e-9 for cpu nanoseconds, or 0
 * when it is a sample count (then times the period). -1 when the type is not CPU time. */
static double per_unit(const char *type, bool *counts)
{
	char part[5][64];
	size_t n = 0;
	const char *s = type;
	while (n < 5) {
		const char *e = strchr(s, ':');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		if (l >= sizeof(part[0]))
			return -1;
		memcpy(part[n], s, l);
		part[n++][l] = 0;
		if (!e)
			break;
		s = e + 1;
	}
	if (n != 5)
		return -1;
	*counts = false;
	if (strstr(part[1], "cpu") && strcmp(part[2], "nanoseconds") == 0)
		return 1e-9;
	if (strcmp(part[1], "samples") == 0 && strcmp(part[2], "count") == 0 &&
	    strcmp(part[3], "cpu") == 0 && strcmp(part[4], "nanoseconds") == 0) {
		*counts = true;
		return 1e-9;
	}
	return -1;
}

typedef struct fn_row {
	const char *name;
	double self_s, total_s;
} fn_row;

static int by_self(const void *a, const void *b)
{
	const fn_row *x = a, *y = b;
	return x->self_s > y->self_s ? -1 : x->self_s < y->self_s ? 1 : strcmp(x->name, y->name);
}
static int by_total(const void *a, const void *b)
{
	const fn_row *x = a, *y = b;
	return x->total_s > y->total_s ? -1 : x->total_s < y->total_s ? 1 : strcmp(x->name, y->name);
}

static int grp_cmp(const void *a, const void *b)
{
	double x = json_real_value(json_object_get(json_object_get(*(json_t *const *)a, "cost"),
						   "core_seconds"));
	double y = json_real_value(json_object_get(json_object_get(*(json_t *const *)b, "cost"),
						   "core_seconds"));
	return x > y ? -1 : x < y;
}

static int reply_json(srv_req *r, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(j);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}

int srv_cost(srv_req *r)
{
	const struct strobe_cost_config *cc = &r->srv->cfg.cost;
	const char *gb = srv_arg(r, "group_by"), *by = srv_arg(r, "by"), *lim = srv_arg(r, "limit");
	const char *order = srv_arg(r, "order");
	if (by && strcmp(by, "function") && strcmp(by, "group"))
		return srv_error(r, 400, "by must be function or group (the default)");
	bool fn = by && strcmp(by, "function") == 0;
	if (gb && (fn || !srv_label_name_ok(gb, STROBE_LABEL_NAME_MAX)))
		return srv_error(r, 400, fn ? "group_by: not with by=function"
					    : "group_by must be a label name ([a-zA-Z_][a-zA-Z0-9_.]*)");
	if (order && (!fn || (strcmp(order, "self") && strcmp(order, "total"))))
		return srv_error(r, 400, "order must be self or total, and only with by=function");
	unsigned long limit = 50;
	if (lim) {
		char *end;
		limit = strtoul(lim, &end, 10);
		if (!*lim || *end || *lim == '-' || limit < 1 || limit > 100000)
			return srv_error(r, 400, "limit must be an integer from 1 to 100000");
	}
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, "query", true, &sel) < 0)
		return 0;
	bool counts = false;
	double unit = sel.type ? per_unit(sel.type, &counts) : -1;
	if (unit < 0) {
		srv_error(r, 400,
			  "query: cost needs a CPU type (TYPE:cpu:nanoseconds:cpu:nanoseconds, or "
			  "TYPE:samples:count:cpu:nanoseconds), not '%.200s'",
			  sel.type ? sel.type : "(none)");
		strobe_selector_free(&sel);
		return 0;
	}
	if (srv_window(r, "from", "to", &from, &to) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	double window_s = (double)(to - from) / 1e9;
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	strobe_profile *p = NULL;
	int rc = 0;
	/* The merged profile: for the functions, and for the sampling period of a count type. */
	if (fn || counts) {
		rc = strobe_store_query(r->srv->store, &q, &p, &err);
		if (rc == 0 && fn)
			srv_name_late(r, &p); /* never fails: what cannot be named stays an address */
		if (rc < 0) {
			strobe_profile_free(p);
			strobe_selector_free(&sel);
			return r->status ? 0 : srv_fail(r, rc, &err);
		}
		if (counts) {
			if (p->period <= 0 && strobe_nsamples(p)) {
				strobe_profile_free(p);
				strobe_selector_free(&sel);
				return srv_error(r, 422, "query: these sample counts carry no sampling "
							 "period; ask for the cpu:nanoseconds type");
			}
			unit = 1e-9 * (double)p->period;
		}
	}
	json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f}", "type", sel.type, "from_ms",
			      (json_int_t)(from / 1000000), "to_ms", (json_int_t)(to / 1000000),
			      "window_seconds", window_s, "year_factor", SRV_SECONDS_PER_YEAR / window_s,
			      "price_per_core_hour", cc->price_per_core_hour);
	if (j && cc->watts_per_core > 0)
		json_object_set_new(j, "energy", json_pack("{s:f, s:f, s:f}", "watts_per_core",
							    cc->watts_per_core, "pue", cc->pue,
							    "grid_g_co2_per_kwh",
							    cc->grid_g_co2_per_kwh));
	if (fn) {
		strobe_fnstat *st = NULL;
		size_t n = 0;
		rc = p->ntypes ? strobe_fnstats(p, 0, STROBE_GRAN_FUNCTIONS, &st, &n) : 0;
		fn_row *rows = rc == 0 && n ? malloc(n * sizeof(*rows)) : NULL;
		if (rc == 0 && n && !rows)
			rc = -ENOMEM;
		for (size_t i = 0; rows && i < n; i++)
			rows[i] = (fn_row){st[i].name, (double)st[i].flat * unit,
					   (double)st[i].cum * unit};
		if (rows)
			qsort(rows, n, sizeof(*rows), order && !strcmp(order, "total") ? by_total : by_self);
		json_t *arr = json_array();
		for (size_t i = 0; arr && i < n && i < limit; i++) {
			json_t *self = srv_cost_figures(cc, rows[i].self_s, window_s);
			json_t *tot = srv_cost_figures(cc, rows[i].total_s, window_s);
			json_array_append_new(arr, json_pack("{s:s, s:o?, s:o?}", "name", rows[i].name,
							     "self", self, "total", tot));
		}
		double all = p->ntypes ? (double)strobe_total(p, 0) * unit : 0;
		json_object_set_new(j, "functions", arr);
		json_object_set_new(j, "total", srv_cost_figures(cc, all, window_s));
		free(rows);
		free(st);
	} else {
		strobe_range_result res = {0};
		rc = strobe_store_range(r->srv->store, &q, to - from, gb, NULL, &res, &err);
		if (rc == 0) {
			json_t **g = calloc(res.n ? res.n : 1, sizeof(*g));
			double all = 0;
			for (size_t i = 0; g && i < res.n; i++) {
				double cs = (double)res.g[i].values[0] * unit;
				all += cs;
				json_t *grp = json_object();
				if (gb && grp)
					json_object_set_new(grp, gb, json_string(res.g[i].value));
				g[i] = json_pack("{s:o?, s:o?}", "group", grp, "cost",
						 srv_cost_figures(cc, cs, window_s));
			}
			if (g)
				qsort(g, res.n, sizeof(*g), grp_cmp);
			json_t *arr = json_array();
			for (size_t i = 0; g && i < res.n; i++)
				json_array_append_new(arr, g[i]);
			if (!g)
				rc = -ENOMEM;
			free(g);
			if (gb)
				json_object_set_new(j, "group_by", json_string(gb));
			json_object_set_new(j, "groups", arr);
			json_object_set_new(j, "total", srv_cost_figures(cc, all, window_s));
			strobe_range_result_free(&res);
		}
	}
	strobe_profile_free(p);
	strobe_selector_free(&sel);
	if (rc < 0) {
		json_decref(j);
		return srv_fail(r, rc, &err);
	}
	return reply_json(r, j);
}
