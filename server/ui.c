// SPDX-License-Identifier: Apache-2.0
/*
 * The web UI's files, built into the binary (scripts/embed_ui.sh turns ui/ into a C table at
 * build time), served at / (index.html) and /ui/NAME with their content type and an ETag: the
 * browser revalidates each load (Cache-Control: no-cache) and gets a body-less 304 when its
 * copy is current, so a new build is picked up at once and an unchanged one costs no bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

typedef struct ui_asset {
	const char *path, *ctype, *etag;
	const unsigned char *data;
	size_t len;
} ui_asset;

#include "ui_assets.inc"

bool srv_ui(srv_req *r)
{
	const char *u = strcmp(r->url, "/") == 0 ? "/ui/index.html" : r->url;
	if (strncmp(u, "/ui/", 4) != 0)
		return false;
	const ui_asset *a = NULL;
	for (size_t i = 0; i < sizeof(ui_assets) / sizeof(*ui_assets); i++)
		if (strcmp(ui_assets[i].path, u) == 0)
			a = &ui_assets[i];
	if (!a) {
		srv_error(r, 404, "no UI file %s", r->url);
		return true;
	}
	r->etag = a->etag;
	r->cache = "no-cache";
	const char *inm = srv_header(r, "If-None-Match");
	bool fresh = inm && strstr(inm, a->etag);
	/* srv_reply takes a malloc'd body; the files are small, so a copy per request is cheap. */
	size_t n = fresh ? 0 : a->len;
	char *b = malloc(n ? n : 1);
	if (b && n)
		memcpy(b, a->data, n);
	srv_reply(r, fresh ? 304 : 200, a->ctype, b, n);
	return true;
}
