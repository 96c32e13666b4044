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

static int listing(srv_req *r, int what, const char *name)
{
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, "query", false, &sel) < 0)
		return 0;
	if (srv_window(r, "from", "to", &from, &to) < 0) {
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
	json_t *j = json_pack("{s:o?}", "data", a);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}

int srv_labels(srv_req *r) { return listing(r, NAMES, NULL); }
int srv_label_values(srv_req *r, const char *name) { return listing(r, VALUES, name); }
int srv_profile_types(srv_req *r) { return listing(r, TYPES, NULL); }
