// SPDX-License-Identifier: Apache-2.0
/*
 * Grafana's protocols: the Connect protocol (unary calls over HTTP/1.1, connectrpc.com/docs/
 * protocol) for Grafana Pyroscope's querier.v1.QuerierService, settings.v1.SettingsService and
 * push.v1.PusherService, and Pyroscope's legacy GETs /pyroscope/render, /render-diff and
 * /label-values. The Pyroscope data source in Grafana and the Profiles Drilldown app call these;
 * Alloy's pyroscope.write pushes through PusherService.
 *
 * A call's body is the request message as application/proto (protobuf-c unpacks it) or
 * application/json (the proto3 JSON mapping, lib/pbjson.c), gzipped when Content-Encoding says
 * so; the answer is packed the same way, gzipped when Accept-Encoding allows it. Nothing here
 * encodes wire bytes by hand. The calls run on the same store calls as the native API
 * (strobe_store_query, _range, _label_*, _series; pushes through push.c's srv_push_series), with
 * the same tenants, tokens and limits: the route table's access checks run first, and every
 * error, theirs included, is answered in Connect's format, {"code": ..., "message": ...}, with the
 * HTTP status Connect gives the code.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "push.pb-c.h"
#include "querier.pb-c.h"
#include "server_impl.h"
#include "settings.pb-c.h"
#include "strobe/codec.h"
#include "strobe/pbjson.h"

#define MAX_MATCHERS 64u    /* selectors in one call's matchers */
#define MAX_SERIES   100000u /* series in one Series answer */
#define MAX_POINTS   100000u /* steps (fine ones included) of one SelectSeries */
#define MAX_ANSWER_POINTS 5000000u /* series x steps in one SelectSeries answer */

/* ---- errors -------------------------------------------------------------------------------- */

/* Connect's codes and the HTTP status each is answered with (the protocol's table). */
static const struct {
	const char *code;
	unsigned http;
} codes[] = {
	{"canceled", 499},          {"unknown", 500},           {"invalid_argument", 400},
	{"deadline_exceeded", 504}, {"not_found", 404},         {"already_exists", 409},
	{"permission_denied", 403}, {"resource_exhausted", 429}, {"failed_precondition", 400},
	{"aborted", 409},           {"out_of_range", 400},      {"unimplemented", 501},
	{"internal", 500},          {"unavailable", 503},       {"data_loss", 500},
	{"unauthenticated", 401},
};

static unsigned code_http(const char *code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(codes[i].code, code) == 0)
			return codes[i].http;
	return 500;
}

/* The Connect code of a native reply's HTTP status. */
static const char *status_code(unsigned st)
{
	switch (st) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 413: case 429: case 507: return "resource_exhausted";
	case 501: return "unimplemented";
	case 503: return "unavailable";
	case 504: return "deadline_exceeded";
	default: return st >= 500 ? "internal" : "unknown";
	}
}

static void cerr_reply(srv_req *r, const char *code, unsigned http, const char *msg)
{
	/* Messages quote the request (a selector's text), and protobuf-c does not check that
	 * strings are UTF-8: bytes that would make the JSON invalid become '?'. */
	char safe[600];
	json_t *probe = json_string(msg);
	if (!probe) {
		snprintf(safe, sizeof(safe), "%s", msg);
		for (char *p = safe; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		msg = safe;
	}
	json_decref(probe);
	json_t *j = json_pack("{s:s, s:s}", "code", code, "message", msg);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	snprintf(r->errmsg, sizeof(r->errmsg), "%.*s", (int)sizeof(r->errmsg) - 1, msg);
	r->cenc = NULL;
	srv_reply(r, http, "application/json", s, s ? strlen(s) : 0);
}

/* A Connect error: code (one of codes[]) and a message; returns 0 so handlers can `return`. */
__attribute__((format(printf, 3, 4))) static int cerr(srv_req *r, const char *code,
						       const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cerr_reply(r, code, code_http(code), msg);
	return 0;
}

void srv_connect_error_from_native(srv_req *r)
{
	if (r->status < 400)
		return;
	json_t *j = r->out ? json_loadb(r->out, r->outlen, 0, NULL) : NULL;
	if (j && json_is_string(json_object_get(j, "code"))) { /* already Connect's */
		json_decref(j);
		return;
	}
	const char *m = j ? json_string_value(json_object_get(j, "error")) : NULL;
	char msg[600];
	snprintf(msg, sizeof(msg), "%s", m ? m : r->errmsg[0] ? r->errmsg : "error");
	json_decref(j);
	const char *code = status_code(r->status);
	unsigned retry = r->retry_after;
	cerr_reply(r, code, code_http(code), msg);
	r->retry_after = retry;
}

static const char *store_code(int rc)
{
	return rc == -EINVAL	? "invalid_argument"
	       : rc == -EDQUOT || rc == -ENOSPC ? "resource_exhausted"
	       : rc == -ENOENT ? "not_found"
				: "internal";
}

static int cfail(srv_req *r, int rc, const strobe_err *err)
{
	return cerr(r, store_code(rc), "%s", err && err->msg[0] ? err->msg : strerror(-rc));
}

/* ---- bodies -------------------------------------------------------------------------------- */

typedef struct call {
	srv_req *r;
	bool json;            /* the request's codec, and so the answer's */
	uint8_t *raw;         /* the gunzipped body, when it was gzipped */
	const uint8_t *body;
	size_t len;
} call;

static bool has_token(const char *h, const char *tok)
{
	size_t n = strlen(tok);
	for (const char *p = h; p && *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (strncasecmp(p, tok, n) == 0 && (p[n] == 0 || p[n] == ',' || p[n] == ';' ||
						    p[n] == ' '))
			return true;
		p = strchr(p, ',');
	}
	return false;
}

/* The request's codec and its body, gunzipped; -1 after an error reply. */
static int call_open(call *c, srv_req *r)
{
	memset(c, 0, sizeof(*c));
	c->r = r;
	const char *ct = srv_header(r, "Content-Type");
	if (ct && strncasecmp(ct, "application/json", 16) == 0)
		c->json = true;
	else if (!ct || (strncasecmp(ct, "application/proto", 17) != 0 &&
			 strncasecmp(ct, "application/x-protobuf", 22) != 0)) {
		cerr(r, "unimplemented", "Content-Type must be application/proto or "
					 "application/json (got %.64s)", ct ? ct : "none");
		r->status = 415; /* Connect: an unsupported codec is 415 */
		return -1;
	}
	c->body = r->body;
	c->len = r->len;
	const char *ce = srv_header(r, "Content-Encoding");
	if (ce && strcasecmp(ce, "identity") != 0) {
		if (strcasecmp(ce, "gzip") != 0)
			return cerr(r, "unimplemented", "Content-Encoding %.32s: only gzip", ce), -1;
		size_t cap = r->srv->cfg.max_decompressed_bytes;
		strobe_err err = {{0}};
		int gr = strobe_gunzip_capped(r->body, r->len, cap, &c->raw, &c->len, "gzip body",
					      &err);
		if (gr == -E2BIG)
			return cerr(r, "resource_exhausted", "limit max_decompressed_bytes: the body is "
				    "larger than %zu bytes decompressed", cap), -1;
		if (gr < 0)
			return cerr(r, "invalid_argument", "Content-Encoding gzip: %s",
				    err.msg[0] ? err.msg : "bad gzip data"), -1;
		c->body = c->raw;
	}
	return 0;
}

/* Decodes the body as a message of type d; -1 after an error reply. */
static int call_decode(call *c, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
	*out = NULL;
	if (c->json) {
		if (!c->len) /* Connect clients may send an empty body for an empty message */
			return (*out = protobuf_c_message_unpack(d, NULL, 0, (const uint8_t *)"")) ? 0
					: (cerr(c->r, "internal", "out of memory"), -1);
		strobe_err err = {{0}};
		int rc = strobe_pbjson_decode(d, (const char *)c->body, c->len, out, &err);
		if (rc < 0)
			return cerr(c->r, rc == -ENOMEM ? "internal" : "invalid_argument",
				    "%s: %s", d->name, err.msg[0] ? err.msg : "bad JSON"), -1;
		return 0;
	}
	*out = protobuf_c_message_unpack(d, NULL, c->len, c->body);
	if (!*out)
		return cerr(c->r, "invalid_argument", "%s: the body is not a valid protobuf message",
			    d->name), -1;
	return 0;
}

/* Answers m in the request's codec, gzipped when the client accepts it. */
static int call_reply(call *c, const ProtobufCMessage *m)
{
	srv_req *r = c->r;
	char *buf = NULL;
	size_t len = 0;
	if (c->json) {
		if (strobe_pbjson_encode(m, &buf, &len) < 0)
			return cerr(r, "internal", "out of memory");
	} else {
		len = protobuf_c_message_get_packed_size(m);
		if (!(buf = malloc(len ? len : 1)))
			return cerr(r, "internal", "out of memory");
		protobuf_c_message_pack(m, (uint8_t *)buf);
	}
	const char *ae = srv_header(r, "Accept-Encoding");
	r->cenc = NULL;
	if (ae && has_token(ae, "gzip")) {
		uint8_t *z;
		size_t zl;
		if (strobe_gzip((const uint8_t *)buf, len, &z, &zl) == 0) {
			free(buf);
			buf = (char *)z;
			len = zl;
			r->cenc = "gzip";
		}
	}
	srv_reply(r, 200, c->json ? "application/json" : "application/proto", buf, len);
	return 0;
}

static void call_close(call *c) { free(c->raw); }

/* ---- selectors and windows ------------------------------------------------------------------ */

/* Parses a label selector ("{a=\"b\"}", with or without a profile type before it); a matcher
 * __profile_type__="T" becomes the selector's type (Grafana names the type that way in
 * matchers), other __ matchers (__name__) are dropped. -1 after an error reply. */
static int parse_sel(srv_req *r, const char *type, const char *s, strobe_selector *sel)
{
	memset(sel, 0, sizeof(*sel));
	char *txt = NULL;
	const char *ls = s && *s ? s : "{}";
	if (asprintf(&txt, "%s%s", type ? type : "", ls) < 0)
		return cerr(r, "internal", "out of memory"), -1;
	strobe_err err = {{0}};
	int rc = strobe_selector_parse(txt, strlen(txt), sel, &err);
	free(txt);
	if (rc < 0)
		return cerr(r, "invalid_argument", "label_selector: %s", err.msg), -1;
	size_t k = 0;
	for (size_t i = 0; i < sel->n; i++) {
		strobe_matcher *m = &sel->m[i];
		if (strcmp(m->name, "__profile_type__") == 0 && m->op == STROBE_MATCH_EQ &&
		    !sel->type) {
			sel->type = m->value;
			m->value = NULL;
		}
		if (strncmp(m->name, "__", 2) == 0) {
			free(m->name);
			free(m->value);
			if (m->has_re)
				regfree(&m->re);
			continue;
		}
		sel->m[k++] = *m;
	}
	sel->n = k;
	return 0;
}

/* A call's [start, end) in unix ms into ns: 0s mean the last hour. -1 after an error reply. */
static int window(srv_req *r, int64_t start, int64_t end, int64_t *from, int64_t *to)
{
	const int64_t ms = 1000000, lim = INT64_MAX / 1000000;
	if (start < 0 || end < 0 || start > lim || end > lim)
		return cerr(r, "invalid_argument", "start and end are unix milliseconds"), -1;
	*to = end ? end * ms : r->now_ns;
	*from = start ? start * ms : *to - 3600 * STROBE_NS_PER_S;
	if (*to <= *from)
		return cerr(r, "invalid_argument", "end must be after start"), -1;
	return 0;
}

/* The matchers of a call as selectors (none: one that matches everything). */
static int matchers(srv_req *r, char **m, size_t n, strobe_selector *sels, size_t *nsel)
{
	*nsel = 0;
	if (n > MAX_MATCHERS)
		return cerr(r, "invalid_argument", "more than %u matchers", MAX_MATCHERS), -1;
	for (size_t i = 0; i < n; i++) {
		if (parse_sel(r, NULL, m[i], &sels[*nsel]) < 0)
			return -1;
		(*nsel)++;
	}
	if (!*nsel)
		memset(&sels[(*nsel)++], 0, sizeof(*sels));
	return 0;
}

static void sels_free(strobe_selector *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		strobe_selector_free(&s[i]);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The union of one listing over several selectors, sorted and distinct. */
enum { L_NAMES, L_VALUES, L_TYPES };
static int listing(srv_req *r, int what, const char *name, strobe_selector *sels, size_t nsel,
		   int64_t from, int64_t to, char ***out, size_t *nout)
{
	char **all = NULL;
	size_t n = 0;
	for (size_t i = 0; i < nsel; i++) {
		strobe_query q = {r->tenant, &sels[i], from, to};
		strobe_err err = {{0}};
		char **v;
		size_t k;
		int rc = what == L_NAMES ? strobe_store_label_names(r->srv->store, &q, &v, &k, &err)
			 : what == L_VALUES
				 ? strobe_store_label_values(r->srv->store, &q, name, &v, &k, &err)
				 : strobe_store_profile_types(r->srv->store, &q, &v, &k, &err);
		if (rc < 0) {
			strobe_strv_free(all, n);
			return cfail(r, rc, &err), -1;
		}
		char **na = realloc(all, (n + k + 1) * sizeof(*na));
		if (!na) {
			strobe_strv_free(v, k);
			strobe_strv_free(all, n);
			return cerr(r, "internal", "out of memory"), -1;
		}
		all = na;
		if (k)
			memcpy(all + n, v, k * sizeof(*v));
		n += k;
		free(v); /* the strings moved to all */
	}
	if (n)
		qsort(all, n, sizeof(*all), cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && strcmp(all[k - 1], all[i]) == 0)
			free(all[i]);
		else
			all[k++] = all[i];
	}
	*out = all;
	*nout = k;
	return 0;
}

/* ---- the querier's calls -------------------------------------------------------------------- */

/* A profile type ID split into its five parts (in place, into buf). */
static void split_type(char *buf, char *part[5])
{
	for (int i = 0; i < 5; i++) {
		part[i] = buf;
		char *c = strchr(buf, ':');
		if (c && i < 4) {
			*c = 0;
			buf = c + 1;
		} else {
			buf += strlen(buf);
		}
	}
}

static int profile_types(call *c, ProtobufCMessage *in)
{
	Querier__V1__ProfileTypesRequest *q = (void *)in;
	int64_t from, to;
	if (window(c->r, q->start, q->end, &from, &to) < 0)
		return 0;
	strobe_selector any = {0};
	char **v;
	size_t n;
	if (listing(c->r, L_TYPES, NULL, &any, 1, from, to, &v, &n) < 0)
		return 0;
	Types__V1__ProfileType *pt = calloc(n ? n : 1, sizeof(*pt));
	Types__V1__ProfileType **pp = calloc(n ? n : 1, sizeof(*pp));
	char **bufs = calloc(n ? n : 1, sizeof(*bufs));
	Querier__V1__ProfileTypesResponse resp = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
	int rc = pt && pp && bufs ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		types__v1__profile_type__init(&pt[i]);
		if (!(bufs[i] = strdup(v[i]))) {
			rc = -ENOMEM;
			break;
		}
		char *part[5];
		split_type(bufs[i], part);
		pt[i].id = v[i];
		pt[i].name = part[0];
		pt[i].sample_type = part[1];
		pt[i].sample_unit = part[2];
		pt[i].period_type = part[3];
		pt[i].period_unit = part[4];
		pp[i] = &pt[i];
	}
	if (rc == 0) {
		resp.n_profile_types = n;
		resp.profile_types = pp;
		call_reply(c, &resp.base);
	} else {
		cerr(c->r, "internal", "out of memory");
	}
	for (size_t i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(pt);
	free(pp);
	strobe_strv_free(v, n);
	return 0;
}

static int label_names(call *c, ProtobufCMessage *in)
{
	Types__V1__LabelNamesRequest *q = (void *)in;
	strobe_selector sels[MAX_MATCHERS];
	size_t nsel;
	int64_t from, to;
	char **v;
	size_t n;
	if (window(c->r, q->start, q->end, &from, &to) < 0)
		return 0;
	if (matchers(c->r, q->matchers, q->n_matchers, sels, &nsel) == 0 &&
	    listing(c->r, L_NAMES, NULL, sels, nsel, from, to, &v, &n) == 0) {
		Types__V1__LabelNamesResponse resp = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;
		resp.names = v;
		resp.n_names = n;
		call_reply(c, &resp.base);
		strobe_strv_free(v, n);
	}
	sels_free(sels, nsel);
	return 0;
}

static int label_values(call *c, ProtobufCMessage *in)
{
	Types__V1__LabelValuesRequest *q = (void *)in;
	strobe_selector sels[MAX_MATCHERS];
	size_t nsel;
	int64_t from, to;
	char **v;
	size_t n;
	if (!q->name || !q->name[0])
		return cerr(c->r, "invalid_argument", "name: the label name is required");
	if (window(c->r, q->start, q->end, &from, &to) < 0)
		return 0;
	if (matchers(c->r, q->matchers, q->n_matchers, sels, &nsel) < 0) {
		sels_free(sels, nsel);
		return 0;
	}
	/* The type's own labels, as Pyroscope lists them. */
	bool types = strcmp(q->name, "__profile_type__") == 0 || strcmp(q->name, "__name__") == 0;
	int rc = listing(c->r, types ? L_TYPES : L_VALUES, q->name, sels, nsel, from, to, &v, &n);
	sels_free(sels, nsel);
	if (rc < 0)
		return 0;
	if (strcmp(q->name, "__name__") == 0) { /* the types' first parts, distinct */
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			v[i][strcspn(v[i], ":")] = 0;
			if (k && strcmp(v[k - 1], v[i]) == 0)
				free(v[i]);
			else
				v[k++] = v[i];
		}
		n = k;
	}
	Types__V1__LabelValuesResponse resp = TYPES__V1__LABEL_VALUES_RESPONSE__INIT;
	resp.names = v;
	resp.n_names = n;
	call_reply(c, &resp.base);
	strobe_strv_free(v, n);
	return 0;
}

static int series(call *c, ProtobufCMessage *in)
{
	Querier__V1__SeriesRequest *q = (void *)in;
	strobe_selector sels[MAX_MATCHERS];
	size_t nsel = 0;
	int64_t from, to;
	if (window(c->r, q->start, q->end, &from, &to) < 0 ||
	    matchers(c->r, q->matchers, q->n_matchers, sels, &nsel) < 0) {
		sels_free(sels, nsel);
		return 0;
	}
	strobe_series_list l;
	strobe_err err = {{0}};
	/* none given means every series: the store takes no selector as that */
	bool any = nsel == 1 && !sels[0].type && !sels[0].n;
	int rc = strobe_store_series(c->r->srv->store, c->r->tenant, sels, any ? 0 : nsel, from,
				     to, MAX_SERIES, &l, &err);
	sels_free(sels, nsel);
	if (rc < 0)
		return cfail(c->r, rc, &err);
	/* Per series: the labels, then the type's labels Pyroscope adds, filtered by
	 * label_names when given; all in one arena per series. */
	static const char *const tnames[] = {"__name__", "__type__", "__unit__",
					     "__period_type__", "__period_unit__"};
	Types__V1__Labels *ls = calloc(l.n ? l.n : 1, sizeof(*ls));
	Types__V1__Labels **lp = calloc(l.n ? l.n : 1, sizeof(*lp));
	Types__V1__LabelPair *pairs = NULL, **pp = NULL;
	char **tbufs = calloc(l.n ? l.n : 1, sizeof(*tbufs));
	size_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.v[i].nlabels + 6;
	pairs = calloc(total ? total : 1, sizeof(*pairs));
	pp = calloc(total ? total : 1, sizeof(*pp));
	if (!ls || !lp || !pairs || !pp || !tbufs) {
		cerr(c->r, "internal", "out of memory");
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < l.n; i++) {
		const strobe_series_info *e = &l.v[i];
		types__v1__labels__init(&ls[i]);
		lp[i] = &ls[i];
		ls[i].labels = pp + k;
		if (!(tbufs[i] = strdup(e->type))) {
			cerr(c->r, "internal", "out of memory");
			goto out;
		}
		char *part[5];
		split_type(tbufs[i], part);
		const char *names[STROBE_SAMPLE_LABELS_MAX + 64], *vals[STROBE_SAMPLE_LABELS_MAX + 64];
		size_t m = 0;
		names[m] = "__profile_type__", vals[m++] = e->type;
		for (int t = 0; t < 5; t++)
			names[m] = tnames[t], vals[m++] = part[t];
		for (size_t j = 0; j < e->nlabels && m < sizeof(names) / sizeof(*names); j++)
			names[m] = e->labels[j].name, vals[m++] = e->labels[j].value;
		for (size_t j = 0; j < m; j++) {
			bool want = !q->n_label_names;
			for (size_t f = 0; f < q->n_label_names && !want; f++)
				want = strcmp(q->label_names[f], names[j]) == 0;
			if (!want || k >= total)
				continue;
			types__v1__label_pair__init(&pairs[k]);
			pairs[k].name = (char *)names[j];
			pairs[k].value = (char *)vals[j];
			pp[k] = &pairs[k];
			k++;
			ls[i].n_labels++;
		}
	}
	Querier__V1__SeriesResponse resp = QUERIER__V1__SERIES_RESPONSE__INIT;
	resp.labels_set = lp;
	resp.n_labels_set = l.n;
	call_reply(c, &resp.base);
out:
	for (size_t i = 0; tbufs && i < l.n; i++)
		free(tbufs[i]);
	free(tbufs);
	free(ls);
	free(lp);
	free(pairs);
	free(pp);
	strobe_series_list_free(&l);
	return 0;
}

/* The merged profile of one type and selector over [start, end); -1 after an error reply. */
static int merged(srv_req *r, const char *type, const char *ls, int64_t start, int64_t end,
		  strobe_profile **out)
{
	if (!type || !type[0])
		return cerr(r, "invalid_argument", "profile_typeID is required (e.g. "
				"process_cpu:cpu:nanoseconds:cpu:nanoseconds)"), -1;
	strobe_selector sel;
	int64_t from, to;
	if (window(r, start, end, &from, &to) < 0 || parse_sel(r, type, ls, &sel) < 0)
		return -1;
	strobe_query q = {r->tenant, &sel, from, to};
	strobe_err err = {{0}};
	int rc = strobe_store_query(r->srv->store, &q, out, &err);
	strobe_selector_free(&sel);
	if (rc < 0)
		return cfail(r, rc, &err), -1;
	return srv_name_late(r, out); /* bare addresses named from the debug-info store */
}

static int max_nodes_ok(srv_req *r, int64_t mn)
{
	if (mn < 0 || mn > 10000000)
		return cerr(r, "invalid_argument", "max_nodes must be from 0 to 10000000"), -1;
	return 0;
}

/* A FlameGraph (or FlameGraphDiff) message over f's arrays; the arrays must outlive it. */
typedef struct flame_msg {
	Querier__V1__Level *lv;
	Querier__V1__Level **lp;
} flame_msg;

static int flame_levels(const srv_flame *f, flame_msg *m)
{
	size_t d = f->depth ? f->depth : 1;
	m->lv = calloc(d, sizeof(*m->lv));
	m->lp = calloc(d, sizeof(*m->lp));
	if (!m->lv || !m->lp)
		return -ENOMEM;
	for (size_t i = 0; i < f->depth; i++) {
		querier__v1__level__init(&m->lv[i]);
		m->lv[i].values = f->rows[i].v;
		m->lv[i].n_values = f->rows[i].n;
		m->lp[i] = &m->lv[i];
	}
	return 0;
}

static void flame_msg_free(flame_msg *m)
{
	free(m->lv);
	free(m->lp);
}

/* The tree of one profile (column 0), or of two (left in column 0, right in column 1). */
static int build_tree(strobe_profile *a, strobe_profile *b, strobe_tree **out)
{
	strobe_tree *t = strobe_tree_new();
	int rc = t ? 0 : -ENOMEM;
	if (rc == 0 && a && a->ntypes)
		rc = strobe_tree_add(t, a, 0, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0);
	if (rc == 0 && b && b->ntypes)
		rc = strobe_tree_add(t, b, 0, STROBE_GRAN_FUNCTIONS, 1, 1.0, 0);
	if (rc == 0)
		rc = strobe_tree_sort(t);
	if (rc < 0) {
		strobe_tree_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

static int flame_reply(call *c, strobe_profile *p, int64_t max_nodes, bool span)
{
	strobe_tree *t = NULL;
	srv_flame f;
	flame_msg fm = {0};
	int rc = build_tree(p, NULL, &t);
	if (rc == 0)
		rc = srv_flame_build(t, 1, (size_t)max_nodes, &f);
	if (rc < 0) {
		strobe_tree_free(t);
		return cerr(c->r, "internal", "out of memory");
	}
	if ((rc = flame_levels(&f, &fm)) == 0) {
		Querier__V1__FlameGraph fg = QUERIER__V1__FLAME_GRAPH__INIT;
		fg.names = (char **)f.names;
		fg.n_names = f.nnames;
		fg.levels = fm.lp;
		fg.n_levels = f.depth;
		fg.total = f.total[0];
		fg.max_self = f.max_self;
		if (span) {
			Querier__V1__SelectMergeSpanProfileResponse resp =
				QUERIER__V1__SELECT_MERGE_SPAN_PROFILE_RESPONSE__INIT;
			resp.flamegraph = &fg;
			call_reply(c, &resp.base);
		} else {
			Querier__V1__SelectMergeStacktracesResponse resp =
				QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
			resp.flamegraph = &fg;
			call_reply(c, &resp.base);
		}
	} else {
		cerr(c->r, "internal", "out of memory");
	}
	flame_msg_free(&fm);
	srv_flame_free(&f);
	strobe_tree_free(t);
	return 0;
}

static int select_merge_stacktraces(call *c, ProtobufCMessage *in)
{
	Querier__V1__SelectMergeStacktracesRequest *q = (void *)in;
	strobe_profile *p = NULL;
	if (max_nodes_ok(c->r, q->max_nodes) < 0 ||
	    merged(c->r, q->profile_typeid, q->label_selector, q->start, q->end, &p) < 0)
		return 0;
	flame_reply(c, p, q->max_nodes, false);
	strobe_profile_free(p);
	return 0;
}

/* A span profile: the samples of the selector whose span_id label (set by an SDK or the agent's
 * C SDK at sample time; it rides on samples, never on series) is one of the spans asked for:
 * the selector gets a span_id=~"(ID|ID...)" matcher, which the store answers from its span
 * index (store/spans.c: the spans' points alone, no scan) and applies to their samples. Span
 * IDs are 16 hex digits (OpenTelemetry's); anything else is refused, so the regex is a plain
 * alternation. No span asked for: no sample is in one. */
#define MAX_SPANS 1000u
static int select_merge_span_profile(call *c, ProtobufCMessage *in)
{
	Querier__V1__SelectMergeSpanProfileRequest *q = (void *)in;
	if (max_nodes_ok(c->r, q->max_nodes) < 0)
		return 0;
	if (q->n_span_selector > MAX_SPANS)
		return cerr(c->r, "invalid_argument", "at most %u span IDs in span_selector", MAX_SPANS);
	const char *ls = q->label_selector && *q->label_selector ? q->label_selector : "{}";
	const char *close = strrchr(ls, '}');
	if (!close)
		return cerr(c->r, "invalid_argument", "label_selector: '%.100s' is not {name=\"value\", ...}", ls);
	size_t head = (size_t)(close - ls), cap = head + 40 + q->n_span_selector * 17;
	char *sel = malloc(cap);
	if (!sel)
		return cerr(c->r, "internal", "out of memory");
	memcpy(sel, ls, head);
	/* A comma unless the braces hold nothing yet. */
	const char *open = memchr(ls, '{', head);
	bool empty = open && strspn(open + 1, " \t\n") == (size_t)(close - open - 1);
	size_t o = head + (size_t)snprintf(sel + head, cap - head, "%sspan_id=~\"(", empty ? "" : ",");
	for (size_t i = 0; i < q->n_span_selector; i++) {
		const char *sid = q->span_selector[i];
		if (strlen(sid) != 16 || strspn(sid, "0123456789abcdefABCDEF") != 16) {
			free(sel);
			return cerr(c->r, "invalid_argument",
				    "span_selector: '%.40s' is not a span ID (16 hex digits)", sid);
		}
		o += (size_t)snprintf(sel + o, cap - o, "%s%s", i ? "|" : "", sid);
	}
	snprintf(sel + o, cap - o, ")\"}");
	strobe_profile *p = NULL;
	int rc = q->n_span_selector ? merged(c->r, q->profile_typeid, sel, q->start, q->end, &p) : 0;
	free(sel);
	if (rc < 0)
		return 0;
	flame_reply(c, p, q->max_nodes, true);
	strobe_profile_free(p);
	return 0;
}

static int select_merge_profile(call *c, ProtobufCMessage *in)
{
	Querier__V1__SelectMergeProfileRequest *q = (void *)in;
	strobe_profile *p = NULL;
	if (max_nodes_ok(c->r, q->max_nodes) < 0 ||
	    merged(c->r, q->profile_typeid, q->label_selector, q->start, q->end, &p) < 0)
		return 0;
	strobe_err err = {{0}};
	uint8_t *gz = NULL, *raw = NULL;
	size_t gl = 0, rl = 0;
	int rc = q->max_nodes ? srv_trim(p, (size_t)q->max_nodes, &err) : 0;
	if (rc == 0)
		rc = strobe_pprof_encode(p, &gz, &gl);
	strobe_profile_free(p);
	/* the encoder gzips (pprof files are gzipped); the message itself is the raw bytes */
	if (rc == 0)
		rc = strobe_gunzip_capped(gz, gl, SIZE_MAX / 2, &raw, &rl, NULL, NULL);
	free(gz);
	ProtobufCMessage *m = NULL;
	if (rc == 0)
		m = protobuf_c_message_unpack(&perftools__profiles__profile__descriptor, NULL, rl,
					      raw);
	free(raw);
	if (!m)
		return cfail(c->r, rc ? rc : -ENOMEM, &err);
	call_reply(c, m);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}

static int select_series(call *c, ProtobufCMessage *in)
{
	Querier__V1__SelectSeriesRequest *q = (void *)in;
	srv_req *r = c->r;
	if (!q->profile_typeid || !q->profile_typeid[0])
		return cerr(r, "invalid_argument", "profile_typeID is required");
	if (!(q->step > 0) || !isfinite(q->step) || q->step > 366 * 86400.0)
		return cerr(r, "invalid_argument", "step must be a positive number of seconds");
	/* group_by: every name given (Pyroscope groups by all of them), as the store takes them,
	 * joined by commas, which no label name holds */
	char gbs[1024];
	size_t gw = 0;
	if (q->n_group_by > 16)
		return cerr(r, "invalid_argument", "group_by: %zu labels, at most 16", q->n_group_by);
	for (size_t i = 0; i < q->n_group_by; i++) {
		const char *g = q->group_by[i];
		if (!srv_label_name_ok(g, 256) && strcmp(g, "__name__") != 0)
			return cerr(r, "invalid_argument", "group_by: '%.64s' is not a label name", g);
		gw += (size_t)snprintf(gbs + gw, sizeof(gbs) - gw, "%s%s", i ? "," : "", g);
	}
	bool avg = q->aggregation == TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_AVERAGE;
	if (q->aggregation != TYPES__V1__TIME_SERIES_AGGREGATION_TYPE__TIME_SERIES_AGGREGATION_TYPE_SUM &&
	    !avg)
		return cerr(r, "invalid_argument", "aggregation must be SUM or AVERAGE");
	int64_t from, to, step = (int64_t)(q->step * 1e9);
	if (step < 1000000)
		step = 1000000;
	strobe_selector sel;
	if (window(r, q->start, q->end, &from, &to) < 0 ||
	    parse_sel(r, q->profile_typeid, q->label_selector, &sel) < 0)
		return 0;
	size_t nsteps = (size_t)((to - from + step - 1) / step);
	/* Averages need the points inside a step told apart: the store's totals are taken at a
	 * finer step (up to 60 per step, at least a second each) and folded. */
	size_t per = 1;
	if (avg) {
		per = (size_t)(step / STROBE_NS_PER_S);
		per = per > 60 ? 60 : per ? per : 1;
		while (per > 1 && step % (int64_t)per)
			per--;
	}
	if (nsteps * per > MAX_POINTS) {
		strobe_selector_free(&sel);
		return cerr(r, "invalid_argument", "more than %u points: use a longer step",
			    MAX_POINTS);
	}
	strobe_query sq = {r->tenant, &sel, from, from + (int64_t)nsteps * step};
	strobe_range_result res;
	strobe_err err = {{0}};
	const char *gb = q->n_group_by ? gbs : NULL;
	int rc = strobe_store_range(r->srv->store, &sq, step / (int64_t)per, gb, NULL, &res, &err);
	strobe_selector_free(&sel);
	if (rc < 0)
		return cfail(r, rc, &err);
	if (res.n * nsteps > MAX_ANSWER_POINTS) {
		strobe_range_result_free(&res);
		return cerr(r, "resource_exhausted", "%zu series x %zu steps: more than %u points in "
				"one answer; use a longer step or a narrower selector", res.n, nsteps,
			    MAX_ANSWER_POINTS);
	}
	Types__V1__Series *ss = calloc(res.n ? res.n : 1, sizeof(*ss));
	Types__V1__Series **sp = calloc(res.n ? res.n : 1, sizeof(*sp));
	size_t nby = q->n_group_by ? q->n_group_by : 1;
	Types__V1__LabelPair *lab = calloc(res.n * nby + 1, sizeof(*lab));
	Types__V1__LabelPair **labp = calloc(res.n * nby + 1, sizeof(*labp));
	Types__V1__Point *pts = calloc(res.n * nsteps + 1, sizeof(*pts));
	Types__V1__Point **ptp = calloc(res.n * nsteps + 1, sizeof(*ptp));
	double *vals = calloc(nsteps + 1, sizeof(*vals));
	bool *has = calloc(nsteps + 1, sizeof(*has));
	if (!ss || !sp || !lab || !labp || !pts || !ptp || !vals || !has) {
		cerr(r, "internal", "out of memory");
		goto out;
	}
	size_t k = 0, ns = 0;
	for (size_t i = 0; i < res.n; i++) {
		srv_fold_steps(res.g[i].values, res.nsteps, per, avg, vals, has, nsteps);
		types__v1__series__init(&ss[ns]);
		if (q->n_group_by == 1) {
			types__v1__label_pair__init(&lab[ns]);
			lab[ns].name = q->group_by[0];
			lab[ns].value = res.g[i].value;
			labp[ns] = &lab[ns];
			ss[ns].labels = &labp[ns];
			ss[ns].n_labels = 1;
		} else if (q->n_group_by > 1) { /* the labels the series have, as Pyroscope */
			Types__V1__LabelPair *lb = lab + ns * nby;
			Types__V1__LabelPair **lbp = labp + ns * nby;
			ss[ns].labels = lbp;
			for (size_t b = 0; b < res.g[i].nby && b < q->n_group_by; b++) {
				if (!res.g[i].by[b][0])
					continue;
				types__v1__label_pair__init(&lb[ss[ns].n_labels]);
				lb[ss[ns].n_labels].name = q->group_by[b];
				lb[ss[ns].n_labels].value = res.g[i].by[b];
				lbp[ss[ns].n_labels] = &lb[ss[ns].n_labels];
				ss[ns].n_labels++;
			}
		}
		ss[ns].points = ptp + k;
		for (size_t s = 0; s < nsteps; s++) {
			if (!has[s])
				continue; /* no data in the step: no point, as Pyroscope answers */
			types__v1__point__init(&pts[k]);
			pts[k].value = vals[s];
			pts[k].timestamp = (from + (int64_t)s * step) / 1000000;
			ptp[k] = &pts[k];
			k++;
			ss[ns].n_points++;
		}
		if (ss[ns].n_points)
			sp[ns] = &ss[ns], ns++;
	}
	/* the heaviest series first when a limit is asked */
	if (q->limit > 0 && (size_t)q->limit < ns) {
		for (size_t a = 0; a < (size_t)q->limit; a++) {
			size_t best = a;
			double bv = -1;
			for (size_t b = a; b < ns; b++) {
				double t = 0;
				for (size_t p = 0; p < sp[b]->n_points; p++)
					t += sp[b]->points[p]->value;
				if (t > bv)
					bv = t, best = b;
			}
			Types__V1__Series *tmp = sp[a];
			sp[a] = sp[best];
			sp[best] = tmp;
		}
		ns = (size_t)q->limit;
	}
	Querier__V1__SelectSeriesResponse resp = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
	resp.series = sp;
	resp.n_series = ns;
	call_reply(c, &resp.base);
out:
	free(ss);
	free(sp);
	free(lab);
	free(labp);
	free(pts);
	free(ptp);
	free(vals);
	free(has);
	strobe_range_result_free(&res);
	return 0;
}

static int diff(call *c, ProtobufCMessage *in)
{
	Querier__V1__DiffRequest *q = (void *)in;
	if (!q->left || !q->right)
		return cerr(c->r, "invalid_argument", "left and right are required");
	strobe_profile *a = NULL, *b = NULL;
	if (merged(c->r, q->left->profile_typeid, q->left->label_selector, q->left->start,
		   q->left->end, &a) < 0)
		return 0;
	if (merged(c->r, q->right->profile_typeid, q->right->label_selector, q->right->start,
		   q->right->end, &b) < 0) {
		strobe_profile_free(a);
		return 0;
	}
	int64_t mn = q->left->max_nodes > q->right->max_nodes ? q->left->max_nodes
							      : q->right->max_nodes;
	strobe_tree *t = NULL;
	srv_flame f = {0};
	flame_msg fm = {0};
	int rc = max_nodes_ok(c->r, mn) < 0 ? 1 : build_tree(a, b, &t);
	if (rc == 0)
		rc = srv_flame_build(t, 2, (size_t)mn, &f);
	if (rc == 0)
		rc = flame_levels(&f, &fm);
	if (rc == 0) {
		Querier__V1__FlameGraphDiff fg = QUERIER__V1__FLAME_GRAPH_DIFF__INIT;
		fg.names = (char **)f.names;
		fg.n_names = f.nnames;
		fg.levels = fm.lp;
		fg.n_levels = f.depth;
		fg.total = f.total[0] + f.total[1];
		fg.max_self = f.max_self;
		fg.leftticks = f.total[0];
		fg.rightticks = f.total[1];
		Querier__V1__DiffResponse resp = QUERIER__V1__DIFF_RESPONSE__INIT;
		resp.flamegraph = &fg;
		call_reply(c, &resp.base);
	} else if (rc < 0) {
		cerr(c->r, "internal", "out of memory");
	}
	flame_msg_free(&fm);
	srv_flame_free(&f);
	strobe_tree_free(t);
	strobe_profile_free(a);
	strobe_profile_free(b);
	return 0;
}

/* Whether the tenant holds any data and the times (ms, as Pyroscope answers) of its oldest and
 * newest profiles, which Grafana uses to tell "no data" from "none in this window". A store
 * that cannot tell the times (-ENOTSUP) answers whether there is data, times 0. */
static int profile_stats(call *c, ProtobufCMessage *in)
{
	(void)in;
	int64_t oldest = 0, newest = 0;
	strobe_err err = {{0}};
	int rc = strobe_store_time_span(c->r->srv->store, c->r->tenant, &oldest, &newest, &err);
	Types__V1__GetProfileStatsResponse resp = TYPES__V1__GET_PROFILE_STATS_RESPONSE__INIT;
	if (rc == -ENOTSUP) {
		strobe_selector any = {0};
		char **v;
		size_t n;
		if (listing(c->r, L_TYPES, NULL, &any, 1, 1,
			    c->r->now_ns + 86400 * STROBE_NS_PER_S, &v, &n) < 0)
			return 0;
		strobe_strv_free(v, n);
		resp.data_ingested = n > 0;
		return call_reply(c, &resp.base);
	}
	if (rc < 0)
		return cfail(c->r, rc, &err);
	resp.data_ingested = oldest || newest;
	resp.oldest_profile_time = oldest / 1000000;
	resp.newest_profile_time = newest / 1000000;
	return call_reply(c, &resp.base);
}

typedef struct method {
	const char *name;
	const ProtobufCMessageDescriptor *in;
	int (*fn)(call *c, ProtobufCMessage *in);
} method;

static const method querier[] = {
	{"ProfileTypes", &querier__v1__profile_types_request__descriptor, profile_types},
	{"LabelNames", &types__v1__label_names_request__descriptor, label_names},
	{"LabelValues", &types__v1__label_values_request__descriptor, label_values},
	{"Series", &querier__v1__series_request__descriptor, series},
	{"SelectMergeStacktraces", &querier__v1__select_merge_stacktraces_request__descriptor,
	 select_merge_stacktraces},
	{"SelectMergeSpanProfile", &querier__v1__select_merge_span_profile_request__descriptor,
	 select_merge_span_profile},
	{"SelectMergeProfile", &querier__v1__select_merge_profile_request__descriptor,
	 select_merge_profile},
	{"SelectSeries", &querier__v1__select_series_request__descriptor, select_series},
	{"Diff", &querier__v1__diff_request__descriptor, diff},
	{"GetProfileStats", &types__v1__get_profile_stats_request__descriptor, profile_stats},
};

static int run(srv_req *r, const method *m)
{
	call c;
	ProtobufCMessage *in = NULL;
	if (call_open(&c, r) == 0 && call_decode(&c, m->in, &in) == 0)
		m->fn(&c, in);
	if (in)
		protobuf_c_message_free_unpacked(in, NULL);
	call_close(&c);
	return 0;
}

int srv_connect_querier(srv_req *r)
{
	for (size_t i = 0; i < sizeof(querier) / sizeof(querier[0]); i++)
		if (strlen(querier[i].name) == r->path_arg_len &&
		    memcmp(querier[i].name, r->path_arg, r->path_arg_len) == 0)
			return run(r, &querier[i]);
	/* as connect-go answers a procedure it does not serve */
	cerr(r, "unimplemented", "querier.v1.QuerierService/%.*s is not a method strobe serves",
	     (int)(r->path_arg_len > 64 ? 64 : r->path_arg_len), r->path_arg);
	r->status = 404;
	return 0;
}

static int settings_get(call *c, ProtobufCMessage *in)
{
	(void)in;
	Settings__V1__GetSettingsResponse resp = SETTINGS__V1__GET_SETTINGS_RESPONSE__INIT;
	return call_reply(c, &resp.base);
}

int srv_connect_settings(srv_req *r)
{
	static const method m = {"Get", &settings__v1__get_settings_request__descriptor,
				 settings_get};
	return run(r, &m);
}

static int push(call *c, ProtobufCMessage *in)
{
	Push__V1__PushRequest *q = (void *)in;
	srv_req *r = c->r;
	if (!q->n_series)
		return cerr(r, "invalid_argument", "no series in the push");
	/* All series in one transaction (srv_push_series): a refused series refuses the push, and
	 * nothing of it is stored, so a client that resends it stores nothing twice. */
	if (q->n_series > r->srv->cfg.max_profiles_per_push)
		return cerr(r, "invalid_argument", "limit max_profiles_per_push: %zu series, at most %u",
			    q->n_series, r->srv->cfg.max_profiles_per_push);
	srv_push_in *ser = calloc(q->n_series, sizeof(*ser));
	strobe_labelpair **ls = calloc(q->n_series, sizeof(*ls));
	const uint8_t ***bs = calloc(q->n_series, sizeof(*bs));
	size_t **lens = calloc(q->n_series, sizeof(*lens));
	int rc = ser && ls && bs && lens ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < q->n_series; i++) {
		Push__V1__RawProfileSeries *s = q->series[i];
		strobe_labelpair *l = ls[i] = calloc(s->n_labels ? s->n_labels : 1, sizeof(*l));
		const uint8_t **b = bs[i] = calloc(s->n_samples ? s->n_samples : 1, sizeof(*b));
		size_t *ln = lens[i] = calloc(s->n_samples ? s->n_samples : 1, sizeof(*ln));
		if (!l || !b || !ln) {
			rc = -ENOMEM;
			break;
		}
		for (size_t k = 0; k < s->n_labels; k++)
			l[k] = (strobe_labelpair){s->labels[k]->name, s->labels[k]->value};
		for (size_t k = 0; k < s->n_samples; k++)
			b[k] = s->samples[k]->raw_profile.data, ln[k] = s->samples[k]->raw_profile.len;
		ser[i] = (srv_push_in){l, s->n_labels, b, ln, s->n_samples};
	}
	size_t failed = SIZE_MAX;
	if (rc == 0)
		srv_push_series(r, ser, q->n_series, &failed);
	for (size_t i = 0; i < q->n_series; i++) {
		if (ls)
			free(ls[i]);
		if (bs)
			free(bs[i]);
		if (lens)
			free(lens[i]);
	}
	free(ser), free(ls), free(bs), free(lens);
	if (rc < 0)
		return cerr(r, "internal", "out of memory");
	if (r->status != 200) {
		srv_connect_error_from_native(r);
		/* say which series was refused and that nothing was stored */
		json_t *j = json_loadb(r->out, r->outlen, 0, NULL);
		const char *m = j ? json_string_value(json_object_get(j, "message")) : "";
		const char *cd = j ? json_string_value(json_object_get(j, "code")) : NULL;
		char msg[700], code[32];
		if (failed != SIZE_MAX)
			snprintf(msg, sizeof(msg), "series %zu of %zu: %s (nothing of the push was "
				 "stored)", failed + 1, q->n_series, m ? m : "");
		else
			snprintf(msg, sizeof(msg), "%s (nothing of the push was stored)", m ? m : "");
		snprintf(code, sizeof(code), "%s", cd ? cd : "internal");
		json_decref(j);
		cerr(r, code, "%s", msg);
		return 0;
	}
	Push__V1__PushResponse resp = PUSH__V1__PUSH_RESPONSE__INIT;
	return call_reply(c, &resp.base);
}

int srv_connect_push(srv_req *r)
{
	static const method m = {"Push", &push__v1__push_request__descriptor, push};
	return run(r, &m);
}
