// SPDX-License-Identifier: Apache-2.0
/*
 * The server's route table (server/routes.c) in process: its entries are well formed and
 * distinct, {name} segments match one non-empty segment only, the admin class's three cases
 * (no tenants: open; tenants without admin_token: 403; admin_token: only it), an unknown path on
 * a server with tokens is a 401 before it is a 404, and the token comparison's answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/server_impl.h"

static char dir[256];
static strobe_server srv;
static strobe_tenant_cfg tenants[] = {{"team-a", "tok-a"}, {"team-b", "tok-b"}};

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/strobe-test-routes-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	memset(&srv, 0, sizeof(srv));
	strobe_server_config_init(&srv.cfg);
	strobe_store_opts o = {.dir = dir, .max_series = 50, .sync_normal = true};
	strobe_err err = {{0}};
	srv.store = strobe_store_open(&o, &err);
	return srv.store ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	strobe_store_close(srv.store);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

/* The status of METHOD URL with an X-Scope-OrgID (or none) and a bearer token (or none). */
static unsigned call(const char *method, const char *url, const char *tenant, const char *token)
{
	srv_kv hd[2];
	size_t nh = 0;
	char auth[128];
	if (tenant)
		hd[nh++] = (srv_kv){"X-Scope-OrgID", tenant};
	if (token) {
		snprintf(auth, sizeof(auth), "Bearer %s", token);
		hd[nh++] = (srv_kv){"Authorization", auth};
	}
	srv_req r = {.srv = &srv, .url = url, .method = method, .hdrs = hd, .nhdrs = nh,
		     .now_ns = 1795000000LL * STROBE_NS_PER_S};
	srv_handle(&r);
	free(r.out);
	return r.status;
}

static void test_table_well_formed(void **state)
{
	(void)state;
	assert_true(srv_nroutes >= 10);
	for (size_t i = 0; i < srv_nroutes; i++) {
		const srv_route *r = &srv_routes[i];
		assert_non_null(r->fn);
		assert_true(strcmp(r->method, "GET") == 0 || strcmp(r->method, "POST") == 0);
		assert_int_equal(r->path[0], '/');
		assert_true(r->access == SRV_PUBLIC || r->access == SRV_TENANT ||
			    r->access == SRV_ADMIN);
		for (size_t k = 0; k < i; k++)
			assert_false(strcmp(r->method, srv_routes[k].method) == 0 &&
				     strcmp(r->path, srv_routes[k].path) == 0);
		/* Tenant data lives under /api/ or /ingest; no such route may be public. */
		if (strncmp(r->path, "/api/", 5) == 0 || strcmp(r->path, "/ingest") == 0)
			assert_int_not_equal(r->access, SRV_PUBLIC);
	}
}

static void test_name_segment(void **state)
{
	(void)state;
	assert_int_equal(call("GET", "/api/v1/label/service_name/values", NULL, NULL), 200);
	assert_int_equal(call("GET", "/api/v1/label//values", NULL, NULL), 404);
	assert_int_equal(call("GET", "/api/v1/label/a/b/values", NULL, NULL), 404);
	assert_int_equal(call("GET", "/api/v1/label/values", NULL, NULL), 404);
	assert_int_equal(srv_route_metric("/api/v1/label/x/values"), SRV_H_LABEL_VALUES);
	assert_int_equal(srv_route_metric("/api/v1/admin/other"), SRV_H_ADMIN);
	assert_int_equal(srv_route_metric("/nothing"), SRV_H_OTHER);
}

static void test_admin_open_without_tenants(void **state)
{
	(void)state;
	assert_int_equal(call("POST", "/api/v1/admin/compact", NULL, NULL), 200);
}

static void test_admin_closed_with_tenants(void **state)
{
	(void)state;
	srv.cfg.tenants = tenants;
	srv.cfg.ntenants = 2;
	assert_int_equal(call("POST", "/api/v1/admin/compact", NULL, NULL), 403);
	assert_int_equal(call("POST", "/api/v1/admin/compact", "team-a", "tok-a"), 403);
	srv.cfg.admin_token = "tok-admin";
	assert_int_equal(call("POST", "/api/v1/admin/compact", "team-a", "tok-a"), 401);
	assert_int_equal(call("POST", "/api/v1/admin/compact", NULL, "tok-admin-x"), 401);
	assert_int_equal(call("POST", "/api/v1/admin/compact", NULL, "tok-admin"), 200);
	/* The admin token is no tenant's. */
	assert_int_equal(call("GET", "/api/v1/labels", "team-a", "tok-admin"), 401);
	assert_int_equal(call("GET", "/api/v1/labels", "team-a", "tok-a"), 200);
	/* Unknown paths: authenticated first, so a caller without a token learns nothing. */
	assert_int_equal(call("GET", "/api/v1/nothing", NULL, NULL), 401);
	assert_int_equal(call("GET", "/api/v1/nothing", "team-a", "tok-a"), 404);
	assert_int_equal(call("GET", "/ready", NULL, NULL), 200);
	srv.cfg.tenants = NULL;
	srv.cfg.ntenants = 0;
	srv.cfg.admin_token = NULL;
}

static void test_secret_equal(void **state)
{
	(void)state;
	assert_true(srv_secret_equal("tok-a", "tok-a"));
	assert_false(srv_secret_equal("tok-b", "tok-a"));
	assert_false(srv_secret_equal("tok-", "tok-a"));
	assert_false(srv_secret_equal("tok-aa", "tok-a"));
	assert_false(srv_secret_equal("", "tok-a"));
	assert_false(srv_secret_equal("tok-a", ""));
	assert_true(srv_secret_equal("", ""));
	/* The caller's string repeats the secret: still not equal (lengths differ). */
	assert_false(srv_secret_equal("tok-atok-a", "tok-a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_well_formed),
		cmocka_unit_test_setup_teardown(test_name_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_open_without_tenants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_closed_with_tenants, setup, teardown),
		cmocka_unit_test(test_secret_equal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
