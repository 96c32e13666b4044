// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the server's request handling (server/http.c's router and every endpoint:
 * native push, Pyroscope /ingest, OTLP profiles, query, diff, range, labels, series, admin,
 * metrics) driven in process,
 * without sockets, against a store in a temporary directory: arbitrary methods, paths, query
 * parameters, headers and bodies reach the same srv_handle the HTTP daemon calls.
 *
 * Input layout: the first line is "METHOD /path"; then, up to the first empty line, lines
 * "?key=value" are query parameters (already percent-decoded, as libmicrohttpd hands them over)
 * and lines "Name: value" are headers; the rest is the body. Seeds in
 * tests/fuzz/corpus/fuzz_http_requests/ cover each endpoint with valid requests.
 *
 * Besides not crashing or leaking, every answer must be well formed: a status from 200 to 599,
 * a body; errors are JSON {"error": ..., "status": N} with the status of the reply; every
 * application/json answer parses as JSON. FUZZ_HTTP_VERBOSE=1 prints each request's answer
 * (to check what the seeds reach: `build/fuzz/fuzz_http_requests -runs=0 CORPUS`).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/server_impl.h"

#define MAX_KV 64
#define NOW (1795000000LL * STROBE_NS_PER_S)
#define RESET_EVERY 2000 /* inputs between fresh stores, so a long run stays small */

static char dir[64];
static strobe_store *store;
static strobe_server srv;
static strobe_tenant_cfg tenants[] = {{"anonymous", NULL}, {"team-a", "sekrit"}};
static unsigned runs;

static void open_store(void)
{
	if (store) {
		strobe_store_close(store);
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			abort();
	}
	snprintf(dir, sizeof(dir), "/tmp/strobe-fuzz-http-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	strobe_store_opts o = {.dir = dir, .retention_ns = 28 * 86400 * STROBE_NS_PER_S,
			       .max_series = 200, .sync_normal = true};
	strobe_err err = {{0}};
	if (!(store = strobe_store_open(&o, &err))) {
		fprintf(stderr, "store: %s\n", err.msg);
		abort();
	}
	srv.store = store;
	srv.cfg.data_dir = dir; /* /metrics reports the store's file sizes */
}

static void cleanup(void)
{
	if (store) {
		strobe_store_close(store);
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	srv_metrics_free(srv.metrics);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	strobe_server_config_init(&srv.cfg);
	srv.cfg.max_body_bytes = 1 << 20;
	srv.cfg.max_decompressed_bytes = 8 << 20;
	srv.cfg.tenants = tenants;
	srv.cfg.ntenants = 2;
	/* As the daemon has: /metrics answers, and every request is counted as it would be. */
	if (!(srv.metrics = srv_metrics_new()))
		abort();
	open_store();
	atexit(cleanup);
	return 0;
}

/* The routes that answer in Connect's error format (server/routes.c, SRV_ROUTE_CONNECT). */
static bool connect_route(const srv_req *r)
{
	const char *q = "/querier.v1.QuerierService/";
	if (strcmp(r->method, "POST") != 0)
		return false;
	if (strncmp(r->url, q, strlen(q)) == 0)
		return r->url[strlen(q)] && !strchr(r->url + strlen(q), '/');
	return strcmp(r->url, "/settings.v1.SettingsService/Get") == 0 ||
	       strcmp(r->url, "/push.v1.PusherService/Push") == 0;
}

static void check_reply(const srv_req *r)
{
	if (r->status < 200 || r->status > 599 || !r->out || !r->ctype)
		abort();
	if (strcmp(r->ctype, "application/json") != 0)
		return;
	json_error_t je;
	json_t *j = json_loadb(r->out, r->outlen, 0, &je);
	if (!j) {
		fprintf(stderr, "not JSON (%u): %.*s\n", r->status, (int)r->outlen, r->out);
		abort();
	}
	if (r->status >= 400 && connect_route(r)) {
		/* the Connect routes answer in Connect's format (server/connect.c) */
		if (!json_is_string(json_object_get(j, "code")))
			abort();
	} else if (r->status >= 400) {
		json_t *e = json_object_get(j, "error"), *s = json_object_get(j, "status");
		if (!json_is_string(e) || (s && json_integer_value(s) != (json_int_t)r->status))
			abort();
	}
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (++runs % RESET_EVERY == 0)
		open_store();
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	srv_kv args[MAX_KV], hdrs[MAX_KV];
	size_t na = 0, nh = 0;
	char *p = text, *end = text + size;
	char *nl = memchr(p, '\n', (size_t)(end - p));
	char *first = p;
	if (nl) {
		*nl = 0;
		p = nl + 1;
	} else {
		p = end;
	}
	char *sp = strchr(first, ' ');
	const char *method = "GET", *url = first;
	if (sp) {
		*sp = 0;
		method = first;
		url = sp + 1;
	}
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		*nl = 0;
		char *line = p;
		p = nl + 1;
		if (!*line)
			break;
		if (line[0] == '?' && na < MAX_KV) {
			char *eq = strchr(line + 1, '=');
			if (eq)
				*eq = 0;
			args[na++] = (srv_kv){line + 1, eq ? eq + 1 : ""};
		} else if (nh < MAX_KV) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = 0;
			char *v = colon + 1;
			while (*v == ' ')
				v++;
			hdrs[nh++] = (srv_kv){line, v};
		}
	}
	srv_req r = {.srv = &srv, .url = url, .method = method, .args = args, .nargs = na,
		     .hdrs = hdrs, .nhdrs = nh, .body = (const uint8_t *)p,
		     .len = (size_t)(end - p), .now_ns = NOW};
	srv_handle(&r);
	/* Refused pushes count by the reason their message names, which may quote the input. */
	int h = strcmp(url, "/api/v1/push") == 0 ? SRV_H_PUSH
		: strcmp(url, "/ingest") == 0	 ? SRV_H_INGEST
		: strcmp(url, "/v1development/profiles") == 0 ? SRV_H_OTLP
						 : SRV_H_OTHER;
	srv_metrics_request(srv.metrics, h, r.status, r.errmsg, 0.001);
	check_reply(&r);
	if (getenv("FUZZ_HTTP_VERBOSE")) /* to see what the seeds reach */
		fprintf(stderr, "%s %s -> %u %.*s\n", method, url, r.status,
			(int)(r.outlen < 160 ? r.outlen : 160), r.out);
	free(r.out);
	free(text);
	return 0;
}
