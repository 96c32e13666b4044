/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the server's endpoint files share: the request as the router hands it over (tenant
 * resolved, body read within the limit), and the reply helpers. Each endpoint family lives in
 * its own file (push.c, read.c, labels.c) and is called from the route table in http.c.
 */
#ifndef STROBE_SERVER_IMPL_H
#define STROBE_SERVER_IMPL_H

#include <microhttpd.h>
#include <stdio.h>

#include "strobe/server.h"

struct strobe_server {
	struct MHD_Daemon *d;
	strobe_server_config cfg; /* shallow copy; the caller's strings outlive the server */
	strobe_store *store;
	uint16_t port;
};

typedef struct srv_req {
	strobe_server *srv;
	struct MHD_Connection *c;
	const char *url, *method, *tenant;
	const uint8_t *body;
	size_t len;
	int64_t now_ns;
	/* The reply, filled by an endpoint: status, content type, body (malloc'd). */
	unsigned status;
	const char *ctype;
	char *out;
	size_t outlen;
	const char *etag, *cache; /* ETag and Cache-Control headers when set (static files) */
} srv_req;

/* A query argument, or NULL. */
const char *srv_arg(srv_req *r, const char *name);
/* A JSON error reply {"error": msg, "status": N}; returns 0 so endpoints can `return`. */
int srv_error(srv_req *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Maps a store/codec error code to an HTTP status and replies with err's message. */
int srv_fail(srv_req *r, int code, const strobe_err *err);
/* Sets the reply body (takes ownership of buf). */
void srv_reply(srv_req *r, unsigned status, const char *ctype, char *buf, size_t len);
/* Reads from/to (defaults now-1h, now) with the names given; replies 400 and returns -1 when
 * bad. */
int srv_window(srv_req *r, const char *fname, const char *tname, int64_t *from, int64_t *to);
/* Parses a selector argument; replies 400 and returns -1 when bad or missing. */
int srv_selector(srv_req *r, const char *name, bool required, strobe_selector *sel);

int srv_push(srv_req *r);
int strobe_pyroscope_ingest(srv_req *r); /* POST /ingest, server/ingest.c */
int srv_query(srv_req *r);
int srv_diff(srv_req *r);
int srv_range(srv_req *r);
int srv_labels(srv_req *r);
int srv_label_values(srv_req *r, const char *name);
int srv_profile_types(srv_req *r);
/* GET / and /ui/...: the web UI's embedded files (server/ui.c); false when the URL is not one. */
bool srv_ui(srv_req *r);

#endif
