// SPDX-License-Identifier: Apache-2.0
/*
 * The server's one route table: every endpoint with its method, its path and its access class,
 * and the checks each class gets before the endpoint runs. An endpoint cannot be added without
 * saying who may call it, and `strobe server --list-routes` prints this table, so the tenant
 * test (tests/e2e/server_tenants.sh) covers every route the server has, not the ones someone
 * remembered.
 *
 *   public  no credentials: readiness, the server's own /metrics (Prometheus scrapes it), and
 *           the UI's static files, which hold no data (the API calls they make carry the auth)
 *   tenant  X-Scope-OrgID, and its bearer token when the tenant has one; the endpoint then sees
 *           only r->tenant, and the store keys every read and write by it
 *   admin   acts on the whole store, every tenant's data: needs "admin_token" from the config;
 *           without one, allowed only on a server with no tenants (it is open to anyone anyway)
 *           and refused (403) on a server that has them
 *
 * A request that matches no route is authenticated as a tenant one before its 404, so an
 * unauthenticated caller learns nothing about which paths exist.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

/* Tenant ids go into paths of future backends and into logs: keep them plain. */
static bool tenant_ok(const char *t)
{
	size_t n = strlen(t);
	if (!n || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

bool srv_secret_equal(const char *given, const char *secret)
{
	/* The loop runs over the caller's string, whatever the secret's length, and folds every
	 * difference into d without branching on it: the time depends on what the caller sent, never
	 * on how much of it matched. volatile keeps the compiler from turning the fold back into an
	 * early exit. */
	size_t lg = strlen(given), ls = strlen(secret);
	volatile unsigned char d = lg != ls;
	for (size_t i = 0; i < lg; i++)
		d |= (unsigned char)(given[i] ^ secret[ls ? i % ls : 0]);
	return d == 0;
}

/* The bearer token of the Authorization header, or NULL. Only the header: a token in the URL
 * (?token=) would land in proxies' access logs and browser histories, so none is read there. */
static const char *bearer(srv_req *r)
{
	const char *h = srv_header(r, "Authorization");
	return h && strncmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL;
}

static int auth_tenant(srv_req *r)
{
	const char *t = srv_header(r, "X-Scope-OrgID");
	r->tenant = t ? t : "anonymous";
	if (!tenant_ok(r->tenant)) {
		srv_error(r, 400, "X-Scope-OrgID must be 1 to 64 of [A-Za-z0-9_.-]");
		return -1;
	}
	const strobe_server_config *c = &r->srv->cfg;
	if (!c->ntenants)
		return r->tenant_accepted = true, 0;
	for (size_t i = 0; i < c->ntenants; i++) {
		if (strcmp(c->tenants[i].id, r->tenant) != 0)
			continue;
		if (!c->tenants[i].token)
			return r->tenant_accepted = true, 0;
		const char *b = bearer(r);
		if (b && srv_secret_equal(b, c->tenants[i].token))
			return r->tenant_accepted = true, 0;
		srv_error(r, 401, "missing or wrong bearer token for tenant '%s'", r->tenant);
		return -1;
	}
	srv_error(r, 401, "unknown tenant '%s'", r->tenant);
	return -1;
}

static int auth_admin(srv_req *r)
{
	const strobe_server_config *c = &r->srv->cfg;
	r->tenant = NULL; /* an admin route acts on the store, not on one tenant's data */
	if (c->admin_token) {
		const char *b = bearer(r);
		if (b && srv_secret_equal(b, c->admin_token))
			return 0;
		srv_error(r, 401, "admin route %s: missing or wrong bearer token (the config's "
				  "admin_token; a tenant's token is not enough)",
			  r->url);
		return -1;
	}
	if (!c->ntenants)
		return 0;
	srv_error(r, 403, "admin route %s is disabled: this server has tenants but no admin_token "
			  "in its config (docs/server.md, Tenants)",
		  r->url);
	return -1;
}

static int ready(srv_req *r)
{
	char *ok = strdup("ok\n");
	srv_reply(r, 200, "text/plain", ok, ok ? 3 : 0);
	return 0;
}

static int ui(srv_req *r)
{
	if (!srv_ui(r))
		srv_error(r, 404, "no UI file %s", r->url);
	return 0;
}

static int label_values(srv_req *r)
{
	char name[STROBE_LABEL_NAME_MAX + 1];
	if (r->path_arg_len > STROBE_LABEL_NAME_MAX)
		return srv_error(r, 400, "label name longer than %u bytes", STROBE_LABEL_NAME_MAX);
	memcpy(name, r->path_arg, r->path_arg_len);
	name[r->path_arg_len] = 0;
	return srv_label_values(r, name);
}

static int admin_compact(srv_req *r)
{
	strobe_err err = {{0}};
	int n = strobe_store_compact(r->srv->store, r->now_ns, &err);
	/* Retention even when compaction failed: on a full disk it is what frees pages. */
	strobe_err err2 = {{0}};
	int d = strobe_store_retain(r->srv->store, r->now_ns, n < 0 ? &err2 : &err);
	if (n < 0 || d < 0)
		return srv_fail(r, n < 0 ? n : d, &err);
	char *s = NULL;
	int len = asprintf(&s, "{\"buckets_compacted\":%d,\"rows_deleted\":%d}\n", n, d);
	srv_reply(r, 200, "application/json", len < 0 ? NULL : s, len < 0 ? 0 : (size_t)len);
	return 0;
}

/* Paths: exact; or one {name} segment (no '/', not empty) handed over as r->path_arg; or a
 * trailing '*' for any rest. The first route whose method and path match is taken. */
const srv_route srv_routes[] = {
	{"GET", "/ready", SRV_PUBLIC, SRV_H_OTHER, ready, 0},
	{"GET", "/healthz", SRV_PUBLIC, SRV_H_OTHER, ready, 0},
	{"GET", "/metrics", SRV_PUBLIC, SRV_H_METRICS, srv_metrics_get, 0},
	{"GET", "/", SRV_PUBLIC, SRV_H_OTHER, ui, 0},
	{"GET", "/ui/*", SRV_PUBLIC, SRV_H_OTHER, ui, 0},
	{"POST", "/api/v1/push", SRV_TENANT, SRV_H_PUSH, srv_push, 0},
	{"POST", "/ingest", SRV_TENANT, SRV_H_INGEST, srv_pyroscope_ingest, 0},
	{"POST", "/v1development/profiles", SRV_TENANT, SRV_H_OTLP, srv_otlp_profiles, 0},
	{"GET", "/api/v1/query", SRV_TENANT, SRV_H_QUERY, srv_query, 0},
	{"GET", "/api/v1/diff", SRV_TENANT, SRV_H_DIFF, srv_diff, 0},
	{"GET", "/api/v1/pgo", SRV_TENANT, SRV_H_PGO, srv_pgo, 0},
	{"GET", "/api/v1/regressions", SRV_TENANT, SRV_H_REGRESSIONS, srv_regressions, 0},
	{"GET", "/api/v1/range", SRV_TENANT, SRV_H_RANGE, srv_range, 0},
	{"GET", "/api/v1/labels", SRV_TENANT, SRV_H_LABELS, srv_labels, 0},
	{"GET", "/api/v1/label/{name}/values", SRV_TENANT, SRV_H_LABEL_VALUES, label_values, 0},
	{"GET", "/api/v1/profile_types", SRV_TENANT, SRV_H_TYPES, srv_profile_types, 0},
	{"GET", "/api/v1/series", SRV_TENANT, SRV_H_SERIES, srv_series, 0},
	{"GET", "/api/v1/cost", SRV_TENANT, SRV_H_COST, srv_cost, 0},
	{"GET", "/api/v1/leaks", SRV_TENANT, SRV_H_LEAKS, srv_leaks, 0},
	{"POST", "/api/v1/admin/compact", SRV_ADMIN, SRV_H_ADMIN, admin_compact, 0},
	{"POST", "/api/v1/debuginfo/{build_id}", SRV_TENANT, SRV_H_DEBUGINFO, srv_debuginfo_upload, 0},
	{"GET", "/api/v1/debuginfo/{build_id}", SRV_TENANT, SRV_H_DEBUGINFO, srv_debuginfo_stat, 0},
	{"GET", "/buildid/*", SRV_TENANT, SRV_H_DEBUGINFO, srv_debuginfod, 0},
	/* Grafana's (server/connect.c, server/render.c) */
	{"POST", "/querier.v1.QuerierService/{name}", SRV_TENANT, SRV_H_CONNECT,
	 srv_connect_querier, SRV_ROUTE_CONNECT},
	{"POST", "/settings.v1.SettingsService/Get", SRV_TENANT, SRV_H_CONNECT,
	 srv_connect_settings, SRV_ROUTE_CONNECT},
	{"POST", "/push.v1.PusherService/Push", SRV_TENANT, SRV_H_CONNECT_PUSH, srv_connect_push,
	 SRV_ROUTE_CONNECT},
	{"GET", "/pyroscope/render", SRV_TENANT, SRV_H_RENDER, srv_render, 0},
	{"GET", "/pyroscope/render-diff", SRV_TENANT, SRV_H_RENDER, srv_render_diff, 0},
	{"GET", "/pyroscope/label-values", SRV_TENANT, SRV_H_RENDER, srv_render_label_values, 0},
};
const size_t srv_nroutes = sizeof(srv_routes) / sizeof(srv_routes[0]);

/* Whether url matches pattern p; a {name} segment's text goes to *arg, *argn. */
static bool path_match(const char *p, const char *url, const char **arg, size_t *argn)
{
	const char *open = strchr(p, '{');
	size_t pl = strlen(p);
	if (!open) {
		if (pl && p[pl - 1] == '*')
			return strncmp(url, p, pl - 1) == 0;
		return strcmp(url, p) == 0;
	}
	const char *close = strchr(open, '}');
	size_t pre = (size_t)(open - p), ul = strlen(url);
	const char *post = close ? close + 1 : "";
	size_t postl = strlen(post);
	if (ul <= pre + postl || strncmp(url, p, pre) != 0 || strcmp(url + ul - postl, post) != 0)
		return false;
	size_t n = ul - pre - postl;
	if (memchr(url + pre, '/', n))
		return false;
	*arg = url + pre;
	*argn = n;
	return true;
}

static const srv_route *find(const char *method, const char *url, const char **arg,
			     size_t *argn)
{
	for (size_t i = 0; i < srv_nroutes; i++)
		if ((!method || strcmp(method, srv_routes[i].method) == 0) &&
		    path_match(srv_routes[i].path, url, arg, argn))
			return &srv_routes[i];
	return NULL;
}

int srv_route_metric(const char *url)
{
	const char *a;
	size_t n;
	const srv_route *rt = find(NULL, url, &a, &n);
	if (rt)
		return rt->metric;
	/* Unknown paths under admin/ still count as admin traffic (as before the table). */
	return strncmp(url, "/api/v1/admin/", 14) == 0 ? SRV_H_ADMIN : SRV_H_OTHER;
}

const char *srv_access_name(srv_access a)
{
	return a == SRV_PUBLIC ? "public" : a == SRV_TENANT ? "tenant" : "admin";
}

void strobe_server_list_routes(FILE *f)
{
	for (size_t i = 0; i < srv_nroutes; i++)
		fprintf(f, "%s %s %s\n", srv_routes[i].method, srv_routes[i].path,
			srv_access_name(srv_routes[i].access));
}

void srv_handle(srv_req *r)
{
	const srv_route *rt = find(r->method, r->url, &r->path_arg, &r->path_arg_len);
	int a = !rt || rt->access == SRV_TENANT ? auth_tenant(r)
		: rt->access == SRV_ADMIN	 ? auth_admin(r)
						 : 0;
	if (a == 0) {
		if (rt)
			rt->fn(r);
		else
			srv_error(r, 404, "no endpoint %s %s", r->method, r->url);
	}
	if (!r->status)
		srv_error(r, 500, "internal error: no reply");
	if (rt && (rt->flags & SRV_ROUTE_CONNECT))
		srv_connect_error_from_native(r);
}
