// SPDX-License-Identifier: Apache-2.0
/*
 * The pull-mode scraper (see server/scrape.h): fetches Go's /debug/pprof endpoints with libcurl,
 * turns cumulative profiles into deltas between scrapes, hands each result to the server's
 * ingest callback.
 *
 * One thread per target, as Parca and Pyroscope run one scrape loop per target: a CPU profile
 * request blocks for its N seconds, and one slow target must not delay the others. A target's
 * state (the previous cumulative profiles) is guarded by its own mutex, so a synchronous
 * srv_scraper_scrape and the target's thread never interleave a round.
 *
 * Every response is capped (max_response) while it arrives, and every request has a timeout;
 * stopping aborts transfers in flight through curl's progress callback instead of waiting out a
 * CPU profile.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strobe/buf.h"
#include "strobe/clock.h"
#include "strobe/codec.h"
#include "strobe/delta.h"
#include "strobe/http_client.h"

#include "scrape.h"

#define DEF_INTERVAL_NS ((int64_t)15 * 1000000000)
#define DEF_TIMEOUT_NS ((int64_t)10 * 1000000000)
#define DEF_MAX_RESPONSE ((size_t)64 << 20)
#define MAX_DECOMPRESSED ((size_t)256 << 20) /* a gzipped pprof after gunzip */

typedef struct ep_desc {
	uint32_t bit;
	const char *path, *hint;
	bool cumulative; /* holds counters since process start */
} ep_desc;

/* Snapshots first: the CPU profile blocks for seconds and would skew their times. */
static const ep_desc endpoints[] = {
	{STROBE_SCRAPE_GOROUTINE, "goroutine", "goroutine", false},
	{STROBE_SCRAPE_ALLOCS, "allocs", "memory", true},
	{STROBE_SCRAPE_HEAP, "heap", "memory", true},
	{STROBE_SCRAPE_MUTEX, "mutex", "mutex", true},
	{STROBE_SCRAPE_BLOCK, "block", "block", true},
	{STROBE_SCRAPE_CPU, "profile", "process_cpu", false},
};
#define NEP (sizeof(endpoints) / sizeof(*endpoints))

typedef struct tgt {
	char *url;
	srv_kv *labels; /* owned strings */
	size_t nlabels;
	int64_t interval_ns, timeout_ns;
	uint32_t profiles, cpu_seconds;
	size_t max_response;

	pthread_mutex_t mu; /* guards everything below */
	strobe_profile *prev[NEP]; /* last raw cumulative profile per endpoint */
	int64_t prev_ns[NEP];      /* when it was fetched */
	srv_scrape_status status;
	pthread_t thread;
	bool thread_started;
	struct srv_scraper *owner;
} tgt;

struct srv_scraper {
	tgt *targets;
	size_t ntargets;
	char *prefix;
	srv_scrape_ingest_fn ingest;
	void *ctx;
	void (*log)(void *ctx, const char *msg);

	atomic_bool stopping;
	bool running;
	pthread_mutex_t mu; /* with cv: wakes sleeping threads on stop */
	pthread_cond_t cv;
};

/* ---- construction ------------------------------------------------------------------------------ */

static void tgt_free(tgt *t)
{
	free(t->url);
	for (size_t i = 0; i < t->nlabels; i++) {
		free((char *)t->labels[i].key);
		free((char *)t->labels[i].value);
	}
	free(t->labels);
	for (size_t e = 0; e < NEP; e++)
		strobe_profile_free(t->prev[e]);
	pthread_mutex_destroy(&t->mu);
}

static int add_label(tgt *t, const char *k, const char *v)
{
	srv_kv *nl = realloc(t->labels, (t->nlabels + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	t->labels = nl;
	char *kk = strdup(k), *vv = strdup(v);
	if (!kk || !vv) {
		free(kk);
		free(vv);
		return -ENOMEM;
	}
	nl[t->nlabels++] = (srv_kv){kk, vv};
	return 0;
}

static const char *find_label(const tgt *t, const char *k)
{
	for (size_t i = 0; i < t->nlabels; i++)
		if (strcmp(t->labels[i].key, k) == 0)
			return t->labels[i].value;
	return NULL;
}

static int tgt_init(tgt *t, const srv_scrape_target *c, strobe_err *err)
{
	const char *u = c->url;
	const char *host = !u ? NULL
			   : strncmp(u, "http://", 7) == 0 ? u + 7
			   : strncmp(u, "https://", 8) == 0 ? u + 8
							    : NULL;
	if (!host || !*host || *host == '/')
		return strobe_errf(err, -EINVAL, "scrape target '%s': expected http://host:port[/path]",
				   u ? u : "(null)");
	if (c->interval_ns < 0 || c->timeout_ns < 0)
		return strobe_errf(err, -EINVAL, "scrape target '%s': negative interval or timeout", u);
	size_t hl = strcspn(host, "/?#");
	size_t ul = strlen(u);
	while (ul > 0 && u[ul - 1] == '/') /* the prefix starts with '/' */
		ul--;
	if (!(t->url = strndup(u, ul)))
		return -ENOMEM;
	t->interval_ns = c->interval_ns ? c->interval_ns : DEF_INTERVAL_NS;
	t->timeout_ns = c->timeout_ns ? c->timeout_ns : DEF_TIMEOUT_NS;
	t->profiles = c->profiles ? c->profiles : STROBE_SCRAPE_DEFAULT;
	t->max_response = c->max_response ? c->max_response : DEF_MAX_RESPONSE;
	int64_t secs = t->interval_ns / 1000000000 - 1;
	if (secs < 1)
		secs = 1;
	t->cpu_seconds = c->cpu_seconds ? c->cpu_seconds : (uint32_t)(secs > 3600 ? 3600 : secs);
	for (size_t i = 0; i < c->nlabels; i++)
		if (c->labels[i].key && c->labels[i].value && add_label(t, c->labels[i].key,
									 c->labels[i].value) < 0)
			return -ENOMEM;
	char inst[256];
	snprintf(inst, sizeof(inst), "%.*s", (int)(hl < 255 ? hl : 255), host);
	if (!find_label(t, "instance") && add_label(t, "instance", inst) < 0)
		return -ENOMEM;
	if (!find_label(t, "service_name") &&
	    add_label(t, "service_name", find_label(t, "instance")) < 0)
		return -ENOMEM;
	return 0;
}

srv_scraper *srv_scraper_new(const srv_scrape_config *cfg, strobe_err *err)
{
	if (!cfg->ingest) {
		strobe_errf(err, -EINVAL, "scraper: no ingest callback");
		errno = EINVAL;
		return NULL;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srv_scraper *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&s->mu, NULL);
	atomic_init(&s->stopping, false);
	s->ingest = cfg->ingest;
	s->ctx = cfg->ctx;
	s->log = cfg->log;
	int r = -ENOMEM;
	if (!(s->prefix = strdup(cfg->path_prefix ? cfg->path_prefix : "/debug/pprof")))
		goto fail;
	if (cfg->ntargets && !(s->targets = calloc(cfg->ntargets, sizeof(*s->targets))))
		goto fail;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		tgt *t = &s->targets[i];
		pthread_mutex_init(&t->mu, NULL);
		t->owner = s;
		s->ntargets = i + 1;
		if ((r = tgt_init(t, &cfg->targets[i], err)) < 0)
			goto fail;
	}
	return s;
fail:
	srv_scraper_free(s);
	errno = -r;
	return NULL;
}

void srv_scraper_free(srv_scraper *s)
{
	if (!s)
		return;
	srv_scraper_stop(s);
	for (size_t i = 0; i < s->ntargets; i++)
		tgt_free(&s->targets[i]);
	free(s->targets);
	free(s->prefix);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
	curl_global_cleanup();
}

/* ---- fetching ---------------------------------------------------------------------------------- */

typedef struct body {
	strobe_buf b; /* capped at the target's max_response */
	bool too_big;
} body;

static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
	body *b = ud;
	int r = strobe_buf_add(&b->b, data, size * nmemb);
	b->too_big |= r == -E2BIG;
	return r < 0 ? 0 : size * nmemb; /* 0 makes curl fail the transfer with CURLE_WRITE_ERROR */
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	srv_scraper *s = ud;
	return atomic_load(&s->stopping) ? 1 : 0; /* non-zero aborts the transfer */
}

static int fetch(srv_scraper *s, const char *url, int64_t timeout_ns, size_t max, body *b,
		 strobe_err *err)
{
	memset(b, 0, sizeof(*b));
	strobe_buf_init(&b->b, max);
	CURL *c = curl_easy_init();
	if (!c)
		return -ENOMEM;
	char ebuf[CURL_ERROR_SIZE] = "";
	long ms = (long)(timeout_ns / 1000000);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms > 0 ? ms : 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "strobe-scraper");
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* whatever curl can undo */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	strobe_http_tls(c, NULL);
	CURLcode cr = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	int r = 0;
	if (b->too_big)
		r = strobe_errf(err, -E2BIG, "%s: response larger than %zu bytes", url, max);
	else if (cr == CURLE_ABORTED_BY_CALLBACK)
		r = strobe_errf(err, -ECANCELED, "%s: aborted (scraper stopping)", url);
	else if (cr == CURLE_OPERATION_TIMEDOUT)
		r = strobe_errf(err, -ETIMEDOUT, "%s: timed out after %ld ms", url, ms);
	else if (cr != CURLE_OK)
		r = strobe_errf(err, -EIO, "%s: %s", url, ebuf[0] ? ebuf : curl_easy_strerror(cr));
	else if (code != 200) {
		/* Go's pprof handler explains itself in a text body ("profile duration exceeds
		 * server's WriteTimeout", "Unknown profile"): keep its first line. */
		size_t l = 0;
		while (l < b->b.len && l < 200 && b->b.p[l] != '\n' && b->b.p[l] != '\r')
			l++;
		r = strobe_errf(err, -EIO, "%s: HTTP %ld: %.*s", url, code, (int)l,
				b->b.p ? b->b.p : "");
	}
	if (r < 0)
		strobe_buf_free(&b->b);
	return r;
}

/* A copy of p with only the columns where keep[t] (at least one). */
static int keep_columns(const strobe_profile *p, const bool *keep, strobe_profile **out)
{
	strobe_profile *c = strobe_profile_clone(p);
	if (!c)
		return -ENOMEM;
	uint32_t n = strobe_nsamples(c), k = 0;
	for (uint32_t t = 0; t < c->ntypes; t++)
		k += keep[t];
	int64_t *v = malloc(((size_t)n + 1) * (k ? k : 1) * sizeof(*v));
	if (!v) {
		strobe_profile_free(c);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s <= n; s++) {
		uint32_t o = 0;
		for (uint32_t t = 0; t < c->ntypes; t++)
			if (keep[t])
				v[(size_t)s * k + o++] = s ? strobe_sample_values(c, s)[t] : 0;
	}
	uint32_t o = 0;
	for (uint32_t t = 0; t < c->ntypes; t++)
		if (keep[t])
			c->types[o++] = c->types[t];
	c->ntypes = k;
	c->default_type = -1;
	free(c->values);
	c->values = v;
	c->values_cap = (size_t)n + 1;
	int r = strobe_profile_drop_zero(c);
	if (r < 0) {
		strobe_profile_free(c);
		return r;
	}
	*out = c;
	return 0;
}

static bool column_cumulative(const ep_desc *e, const char *type)
{
	if (e->bit == STROBE_SCRAPE_HEAP || e->bit == STROBE_SCRAPE_ALLOCS)
		return strncmp(type, "alloc_", 6) == 0; /* inuse_* are gauges */
	return e->cumulative;
}

/* Scrapes one endpoint of t (t->mu held). */
static int scrape_endpoint(srv_scraper *s, tgt *t, size_t ei, strobe_err *err)
{
	const ep_desc *e = &endpoints[ei];
	char url[4096];
	int64_t timeout = t->timeout_ns;
	if (e->bit == STROBE_SCRAPE_CPU) {
		snprintf(url, sizeof(url), "%s%s/%s?seconds=%u", t->url, s->prefix, e->path,
			 t->cpu_seconds);
		timeout += (int64_t)t->cpu_seconds * 1000000000;
	} else {
		snprintf(url, sizeof(url), "%s%s/%s", t->url, s->prefix, e->path);
	}
	int64_t fetched = strobe_real_ns();
	body b;
	int r = fetch(s, url, timeout, t->max_response, &b, err);
	if (r < 0)
		return r;
	const uint8_t *raw = (const uint8_t *)b.b.p;
	size_t rawlen = b.b.len;
	uint8_t *plain = NULL;
	strobe_err derr = {{0}};
	if (rawlen >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
		if ((r = strobe_gunzip_capped(raw, rawlen, MAX_DECOMPRESSED, &plain, &rawlen, url,
					      &derr)) < 0) {
			strobe_buf_free(&b.b);
			return strobe_errf(err, r, "%s", derr.msg);
		}
		raw = plain;
	}
	strobe_profile *p = NULL;
	r = strobe_pprof_decode(raw, rawlen, url, &p, &derr);
	strobe_buf_free(&b.b);
	free(plain);
	if (r < 0)
		return strobe_errf(err, r, "%s", derr.msg);
	if (!p->time_nanos)
		p->time_nanos = fetched;
	strobe_profile *deliver = NULL, *gauges = NULL;
	int64_t t0 = p->time_nanos, dur = p->duration_nanos, now = p->time_nanos;
	if (!e->cumulative) {
		deliver = p; /* CPU (its own window) or goroutines (a snapshot) */
		p = NULL;
	} else {
		bool *cum = calloc(2 * ((size_t)p->ntypes + 1), sizeof(*cum));
		if (!cum) {
			strobe_profile_free(p);
			return -ENOMEM;
		}
		bool *gauge = cum + p->ntypes + 1;
		bool any_gauge = false, any_counter = false;
		for (uint32_t c = 0; c < p->ntypes; c++) {
			cum[c] = column_cumulative(e, strobe_str(p, p->types[c].type));
			gauge[c] = !cum[c];
			any_gauge |= gauge[c];
			any_counter |= cum[c];
		}
		strobe_profile *prev = t->prev[ei];
		if (prev && any_counter) {
			bool reset = false;
			strobe_profile *d = NULL;
			r = strobe_profile_delta_cols(prev, p, cum, &d, &reset, &derr);
			if (r == -EINVAL) { /* the target changed its sample types: start over */
				r = 0;
			} else if (r == 0) {
				/* The counters' delta covers the window since the last scrape and is
				 * stamped at its start; the gauges are split off, below. */
				if (any_gauge) {
					r = keep_columns(d, cum, &deliver);
					strobe_profile_free(d);
				} else {
					deliver = d;
				}
				t0 = reset ? t->prev_ns[ei] : prev->time_nanos;
				dur = p->time_nanos - t0;
				if (deliver) {
					deliver->time_nanos = t0;
					deliver->duration_nanos = dur > 0 ? dur : 0;
				}
			}
		}
		/* Gauges (a heap's inuse_*) are the state at this scrape: stamped with this scrape's
		 * time, never with the window's start, which is the previous scrape's time (a point
		 * already delivered then). The first sight delivers them alone: counters only set
		 * the baseline. */
		if (r == 0 && any_gauge && (r = keep_columns(p, gauge, &gauges)) == 0)
			gauges->duration_nanos = 0;
		free(cum);
		if (r < 0) {
			strobe_profile_free(deliver);
			strobe_profile_free(p);
			return r;
		}
		strobe_profile_free(t->prev[ei]);
		t->prev[ei] = p;
		t->prev_ns[ei] = fetched;
		p = NULL;
	}
	if (deliver) {
		r = s->ingest(s->ctx, e->hint, t->labels, t->nlabels, deliver, t0, dur > 0 ? dur : 0);
		if (r < 0) {
			strobe_profile_free(gauges);
			return strobe_errf(err, r, "%s: ingest failed: %s", url, strerror(-r));
		}
	}
	if (gauges) {
		r = s->ingest(s->ctx, e->hint, t->labels, t->nlabels, gauges, now, 0);
		if (r < 0)
			return strobe_errf(err, r, "%s: ingest failed: %s", url, strerror(-r));
	}
	return 0;
}

static int scrape_round(srv_scraper *s, tgt *t, strobe_err *err)
{
	int first = 0;
	pthread_mutex_lock(&t->mu);
	t->status.last_round_ns = strobe_real_ns();
	for (size_t ei = 0; ei < NEP; ei++) {
		if (!(t->profiles & endpoints[ei].bit))
			continue;
		if (atomic_load(&s->stopping))
			break;
		strobe_err e = {{0}};
		int r = scrape_endpoint(s, t, ei, &e);
		if (r < 0) {
			t->status.errors++;
			/* Truncated on purpose: the status keeps a short line. */
			size_t l = strnlen(e.msg, sizeof(t->status.last_error) - 1);
			memcpy(t->status.last_error, e.msg, l);
			t->status.last_error[l] = 0;
			if (s->log)
				s->log(s->ctx, e.msg);
			if (!first) {
				first = r;
				strobe_errf(err, r, "%s", e.msg);
			}
		}
	}
	t->status.rounds++;
	pthread_mutex_unlock(&t->mu);
	return first;
}

int srv_scraper_scrape(srv_scraper *s, size_t ti, strobe_err *err)
{
	if (ti >= s->ntargets)
		return strobe_errf(err, -EINVAL, "no scrape target %zu", ti);
	return scrape_round(s, &s->targets[ti], err);
}

/* ---- the loop ---------------------------------------------------------------------------------- */

static void *target_loop(void *arg)
{
	tgt *t = arg;
	srv_scraper *s = t->owner;
	while (!atomic_load(&s->stopping)) {
		int64_t next = strobe_mono_ns() + t->interval_ns;
		scrape_round(s, t, NULL);
		struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
		pthread_mutex_lock(&s->mu);
		while (!atomic_load(&s->stopping) && strobe_mono_ns() < next)
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

int srv_scraper_start(srv_scraper *s)
{
	if (s->running)
		return -EALREADY;
	atomic_store(&s->stopping, false);
	s->running = true;
	for (size_t i = 0; i < s->ntargets; i++) {
		int r = pthread_create(&s->targets[i].thread, NULL, target_loop, &s->targets[i]);
		if (r) {
			srv_scraper_stop(s);
			return -r;
		}
		s->targets[i].thread_started = true;
	}
	return 0;
}

void srv_scraper_stop(srv_scraper *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->stopping, true);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < s->ntargets; i++)
		if (s->targets[i].thread_started) {
			pthread_join(s->targets[i].thread, NULL);
			s->targets[i].thread_started = false;
		}
	s->running = false;
	atomic_store(&s->stopping, false);
}

int srv_scraper_status(srv_scraper *s, size_t ti, srv_scrape_status *st)
{
	if (ti >= s->ntargets)
		return -EINVAL;
	pthread_mutex_lock(&s->targets[ti].mu);
	*st = s->targets[ti].status;
	pthread_mutex_unlock(&s->targets[ti].mu);
	return 0;
}

int srv_scraper_last_raw(srv_scraper *s, size_t ti, uint32_t ep,
			    strobe_profile **out)
{
	*out = NULL;
	if (ti >= s->ntargets)
		return -EINVAL;
	tgt *t = &s->targets[ti];
	int r = -ENOENT;
	pthread_mutex_lock(&t->mu);
	for (size_t e = 0; e < NEP; e++)
		if (endpoints[e].bit == ep && t->prev[e]) {
			r = (*out = strobe_profile_clone(t->prev[e])) ? 0 : -ENOMEM;
			break;
		}
	pthread_mutex_unlock(&t->mu);
	return r;
}
