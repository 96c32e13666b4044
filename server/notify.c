// SPDX-License-Identifier: Apache-2.0
/*
 * Automatic regression detection and the webhook notifier. A thread of the server, every
 * check_interval, for each tenant: the series of the last `lookback` give each service (the
 * service_label) and its profile type (a CPU one when it has one); the timeline of that type
 * grouped by the version label gives each version's first and last appearance. A version not
 * yet judged, first seen at least `settle` ago and holding at least min_profiles stored
 * profiles, is compared with the version seen before it through /api/v1/regressions' engine
 * (diff_sets.c: the same test, the same normalisation by total, functions judged on their flat
 * value). A pair with significant growth makes one notification: a JSON POST to the webhook
 * with the service, the two versions, the team (owners.c), the functions with their changes
 * and confidence, and a link to the UI's diff view.
 *
 * Never twice: each judged pair (tenant, service, base, new) is written to
 * DATA_DIR/notify-state.json (atomically: a temporary file, fsync, rename) once it is settled
 * for good: "clean" (nothing significant), "sent" (the webhook answered 2xx) or "given_up"
 * (max_tries failed). A pending notification lives in memory and is retried with exponential
 * backoff; after a restart it is recomputed (its pair is not in the file yet), not read back.
 * The webhook URL comes from the config only.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "strobe/clock.h"
#include "strobe/http_client.h"

#include "diff_sets.h"
#include "notify.h"

enum { NOTIFY_MAX_SERVICES = 10000, NOTIFY_MAX_PAIRS = 1000000, NOTIFY_MAX_FUNCS = 50,
       NOTIFY_STEPS = 2000, NOTIFY_NAME_MAX = 256 };
#define NS_S ((int64_t)1000000000)

typedef struct ncfg {
	char *webhook, *version_label, *service_label, *public_url;
	int64_t settle, check_interval, lookback, timeout, backoff, backoff_max;
	long min_profiles, max_tries;
	double confidence;
	char **tenants;
	size_t ntenants;
} ncfg;

typedef struct pair {
	char *tenant, *service, *base, *nw; /* the key */
	char *state;                       /* "clean", "sent", "given_up"; NULL = pending */
	char *body;                        /* the pending notification */
	long tries;
	int64_t next_try; /* monotonic ns */
} pair;

struct srv_notify {
	strobe_server *srv;
	ncfg c;
	char *state_path;
	pair *p;
	size_t np;
	pthread_t thread;
	bool started;
	atomic_bool stopping;
	pthread_mutex_t mu; /* with cv: wakes the thread on stop */
	pthread_cond_t cv;
	atomic_uint_least64_t found, sent, failed, given_up, checks, check_errors, pending;
};

static int dur(json_t *o, const char *k, int64_t def, int64_t *out, strobe_err *err)
{
	json_t *v = json_object_get(o, k);
	*out = def;
	if (!v)
		return 0;
	if (!json_is_string(v) || strobe_duration_parse(json_string_value(v), out, err) < 0 ||
	    *out < 0)
		return strobe_errf(err, -EINVAL, "config: \"notify\".\"%s\" must be a duration such "
						 "as \"60s\", \"5m\" or \"2h\"", k);
	return 0;
}

static void ncfg_free(ncfg *c)
{
	free(c->webhook);
	free(c->version_label);
	free(c->service_label);
	free(c->public_url);
	for (size_t i = 0; i < c->ntenants; i++)
		free(c->tenants[i]);
	free(c->tenants);
	memset(c, 0, sizeof(*c));
}

static int str(json_t *o, const char *k, const char *def, char **out, strobe_err *err)
{
	json_t *v = json_object_get(o, k);
	if (v && (!json_is_string(v) || !*json_string_value(v) ||
		  strlen(json_string_value(v)) > 4096))
		return strobe_errf(err, -EINVAL, "config: \"notify\".\"%s\" must be a string of 1 "
						 "to 4096 bytes", k);
	const char *s = v ? json_string_value(v) : def;
	*out = s ? strdup(s) : NULL;
	return s && !*out ? -ENOMEM : 0;
}

static bool http_url(const char *u)
{
	return u && (!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8)) &&
	       strlen(u) > 8 && !strpbrk(u, " \t\r\n");
}

static int ncfg_parse(json_t *o, ncfg *c, strobe_err *err)
{
	memset(c, 0, sizeof(*c));
	static const char *const keys[] = {
		"webhook", "version_label", "service_label", "public_url", "settle",
		"check_interval", "lookback", "timeout", "backoff", "backoff_max", "min_profiles",
		"max_tries", "confidence", "tenants"};
	if (!json_is_object(o))
		return strobe_errf(err, -EINVAL, "config: \"notify\" must be an object with at least "
						 "\"webhook\"");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		size_t i = 0;
		while (i < sizeof(keys) / sizeof(*keys) && strcmp(keys[i], k))
			i++;
		if (i == sizeof(keys) / sizeof(*keys))
			return strobe_errf(err, -EINVAL, "config: \"notify\": unknown key \"%.64s\"", k);
	}
	int r;
	if ((r = str(o, "webhook", NULL, &c->webhook, err)) < 0 ||
	    (r = str(o, "version_label", "version", &c->version_label, err)) < 0 ||
	    (r = str(o, "service_label", "service_name", &c->service_label, err)) < 0 ||
	    (r = str(o, "public_url", NULL, &c->public_url, err)) < 0 ||
	    (r = dur(o, "settle", 5 * 60 * NS_S, &c->settle, err)) < 0 ||
	    (r = dur(o, "check_interval", 60 * NS_S, &c->check_interval, err)) < 0 ||
	    (r = dur(o, "lookback", 7 * 24 * 3600 * NS_S, &c->lookback, err)) < 0 ||
	    (r = dur(o, "timeout", 10 * NS_S, &c->timeout, err)) < 0 ||
	    (r = dur(o, "backoff", 1 * NS_S, &c->backoff, err)) < 0 ||
	    (r = dur(o, "backoff_max", 300 * NS_S, &c->backoff_max, err)) < 0)
		goto bad;
	if (!http_url(c->webhook)) {
		r = strobe_errf(err, -EINVAL, "config: \"notify\".\"webhook\" must be an http:// or "
					      "https:// URL (the only place it can come from)");
		goto bad;
	}
	if (c->public_url && !http_url(c->public_url)) {
		r = strobe_errf(err, -EINVAL, "config: \"notify\".\"public_url\" must be the server's "
					      "http:// or https:// base URL, as users reach the UI");
		goto bad;
	}
	if (c->check_interval < NS_S / 10 || c->lookback < 60 * NS_S || c->timeout < NS_S / 10 ||
	    c->backoff < NS_S / 100 || c->backoff_max < c->backoff) {
		r = strobe_errf(err, -EINVAL, "config: \"notify\": check_interval and timeout must "
					      "be at least 100ms, lookback at least 1m, backoff at least "
					      "10ms and at most backoff_max");
		goto bad;
	}
	json_t *mp = json_object_get(o, "min_profiles"), *mt = json_object_get(o, "max_tries"),
	       *cf = json_object_get(o, "confidence"), *tn = json_object_get(o, "tenants");
	c->min_profiles = mp ? (long)json_integer_value(mp) : 3;
	c->max_tries = mt ? (long)json_integer_value(mt) : 8;
	c->confidence = cf ? json_number_value(cf) : 0.99;
	if ((mp && (!json_is_integer(mp) || c->min_profiles < 1 || c->min_profiles > 100000)) ||
	    (mt && (!json_is_integer(mt) || c->max_tries < 1 || c->max_tries > 100)) ||
	    (cf && (!json_is_number(cf) || !(c->confidence >= 0.5 && c->confidence < 1)))) {
		r = strobe_errf(err, -EINVAL, "config: \"notify\": min_profiles must be an integer "
					      "from 1 to 100000, max_tries from 1 to 100, confidence a "
					      "number from 0.5 to below 1");
		goto bad;
	}
	if (tn) {
		size_t i;
		if (!json_is_array(tn) || json_array_size(tn) > 10000) {
			r = strobe_errf(err, -EINVAL, "config: \"notify\".\"tenants\" must be an array "
						      "of at most 10000 tenant ids");
			goto bad;
		}
		c->tenants = calloc(json_array_size(tn) + 1, sizeof(*c->tenants));
		if (!c->tenants) {
			r = -ENOMEM;
			goto bad;
		}
		json_array_foreach(tn, i, v) {
			const char *s = json_string_value(v);
			if (!s || !*s || strlen(s) > NOTIFY_NAME_MAX) {
				r = strobe_errf(err, -EINVAL, "config: \"notify\".\"tenants\"[%zu] must "
							      "be a tenant id of 1 to %d bytes", i,
						NOTIFY_NAME_MAX);
				goto bad;
			}
			if (!(c->tenants[c->ntenants++] = strdup(s))) {
				r = -ENOMEM;
				goto bad;
			}
		}
	}
	return 0;
bad:
	ncfg_free(c);
	return r;
}

int srv_notify_config(json_t *v, char **out, strobe_err *err)
{
	ncfg c;
	int r = ncfg_parse(v, &c, err);
	if (r < 0)
		return r;
	ncfg_free(&c);
	char *s = json_dumps(v, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	free(*out);
	*out = s;
	return 0;
}

/* ---- the state file ------------------------------------------------------------------------ */

static pair *find(srv_notify *n, const char *t, const char *s, const char *b, const char *nw)
{
	for (size_t i = 0; i < n->np; i++)
		if (!strcmp(n->p[i].tenant, t) && !strcmp(n->p[i].service, s) &&
		    !strcmp(n->p[i].base, b) && !strcmp(n->p[i].nw, nw))
			return &n->p[i];
	return NULL;
}

static pair *add(srv_notify *n, const char *t, const char *s, const char *b, const char *nw,
		 const char *state)
{
	if (n->np >= NOTIFY_MAX_PAIRS)
		return NULL;
	pair *p = realloc(n->p, (n->np + 1) * sizeof(*p));
	if (!p)
		return NULL;
	n->p = p;
	p = &p[n->np];
	memset(p, 0, sizeof(*p));
	p->tenant = strdup(t);
	p->service = strdup(s);
	p->base = strdup(b);
	p->nw = strdup(nw);
	p->state = state ? strdup(state) : NULL;
	if (!p->tenant || !p->service || !p->base || !p->nw || (state && !p->state)) {
		free(p->tenant);
		free(p->service);
		free(p->base);
		free(p->nw);
		free(p->state);
		return NULL;
	}
	n->np++;
	return p;
}

/* Writes every settled pair, atomically: a crash leaves the old file or the new one. */
static int save(srv_notify *n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n->np; i++)
		if (n->p[i].state)
			json_array_append_new(a, json_pack("[s,s,s,s,s]", n->p[i].tenant,
							   n->p[i].service, n->p[i].base, n->p[i].nw,
							   n->p[i].state));
	json_t *root = json_pack("{s:i, s:o}", "version", 1, "pairs", a);
	char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!text)
		return -ENOMEM;
	size_t len = strlen(text), l = strlen(n->state_path) + 8;
	char *tmp = malloc(l);
	int r = 0;
	if (!tmp) {
		free(text);
		return -ENOMEM;
	}
	snprintf(tmp, l, "%s.tmp", n->state_path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		r = -errno;
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			r = w < 0 ? -errno : -EIO;
		else
			off += (size_t)w;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (fd >= 0)
		close(fd);
	if (r == 0 && rename(tmp, n->state_path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	free(tmp);
	free(text);
	return r;
}

static int load(srv_notify *n, strobe_err *err)
{
	json_error_t je;
	/* Our own file, but a cap all the same: a pair is four names of at most a few hundred
	 * bytes, so 256 MiB is far past NOTIFY_MAX_PAIRS. */
	FILE *f = fopen(n->state_path, "re");
	if (!f)
		return errno == ENOENT ? 0 : strobe_errf(err, -errno, "%s: %s", n->state_path,
							 strerror(errno));
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fclose(f);
	if (sz > (256L << 20))
		return strobe_errf(err, -EFBIG, "%s: larger than 256 MiB", n->state_path);
	json_t *root = json_load_file(n->state_path, 0, &je), *a = json_object_get(root, "pairs"),
	       *v;
	if (!json_is_array(a)) {
		json_decref(root);
		return strobe_errf(err, -EINVAL, "%s: not a notifier state file (%s); move it away to "
						 "start afresh (pairs already notified would be sent "
						 "again)", n->state_path, je.text);
	}
	size_t i;
	json_array_foreach(a, i, v) {
		const char *t = json_string_value(json_array_get(v, 0)),
			   *s = json_string_value(json_array_get(v, 1)),
			   *b = json_string_value(json_array_get(v, 2)),
			   *nw = json_string_value(json_array_get(v, 3)),
			   *st = json_string_value(json_array_get(v, 4));
		if (t && s && b && nw && st && !add(n, t, s, b, nw, st)) {
			json_decref(root);
			return strobe_errf(err, -ENOMEM, "%s: out of memory", n->state_path);
		}
	}
	json_decref(root);
	return 0;
}

/* ---- detection ----------------------------------------------------------------------------- */

/* Percent-encodes s onto f (the UI reads URLSearchParams). */
static void url_enc(FILE *f, const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    strchr("-_.~", *c))
			fputc(*c, f);
		else
			fprintf(f, "%%%02X", *c);
}

/* label="value" with the value's quote and backslash escaped, as selectors take them. */
static void sel_lab(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (; *value; value++) {
		if (*value == '"' || *value == '\\')
			fputc('\\', f);
		fputc(*value, f);
	}
	fputc('"', f);
}

static char *diff_link(srv_notify *n, const char *type, const char *svc, const char *bv,
		       const char *nv, const srv_sig_side *b, const srv_sig_side *nw)
{
	if (!n->c.public_url)
		return NULL;
	char *q = NULL, *bq = NULL, *out = NULL;
	size_t len;
	FILE *f = open_memstream(&q, &len);
	if (!f)
		return NULL;
	sel_lab(f, n->c.service_label, svc);
	fputc(',', f);
	sel_lab(f, n->c.version_label, nv);
	fclose(f);
	if (!(f = open_memstream(&bq, &len))) {
		free(q);
		return NULL;
	}
	sel_lab(f, n->c.service_label, svc);
	fputc(',', f);
	sel_lab(f, n->c.version_label, bv);
	fclose(f);
	if ((f = open_memstream(&out, &len))) {
		const char *u = n->c.public_url;
		size_t ul = strlen(u);
		while (ul && u[ul - 1] == '/')
			ul--;
		/* The parameters ui/app.js reads: mode=diff, type, q (comparison labels), bq
		 * (baseline labels), from/to (the whole span), sel/bsel (each side's window, ms). */
		fprintf(f, "%.*s/?mode=diff&type=", (int)ul, u);
		url_enc(f, type);
		fputs("&q=", f);
		url_enc(f, q);
		fputs("&bq=", f);
		url_enc(f, bq);
		fprintf(f, "&from=%lld&to=%lld&bsel=%lld-%lld&sel=%lld-%lld",
			(long long)(b->from / 1000000000), (long long)((nw->to + 999999999) / 1000000000),
			(long long)(b->from / 1000000), (long long)(b->to / 1000000),
			(long long)(nw->from / 1000000), (long long)(nw->to / 1000000));
		fclose(f);
	}
	free(q);
	free(bq);
	return out;
}

typedef struct fnreg {
	size_t i;
	double cost;
} fnreg;
static int by_cost(const void *a, const void *b)
{
	const fnreg *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int make_sel(strobe_selector *s, const char *type, const char *l1, const char *v1,
		    const char *l2, const char *v2)
{
	memset(s, 0, sizeof(*s));
	if (!(s->type = strdup(type)) || strobe_selector_add_eq(s, l1, v1) < 0 ||
	    (l2 && strobe_selector_add_eq(s, l2, v2) < 0))
		return -ENOMEM;
	return 0;
}

/* Compares base [bfrom, bto) and new [nfrom, nto) of one service, each over the span it has data
 * in (a window mostly empty would leave too few slices for the bootstrap): 1 with *body set (a regression set), 0 when nothing
 * grew significantly, -errno on failure. */
static int compare(srv_notify *n, const char *tenant, const char *svc, const char *type,
		   const char *bv, int64_t bfrom, int64_t bto, const char *nv, int64_t nfrom,
		   int64_t nto, char **body)
{
	strobe_selector bsel = {0}, nsel = {0};
	srv_sig_side b = {&bsel, bfrom, bto, NULL, 0}, nw = {&nsel, nfrom, nto, NULL, 0};
	srv_sig_result res = {0};
	srv_req r = {.srv = n->srv, .url = "/notify", .method = "GET", .tenant = tenant,
		     .tenant_accepted = true, .now_ns = strobe_real_ns()};
	fnreg *regs = NULL;
	int rc = -ENOMEM;
	*body = NULL;
	if (make_sel(&bsel, type, n->c.service_label, svc, n->c.version_label, bv) < 0 ||
	    make_sel(&nsel, type, n->c.service_label, svc, n->c.version_label, nv) < 0)
		goto out;
	strobe_err err = {{0}};
	strobe_query qb = {tenant, &bsel, b.from, b.to}, qn = {tenant, &nsel, nw.from, nw.to};
	if ((rc = strobe_store_query(n->srv->store, &qb, &b.p, &err)) < 0 ||
	    (rc = strobe_store_query(n->srv->store, &qn, &nw.p, &err)) < 0)
		goto out;
	rc = -EIO;
	if (srv_name_late(&r, &b.p) < 0 || srv_name_late(&r, &nw.p) < 0)
		goto out;
	rc = 0;
	if (!b.p->ntypes || !nw.p->ntypes || strobe_total(b.p, 0) <= 0 ||
	    strobe_total(nw.p, 0) <= 0)
		goto out; /* one side is gone (retention): nothing to compare */
	if ((rc = srv_sig_functions(&r, &b, &nw, n->c.confidence, &res)) < 0)
		goto out;
	size_t nreg = 0;
	rc = -ENOMEM;
	if (!(regs = malloc((res.n ? res.n : 1) * sizeof(*regs))))
		goto out;
	/* As /api/v1/regressions: significant growth of the flat value, ranked by what the
	 * growth costs in NEW. */
	for (size_t i = 0; i < res.n; i++)
		if (res.rows[i].significant && res.rows[i].change > 0)
			regs[nreg++] = (fnreg){i, res.rows[i].change * (double)res.tot[0]};
	rc = 0;
	if (!nreg)
		goto out;
	qsort(regs, nreg, sizeof(*regs), by_cost);
	const char *names[1] = {n->c.service_label}, *values[1] = {svc}, *olabel = NULL;
	char *team = srv_owner_of(&n->srv->cfg, names, values, 1, &olabel);
	char *link = diff_link(n, type, svc, bv, nv, &b, &nw);
	json_t *arr = json_array();
	for (size_t k = 0; arr && k < nreg && k < NOTIFY_MAX_FUNCS; k++) {
		size_t i = regs[k].i;
		json_array_append_new(
			arr, json_pack("{s:s, s:I, s:I, s:f, s:o, s:o}", "function", res.c[i].name,
				       "base_value", (json_int_t)res.c[i].flat[1], "new_value",
				       (json_int_t)res.c[i].flat[0], "cost", regs[k].cost, "self",
				       srv_sig_row_json(&res.rows[i]), "total",
				       srv_sig_row_json(&res.rows[res.n + i])));
	}
	json_t *j = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:s, s:{s:s, s:I, s:I, s:I},"
		" s:{s:s, s:I, s:I, s:I}, s:s, s:f, s:I, s:o, s:s?}",
		"kind", "strobe.regression", "tenant", tenant, "service", svc, "service_label",
		n->c.service_label, "version_label", n->c.version_label, "team", team, "type", type,
		"unit", strobe_str(nw.p, nw.p->types[0].unit), "base", "version", bv, "from_ms",
		(json_int_t)(b.from / 1000000), "to_ms", (json_int_t)(b.to / 1000000), "total",
		(json_int_t)res.tot[1], "new", "version", nv, "from_ms",
		(json_int_t)(nw.from / 1000000), "to_ms", (json_int_t)(nw.to / 1000000), "total",
		(json_int_t)res.tot[0], "method", res.method, "confidence", n->c.confidence, "count",
		(json_int_t)nreg, "regressions", arr, "link", link);
	*body = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(j);
	free(team);
	free(link);
	rc = *body ? 1 : -ENOMEM;
out:
	free(r.out);
	free(regs);
	srv_sig_result_free(&res);
	strobe_profile_free(b.p);
	strobe_profile_free(nw.p);
	strobe_selector_free(&bsel);
	strobe_selector_free(&nsel);
	return rc;
}

typedef struct ver {
	const char *v;
	int64_t first, last; /* ns: the start of the first step with data, the end of the last */
} ver;
static int by_first(const void *a, const void *b)
{
	const ver *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first ? 1 : strcmp(x->v, y->v);
}

/* Stored profiles of the selector in [from, to), counted up to `want`. */
static long profiles(srv_notify *n, const char *tenant, const strobe_selector *sel, int64_t from,
		     int64_t to, int64_t step, long want)
{
	strobe_query q = {tenant, sel, from, to};
	strobe_exemplars e = {0};
	strobe_err err = {{0}};
	if (strobe_store_exemplars(n->srv->store, &q, step, STROBE_EXEMPLARS_MAX, &e, &err) < 0)
		return -1;
	long c = 0;
	for (size_t i = 0; i < e.nsteps * e.per_step && c < want; i++)
		c += e.v[i].id != 0;
	strobe_exemplars_free(&e);
	return c;
}

static int check_service(srv_notify *n, const char *tenant, const char *svc, const char *type,
			 int64_t now, bool *dirty)
{
	int64_t from = now - n->c.lookback, step = n->c.lookback / NOTIFY_STEPS;
	step = step < NS_S ? NS_S : step;
	from = now - (n->c.lookback / step + 1) * step;
	strobe_selector sel;
	strobe_range_result rr = {0};
	strobe_err err = {{0}};
	ver *vs = NULL;
	int rc = make_sel(&sel, type, n->c.service_label, svc, NULL, NULL);
	if (rc < 0)
		goto out;
	strobe_query q = {tenant, &sel, from, now};
	if ((rc = strobe_store_range(n->srv->store, &q, step, n->c.version_label, NULL, &rr,
				     &err)) < 0)
		goto out;
	rc = -ENOMEM;
	if (!(vs = calloc(rr.n + 1, sizeof(*vs))))
		goto out;
	size_t nv = 0;
	for (size_t g = 0; g < rr.n; g++) {
		if (!rr.g[g].value[0] || strlen(rr.g[g].value) > NOTIFY_NAME_MAX)
			continue; /* series without the version label */
		ssize_t a = -1, z = -1;
		for (size_t s = 0; s < rr.nsteps; s++)
			if (rr.g[g].values[s]) {
				if (a < 0)
					a = (ssize_t)s;
				z = (ssize_t)s;
			}
		if (a >= 0)
			vs[nv++] = (ver){rr.g[g].value, from + a * step, from + (z + 1) * step};
	}
	qsort(vs, nv, sizeof(*vs), by_first);
	rc = 0;
	for (size_t k = 1; k < nv && !atomic_load(&n->stopping); k++) {
		const ver *bv = &vs[k - 1], *nw = &vs[k];
		if (find(n, tenant, svc, bv->v, nw->v) || now - nw->first < n->c.settle)
			continue;
		strobe_selector vsel;
		if (make_sel(&vsel, type, n->c.service_label, svc, n->c.version_label, nw->v) < 0) {
			strobe_selector_free(&vsel);
			rc = -ENOMEM;
			break;
		}
		long np = profiles(n, tenant, &vsel, nw->first, now, step, n->c.min_profiles);
		strobe_selector_free(&vsel);
		if (np < n->c.min_profiles)
			continue; /* not enough data yet: looked at again next time */
		char *body = NULL;
		int c = compare(n, tenant, svc, type, bv->v, bv->first, bv->last, nw->v, nw->first,
				nw->last, &body);
		if (c < 0) {
			rc = c;
			continue;
		}
		pair *p = add(n, tenant, svc, bv->v, nw->v, c ? NULL : "clean");
		if (!p) {
			free(body);
			rc = -ENOMEM;
			break;
		}
		if (c) {
			p->body = body;
			p->next_try = strobe_mono_ns();
			atomic_fetch_add(&n->found, 1);
			atomic_fetch_add(&n->pending, 1);
		} else
			*dirty = true;
	}
out:
	free(vs);
	strobe_range_result_free(&rr);
	strobe_selector_free(&sel);
	return rc;
}

typedef struct svc {
	const char *name, *type;
} svc;

static void check_tenant(srv_notify *n, const char *tenant, int64_t now, bool *dirty)
{
	strobe_series_list l = {0};
	strobe_err err = {{0}};
	if (strobe_store_series(n->srv->store, tenant, NULL, 0, now - n->c.lookback, now, 0, &l,
				&err) < 0) {
		atomic_fetch_add(&n->check_errors, 1);
		return;
	}
	svc *s = calloc(l.n + 1, sizeof(*s));
	size_t ns = 0;
	for (size_t i = 0; s && i < l.n; i++) {
		const char *name = NULL;
		bool has_version = false;
		for (size_t k = 0; k < l.v[i].nlabels; k++) {
			if (!strcmp(l.v[i].labels[k].name, n->c.service_label))
				name = l.v[i].labels[k].value;
			has_version |= !strcmp(l.v[i].labels[k].name, n->c.version_label);
		}
		if (!name || !has_version)
			continue;
		size_t j = 0;
		while (j < ns && strcmp(s[j].name, name))
			j++;
		/* One type per service: a CPU one when there is one (what a release makes slower),
		 * else the first. */
		if (j == ns) {
			if (ns >= NOTIFY_MAX_SERVICES)
				continue;
			s[ns++] = (svc){name, l.v[i].type};
		} else if (!strstr(s[j].type, "cpu") && strstr(l.v[i].type, "cpu"))
			s[j].type = l.v[i].type;
	}
	for (size_t j = 0; j < ns && !atomic_load(&n->stopping); j++)
		if (check_service(n, tenant, s[j].name, s[j].type, now, dirty) < 0)
			atomic_fetch_add(&n->check_errors, 1);
	free(s);
	strobe_series_list_free(&l);
}

/* ---- delivery ------------------------------------------------------------------------------ */

static size_t discard(char *d, size_t size, size_t nmemb, void *ud)
{
	(void)d;
	(void)ud;
	return size * nmemb;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)dn, (void)ut, (void)un;
	return atomic_load(&((srv_notify *)ud)->stopping) ? 1 : 0;
}

/* One POST: 0 on a 2xx answer. */
static int post(srv_notify *n, const char *body)
{
	CURL *c = curl_easy_init();
	if (!c)
		return -ENOMEM;
	struct curl_slist *h = strobe_http_headers(NULL, NULL, "Content-Type: application/json");
	long ms = (long)(n->c.timeout / 1000000);
	curl_easy_setopt(c, CURLOPT_URL, n->c.webhook);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "strobe-notifier");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, n);
	strobe_http_tls(c, NULL);
	CURLcode cr = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	return cr == CURLE_OK && code >= 200 && code < 300 ? 0 : -EIO;
}

static void deliver(srv_notify *n, bool *dirty)
{
	for (size_t i = 0; i < n->np && !atomic_load(&n->stopping); i++) {
		pair *p = &n->p[i];
		if (p->state || !p->body || strobe_mono_ns() < p->next_try)
			continue;
		int r = post(n, p->body);
		if (atomic_load(&n->stopping))
			return; /* aborted: neither a failure nor a delivery; recomputed next start */
		p->tries++;
		if (r == 0 || p->tries >= n->c.max_tries) {
			if (r < 0) {
				atomic_fetch_add(&n->failed, 1);
				atomic_fetch_add(&n->given_up, 1);
			} else
				atomic_fetch_add(&n->sent, 1);
			p->state = strdup(r == 0 ? "sent" : "given_up");
			free(p->body);
			p->body = NULL;
			atomic_fetch_sub(&n->pending, 1);
			*dirty = true;
			continue;
		}
		atomic_fetch_add(&n->failed, 1);
		/* Exponential backoff, bounded: backoff, 2x, 4x... up to backoff_max. */
		int64_t d = n->c.backoff;
		for (long k = 1; k < p->tries && d < n->c.backoff_max; k++)
			d *= 2;
		p->next_try = strobe_mono_ns() + (d < n->c.backoff_max ? d : n->c.backoff_max);
	}
}

static void *run(void *ud)
{
	srv_notify *n = ud;
	int64_t next_check = strobe_mono_ns();
	while (!atomic_load(&n->stopping)) {
		bool dirty = false;
		if (strobe_mono_ns() >= next_check) {
			int64_t now = strobe_real_ns();
			if (n->c.ntenants)
				for (size_t i = 0; i < n->c.ntenants; i++)
					check_tenant(n, n->c.tenants[i], now, &dirty);
			else if (n->srv->cfg.ntenants)
				for (size_t i = 0; i < n->srv->cfg.ntenants; i++)
					check_tenant(n, n->srv->cfg.tenants[i].id, now, &dirty);
			else
				check_tenant(n, "anonymous", now, &dirty);
			atomic_fetch_add(&n->checks, 1);
			next_check = strobe_mono_ns() + n->c.check_interval;
		}
		deliver(n, &dirty);
		if (dirty && save(n) < 0)
			atomic_fetch_add(&n->check_errors, 1);
		int64_t wake = next_check;
		for (size_t i = 0; i < n->np; i++)
			if (!n->p[i].state && n->p[i].body && n->p[i].next_try < wake)
				wake = n->p[i].next_try;
		pthread_mutex_lock(&n->mu);
		while (!atomic_load(&n->stopping) && strobe_mono_ns() < wake) {
			struct timespec ts = {(time_t)(wake / NS_S), (long)(wake % NS_S)};
			pthread_cond_timedwait(&n->cv, &n->mu, &ts);
		}
		pthread_mutex_unlock(&n->mu);
	}
	return NULL;
}

srv_notify *srv_notify_start(strobe_server *srv, strobe_err *err)
{
	if (!srv->cfg.notify_json)
		return NULL;
	srv_notify *n = calloc(1, sizeof(*n));
	if (!n) {
		strobe_errf(err, -ENOMEM, "out of memory");
		return NULL;
	}
	n->srv = srv;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&n->mu, NULL);
	json_t *j = json_loads(srv->cfg.notify_json, 0, NULL);
	int r = j ? ncfg_parse(j, &n->c, err) : strobe_errf(err, -EINVAL, "config: bad \"notify\"");
	json_decref(j);
	size_t l = strlen(srv->cfg.data_dir) + 32;
	if (r < 0 || !(n->state_path = malloc(l)))
		goto bad;
	snprintf(n->state_path, l, "%s/notify-state.json", srv->cfg.data_dir);
	if (load(n, err) < 0)
		goto bad;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (pthread_create(&n->thread, NULL, run, n) != 0) {
		strobe_errf(err, -EAGAIN, "cannot start the notifier thread");
		goto bad;
	}
	n->started = true;
	return n;
bad:
	if (err && !err->msg[0])
		strobe_errf(err, -ENOMEM, "out of memory");
	srv_notify_stop(n);
	return NULL;
}

void srv_notify_stop(srv_notify *n)
{
	if (!n)
		return;
	if (n->started) {
		pthread_mutex_lock(&n->mu);
		atomic_store(&n->stopping, true);
		pthread_cond_broadcast(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->thread, NULL);
	}
	for (size_t i = 0; i < n->np; i++) {
		free(n->p[i].tenant);
		free(n->p[i].service);
		free(n->p[i].base);
		free(n->p[i].nw);
		free(n->p[i].state);
		free(n->p[i].body);
	}
	free(n->p);
	free(n->state_path);
	ncfg_free(&n->c);
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
	free(n);
}

void srv_notify_metrics(srv_notify *n, FILE *f)
{
	static const struct {
		const char *name, *help, *type;
		size_t off;
	} m[] = {
		{"strobe_notify_checks_total", "Detection rounds run.", "counter",
		 offsetof(srv_notify, checks)},
		{"strobe_notify_check_errors_total",
		 "Services whose check failed (store errors), and state file writes that failed.",
		 "counter", offsetof(srv_notify, check_errors)},
		{"strobe_notify_regression_sets_total",
		 "Version pairs found with significant regressions.", "counter",
		 offsetof(srv_notify, found)},
		{"strobe_notify_sent_total", "Notifications the webhook accepted (2xx).", "counter",
		 offsetof(srv_notify, sent)},
		{"strobe_notify_failed_attempts_total", "Webhook POSTs that failed.", "counter",
		 offsetof(srv_notify, failed)},
		{"strobe_notify_given_up_total", "Notifications dropped after max_tries.", "counter",
		 offsetof(srv_notify, given_up)},
		{"strobe_notify_pending", "Notifications waiting for delivery.", "gauge",
		 offsetof(srv_notify, pending)},
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(*m); i++)
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", m[i].name, m[i].help, m[i].name,
			m[i].type, m[i].name,
			(unsigned long long)atomic_load(
				(atomic_uint_least64_t *)((char *)n + m[i].off)));
}
