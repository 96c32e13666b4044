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

/* Series labels (sorted by name) as every ingest path accepts them: valid names, values not
 * empty, not too long and UTF-8, no name twice, service_name among them. 0, or -EINVAL with the
 * reason in why. Shared by the push and OTLP (server/otlp.c). */
int srv_series_labels_check(const strobe_server_config *c, const strobe_labelpair *l, size_t k,
			    char *why, size_t whylen)
{
	bool has_svc = false;
	if (k > c->max_labels) {
		snprintf(why, whylen, "limit max_labels: %zu labels, at most %u", k, c->max_labels);
		return -EINVAL;
	}
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
			snprintf(why, whylen, "label '%.128s' %s", l[i].name, bad);
			return -EINVAL;
		}
		has_svc |= strcmp(l[i].name, "service_name") == 0;
	}
	if (!has_svc) {
		snprintf(why, whylen, "the label service_name is required (service_name=NAME)");
		return -EINVAL;
	}
	return 0;
}

/* Sorts the series labels and checks them (srv_series_labels_check); replies 400 and returns
 * -1 when one breaks a rule. For push.v1 (srv_push_series). */
static int check_labels(srv_req *r, strobe_labelpair *l, size_t k)
{
	qsort(l, k, sizeof(*l), cmp_label);
	char why[256];
	if (srv_series_labels_check(&r->srv->cfg, l, k, why, sizeof(why)) < 0)
		return srv_error(r, 400, "%s", why), -1;
	return 0;
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
	if (check_labels(r, l, k) < 0) {
		free(l);
		return -1;
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

/* One push while it is answered: the labels, the bodies and what each became (a view straight
 * into the store, or a decoded profile split by its sample labels), and the store's items. */
typedef struct push_req {
	srv_req *r;
	strobe_selector sel, ssel;
	strobe_labelpair *labels;           /* series labels (malloc'd) */
	size_t nlabels;
	strobe_labelpair rsl[STROBE_SAMPLE_LABELS_MAX]; /* the push's sample labels, sorted */
	size_t nrsl;
	const char *name;
	int64_t t;
	bool average;
	parts ps;
	strobe_profile **profs;
	strobe_pprof_view **views;
	uint8_t **raws; /* gunzipped bodies: a view points into its own */
	srv_label_groups *groups;
	strobe_push_item *items;
	size_t nprof, nitems, capitems;
} push_req;

static void push_req_free(push_req *q)
{
	for (size_t i = 0; q->profs && i < q->ps.n; i++)
		strobe_profile_free(q->profs[i]);
	for (size_t i = 0; q->views && i < q->ps.n; i++)
		strobe_pprof_view_free(q->views[i]);
	for (size_t i = 0; q->raws && i < q->ps.n; i++)
		free(q->raws[i]);
	for (size_t i = 0; q->groups && i < q->ps.n; i++)
		srv_label_groups_free(&q->groups[i]);
	free(q->views);
	free(q->raws);
	free(q->groups);
	free(q->ps.p);
	free(q->profs);
	free(q->items);
	free(q->labels);
	strobe_selector_free(&q->ssel);
	strobe_selector_free(&q->sel);
}

/* The series labels and the sample labels, from the query string; -1 after an error reply.
 * pid, comm, exe... given as push labels (agents before they moved to the samples) go on the
 * samples all the same: one series per service, whatever sends it. */
static int push_split_labels(push_req *q)
{
	if (push_labels(q->r, &q->sel, &q->labels, &q->nlabels) < 0)
		return -1;
	size_t nser = 0;
	for (size_t i = 0; i < q->nlabels; i++) {
		if (strobe_sample_label_name(q->labels[i].name) && q->nrsl < STROBE_SAMPLE_LABELS_MAX)
			q->rsl[q->nrsl++] = q->labels[i];
		else
			q->labels[nser++] = q->labels[i];
	}
	q->nlabels = nser;
	if (push_sample_labels(q->r, &q->ssel, q->rsl, &q->nrsl) < 0)
		return -1;
	/* sorted, as the store keeps them: one set, one form, one roll-up */
	qsort(q->rsl, q->nrsl, sizeof(*q->rsl), cmp_label);
	return 0;
}

/* time, aggregation and the body's profiles (one, or the parts of a multipart body); -1 after
 * an error reply. */
static int push_params(push_req *q)
{
	srv_req *r = q->r;
	const strobe_server_config *c = &r->srv->cfg;
	strobe_err err = {{0}};
	const char *ts = srv_arg(r, "time");
	q->name = srv_arg(r, "name");
	if (ts && strobe_time_parse(ts, r->now_ns, &q->t, &err) < 0)
		return srv_error(r, 400, "time: %s", err.msg), -1;
	const char *agg = srv_arg(r, "aggregation");
	if (agg && strcmp(agg, "sum") && strcmp(agg, "average"))
		return srv_error(r, 400, "aggregation must be sum or average"), -1;
	q->average = agg && strcmp(agg, "average") == 0;
	const char *ct = srv_header(r, "Content-Type");
	if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
		int mr = srv_multipart_parse(ct, r->body, r->len, c->max_profiles_per_push, add_part,
						&q->ps, &err);
		if (mr == -E2BIG)
			return srv_error(r, 400, "limit max_profiles_per_push: more than %u profiles",
					 c->max_profiles_per_push), -1;
		if (mr == -ENOMEM)
			return -ENOMEM;
		if (mr < 0 || !q->ps.n)
			return srv_error(r, 400, "malformed multipart body: %s",
					 mr < 0 ? err.msg : "no parts"), -1;
	} else {
		if (!r->len)
			return srv_error(r, 400, "empty body: send a pprof profile"), -1;
		if (add_part(&q->ps, "", r->body, r->len) < 0)
			return -ENOMEM;
	}
	q->profs = calloc(q->ps.n, sizeof(*q->profs));
	q->views = calloc(q->ps.n, sizeof(*q->views));
	q->raws = calloc(q->ps.n, sizeof(*q->raws));
	q->groups = calloc(q->ps.n, sizeof(*q->groups));
	return q->profs && q->views && q->raws && q->groups ? 0 : -ENOMEM;
}

static int push_item(push_req *q, strobe_push_item it)
{
	if (q->nitems == q->capitems) {
		size_t nc = q->capitems ? q->capitems * 2 : 8;
		strobe_push_item *ni = realloc(q->items, nc * sizeof(*ni));
		if (!ni)
			return -ENOMEM;
		q->items = ni;
		q->capitems = nc;
	}
	q->items[q->nitems++] = it;
	return 0;
}

/* Profile i of the body into items; -1 after an error reply, -ENOMEM. */
static int push_part(push_req *q, size_t i)
{
	srv_req *r = q->r;
	const strobe_server_config *c = &r->srv->cfg;
	const uint8_t *d = q->ps.p[i].data;
	size_t len = q->ps.p[i].len;
	if (len >= 2 && d[0] == 0x1f && d[1] == 0x8b) {
		int gr = strobe_gunzip_capped(d, len, c->max_decompressed_bytes, &q->raws[i], &len,
					      NULL, NULL);
		if (gr == -E2BIG)
			return srv_error(r, 413, "limit max_decompressed_bytes: profile %zu is larger "
						 "than %zu bytes decompressed",
					 i + 1, c->max_decompressed_bytes), -1;
		if (gr < 0)
			return srv_error(r, 400, "profile %zu: bad gzip data", i + 1), -1;
		d = q->raws[i];
	}
	/* The common case, a pprof without per-sample labels, goes to the store as a view: no
	 * profile model in between (strobe/pprof_view.h). Anything else, and whatever the view
	 * refuses, is decoded, and the decoder says what is wrong. */
	strobe_pprof_view **v = &q->views[i];
	if (strobe_detect(d, len) == STROBE_FMT_PPROF && (*v = strobe_pprof_view_open(d, len)) &&
	    !(*v)->simple) {
		strobe_pprof_view_free(*v);
		*v = NULL;
	}
	if (*v) {
		q->nprof++;
		if (!(q->groups[i].g = calloc(1, sizeof(*q->groups[i].g))))
			return -ENOMEM;
		q->groups[i].n = 1;
		return push_item(q, (strobe_push_item){.profile = (*v)->hdr, .name = q->name,
						       .time_ns = q->t, .average = q->average,
						       .slabels = q->rsl, .nslabels = q->nrsl,
						       .view = *v});
	}
	char nm[32];
	snprintf(nm, sizeof(nm), "profile %zu", i + 1);
	strobe_err err = {{0}};
	int dr = strobe_decode_profile(d, len, nm, &q->profs[i], &err);
	if (dr < 0)
		return srv_fail(r, dr, &err), -1;
	q->nprof++;
	/* One item per distinct set of per-sample labels (pprof.Do), each its own series. */
	if ((dr = srv_sample_groups(q->profs[i], c, q->labels, q->nlabels, q->rsl, q->nrsl,
				    &q->groups[i], &err)) < 0)
		return srv_error(r, dr == -EDQUOT ? 429 : dr == -ENOMEM ? 500 : 400,
				 "profile %zu: %s", i + 1, err.msg), -1;
	for (size_t g = 0; g < q->groups[i].n; g++) {
		const srv_label_group *gr = &q->groups[i].g[g];
		if (push_item(q, (strobe_push_item){
				    .profile = q->profs[i], .name = q->name, .time_ns = q->t,
				    .average = q->average, .labels = gr->labels,
				    .nlabels = gr->nlabels, .slabels = gr->slabels,
				    .nslabels = gr->nslabels, .samples = gr->samples,
				    .nsamples = gr->nsamples}) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Stores the items (all of them or none) and answers what was accepted. */
static int push_store(push_req *q)
{
	srv_req *r = q->r;
	strobe_err err = {{0}};
	strobe_push_req rq = {r->tenant, q->labels, q->nlabels, q->items, q->nitems, r->now_ns};
	strobe_push_result res;
	int pr = strobe_store_push(r->srv->store, &rq, &res, &err);
	if (pr < 0)
		return srv_fail(r, pr, &err), -1;
	json_t *acc = json_array();
	for (size_t i = 0; acc && i < res.n; i++)
		json_array_append_new(acc, json_pack("{s:s, s:I, s:i, s:I}", "type", res.acc[i].type,
						     "time", (json_int_t)res.acc[i].time_ns,
						     "stacks", (int)res.acc[i].stacks, "total",
						     (json_int_t)res.acc[i].total));
	strobe_push_result_free(&res);
	uint64_t nsamples = 0;
	for (size_t i = 0; i < q->ps.n; i++)
		nsamples += q->views[i] ? q->views[i]->nsamples
			    : q->profs[i] ? strobe_nsamples(q->profs[i]) : 0;
	srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_PUSH, q->nprof, r->len, nsamples);
	json_t *j = acc ? json_pack("{s:i, s:o}", "profiles", (int)q->nprof, "accepted", acc) : NULL;
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return -ENOMEM;
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}

int srv_push(srv_req *r)
{
	push_req q = {.r = r};
	int rc = push_split_labels(&q);
	if (rc == 0)
		rc = push_params(&q);
	for (size_t i = 0; rc == 0 && i < q.ps.n; i++)
		rc = push_part(&q, i);
	if (rc == 0)
		rc = push_store(&q);
	if (rc == -ENOMEM)
		srv_error(r, 500, "out of memory");
	push_req_free(&q);
	return 0;
}

/* One series of a push.v1 request checked and decoded into q->items (nothing stored): 0, -1
 * after an error reply, -ENOMEM. */
static int series_prepare(push_req *q, const srv_push_in *in)
{
	srv_req *r = q->r;
	const strobe_server_config *c = &r->srv->cfg;
	int rc = 0;
	if (in->nlabels > c->max_labels + 8) /* room for the __ labels dropped below */
		return srv_error(r, 400, "limit max_labels: %zu labels, at most %u", in->nlabels,
				 c->max_labels), -1;
	if (!in->nbodies)
		return srv_error(r, 400, "a series without samples: send a pprof profile"), -1;
	if (in->nbodies > c->max_profiles_per_push)
		return srv_error(r, 400, "limit max_profiles_per_push: more than %u profiles",
				 c->max_profiles_per_push), -1;
	if (!(q->labels = calloc(in->nlabels ? in->nlabels : 1, sizeof(*q->labels))))
		return -ENOMEM;
	/* __name__ names the profile (process_cpu, memory...); other __ labels (__session_id__,
	 * __delta__) describe the push, not the series */
	size_t k = 0;
	for (size_t i = 0; i < in->nlabels; i++) {
		if (strcmp(in->labels[i].name, "__name__") == 0)
			q->name = in->labels[i].value;
		else if (strncmp(in->labels[i].name, "__", 2) != 0)
			q->labels[k++] = in->labels[i];
	}
	if (k > c->max_labels)
		return srv_error(r, 400, "limit max_labels: %zu labels, at most %u", k,
				 c->max_labels), -1;
	if (check_labels(r, q->labels, k) < 0)
		return -1;
	size_t nser = 0;
	for (size_t i = 0; i < k; i++) {
		if (strobe_sample_label_name(q->labels[i].name) && q->nrsl < STROBE_SAMPLE_LABELS_MAX)
			q->rsl[q->nrsl++] = q->labels[i];
		else
			q->labels[nser++] = q->labels[i];
	}
	q->nlabels = nser;
	qsort(q->rsl, q->nrsl, sizeof(*q->rsl), cmp_label);
	for (size_t i = 0; rc == 0 && i < in->nbodies; i++) {
		if (!in->lens[i])
			return srv_error(r, 400, "profile %zu: empty", i + 1), -1;
		rc = add_part(&q->ps, "", in->bodies[i], in->lens[i]);
	}
	q->profs = calloc(q->ps.n, sizeof(*q->profs));
	q->views = calloc(q->ps.n, sizeof(*q->views));
	q->raws = calloc(q->ps.n, sizeof(*q->raws));
	q->groups = calloc(q->ps.n, sizeof(*q->groups));
	if (rc == 0 && !(q->profs && q->views && q->raws && q->groups))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < q->ps.n; i++)
		rc = push_part(q, i);
	return rc;
}

int srv_push_series(srv_req *r, const srv_push_in *in, size_t n, size_t *failed)
{
	push_req *qs = calloc(n ? n : 1, sizeof(*qs));
	strobe_push_item *items = NULL;
	strobe_labelpair **merged = NULL;
	size_t nitems = 0, nprof = 0;
	uint64_t nsamples = 0;
	int rc = qs ? 0 : -ENOMEM;
	*failed = SIZE_MAX;
	/* Every series checked and decoded before anything is stored. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		qs[i].r = r;
		if ((rc = series_prepare(&qs[i], &in[i])) != 0) {
			*failed = i;
			break;
		}
		nitems += qs[i].nitems;
	}
	if (rc == 0 && (!(items = calloc(nitems ? nitems : 1, sizeof(*items))) ||
			!(merged = calloc(nitems ? nitems : 1, sizeof(*merged)))))
		rc = -ENOMEM;
	/* One push of all of them: each item carries its series' whole label set (the series'
	 * labels and its sample-label group's, which share no name), the request none. */
	size_t w = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		push_req *q = &qs[i];
		for (size_t j = 0; rc == 0 && j < q->nitems; j++) {
			strobe_push_item it = q->items[j];
			size_t nl = q->nlabels + it.nlabels;
			strobe_labelpair *m = merged[w] = malloc((nl ? nl : 1) * sizeof(*m));
			if (!m) {
				rc = -ENOMEM;
				break;
			}
			memcpy(m, q->labels, q->nlabels * sizeof(*m));
			if (it.nlabels)
				memcpy(m + q->nlabels, it.labels, it.nlabels * sizeof(*m));
			qsort(m, nl, sizeof(*m), cmp_label);
			it.labels = m;
			it.nlabels = nl;
			items[w++] = it;
		}
		nprof += q->nprof;
		for (size_t k = 0; k < q->ps.n; k++)
			nsamples += q->views[k] ? q->views[k]->nsamples
				    : q->profs[k] ? strobe_nsamples(q->profs[k]) : 0;
	}
	if (rc == 0) {
		strobe_err err = {{0}};
		strobe_push_req rq = {r->tenant, NULL, 0, items, w, r->now_ns};
		strobe_push_result res;
		int pr = strobe_store_push(r->srv->store, &rq, &res, &err);
		if (pr == 0) {
			strobe_push_result_free(&res);
			srv_metrics_ingested(r->srv->metrics, r->tenant, SRV_SRC_PUSH, nprof, r->len,
					     nsamples);
			char *ok = strdup("{}");
			if (ok)
				srv_reply(r, 200, "application/json", ok, 2);
			else
				rc = -ENOMEM;
		} else if (pr == -ENOMEM) {
			rc = -ENOMEM;
		} else {
			srv_fail(r, pr, &err);
		}
	}
	if (rc == -ENOMEM)
		srv_error(r, 500, "out of memory");
	for (size_t i = 0; merged && i < nitems; i++)
		free(merged[i]);
	free(merged);
	free(items);
	for (size_t i = 0; qs && i < n; i++)
		push_req_free(&qs[i]);
	free(qs);
	return 0;
}
