// SPDX-License-Identifier: Apache-2.0
/*
 * POST /api/v1/push: one pprof body (raw or gzip; folded text also works) or several as parts
 * of a multipart/form-data body, with the series labels in the query (`service_name=` and/or
 * `labels={k="v",...}`), an optional profile name (`name=`) and time (`time=`). Everything is
 * validated and decoded before the store sees it, and the store commits all of it in one
 * transaction, so a 200 means durable and an error means nothing was stored.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"
#include "strobe/codec.h"
#include "strobe/pprof_view.h"

/* The profiles of a push: slices of the request body. */
typedef struct part {
	const uint8_t *data;
	size_t len;
} part;

typedef struct parts {
	part *p;
	size_t n;
} parts;

static int add_part(void *ctx, const char *name, const uint8_t *data, size_t len)
{
	(void)name; /* any field name: every part is a profile */
	parts *ps = ctx;
	part *np = realloc(ps->p, (ps->n + 1) * sizeof(*np));
	if (!np)
		return -ENOMEM;
	ps->p = np;
	ps->p[ps->n++] = (part){data, len};
	return 0;
}

bool srv_label_name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (!n || n > max || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
			       s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.'))
			return false;
	}
	return strncmp(s, "__", 2) != 0; /* reserved, as in Prometheus */
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(((const strobe_labelpair *)a)->name, ((const strobe_labelpair *)b)->name);
}

/* The series labels of the push; replies 400 and returns -1 when they break a rule. */
static int push_labels(srv_req *r, strobe_selector *sel, strobe_labelpair **out, size_t *n)
{
	const strobe_server_config *c = &r->srv->cfg;
	const char *svc = srv_arg(r, "service_name");
	const char *ls = srv_arg(r, "labels");
	memset(sel, 0, sizeof(*sel));
	if (ls) {
		strobe_err err = {{0}};
		if (strobe_selector_parse(ls, strlen(ls), sel, &err) < 0)
			return srv_error(r, 400, "labels: %s", err.msg), -1;
		if (sel->type)
			return srv_error(r, 400, "labels: give {name=\"value\", ...} only"), -1;
	}
	size_t cnt = sel->n + (svc != NULL);
	if (cnt > c->max_labels)
		return srv_error(r, 400, "limit max_labels: %zu labels, at most %u", cnt,
				 c->max_labels),
		       -1;
	strobe_labelpair *l = calloc(cnt ? cnt : 1, sizeof(*l));
	if (!l)
		return srv_error(r, 500, "out of memory"), -1;
	size_t k = 0;
	if (svc)
		l[k++] = (strobe_labelpair){"service_name", svc};
	for (size_t i = 0; i < sel->n; i++) {
		if (sel->m[i].op != STROBE_MATCH_EQ) {
			free(l);
			return srv_error(r, 400, "labels: only name=\"value\" pairs, not matchers"), -1;
		}
		l[k++] = (strobe_labelpair){sel->m[i].name, sel->m[i].value};
	}
	qsort(l, k, sizeof(*l), cmp_label);
	bool has_svc = false;
	for (size_t i = 0; i < k; i++) {
		const char *bad = NULL;
		if (!srv_label_name_ok(l[i].name, c->max_label_name_len))
			bad = "is not a valid label name or is longer than max_label_name_length";
		else if (strlen(l[i].value) > c->max_label_value_len)
			bad = "has a value longer than max_label_value_length";
		else if (!l[i].value[0])
			bad = "has an empty value";
		else if (i && strcmp(l[i].name, l[i - 1].name) == 0)
			bad = "is given twice";
		else {
			json_t *js = json_string(l[i].value); /* NULL: not valid UTF-8 */
			if (!js)
				bad = "has a value that is not UTF-8";
			json_decref(js);
		}
		if (bad) {
			srv_error(r, 400, "label '%.128s' %s", l[i].name, bad);
			free(l);
			return -1;
		}
		has_svc |= strcmp(l[i].name, "service_name") == 0;
	}
	if (!has_svc) {
		free(l);
		return srv_error(r, 400, "the label service_name is required (service_name=NAME)"),
		       -1;
	}
	*out = l;
	*n = k;
	return 0;
}

/* The push's sample labels, sample_labels={pid="1",comm="x",...}: labels of the process that
 * made the profile, stored with its points rather than on the series. Only the names selectors
 * match on points (strobe_sample_label_name) are taken, so that nothing else silently drops
 * out of the series. Appended to rsl (a name already there keeps its value); replies 400 and
 * returns -1 when they break a rule. */
static int push_sample_labels(srv_req *r, strobe_selector *sel, strobe_labelpair *rsl,
			      size_t *nrsl)
{
	const strobe_server_config *c = &r->srv->cfg;
	const char *ls = srv_arg(r, "sample_labels");
	memset(sel, 0, sizeof(*sel));
	if (!ls)
		return 0;
	strobe_err err = {{0}};
	if (strobe_selector_parse(ls, strlen(ls), sel, &err) < 0)
		return srv_error(r, 400, "sample_labels: %s", err.msg), -1;
	if (sel->type)
		return srv_error(r, 400, "sample_labels: give {name=\"value\", ...} only"), -1;
	for (size_t i = 0; i < sel->n; i++) {
		const strobe_matcher *m = &sel->m[i];
		const char *bad = NULL;
		if (m->op != STROBE_MATCH_EQ)
			bad = "is a matcher: give name=\"value\" pairs";
		else if (!strobe_sample_label_name(m->name))
			bad = "is not a sample label (pid, tid, comm, exe, process, thread, "
			      "lock_addr, span_id, trace_id, profile_id); give it in labels";
		else if (strlen(m->value) > c->max_label_value_len)
			bad = "has a value longer than max_label_value_length";
		else {
			json_t *js = json_string(m->value); /* NULL: not valid UTF-8 */
			if (!js)
				bad = "has a value that is not UTF-8";
			json_decref(js);
		}
		if (bad)
			return srv_error(r, 400, "sample label '%.128s' %s", m->name, bad), -1;
		bool dup = !m->value[0];
		for (size_t j = 0; j < *nrsl && !dup; j++)
			dup = strcmp(rsl[j].name, m->name) == 0;
		if (!dup && *nrsl < STROBE_SAMPLE_LABELS_MAX)
			rsl[(*nrsl)++] = (strobe_labelpair){m->name, m->value};
	}
	return 0;
}

int srv_push(srv_req *r)
{
	const strobe_server_config *c = &r->srv->cfg;
	strobe_selector sel;
	strobe_labelpair *labels = NULL;
	size_t nlabels = 0;
	if (push_labels(r, &sel, &labels, &nlabels) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	/* pid, comm, exe... given as push labels (agents before they moved to the samples) go on
	 * the samples all the same: one series per service, whatever sends it. */
	strobe_labelpair rsl[STROBE_SAMPLE_LABELS_MAX];
	size_t nrsl = 0, nser = 0;
	for (size_t i = 0; i < nlabels; i++) {
		if (strobe_sample_label_name(labels[i].name) && nrsl < STROBE_SAMPLE_LABELS_MAX)
			rsl[nrsl++] = labels[i];
		else
			labels[nser++] = labels[i];
	}
	nlabels = nser;
	strobe_selector ssel;
	if (push_sample_labels(r, &ssel, rsl, &nrsl) < 0) {
		strobe_selector_free(&ssel);
		strobe_selector_free(&sel);
		free(labels);
		return 0;
	}
	/* sorted, as the store keeps them: one set, one form, one roll-up */
	qsort(rsl, nrsl, sizeof(*rsl), cmp_label);
	int64_t t = 0;
	const char *ts = srv_arg(r, "time"), *name = srv_arg(r, "name");
	strobe_err err = {{0}};
	parts ps = {0};
	strobe_profile **profs = NULL;
	strobe_pprof_view **views = NULL;
	uint8_t **raws = NULL; /* gunzipped bodies: a view points into its own */
	strobe_push_item *items = NULL;
	srv_label_groups *groups = NULL;
	size_t nprof = 0, nitems = 0, capitems = 0;
	if (ts && strobe_time_parse(ts, r->now_ns, &t, &err) < 0) {
		srv_error(r, 400, "time: %s", err.msg);
		goto out;
	}
	const char *agg = srv_arg(r, "aggregation");
	if (agg && strcmp(agg, "sum") && strcmp(agg, "average")) {
		srv_error(r, 400, "aggregation must be sum or average");
		goto out;
	}
	bool average = agg && strcmp(agg, "average") == 0;
	const char *ct = srv_header(r, "Content-Type");
	if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
		int mr = strobe_multipart_parse(ct, r->body, r->len, c->max_profiles_per_push, add_part,
						&ps, &err);
		if (mr == -E2BIG) {
			srv_error(r, 400, "limit max_profiles_per_push: more than %u profiles",
				  c->max_profiles_per_push);
			goto out;
		}
		if (mr == -ENOMEM)
			goto oom;
		if (mr < 0 || !ps.n) {
			srv_error(r, 400, "malformed multipart body: %s",
				  mr < 0 ? err.msg : "no parts");
			goto out;
		}
	} else {
		if (!r->len) {
			srv_error(r, 400, "empty body: send a pprof profile");
			goto out;
		}
		if (add_part(&ps, "", r->body, r->len) < 0)
			goto oom;
	}
	profs = calloc(ps.n, sizeof(*profs));
	views = calloc(ps.n, sizeof(*views));
	raws = calloc(ps.n, sizeof(*raws));
	groups = calloc(ps.n, sizeof(*groups));
	if (!profs || !views || !raws || !groups)
		goto oom;
	for (size_t i = 0; i < ps.n; i++) {
		const uint8_t *d = ps.p[i].data;
		size_t len = ps.p[i].len;
		uint8_t *raw = NULL;
		if (len >= 2 && d[0] == 0x1f && d[1] == 0x8b) {
			int gr = strobe_gunzip_capped(d, len, c->max_decompressed_bytes, &raw, &len,
						      NULL, NULL);
			if (gr == -E2BIG) {
				srv_error(r, 413, "limit max_decompressed_bytes: profile %zu is larger "
						  "than %zu bytes decompressed",
					  i + 1, c->max_decompressed_bytes);
				goto out;
			}
			if (gr < 0) {
				srv_error(r, 400, "profile %zu: bad gzip data", i + 1);
				goto out;
			}
			d = raw;
		}
		raws[i] = raw;
		/* The common case, a pprof without per-sample labels, goes to the store as a view:
		 * no profile model in between (strobe/pprof_view.h). Anything else, and whatever
		 * the view refuses, is decoded, and the decoder says what is wrong. */
		if (strobe_detect(d, len) == STROBE_FMT_PPROF &&
		    strobe_pprof_view_open(d, len, &views[i]) == 0 && !views[i]->simple) {
			strobe_pprof_view_free(views[i]);
			views[i] = NULL;
		}
		if (views[i]) {
			nprof++;
			if (!(groups[i].g = calloc(1, sizeof(*groups[i].g))))
				goto oom;
			groups[i].n = 1;
			if (nitems == capitems) {
				capitems = capitems ? capitems * 2 : 8;
				strobe_push_item *ni = realloc(items, capitems * sizeof(*ni));
				if (!ni)
					goto oom;
				items = ni;
			}
			items[nitems++] = (strobe_push_item){.profile = views[i]->hdr, .name = name,
							     .time_ns = t, .average = average,
							     .slabels = rsl, .nslabels = nrsl,
							     .view = views[i]};
			continue;
		}
		char nm[32];
		snprintf(nm, sizeof(nm), "profile %zu", i + 1);
		int dr = strobe_decode_profile(d, len, nm, &profs[i], &err);
		if (dr < 0) {
			srv_fail(r, dr, &err);
			goto out;
		}
		nprof++;
		/* One item per distinct set of per-sample labels (pprof.Do), each its own series. */
		if ((dr = srv_sample_groups(profs[i], c, labels, nlabels, rsl, nrsl, &groups[i],
					    &err)) < 0) {
			srv_error(r, dr == -EDQUOT ? 429 : dr == -ENOMEM ? 500 : 400, "profile %zu: %s",
				  i + 1, err.msg);
			goto out;
		}
		for (size_t g = 0; g < groups[i].n; g++) {
			if (nitems == capitems) {
				capitems = capitems ? capitems * 2 : 8;
				strobe_push_item *ni = realloc(items, capitems * sizeof(*ni));
				if (!ni)
					goto oom;
				items = ni;
			}
			const srv_label_group *gr = &groups[i].g[g];
			items[nitems++] = (strobe_push_item){
				.profile = profs[i], .name = name, .time_ns = t, .average = average,
				.labels = gr->labels, .nlabels = gr->nlabels, .slabels = gr->slabels,
				.nslabels = gr->nslabels, .samples = gr->samples,
				.nsamples = gr->nsamples};
		}
	}
	strobe_push_req rq = {r->tenant, labels, nlabels, items, nitems, r->now_ns};
	strobe_push_result res;
	int pr = strobe_store_push(r->srv->store, &rq, &res, &err);
	if (pr < 0) {
		srv_fail(r, pr, &err);
		goto out;
	}
	json_t *acc = json_array();
	for (size_t i = 0; acc && i < res.n; i++)
		json_array_append_new(acc, json_pack("{s:s, s:I, s:i, s:I}", "type", res.acc[i].type,
						     "time", (json_int_t)res.acc[i].time_ns,
						     "stacks", (int)res.acc[i].stacks, "total",
						     (json_int_t)res.acc[i].total));
	strobe_push_result_free(&res);
	uint64_t nsamples = 0;
	for (size_t i = 0; i < nprof; i++)
		nsamples += views[i] ? views[i]->nsamples : strobe_nsamples(profs[i]);
	srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_PUSH, nprof, r->len, nsamples);
	json_t *j = acc ? json_pack("{s:i, s:o}", "profiles", (int)nprof, "accepted", acc) : NULL;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		goto oom;
	srv_reply(r, 200, "application/json", s, strlen(s));
	goto out;
oom:
	srv_error(r, 500, "out of memory");
out:
	for (size_t i = 0; profs && i < ps.n; i++)
		strobe_profile_free(profs[i]);
	for (size_t i = 0; views && i < ps.n; i++)
		strobe_pprof_view_free(views[i]);
	for (size_t i = 0; raws && i < ps.n; i++)
		free(raws[i]);
	free(views);
	free(raws);
	for (size_t i = 0; groups && i < ps.n; i++)
		srv_label_groups_free(&groups[i]);
	free(groups);
	free(ps.p);
	free(profs);
	free(items);
	free(labels);
	strobe_selector_free(&ssel);
	strobe_selector_free(&sel);
	return 0;
}
