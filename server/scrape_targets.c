// SPDX-License-Identifier: Apache-2.0
/*
 * Pull scraping inside `strobe server`: the config's "scrape" section turned into the scraper's
 * targets (server/scrape.c), and what the scraper fetches stored through strobe_store_push like
 * any push, so a scraped profile is named, deduplicated and kept exactly as a pushed one.
 *
 *   "scrape": [
 *     {"url": "http://10.0.0.5:6060", "labels": {"service_name": "checkout", "env": "prod"},
 *      "interval": "15s", "profiles": ["cpu", "allocs", "heap", "mutex", "block", "goroutine"],
 *      "cpu_seconds": 10, "tenant": "team-a"}
 *   ]
 *
 * Cumulative profiles (allocs, mutex, block) arrive as deltas between scrapes; the first scrape
 * of one only sets the baseline.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "scrape.h"
#include "server_impl.h"

#define MAX_TARGETS 4096
#define MAX_TARGET_LABELS 32

struct strobe_server_scraper {
	srv_scraper *sc;
	srv_scrape_target *targets;
	srv_kv **labels;  /* per target, owned strings */
	size_t ntargets;
	strobe_store *store;
	strobe_server_config cfg; /* shallow copy, for the label limits */
	json_t *root;        /* keeps the strings the targets point at */
	void (*log)(const char *msg);
	atomic_ullong stored, samples, failed; /* for /metrics */
};

/* The scraper calls this from its threads; the store serialises writers itself. */
static int ingest(void *ctxp, const char *hint, const srv_kv *labels, size_t nlabels,
		  strobe_profile *p, int64_t t_ns, int64_t dur_ns)
{
	struct strobe_server_scraper *s = ctxp;
	(void)dur_ns;
	const char *tenant = "anonymous";
	/* The tenant rides along as a label the scraper never sees: "__tenant__" is stripped. */
	strobe_labelpair lp[MAX_TARGET_LABELS + 2];
	size_t n = 0;
	for (size_t i = 0; i < nlabels && n < MAX_TARGET_LABELS + 2; i++) {
		if (strcmp(labels[i].key, "__tenant__") == 0)
			tenant = labels[i].value;
		else
			lp[n++] = (strobe_labelpair){labels[i].key, labels[i].value};
	}
	/* Per-sample labels (pprof.Do) make series of their own, as on the push API. */
	strobe_err err = {{0}};
	srv_label_groups g;
	int rc = srv_sample_groups(p, &s->cfg, lp, n, NULL, 0, &g, &err);
	strobe_push_item *items = rc == 0 ? calloc(g.n, sizeof(*items)) : NULL;
	if (rc == 0 && !items)
		rc = strobe_errf(&err, -ENOMEM, "out of memory");
	for (size_t i = 0; items && i < g.n; i++)
		items[i] = (strobe_push_item){.profile = p, .name = hint, .time_ns = t_ns,
					      .labels = g.g[i].labels, .nlabels = g.g[i].nlabels,
					      .slabels = g.g[i].slabels, .nslabels = g.g[i].nslabels,
					      .samples = g.g[i].samples, .nsamples = g.g[i].nsamples};
	strobe_push_req rq = {tenant, lp, n, items, g.n, 0};
	strobe_push_result res;
	if (rc == 0)
		rc = strobe_store_push(s->store, &rq, &res, &err);
	if (rc == 0) {
		strobe_push_result_free(&res);
		atomic_fetch_add(&s->stored, 1);
		atomic_fetch_add(&s->samples, strobe_nsamples(p));
	} else {
		atomic_fetch_add(&s->failed, 1);
		if (s->log)
			s->log(err.msg);
	}
	srv_label_groups_free(&g); /* zeroed on error */
	free(items);
	strobe_profile_free(p); /* the callee owns it */
	return rc;
}

static void log_line(void *ctx, const char *msg)
{
	struct strobe_server_scraper *s = ctx;
	if (s->log)
		s->log(msg);
}

static uint32_t profile_bit(const char *name)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} t[] = {{"cpu", STROBE_SCRAPE_CPU},	     {"heap", STROBE_SCRAPE_HEAP},
		 {"allocs", STROBE_SCRAPE_ALLOCS},   {"mutex", STROBE_SCRAPE_MUTEX},
		 {"block", STROBE_SCRAPE_BLOCK},     {"goroutine", STROBE_SCRAPE_GOROUTINE}};
	for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++)
		if (strcmp(name, t[i].name) == 0)
			return t[i].bit;
	return 0;
}

void strobe_server_scrape_stop(strobe_server_scraper *s)
{
	if (!s)
		return;
	if (s->sc) {
		srv_scraper_stop(s->sc);
		srv_scraper_free(s->sc);
	}
	for (size_t i = 0; i < s->ntargets; i++)
		free(s->labels ? s->labels[i] : NULL);
	free(s->labels);
	free(s->targets);
	json_decref(s->root);
	free(s);
}

strobe_server_scraper *strobe_server_scrape_start(const strobe_server_config *c, strobe_store *st,
						  void (*log)(const char *msg), strobe_err *err)
{
	if (err)
		err->msg[0] = 0;
	if (!c->scrape_json)
		return NULL;
	json_error_t je;
	json_t *root = json_loads(c->scrape_json, 0, &je);
	if (!root || !json_is_array(root)) {
		strobe_errf(err, -EINVAL, "config: \"scrape\" must be a list of targets%s%s",
			    root ? "" : ": ", root ? "" : je.text);
		json_decref(root);
		return NULL;
	}
	size_t n = json_array_size(root);
	if (n == 0) {
		json_decref(root);
		return NULL;
	}
	if (n > MAX_TARGETS) {
		strobe_errf(err, -E2BIG, "config: more than %d scrape targets", MAX_TARGETS);
		json_decref(root);
		return NULL;
	}
	struct strobe_server_scraper *s = calloc(1, sizeof(*s));
	if (!s || !(s->targets = calloc(n, sizeof(*s->targets))) ||
	    !(s->labels = calloc(n, sizeof(*s->labels)))) {
		strobe_errf(err, -ENOMEM, "out of memory");
		json_decref(root);
		strobe_server_scrape_stop(s);
		return NULL;
	}
	s->root = root;
	s->ntargets = n;
	s->store = st;
	s->cfg = *c;
	s->log = log;
	for (size_t i = 0; i < n; i++) {
		json_t *t = json_array_get(root, i), *v;
		srv_scrape_target *tg = &s->targets[i];
		const char *url = json_string_value(json_object_get(t, "url"));
		if (!json_is_object(t) || !url) {
			strobe_errf(err, -EINVAL, "config: scrape target %zu has no \"url\"", i + 1);
			goto bad;
		}
		/* The URL is a label of the public /metrics and goes into the log: no secrets in it. */
		char what[48];
		snprintf(what, sizeof(what), "config: scrape target %zu", i + 1);
		if (strobe_url_check_secrets(url, what,
					      "scrape targets take none (the URL is a label "
					      "of the public /metrics)",
					      err) < 0)
			goto bad;
		tg->url = url;
		json_t *labels = json_object_get(t, "labels");
		size_t nl = labels ? json_object_size(labels) : 0;
		if (nl > MAX_TARGET_LABELS) {
			strobe_errf(err, -E2BIG, "config: scrape target %zu has more than %d labels",
				    i + 1, MAX_TARGET_LABELS);
			goto bad;
		}
		srv_kv *kv = calloc(nl + 1, sizeof(*kv));
		if (!kv) {
			strobe_errf(err, -ENOMEM, "out of memory");
			goto bad;
		}
		s->labels[i] = kv;
		const char *key;
		size_t k = 0;
		json_object_foreach(labels, key, v)
		{
			if (!json_is_string(v)) {
				strobe_errf(err, -EINVAL,
					    "config: scrape target %zu: label %s is not a string", i + 1,
					    key);
				goto bad;
			}
			kv[k++] = (srv_kv){key, json_string_value(v)};
		}
		const char *tenant = json_string_value(json_object_get(t, "tenant"));
		if (tenant)
			kv[k++] = (srv_kv){"__tenant__", tenant};
		tg->labels = kv;
		tg->nlabels = k;
		const char *iv = json_string_value(json_object_get(t, "interval"));
		if (iv && strobe_duration_parse(iv, &tg->interval_ns, err) < 0)
			goto bad;
		json_t *profs = json_object_get(t, "profiles");
		size_t pi;
		json_array_foreach(profs, pi, v)
		{
			uint32_t bit = json_is_string(v) ? profile_bit(json_string_value(v)) : 0;
			if (!bit) {
				strobe_errf(err, -EINVAL,
					    "config: scrape target %zu: unknown profile %s (cpu, heap, "
					    "allocs, mutex, block, goroutine)",
					    i + 1, json_is_string(v) ? json_string_value(v) : "?");
				goto bad;
			}
			tg->profiles |= bit;
		}
		json_int_t secs = json_integer_value(json_object_get(t, "cpu_seconds"));
		if (secs < 0 || secs > 3600) {
			strobe_errf(err, -EINVAL, "config: scrape target %zu: cpu_seconds out of range",
				    i + 1);
			goto bad;
		}
		tg->cpu_seconds = (uint32_t)secs;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srv_scrape_config sc = {.targets = s->targets, .ntargets = n, .ingest = ingest, .ctx = s,
				   .log = log_line};
	if (!(s->sc = srv_scraper_new(&sc, err)) || srv_scraper_start(s->sc) < 0) {
		if (err && !err->msg[0])
			strobe_errf(err, -EINVAL, "cannot start the scraper");
		goto bad;
	}
	return s;
bad:
	strobe_server_scrape_stop(s);
	return NULL;
}

/* Label values in the text format escape backslash, quote and newline. */
static void put_escaped(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*v, f);
	}
}

void srv_scrape_metrics(strobe_server_scraper *s, FILE *f)
{
	static const char *const names[3] = {"strobe_scrape_rounds_total",
					     "strobe_scrape_errors_total",
					     "strobe_scrape_last_round_timestamp_seconds"};
	static const char *const help[3] = {
		"Scrape rounds completed, per target.",
		"Endpoint scrapes that failed (fetch, decode or store), per target.",
		"Unix time of the start of the target's last round."};
	for (int k = 0; k < 3; k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", names[k], help[k], names[k],
			k < 2 ? "counter" : "gauge");
		for (size_t i = 0; i < s->ntargets; i++) {
			srv_scrape_status st;
			if (srv_scraper_status(s->sc, i, &st) < 0)
				continue;
			fprintf(f, "%s{target=\"", names[k]);
			put_escaped(f, s->targets[i].url);
			if (k < 2)
				fprintf(f, "\"} %llu\n",
					(unsigned long long)(k ? st.errors : st.rounds));
			else
				fprintf(f, "\"} %.3f\n", (double)st.last_round_ns / 1e9);
		}
	}
	fprintf(f, "# HELP strobe_scrape_profiles_stored_total Scraped profiles stored.\n"
		   "# TYPE strobe_scrape_profiles_stored_total counter\n"
		   "strobe_scrape_profiles_stored_total %llu\n"
		   "# HELP strobe_scrape_samples_stored_total pprof samples in them.\n"
		   "# TYPE strobe_scrape_samples_stored_total counter\n"
		   "strobe_scrape_samples_stored_total %llu\n"
		   "# HELP strobe_scrape_store_failures_total Scraped profiles the store refused.\n"
		   "# TYPE strobe_scrape_store_failures_total counter\n"
		   "strobe_scrape_store_failures_total %llu\n",
		(unsigned long long)atomic_load(&s->stored),
		(unsigned long long)atomic_load(&s->samples),
		(unsigned long long)atomic_load(&s->failed));
}
