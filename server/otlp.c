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
 * scope attributes as labels); a series without sample attributes comes as a pprof view
 * (lib/otlp_view.c), mapped by the store straight into its ids with no profile model between.
 * All series of a request go into ONE store push: a request is stored whole or not at all. A
 * series the rules refuse (a label too long, the series limit) refuses the request with a 400
 * (429 for a quota) that names the series, rather than OTLP's partial success, which would
 * leave the exporter unable to tell what to resend. A request that cannot be decoded at all is
 * a 400; a store failure that a retry may cure (disk full, I/O) is the 5xx of the push, after
 * which the exporter retries the whole request, which stores nothing twice.
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
#include "strobe/pprof_view.h"

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

static int cmp_lp(const void *a, const void *b)
{
	return strcmp(((const strobe_labelpair *)a)->name, ((const strobe_labelpair *)b)->name);
}

/* A request's series as the items of one push. Each item carries its series' whole label set
 * (the push's request labels are empty), so series with different labels commit together. */
typedef struct opush {
	srv_req *r;
	strobe_labelpair **labels; /* per series: its series labels, sorted */
	strobe_labelpair (*rsl)[STROBE_SAMPLE_LABELS_MAX]; /* per series: its sample labels */
	srv_label_groups *groups;  /* per series (model series split by sample labels) */
	strobe_labelpair **owned;  /* per item: merged labels to free, or NULL */
	strobe_push_item *items;
	size_t nitems, cap, nseries;
	uint64_t nsamples;
} opush;

static void opush_free(opush *o)
{
	for (size_t i = 0; i < o->nseries; i++) {
		if (o->labels)
			free(o->labels[i]);
		if (o->groups)
			srv_label_groups_free(&o->groups[i]);
	}
	for (size_t i = 0; o->owned && i < o->nitems; i++)
		free(o->owned[i]);
	free(o->labels);
	free(o->rsl);
	free(o->groups);
	free(o->owned);
	free(o->items);
}

static int opush_item(opush *o, strobe_push_item it, strobe_labelpair *owned)
{
	if (o->nitems == o->cap) {
		size_t nc = o->cap ? 2 * o->cap : 8;
		strobe_push_item *ni = realloc(o->items, nc * sizeof(*ni));
		strobe_labelpair **no = ni ? realloc(o->owned, nc * sizeof(*no)) : NULL;
		if (ni)
			o->items = ni;
		if (!no) {
			free(owned);
			return -ENOMEM;
		}
		o->owned = no;
		o->cap = nc;
	}
	o->owned[o->nitems] = owned;
	o->items[o->nitems++] = it;
	return 0;
}

/* Series i into items: its labels split (pid, comm... among the resource's attributes ride on
 * the samples, as in the push) and checked. 0, -EINVAL/-EDQUOT with why, -ENOMEM. */
static int opush_series(opush *o, size_t i, const strobe_otlp_series *se, char *why,
			size_t whylen)
{
	const strobe_server_config *c = &o->r->srv->cfg;
	strobe_labelpair *l = o->labels[i] = calloc(se->nlabels ? se->nlabels : 1, sizeof(*l));
	strobe_labelpair *rsl = o->rsl[i];
	if (!l)
		return -ENOMEM;
	size_t k = 0, nrsl = 0;
	for (size_t j = 0; j < se->nlabels; j++) {
		strobe_labelpair lp = {se->labels[j].name, se->labels[j].value};
		if (strobe_sample_label_name(lp.name)) {
			if (nrsl < STROBE_SAMPLE_LABELS_MAX)
				rsl[nrsl++] = lp;
		} else {
			l[k++] = lp;
		}
	}
	int rc = srv_series_labels_check(c, l, k, why, whylen);
	if (rc < 0)
		return rc;
	if (se->view) { /* the fast path: no sample labels, straight into the store's ids */
		o->nsamples += se->view->nsamples;
		return opush_item(o, (strobe_push_item){.profile = se->view->hdr, .labels = l,
						       .nlabels = k, .slabels = rsl,
						       .nslabels = nrsl, .view = se->view},
				  NULL);
	}
	strobe_err err = {{0}};
	srv_label_groups *g = &o->groups[i];
	if ((rc = srv_sample_groups(se->profile, c, l, k, rsl, nrsl, g, &err)) < 0) {
		snprintf(why, whylen, "%s", err.msg);
		return rc;
	}
	o->nsamples += strobe_nsamples(se->profile);
	for (size_t j = 0; j < g->n; j++) {
		const srv_label_group *gr = &g->g[j];
		strobe_labelpair *m = NULL;
		const strobe_labelpair *il = l;
		size_t nl = k;
		if (gr->nlabels) { /* the series' labels and the group's (no name in both) */
			if (!(m = malloc((k + gr->nlabels) * sizeof(*m))))
				return -ENOMEM;
			memcpy(m, l, k * sizeof(*m));
			memcpy(m + k, gr->labels, gr->nlabels * sizeof(*m));
			qsort(m, k + gr->nlabels, sizeof(*m), cmp_lp);
			il = m;
			nl = k + gr->nlabels;
		}
		if (opush_item(o, (strobe_push_item){.profile = se->profile, .labels = il,
						     .nlabels = nl, .slabels = gr->slabels,
						     .nslabels = gr->nslabels, .samples = gr->samples,
						     .nsamples = gr->nsamples},
			       m) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The series labels of se, for an error message: {service_name="a", ...}, cut short. */
static void series_name(const strobe_otlp_series *se, char *o, size_t n)
{
	size_t w = (size_t)snprintf(o, n, "{");
	for (size_t i = 0; i < se->nlabels && w < n; i++)
		w += (size_t)snprintf(o + w, n - w, "%s%.64s=\"%.64s\"", i ? ", " : "",
				      se->labels[i].name, se->labels[i].value);
	if (w < n)
		snprintf(o + w, n - w, "}");
}

/* The whole request in one push: every series checked and decoded first, then one store
 * transaction, so that a request is stored whole or not at all. A retry of a refused request
 * (after a 5xx) then cannot store its first series twice, and a 4xx leaves nothing half
 * stored. 0 after the reply was sent for an error, 1 when stored (*nprof profiles), -ENOMEM. */
static int store_batch(srv_req *r, const strobe_otlp_batch *b, uint64_t *nsamples)
{
	opush o = {.r = r, .nseries = b->n};
	o.labels = calloc(b->n ? b->n : 1, sizeof(*o.labels));
	o.rsl = calloc(b->n ? b->n : 1, sizeof(*o.rsl));
	o.groups = calloc(b->n ? b->n : 1, sizeof(*o.groups));
	int rc = o.labels && o.rsl && o.groups ? 0 : -ENOMEM;
	char why[640] = "";
	for (size_t i = 0; rc == 0 && i < b->n; i++) {
		if ((rc = opush_series(&o, i, &b->s[i], why, sizeof(why))) == -ENOMEM)
			break;
		if (rc < 0) {
			char nm[300];
			series_name(&b->s[i], nm, sizeof(nm));
			srv_error(r, rc == -EDQUOT ? 429 : 400,
				  "series %zu of %zu %s: %s; nothing of the request was stored", i + 1,
				  b->n, nm, why);
			rc = 0;
			goto out;
		}
	}
	if (rc == 0) {
		strobe_err err = {{0}};
		strobe_push_req rq = {r->tenant, NULL, 0, o.items, o.nitems, r->now_ns};
		strobe_push_result res;
		int pr = strobe_store_push(r->srv->store, &rq, &res, &err);
		if (pr == 0) {
			strobe_push_result_free(&res);
			*nsamples = o.nsamples;
			rc = 1;
		} else if (pr == -ENOMEM) {
			rc = -ENOMEM;
		} else {
			if (pr == -EINVAL || pr == -EDQUOT || pr == -ERANGE) {
				/* the store's reason, and what became of the request */
				size_t l = strnlen(err.msg, sizeof(err.msg) - 40);
				snprintf(err.msg + l, sizeof(err.msg) - l,
					 "; nothing of the request was stored");
			}
			srv_fail(r, pr, &err);
		}
	}
out:
	opush_free(&o);
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
				  .max_labels = c->max_labels, .views = true};
	strobe_otlp_batch b;
	int dr = json ? strobe_otlp_decode_json((const char *)body, len, &lim, &b, &err)
		      : strobe_otlp_decode(body, len, &lim, &b, &err);
	free(plain);
	if (dr < 0)
		return dr == -ENOMEM ? srv_error(r, 500, "out of memory")
				     : srv_error(r, dr == -ENOTSUP ? 415 : 400, "%s", err.msg);
	uint64_t nsamples = 0;
	int rc = b.n ? store_batch(r, &b, &nsamples) : 1;
	uint32_t stored = b.nprofiles;
	strobe_otlp_batch_free(&b);
	if (rc == -ENOMEM)
		return srv_error(r, 500, "out of memory");
	if (rc == 0)
		return 0; /* refused, replied */
	if (stored)
		srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_OTLP, stored, r->len,
				     nsamples);
	if (reply(r, json, 0, NULL) < 0)
		return srv_error(r, 500, "out of memory");
	return 0;
}
