// SPDX-License-Identifier: Apache-2.0
/*
 * POST /v1development/profiles: OpenTelemetry profiles over OTLP/HTTP (an exporter's
 * ExportProfilesServiceRequest, binary protobuf or OTLP/JSON, gzip allowed), answered with an
 * ExportProfilesServiceResponse in the request's encoding.
 *
 * The request goes through the same doors as a push: the tenant and token checks of the route
 * table, the in-flight limits of admission (server/http.c), the series label rules of the push
 * (srv_series_labels_check), the split of a profile by its sample labels (srv_sample_groups) and
 * the store's one-transaction push. lib/otlp.c turns the request into series (resource and
 * scope attributes as labels); each series is stored on its own, so a series the rules refuse
 * (a label too long, the series limit) is counted in partial_success.rejected_profiles while the
 * others are kept, as OTLP asks. A request that cannot be decoded at all is a 400; a store
 * failure that a retry may cure (disk full, I/O) is the 5xx of the push, after which the
 * exporter retries the whole request.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "otlp_profiles_service.pb-c.h"
#include "server_impl.h"
#include "strobe/codec.h"
#include "strobe/otlp.h"
#include "strobe/pbjson.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
	otlp_resp;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
	otlp_partial;

/* JSON when the Content-Type says so; any other type (application/x-protobuf, none, curl's
 * default form type) is read as protobuf, and a body that is not one gets its 400 there. */
static bool is_json(const char *ct)
{
	return ct && strncasecmp(ct, "application/json", 16) == 0;
}

/* The answer: an empty response, or partial_success with the count and the first reason. */
static int reply(srv_req *r, bool json, int64_t rejected, const char *why)
{
	otlp_resp resp;
	otlp_partial ps;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__init(
		&resp);
	opentelemetry__proto__collector__profiles__v1development__export_profiles_partial_success__init(
		&ps);
	if (rejected) {
		ps.rejected_profiles = rejected;
		ps.error_message = (char *)why;
		resp.partial_success = &ps;
	}
	char *buf;
	size_t n;
	if (json) { /* {} or {"partialSuccess":{"rejectedProfiles":"1",...}} (int64 as a string) */
		if (strobe_pbjson_encode(&resp.base, &buf, &n) < 0)
			return -ENOMEM;
		srv_reply(r, 200, "application/json", buf, n);
		return 0;
	}
	n = protobuf_c_message_get_packed_size(&resp.base);
	if (!(buf = malloc(n ? n : 1)))
		return -ENOMEM;
	protobuf_c_message_pack(&resp.base, (uint8_t *)buf);
	srv_reply(r, 200, "application/x-protobuf", buf, n);
	return 0;
}

/* One series into the store, as a push of one profile: 0, -EINVAL/-EDQUOT (refused: counted,
 * why says it), or another -errno that fails the request (after its reply). */
static int store_series(srv_req *r, const strobe_otlp_series *se, char *why, size_t whylen,
			uint64_t *nsamples)
{
	const strobe_server_config *c = &r->srv->cfg;
	strobe_labelpair *l = calloc(se->nlabels ? se->nlabels : 1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	size_t k = 0;
	/* pid, comm... among the resource's attributes ride on the samples, as in the push */
	strobe_labelpair rsl[STROBE_SAMPLE_LABELS_MAX];
	size_t nrsl = 0;
	for (size_t i = 0; i < se->nlabels; i++) {
		strobe_labelpair lp = {se->labels[i].name, se->labels[i].value};
		if (strobe_sample_label_name(lp.name)) {
			if (nrsl < STROBE_SAMPLE_LABELS_MAX)
				rsl[nrsl++] = lp;
		} else {
			l[k++] = lp;
		}
	}
	int rc = srv_series_labels_check(c, l, k, why, whylen);
	srv_label_groups g = {0};
	strobe_push_item *items = NULL;
	strobe_err err = {{0}};
	if (rc == 0 && (rc = srv_sample_groups(se->profile, c, l, k, rsl, nrsl, &g, &err)) < 0)
		snprintf(why, whylen, "%s", err.msg);
	if (rc == 0 && !(items = calloc(g.n ? g.n : 1, sizeof(*items))))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < g.n; i++)
		items[i] = (strobe_push_item){.profile = se->profile, .labels = g.g[i].labels,
					      .nlabels = g.g[i].nlabels, .slabels = g.g[i].slabels,
					      .nslabels = g.g[i].nslabels, .samples = g.g[i].samples,
					      .nsamples = g.g[i].nsamples};
	if (rc == 0) {
		strobe_push_req rq = {r->tenant, l, k, items, g.n, r->now_ns};
		strobe_push_result res;
		rc = strobe_store_push(r->srv->store, &rq, &res, &err);
		if (rc == 0) {
			strobe_push_result_free(&res);
			*nsamples += strobe_nsamples(se->profile);
		} else if (rc == -EINVAL || rc == -EDQUOT || rc == -ERANGE) {
			snprintf(why, whylen, "%s", err.msg);
		} else {
			srv_fail(r, rc, &err);
			rc = -EIO; /* replied */
		}
	}
	free(items);
	srv_label_groups_free(&g);
	free(l);
	return rc;
}

int srv_otlp_profiles(srv_req *r)
{
	const strobe_server_config *c = &r->srv->cfg;
	const char *ct = srv_header(r, "Content-Type");
	const char *ce = srv_header(r, "Content-Encoding");
	bool json = is_json(ct);
	const uint8_t *body = r->body;
	size_t len = r->len;
	uint8_t *plain = NULL;
	strobe_err err = {{0}};
	if ((ce && strcasecmp(ce, "gzip") == 0) || (len >= 2 && body[0] == 0x1f && body[1] == 0x8b)) {
		int gr = strobe_gunzip_capped(body, len, c->max_decompressed_bytes, &plain, &len,
					      "the body", &err);
		if (gr == -E2BIG)
			return srv_error(r, 413, "limit max_decompressed_bytes: the body is larger "
						 "than %zu bytes decompressed",
					 c->max_decompressed_bytes);
		if (gr < 0)
			return srv_error(r, 400, "Content-Encoding gzip: %s", err.msg);
		body = plain;
	} else if (ce && strcasecmp(ce, "identity") != 0) {
		return srv_error(r, 415, "Content-Encoding %s: send gzip or nothing", ce);
	}
	strobe_otlp_limits lim = {.max_profiles = c->max_profiles_per_push,
				  .max_labels = c->max_labels};
	strobe_otlp_batch b;
	int dr = json ? strobe_otlp_decode_json((const char *)body, len, &lim, &b, &err)
		      : strobe_otlp_decode(body, len, &lim, &b, &err);
	free(plain);
	if (dr < 0)
		return dr == -ENOMEM ? srv_error(r, 500, "out of memory")
				     : srv_error(r, dr == -ENOTSUP ? 415 : 400, "%s", err.msg);
	int64_t rejected = 0;
	uint32_t stored = 0;
	uint64_t nsamples = 0;
	char why[640] = "", first[640] = "";
	int rc = 0;
	for (size_t i = 0; i < b.n; i++) {
		rc = store_series(r, &b.s[i], why, sizeof(why), &nsamples);
		if (rc == 0) {
			stored += b.s[i].nprofiles;
			continue;
		}
		if (rc != -EINVAL && rc != -EDQUOT && rc != -ERANGE)
			break;
		rejected += b.s[i].nprofiles;
		if (!first[0])
			snprintf(first, sizeof(first), "%s", why);
		rc = 0;
	}
	strobe_otlp_batch_free(&b);
	if (rc == -ENOMEM)
		return srv_error(r, 500, "out of memory");
	if (rc < 0)
		return 0; /* replied */
	if (stored)
		srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_OTLP, stored, r->len,
				     nsamples);
	if (reply(r, json, rejected, first) < 0)
		return srv_error(r, 500, "out of memory");
	return 0;
}
