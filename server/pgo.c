// SPDX-License-Identifier: Apache-2.0
/*
 * GET /api/v1/pgo?query=&from=&to=&format=go|autofdo|bolt: the merged CPU profile of a selector
 * over a window as a PGO input (docs/pgo.md): Go's default.pgo, LLVM AutoFDO text or BOLT's
 * no-LBR fdata, written by the same lib/ writers as `strobe pgo`.
 *
 * A compiler takes an empty or useless profile without complaint, so every case where the file
 * would guide nothing is an error that says why: 404 for a window with no samples, 400 for a
 * profile type that is not CPU time, 422 for frames without names, lines or start lines (or, for
 * BOLT, addresses in no executable uploaded to the debug-info store).
 *
 * BOLT names addresses by the executable's symbol table: the server reads it from the tenant's
 * debug-info store (strobe debuginfo uploads it by build ID), at most BOLT_BINARIES_MAX of the
 * profile's mappings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_impl.h"
#include "strobe/bolt_syms.h"
#include "strobe/pgo.h"

#define PGO_OUT_MAX ((size_t)256 << 20)
#define BOLT_BINARIES_MAX 16

typedef struct bins {
	strobe_bolt_syms *s[BOLT_BINARIES_MAX];
	size_t n;
} bins;

static int bins_resolve(void *ctx, const strobe_profile *p, const strobe_location *loc,
			const char **sym, uint64_t *off)
{
	bins *b = ctx;
	for (size_t i = 0; i < b->n; i++) {
		int r = strobe_bolt_syms_resolve(b->s[i], p, loc, sym, off);
		if (r)
			return r;
	}
	return 0;
}

/* The tenant's uploaded executables (else debug files, which keep the symbol table) for the
 * profile's mappings, by build ID. */
static void bins_open(srv_req *r, const strobe_profile *p, bins *b)
{
	static const char *const roles[] = {"executable", "debuginfo"};
	for (uint32_t m = 1; m < p->mappings.n && b->n < BOLT_BINARIES_MAX; m++) {
		const char *bid = strobe_str(p, strobe_mapping_get(p, m)->build_id);
		size_t bl = strlen(bid);
		if (bl < 2 || bl > 128 || strspn(bid, "0123456789abcdef") != bl)
			continue; /* the path is built from it: only a plain build ID */
		bool dup = false;
		for (size_t i = 0; i < b->n; i++)
			dup |= strcmp(strobe_bolt_syms_build_id(b->s[i]), bid) == 0;
		for (size_t k = 0; k < 2 && !dup; k++) {
			char path[4096];
			strobe_err err = {{0}};
			if (srv_debuginfo_path(r->srv, r->tenant, bid, roles[k], path, sizeof path) == 0 &&
			    access(path, R_OK) == 0 &&
			    (b->s[b->n] = strobe_bolt_syms_open(path, &err))) {
				b->n++;
				break;
			}
		}
	}
}

int srv_pgo(srv_req *r)
{
	const char *fmt = srv_arg(r, "format");
	strobe_pgo_format f = strobe_pgo_format_parse(fmt);
	if (f == STROBE_PGO_NONE)
		return srv_error(r, 400, "format must be go, autofdo or bolt%s",
				 fmt ? "" : " (it is required)");
	strobe_selector sel;
	int64_t from, to;
	if (srv_selector(r, "query", true, &sel) < 0)
		return 0;
	if (!sel.type) {
		strobe_selector_free(&sel);
		return srv_error(r, 400, "query: the selector needs a profile type, a CPU one such "
					 "as process_cpu:cpu:nanoseconds:cpu:nanoseconds");
	}
	if (srv_window(r, "from", "to", &from, &to) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	strobe_profile *p = NULL;
	int rc = strobe_store_query(r->srv->store, &q, &p, &err);
	strobe_selector_free(&sel);
	if (rc < 0)
		return srv_fail(r, rc, &err);
	if (srv_name_late(r, &p) < 0) {
		strobe_profile_free(p);
		return 0;
	}
	strobe_buf b;
	strobe_buf_init(&b, PGO_OUT_MAX);
	bins bs = {.n = 0};
	int t = strobe_pgo_type(p, &err);
	rc = t;
	if (rc >= 0) {
		if (f == STROBE_PGO_GO)
			rc = strobe_pgo_go_write(p, t, NULL, &b, NULL, &err);
		else if (f == STROBE_PGO_AUTOFDO)
			rc = strobe_autofdo_write(p, t, &b, NULL, &err);
		else {
			bins_open(r, p, &bs);
			rc = bs.n ? strobe_bolt_fdata_write(p, t, bins_resolve, &bs, &b, NULL, &err)
				  : strobe_errf(&err, -ENODATA,
						"BOLT names addresses by the executable's symbol table, "
						"and none of the profile's binaries is in the debug-info "
						"store: upload it with strobe debuginfo FILE");
		}
	}
	for (size_t i = 0; i < bs.n; i++)
		strobe_bolt_syms_free(bs.s[i]);
	strobe_profile_free(p);
	if (rc < 0) {
		strobe_buf_free(&b);
		unsigned st = rc == -EINVAL ? 400 : rc == -ENODATA && t < 0 ? 404 : rc == -ENOMEM ? 503
			      : rc == -E2BIG ? 413 : 422;
		return srv_error(r, st, "%s", err.msg);
	}
	size_t len;
	char *body = strobe_buf_take(&b, &len);
	srv_reply(r, 200, f == STROBE_PGO_GO ? "application/octet-stream" : "text/plain; charset=utf-8",
		  body, len);
	return 0;
}
