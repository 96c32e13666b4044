// SPDX-License-Identifier: Apache-2.0
/*
 * Pyroscope's legacy HTTP API, which older Grafana data sources and Pyroscope's own UI call:
 * GET /pyroscope/render (one flame graph as "flamebearer" JSON), /pyroscope/render-diff (two, in
 * flamebearer's "double" format) and /pyroscope/label-values. A query is Pyroscope's
 * `TYPE{labels}` (process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api"}), which is
 * strobe's selector, or its older `app.cpu{labels}` (an application name with a type suffix, as
 * /ingest takes it), which becomes TYPE{service_name="app",labels} with the stored type the
 * suffix became; from/until take what the native API's from/to take (now-1h, unix seconds or
 * milliseconds, RFC 3339). /render's timeline holds the totals per step (10 s or more, about
 * 1,000 steps); render-diff's is null. The flame graph rows are the Connect querier's (server/flamegraph.c).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

/* Pyroscope's timeline: the query's totals per step from `from`, about 1,000 steps, 10 s at
 * least (Pyroscope's resolution). NULL when the range fails (the flame graph still answers). */
static json_t *timeline(srv_req *r, const strobe_selector *sel, int64_t from, int64_t to)
{
	int64_t step = (to - from) / 1000;
	step = step < 10 * STROBE_NS_PER_S ? 10 * STROBE_NS_PER_S
					   : (step + STROBE_NS_PER_S - 1) / STROBE_NS_PER_S * STROBE_NS_PER_S;
	strobe_query q = {r->tenant, sel, from, to};
	strobe_range_result res;
	strobe_err err = {{0}};
	if (strobe_store_range(r->srv->store, &q, step, NULL, NULL, &res, &err) < 0)
		return NULL;
	json_t *samples = json_array();
	for (size_t k = 0; samples && k < res.nsteps; k++)
		json_array_append_new(samples, json_integer(res.n ? res.g[0].values[k] : 0));
	strobe_range_result_free(&res);
	return json_pack("{s:I, s:o?, s:I}", "startTime", (json_int_t)(from / STROBE_NS_PER_S),
			 "samples", samples, "durationDelta", (json_int_t)(step / STROBE_NS_PER_S));
}

/* Pyroscope's older application names, app.suffix{labels} (as /ingest takes them): the suffix's
 * profile name and sample types, to find the stored type they became. */
static const struct {
	const char *suffix, *name, *types[2];
} legacy[] = {
	{"cpu", "process_cpu", {"cpu", "samples"}},   {"itimer", "process_cpu", {"cpu", "samples"}},
	{"wall", "wall", {"wall", "samples"}},        {"inuse_objects", "memory", {"inuse_objects"}},
	{"inuse_space", "memory", {"inuse_space"}},   {"alloc_objects", "memory", {"alloc_objects"}},
	{"alloc_space", "memory", {"alloc_space"}},   {"goroutines", "goroutine", {"goroutine", "goroutines"}},
	{"mutex_count", "mutex", {"contentions"}},    {"mutex_duration", "mutex", {"delay"}},
	{"block_count", "block", {"contentions"}},    {"block_duration", "block", {"delay"}},
};

/* A query "app.cpu{...}" (no profile type ID before the braces) as the selector
 * TYPE{service_name="app",...}, TYPE being the stored type the suffix became; the selector is
 * left as it is when the query is not in that form or nothing matches. */
static void resolve_legacy(srv_req *r, const char *q, strobe_selector *sel, int64_t from,
			   int64_t to)
{
	const char *brace = strchr(q, '{');
	size_t nl = brace ? (size_t)(brace - q) : strlen(q);
	char app[256];
	if (!sel->type || memchr(q, ':', nl) || nl >= sizeof(app))
		return;
	memcpy(app, q, nl);
	app[nl] = 0;
	char *dot = strrchr(app, '.');
	const char *suffix = dot ? dot + 1 : "cpu";
	size_t li = 0;
	while (li < sizeof(legacy) / sizeof(*legacy) && strcmp(legacy[li].suffix, suffix))
		li++;
	if (li == sizeof(legacy) / sizeof(*legacy))
		return;
	if (dot)
		*dot = 0;
	strobe_matcher *m = realloc(sel->m, (sel->n + 1) * sizeof(*m));
	if (!m)
		return;
	sel->m = m;
	memset(&m[sel->n], 0, sizeof(*m));
	if (!(m[sel->n].name = strdup("service_name")) || !(m[sel->n].value = strdup(app))) {
		free(m[sel->n].name);
		return;
	}
	sel->n++;
	char *type = sel->type;
	sel->type = NULL; /* any type, to list them */
	strobe_query q2 = {r->tenant, sel, from, to};
	strobe_err err = {{0}};
	char **v;
	size_t n;
	char *found = NULL;
	if (strobe_store_profile_types(r->srv->store, &q2, &v, &n, &err) == 0) {
		for (size_t i = 0; i < n && !found; i++) {
			char name[64], st[64];
			if (sscanf(v[i], "%63[^:]:%63[^:]", name, st) != 2 || strcmp(name, legacy[li].name))
				continue;
			for (int k = 0; k < 2 && !found; k++)
				if (legacy[li].types[k] && strcmp(legacy[li].types[k], st) == 0)
					found = strdup(v[i]);
		}
		strobe_strv_free(v, n);
	}
	if (found) {
		free(type);
		sel->type = found;
	} else {
		sel->type = type;
	}
}

static int one(srv_req *r, const char *qname, const char *fname, const char *tname,
	       strobe_profile **out, json_t **tl)
{
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, qname, true, &sel) < 0)
		return -1;
	if (srv_window(r, fname, tname, &from, &to) < 0) {
		strobe_selector_free(&sel);
		return -1;
	}
	resolve_legacy(r, srv_arg(r, qname), &sel, from, to);
	if (!sel.type) {
		strobe_selector_free(&sel);
		return srv_error(r, 400, "%s: the query needs a profile type, as "
					 "process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}", qname), -1;
	}
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	int rc = strobe_store_query(r->srv->store, &q, out, &err);
	if (rc == 0 && tl)
		*tl = timeline(r, &sel, from, to);
	strobe_selector_free(&sel);
	if (rc < 0)
		return srv_fail(r, rc, &err), -1;
	return srv_name_late(r, out); /* bare addresses named from the debug-info store */
}

static int max_nodes(srv_req *r, size_t *out)
{
	const char *m = srv_arg(r, "max-nodes");
	if (!m)
		m = srv_arg(r, "maxNodes");
	*out = 0;
	if (!m)
		return 0;
	char *end;
	unsigned long long v = strtoull(m, &end, 10);
	if (*end || !*m || v > 10000000)
		return srv_error(r, 400, "max-nodes must be an integer from 0 to 10000000"), -1;
	*out = (size_t)v;
	return 0;
}

/* Pyroscope's names for a sample unit. */
static const char *units(const char *unit)
{
	return strcmp(unit, "bytes") == 0 ? "bytes"
	       : strcmp(unit, "count") == 0 ? "objects"
	       : strcmp(unit, "nanoseconds") == 0 ? "samples" : "samples";
}

static int flamebearer(srv_req *r, strobe_profile *a, strobe_profile *b, size_t mn, json_t *tl)
{
	strobe_tree *t = strobe_tree_new();
	srv_flame f = {0};
	int rc = t ? 0 : -ENOMEM;
	if (rc == 0 && a->ntypes)
		rc = strobe_tree_add(t, a, 0, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0);
	if (rc == 0 && b && b->ntypes)
		rc = strobe_tree_add(t, b, 0, STROBE_GRAN_FUNCTIONS, 1, 1.0, 0);
	if (rc == 0)
		rc = strobe_tree_sort(t);
	if (rc == 0)
		rc = srv_flame_build(t, b ? 2 : 1, mn, &f);
	json_t *names = json_array(), *levels = json_array();
	for (size_t i = 0; rc == 0 && i < f.nnames; i++)
		json_array_append_new(names, json_string(f.names[i]));
	for (size_t i = 0; rc == 0 && i < f.depth; i++) {
		json_t *row = json_array();
		for (size_t k = 0; k < f.rows[i].n; k++)
			json_array_append_new(row, json_integer(f.rows[i].v[k]));
		json_array_append_new(levels, row);
	}
	const char *unit = a->ntypes ? strobe_str(a, a->types[0].unit) : "";
	json_t *fb = json_pack("{s:o?, s:o?, s:I, s:I}", "names", names, "levels", levels,
			       "numTicks", (json_int_t)(f.total[0] + f.total[1]), "maxSelf",
			       (json_int_t)f.max_self);
	json_t *md = json_pack("{s:s, s:s, s:I, s:s}", "format", b ? "double" : "single",
			       "spyName", "", "sampleRate", (json_int_t)100, "units", units(unit));
	json_t *j = json_pack("{s:o?, s:o?, s:o?}", "flamebearer", fb, "metadata", md, "timeline", tl);
	if (j && b) {
		json_object_set_new(j, "leftTicks", json_integer(f.total[0]));
		json_object_set_new(j, "rightTicks", json_integer(f.total[1]));
	}
	char *s = rc == 0 && j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	srv_flame_free(&f);
	strobe_tree_free(t);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}

int srv_render(srv_req *r)
{
	const char *fmt = srv_arg(r, "format");
	if (fmt && strcmp(fmt, "json") != 0)
		return srv_error(r, 400, "format: only json (flamebearer)");
	size_t mn;
	strobe_profile *p = NULL;
	json_t *tl = NULL;
	if (max_nodes(r, &mn) < 0 || one(r, "query", "from", "until", &p, &tl) < 0)
		return 0;
	flamebearer(r, p, NULL, mn, tl);
	strobe_profile_free(p);
	return 0;
}

int srv_render_diff(srv_req *r)
{
	size_t mn;
	strobe_profile *a = NULL, *b = NULL;
	if (max_nodes(r, &mn) < 0 || one(r, "leftQuery", "leftFrom", "leftUntil", &a, NULL) < 0)
		return 0;
	if (one(r, "rightQuery", "rightFrom", "rightUntil", &b, NULL) == 0)
		flamebearer(r, a, b, mn, NULL);
	strobe_profile_free(a);
	strobe_profile_free(b);
	return 0;
}
