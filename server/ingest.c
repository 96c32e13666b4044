// SPDX-License-Identifier: Apache-2.0
/*
 * POST /ingest, the Pyroscope protocol: the HTTP side of server/pyroscope.c. The request's query
 * parameters, Content-Type and body (gunzipped first when Content-Encoding says gzip) go to the
 * parser, which returns one single-type profile per sample type with its labels; they are stored
 * in one transaction through the same strobe_store_push as the native API, so durability, limits
 * and tenants are the same, and a refused upload stores nothing.
 *
 * Naming: the store names the series from the profile's own sample and period types, with the
 * profile name the parser derived (process_cpu, memory, mutex, ...), so a profile pushed here
 * and the same profile pushed to /api/v1/push land in the same series.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pyroscope.h"
#include "strobe/codec.h"
#include "server_impl.h"

int srv_pyroscope_ingest(srv_req *r)
{
	const strobe_server_config *c = &r->srv->cfg;
	const char *ctype = srv_header(r, "Content-Type");
	const char *cenc = srv_header(r, "Content-Encoding");
	const uint8_t *body = r->body;
	size_t len = r->len;
	uint8_t *plain = NULL;
	strobe_err err = {{0}};
	if (cenc && strcmp(cenc, "gzip") == 0) {
		int gr = strobe_gunzip_capped(body, len, c->max_decompressed_bytes, &plain, &len,
					      "the body", &err);
		if (gr < 0) {
			return gr == -E2BIG ? srv_error(r, 413,
							"limit max_decompressed_bytes: the body is "
							"larger than %zu bytes decompressed",
							c->max_decompressed_bytes)
					    : srv_error(r, 400, "Content-Encoding gzip: %s", err.msg);
		}
		body = plain;
	}
	srv_pyro_limits lim = {
		.max_body = c->max_body_bytes,
		.max_decompressed = c->max_decompressed_bytes,
		.max_labels = c->max_labels,
		.max_label_name = c->max_label_name_len,
		.max_label_value = c->max_label_value_len,
	};
	srv_pyro_request rq = {
		.params = r->args, .nparams = r->nargs, .content_type = ctype, .body = body,
		.body_len = len, .now_ns = r->now_ns, .limits = &lim};
	srv_pyro_batch b = {0};
	int status = 0;
	int pr = srv_pyro_parse(&rq, &b, &status, &err);
	free(plain);
	if (pr < 0)
		return srv_error(r, status ? (unsigned)status : 400, "%s", err.msg);

	/* Every item of one upload has the same series labels; each distinct set of per-sample
	 * labels (pprof.Do) adds its own, as its own item. One store transaction for all. */
	strobe_push_item *items = NULL;
	char (*names)[STROBE_PTYPE_MAX] = calloc(b.nitems ? b.nitems : 1, sizeof(*names));
	srv_label_groups *groups = calloc(b.nitems ? b.nitems : 1, sizeof(*groups));
	uint32_t nbase = b.nitems ? b.items[0].nlabels : 0;
	strobe_labelpair *labels = calloc(nbase ? nbase : 1, sizeof(*labels));
	size_t nitems = 0, capitems = 0;
	int rc = 0;
	if (!names || !groups || !labels) {
		rc = srv_error(r, 500, "out of memory");
		goto out;
	}
	/* pid, comm... in the application name's labels (app{pid="1"}) go on the samples: one
	 * series per service, as on the push API. */
	strobe_labelpair rsl[STROBE_SAMPLE_LABELS_MAX];
	size_t nrsl = 0;
	uint32_t nser = 0;
	for (uint32_t l = 0; l < nbase; l++) {
		strobe_labelpair lp = {b.items[0].labels[l].name, b.items[0].labels[l].value};
		if (strobe_sample_label_name(lp.name) && nrsl < STROBE_SAMPLE_LABELS_MAX)
			rsl[nrsl++] = lp;
		else
			labels[nser++] = lp;
	}
	nbase = nser;
	for (size_t i = 0; i < b.nitems; i++) {
		const srv_pyro_item *it = &b.items[i];
		if (!it->profile)
			continue;
		size_t plen = strcspn(it->type, ":");
		memcpy(names[i], it->type, plen);
		names[i][plen] = 0;
		int gr = srv_sample_groups(it->profile, c, labels, nbase, rsl, nrsl, &groups[i], &err);
		if (gr < 0) {
			rc = srv_error(r, gr == -EDQUOT ? 429 : gr == -ENOMEM ? 500 : 400, "%s",
				       err.msg);
			goto out;
		}
		for (size_t g = 0; g < groups[i].n; g++) {
			if (nitems == capitems) {
				capitems = capitems ? capitems * 2 : 8;
				strobe_push_item *ni = realloc(items, capitems * sizeof(*ni));
				if (!ni) {
					rc = srv_error(r, 500, "out of memory");
					goto out;
				}
				items = ni;
			}
			const srv_label_group *lg = &groups[i].g[g];
			items[nitems++] = (strobe_push_item){
				.profile = it->profile, .name = names[i], .time_ns = it->from_ns,
				.average = it->aggregation == STROBE_AGG_AVERAGE, .labels = lg->labels,
				.nlabels = lg->nlabels, .slabels = lg->slabels, .nslabels = lg->nslabels,
				.samples = lg->samples, .nsamples = lg->nsamples};
		}
	}
	json_t *acc = json_array();
	if (nitems) {
		strobe_push_req prq = {r->tenant, labels, nbase, items, nitems, r->now_ns};
		strobe_push_result res;
		int sr = strobe_store_push(r->srv->store, &prq, &res, &err);
		if (sr < 0) {
			json_decref(acc);
			rc = srv_fail(r, sr, &err);
			goto out;
		}
		for (size_t i = 0; acc && i < res.n; i++)
			json_array_append_new(acc, json_pack("{s:s, s:I, s:I}", "type",
							     res.acc[i].type, "time",
							     (json_int_t)res.acc[i].time_ns, "total",
							     (json_int_t)res.acc[i].total));
		strobe_push_result_free(&res);
		/* One upload is one profile; Pyroscope's parser split it per sample type, and
		 * each part has the upload's samples. */
		srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_INGEST, 1, r->len,
				     strobe_nsamples(items[0].profile));
	}
	json_t *j = acc ? json_pack("{s:o}", "accepted", acc) : NULL;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		rc = srv_error(r, 500, "out of memory");
	else
		srv_reply(r, 200, "application/json", s, strlen(s));
out:
	for (size_t i = 0; groups && i < b.nitems; i++)
		srv_label_groups_free(&groups[i]);
	free(groups);
	free(items);
	free(names);
	free(labels);
	srv_pyro_batch_free(&b);
	return rc;
}
