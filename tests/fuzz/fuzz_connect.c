// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the Connect protocol's request decoding (server/connect.c) in process,
 * against a store holding one small profile: every querier.v1 method's request, settings.v1 Get
 * and push.v1 Push, as application/proto (protobuf-c's unpacker) and application/json (the proto3
 * JSON mapping, lib/pbjson.c), plain or gzipped (the gunzip under max_decompressed_bytes).
 *
 * Input layout: byte 0 picks the method (low 4 bits) and the body's form (bit 4: JSON, bit 5:
 * the rest is gzipped here before it is sent with Content-Encoding: gzip, bit 6: sent with
 * Content-Encoding: gzip as it is, so broken gzip reaches the gunzip; bit 7: Accept-Encoding:
 * gzip); the rest is the body. Seeds in tests/fuzz/corpus/fuzz_connect/ hold a valid request of
 * every method in both codecs.
 *
 * Besides not crashing or leaking, every answer must be well formed: 200 with a body that
 * decodes as the method's answer (binary) or parses as JSON, or Connect's error format
 * {"code": ..., "message": ...} as application/json.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../server/server_impl.h"
#include "strobe/codec.h"

#define NOW (1795000000LL * STROBE_NS_PER_S)

static char dir[64];
static strobe_store *store;
static strobe_server srv;

static const char *const paths[] = {
	"/querier.v1.QuerierService/ProfileTypes",
	"/querier.v1.QuerierService/LabelNames",
	"/querier.v1.QuerierService/LabelValues",
	"/querier.v1.QuerierService/Series",
	"/querier.v1.QuerierService/SelectMergeStacktraces",
	"/querier.v1.QuerierService/SelectMergeSpanProfile",
	"/querier.v1.QuerierService/SelectMergeProfile",
	"/querier.v1.QuerierService/SelectSeries",
	"/querier.v1.QuerierService/Diff",
	"/settings.v1.SettingsService/Get",
	"/push.v1.PusherService/Push",
	"/querier.v1.QuerierService/GetProfileStats",
	"/querier.v1.QuerierService/Unknown",
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

static void cleanup(void)
{
	if (store) {
		strobe_store_close(store);
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
}

/* One profile of service "svc" at NOW - 60 s, so the queries have something to merge. */
static void seed_store(void)
{
	static const char folded[] = "main;handle;parse 10\nmain;handle;render 5\nmain;idle 3\n";
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	uint8_t *gz = NULL;
	size_t gl = 0;
	if (strobe_folded_decode(folded, sizeof(folded) - 1, "seed", &p, &err) < 0 ||
	    strobe_pprof_encode(p, &gz, &gl) < 0)
		abort();
	strobe_profile_free(p);
	strobe_labelpair l[] = {{"__name__", "process_cpu"}, {"service_name", "svc"}};
	const uint8_t *b[] = {gz};
	size_t lens[] = {gl};
	srv_req r = {.srv = &srv, .url = "/push.v1.PusherService/Push", .method = "POST",
		     .tenant = "anonymous", .now_ns = NOW - 60 * STROBE_NS_PER_S};
	srv_push_in in = {.labels = l, .nlabels = 2, .bodies = b, .lens = lens, .nbodies = 1};
	size_t failed = 0;
	srv_push_series(&r, &in, 1, &failed);
	if (r.status != 200)
		abort();
	free(r.out);
	free(gz);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	strobe_server_config_init(&srv.cfg);
	srv.cfg.max_body_bytes = 1 << 20;
	srv.cfg.max_decompressed_bytes = 8 << 20;
	snprintf(dir, sizeof(dir), "/tmp/strobe-fuzz-connect-XXXXXX");
	if (!mkdtemp(dir))
		abort();
	strobe_store_opts o = {.dir = dir, .max_series = 200, .sync_normal = true};
	strobe_err err = {{0}};
	if (!(store = strobe_store_open(&o, &err)))
		abort();
	srv.store = store;
	srv.cfg.data_dir = dir;
	atexit(cleanup);
	seed_store();
	return 0;
}

static void check_reply(const srv_req *r, bool json)
{
	if (r->status < 200 || r->status > 599 || !r->out || !r->ctype)
		abort();
	if (r->status == 200 && !json)
		return;
	if (strcmp(r->ctype, "application/json") != 0)
		abort();
	const char *body = r->out;
	size_t len = r->outlen;
	uint8_t *raw = NULL;
	if (r->cenc) {
		if (strobe_gunzip_capped((const uint8_t *)r->out, r->outlen, 64 << 20, &raw, &len,
					 NULL, NULL) < 0)
			abort();
		body = (const char *)raw;
	}
	json_t *j = json_loadb(body, len, 0, NULL);
	if (!j)
		abort();
	if (r->status >= 400 && (!json_is_string(json_object_get(j, "code")) ||
				 !json_is_string(json_object_get(j, "message"))))
		abort();
	json_decref(j);
	free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	uint8_t ctl = data[0];
	const char *path = paths[(ctl & 15) % NPATHS];
	bool json = ctl & 16;
	uint8_t *gz = NULL;
	const uint8_t *body = data + 1;
	size_t len = size - 1;
	if ((ctl & 32) && strobe_gzip(body, len, &gz, &len) == 0)
		body = gz;
	srv_kv hdrs[3];
	size_t nh = 0;
	hdrs[nh++] = (srv_kv){"Content-Type", json ? "application/json" : "application/proto"};
	if (ctl & (32 | 64))
		hdrs[nh++] = (srv_kv){"Content-Encoding", "gzip"};
	if (ctl & 128)
		hdrs[nh++] = (srv_kv){"Accept-Encoding", "gzip"};
	srv_req r = {.srv = &srv, .url = path, .method = "POST", .hdrs = hdrs, .nhdrs = nh,
		     .body = body, .len = len, .now_ns = NOW};
	srv_handle(&r);
	check_reply(&r, json || r.status != 200);
	if (getenv("FUZZ_CONNECT_VERBOSE"))
		fprintf(stderr, "%s -> %u %.*s\n", path, r.status,
			(int)(r.outlen < 160 ? r.outlen : 160), r.out);
	free(r.out);
	free(gz);
	return 0;
}
