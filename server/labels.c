// SPDX-License-Identifier: Apache-2.0
/*
 * The discovery endpoints: label names, one label's values and the profile types of a tenant,
 * each narrowed by an optional selector (query=) and a time window, as a UI fills its pickers.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

enum { NAMES, VALUES, TYPES };

/* The names, values or types asked for, as {"data": [...]} or (bare, for Pyroscope's legacy
 * label-values, whose window ends at "until") a plain array. */
static int listing(srv_req *r, int what, const char *name, const char *to_arg, bool bare)
{
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, "query", false, &sel) < 0)
		return 0;
	if (srv_window(r, "from", to_arg, &from, &to) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	char **v;
	size_t n;
	int rc = what == NAMES	 ? strobe_store_label_names(r->srv->store, &q, &v, &n, &err)
		 : what == VALUES ? strobe_store_label_values(r->srv->store, &q, name, &v, &n, &err)
				  : strobe_store_profile_types(r->srv->store, &q, &v, &n, &err);
	strobe_selector_free(&sel);
	if (rc < 0)
		return srv_fail(r, rc, &err);
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	strobe_strv_free(v, n);
	json_t *j = bare ? a : json_pack("{s:o?}", "data", a);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}

int srv_labels(srv_req *r) { return listing(r, NAMES, NULL, "to", false); }
int srv_label_values(srv_req *r, const char *name) { return listing(r, VALUES, name, "to", false); }
int srv_profile_types(srv_req *r) { return listing(r, TYPES, NULL, "to", false); }

/* GET /pyroscope/label-values?label=NAME[&query=SEL][&from=&until=]: a JSON array. */
int srv_render_label_values(srv_req *r)
{
	const char *name = srv_arg(r, "label");
	if (!name || !*name)
		return srv_error(r, 400, "missing parameter 'label'");
	return listing(r, VALUES, name, "until", true);
}

#define SERIES_MAX_MATCH  64u     /* match= selectors in one request */
#define SERIES_MAX_LISTED 100000u /* series in one answer */

/* GET /api/v1/series?match=SEL[&match=SEL...][&from=&to=]: every series matching any selector
 * (match[]= as Prometheus spells it works too), as a label set with __profile_type__ (the full
 * type) and __name__ (its first part), as Pyroscope lists them. */
int srv_series(srv_req *r)
{
	strobe_selector sels[SERIES_MAX_MATCH];
	size_t nsel = 0;
	int64_t from, to;
	for (size_t i = 0; i < r->nargs; i++) {
		if (strcmp(r->args[i].key, "match") && strcmp(r->args[i].key, "match[]"))
			continue;
		if (nsel == SERIES_MAX_MATCH) {
			srv_error(r, 400, "more than %u match= selectors", SERIES_MAX_MATCH);
			goto out;
		}
		const char *v = r->args[i].value;
		strobe_err err = {{0}};
		if (strobe_selector_parse(v, strlen(v), &sels[nsel], &err) < 0) {
			srv_error(r, 400, "match: %s", err.msg);
			goto out;
		}
		nsel++;
	}
	if (srv_window(r, "from", "to", &from, &to) < 0)
		goto out;
	strobe_series_list l;
	strobe_err err = {{0}};
	int rc = strobe_store_series(r->srv->store, r->tenant, sels, nsel, from, to,
				     SERIES_MAX_LISTED, &l, &err);
	if (rc < 0) {
		srv_fail(r, rc, &err);
		goto out;
	}
	json_t *a = json_array();
	for (size_t i = 0; a && i < l.n; i++) {
		const strobe_series_info *e = &l.v[i];
		json_t *o = json_object();
		if (!o) {
			json_decref(a);
			a = NULL;
			break;
		}
		size_t nl = strcspn(e->type, ":");
		json_object_set_new(o, "__name__", json_stringn(e->type, nl));
		json_object_set_new(o, "__profile_type__", json_string(e->type));
		for (size_t k = 0; k < e->nlabels; k++)
			json_object_set_new(o, e->labels[k].name, json_string(e->labels[k].value));
		json_array_append_new(a, o);
	}
	strobe_series_list_free(&l);
	json_t *j = a ? json_pack("{s:o}", "data", a) : NULL;
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(j);
	if (!s)
		srv_error(r, 500, "out of memory");
	else
		srv_reply(r, 200, "application/json", s, strlen(s));
out:
	for (size_t i = 0; i < nsel; i++)
		strobe_selector_free(&sels[i]);
	return 0;
}
