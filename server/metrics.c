// SPDX-License-Identifier: Apache-2.0
/*
 * GET /metrics: the server's own health in the Prometheus text exposition format (version
 * 0.0.4), so the profiler is watched by the same Prometheus that watches everything else.
 *
 *   strobe_ingested_profiles_total{tenant,source}   profiles stored (source push | ingest)
 *   strobe_ingested_bytes_total{tenant,source}      request bytes of them, as received
 *   strobe_ingested_samples_total{tenant,source}    pprof samples (rows) in them
 *   strobe_rejected_total{reason}                   refused pushes, by limit or error kind
 *   strobe_request_duration_seconds{handler}        histogram: query, diff, range, labels, push...
 *   strobe_store_size_bytes                         the store's files on disk (db, WAL, shm)
 *   strobe_store_series / _stacks / _points ...     what the store holds
 *   strobe_store_commits_total, _committed_pushes_total   group commit: pushes per fsync
 *   strobe_tls_enabled, strobe_tls_certificate_expiry_seconds   HTTPS on, and until when
 *   strobe_scrape_*{target}                         pull scraping: rounds, errors, last round
 *   process_resident_memory_bytes, process_cpu_seconds_total
 *
 * Counters are kept under one mutex (a handful of additions per request). The tenant table is
 * capped: past MAX_TENANTS distinct tenants the rest are counted under tenant="_other", so an
 * open server cannot be made to grow it without bound.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/times.h>
#include <unistd.h>

#include "server_impl.h"
#include "notify.h"

#define MAX_TENANTS 256
#define MAX_REASONS 64

static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
				 0.25,  0.5,    1,     2.5,  5,     10};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

static const char *const handlers[SRV_H_N] = {
	"push", "ingest", "query", "diff", "range", "labels", "label_values", "profile_types",
	"series", "admin", "metrics", "other", "debuginfo", "otlp", "connect", "connect_push", "render", "cost", "leaks",
	"pgo", "regressions"};

typedef struct tenant_ctr {
	char name[65];
	uint64_t profiles[SRV_SRC_N], bytes[SRV_SRC_N], samples[SRV_SRC_N]; /* [source] */
} tenant_ctr;

struct srv_metrics {
	pthread_mutex_t mu;
	tenant_ctr *t;
	size_t nt;
	struct {
		char name[48];
		uint64_t n;
	} rej[MAX_REASONS];
	size_t nrej;
	uint64_t hist[SRV_H_N][NBUCKETS + 1], count[SRV_H_N];
	double sum[SRV_H_N];
};

void strobe_server_set_scraper(strobe_server *srv, strobe_server_scraper *s)
{
	srv->scraper = s;
}

srv_metrics *srv_metrics_new(void)
{
	srv_metrics *m = calloc(1, sizeof(*m));
	if (m)
		pthread_mutex_init(&m->mu, NULL);
	return m;
}

void srv_metrics_free(srv_metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m->t);
	free(m);
}

static tenant_ctr *tenant_get(srv_metrics *m, const char *name)
{
	for (size_t i = 0; i < m->nt; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return &m->t[i];
	if (m->nt == MAX_TENANTS) {
		if (strcmp(name, "_other") == 0)
			return NULL;
		return tenant_get(m, "_other");
	}
	if (!m->t && !(m->t = calloc(MAX_TENANTS + 1, sizeof(*m->t))))
		return NULL;
	tenant_ctr *t = &m->t[m->nt++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	return t;
}

void srv_metrics_ingested(srv_metrics *m, const char *tenant, int source, uint64_t profiles,
			  uint64_t bytes, uint64_t samples)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	tenant_ctr *t = tenant_get(m, tenant);
	if (!t && m->nt == MAX_TENANTS)
		t = &m->t[MAX_TENANTS - 1]; /* "_other" could not be added: the last one */
	if (t) {
		t->profiles[source] += profiles;
		t->bytes[source] += bytes;
		t->samples[source] += samples;
	}
	pthread_mutex_unlock(&m->mu);
}

/* A refused push's reason: the limit its message names ("limit max_body_bytes: ..."), else
 * the kind of error its status says. */
static void reason_of(unsigned status, const char *msg, char *out, size_t cap)
{
	const char *l = strstr(msg, "limit ");
	if (l == msg || (l && l > msg && l[-1] == ' ' && strncmp(l + 6, "max_", 4) == 0)) {
		size_t n = strspn(l + 6, "abcdefghijklmnopqrstuvwxyz_");
		if (n && n < cap) {
			memcpy(out, l + 6, n);
			out[n] = 0;
			return;
		}
	}
	snprintf(out, cap, "%s",
		 status == 400	 ? "invalid"
		 : status == 401 ? "unauthorized"
		 : status == 413 ? "too_large"
		 : status == 429 ? "limit"
		 : status == 507 ? "disk_full"
		 : status == 503 ? "overloaded"
		 : status == 404 ? "not_found"
		 : status >= 500 ? "internal"
				 : "other");
}

void srv_metrics_request(srv_metrics *m, int handler, unsigned status, const char *errmsg,
			 double seconds)
{
	if (!m || handler < 0 || handler >= SRV_H_N)
		return;
	char reason[48] = "";
	bool rejected = (handler == SRV_H_PUSH || handler == SRV_H_INGEST || handler == SRV_H_OTLP ||
			 handler == SRV_H_CONNECT_PUSH) && status >= 400;
	if (rejected)
		reason_of(status, errmsg ? errmsg : "", reason, sizeof(reason));
	pthread_mutex_lock(&m->mu);
	size_t b = 0;
	while (b < NBUCKETS && seconds > buckets[b])
		b++;
	m->hist[handler][b]++;
	m->count[handler]++;
	m->sum[handler] += seconds;
	if (rejected) {
		size_t i = 0;
		while (i < m->nrej && strcmp(m->rej[i].name, reason) != 0)
			i++;
		if (i == m->nrej && m->nrej < MAX_REASONS)
			snprintf(m->rej[m->nrej++].name, sizeof(m->rej[0].name), "%s", reason);
		if (i < m->nrej)
			m->rej[i].n++;
	}
	pthread_mutex_unlock(&m->mu);
}

static uint64_t file_size(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void counter(FILE *f, const char *name, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
}

static void gauge(FILE *f, const char *name, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

static void write_process(FILE *f)
{
	long rss_pages = 0, page = sysconf(_SC_PAGESIZE);
	FILE *sm = fopen("/proc/self/statm", "r");
	if (sm) {
		if (fscanf(sm, "%*d %ld", &rss_pages) != 1)
			rss_pages = 0;
		fclose(sm);
	}
	struct tms t;
	times(&t);
	long hz = sysconf(_SC_CLK_TCK);
	gauge(f, "process_resident_memory_bytes", "Resident memory of the server.");
	fprintf(f, "process_resident_memory_bytes %ld\n", rss_pages * page);
	counter(f, "process_cpu_seconds_total", "User and system CPU time of the server.");
	fprintf(f, "process_cpu_seconds_total %.2f\n",
		hz > 0 ? (double)(t.tms_utime + t.tms_stime) / (double)hz : 0.0);
}

int srv_metrics_get(srv_req *r)
{
	srv_metrics *m = r->srv->metrics;
	if (!m)
		return srv_error(r, 500, "metrics are not kept by this server");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return srv_error(r, 500, "out of memory");
	static const char *const src[SRV_SRC_N] = {"push", "ingest", "otlp"};
	pthread_mutex_lock(&m->mu);
	counter(f, "strobe_ingested_profiles_total", "Profiles stored, by tenant and API.");
	for (size_t i = 0; i < m->nt; i++)
		for (int s = 0; s < SRV_SRC_N; s++)
			fprintf(f, "strobe_ingested_profiles_total{tenant=\"%s\",source=\"%s\"} %llu\n",
				m->t[i].name, src[s], (unsigned long long)m->t[i].profiles[s]);
	counter(f, "strobe_ingested_bytes_total",
		"Request body bytes of the stored profiles, as received (gzipped if sent so).");
	for (size_t i = 0; i < m->nt; i++)
		for (int s = 0; s < SRV_SRC_N; s++)
			fprintf(f, "strobe_ingested_bytes_total{tenant=\"%s\",source=\"%s\"} %llu\n",
				m->t[i].name, src[s], (unsigned long long)m->t[i].bytes[s]);
	counter(f, "strobe_ingested_samples_total", "pprof samples in the stored profiles.");
	for (size_t i = 0; i < m->nt; i++)
		for (int s = 0; s < SRV_SRC_N; s++)
			fprintf(f, "strobe_ingested_samples_total{tenant=\"%s\",source=\"%s\"} %llu\n",
				m->t[i].name, src[s], (unsigned long long)m->t[i].samples[s]);
	counter(f, "strobe_rejected_total",
		"Pushes refused (nothing stored), by the limit named or the kind of error.");
	for (size_t i = 0; i < m->nrej; i++)
		fprintf(f, "strobe_rejected_total{reason=\"%s\"} %llu\n", m->rej[i].name,
			(unsigned long long)m->rej[i].n);
	fprintf(f, "# HELP strobe_request_duration_seconds Time to answer a request, by handler.\n"
		   "# TYPE strobe_request_duration_seconds histogram\n");
	for (int h = 0; h < SRV_H_N; h++) {
		if (!m->count[h])
			continue;
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBUCKETS; b++) {
			cum += m->hist[h][b];
			if (b < NBUCKETS)
				fprintf(f,
					"strobe_request_duration_seconds_bucket{handler=\"%s\",le=\"%g\"} "
					"%llu\n",
					handlers[h], buckets[b], (unsigned long long)cum);
			else
				fprintf(f,
					"strobe_request_duration_seconds_bucket{handler=\"%s\",le=\"+Inf\"} "
					"%llu\n",
					handlers[h], (unsigned long long)cum);
		}
		fprintf(f, "strobe_request_duration_seconds_sum{handler=\"%s\"} %.6f\n", handlers[h],
			m->sum[h]);
		fprintf(f, "strobe_request_duration_seconds_count{handler=\"%s\"} %llu\n", handlers[h],
			(unsigned long long)m->count[h]);
	}
	pthread_mutex_unlock(&m->mu);

	const char *dir = r->srv->cfg.data_dir;
	uint64_t db = dir ? file_size(dir, "strobe.db") : 0;
	uint64_t wal = dir ? file_size(dir, "strobe.db-wal") : 0;
	uint64_t shm = dir ? file_size(dir, "strobe.db-shm") : 0;
	strobe_store_stats st;
	int str = strobe_store_stats_get(r->srv->store, &st);
	if (str == 0 && st.disk_bytes) /* a backend that keeps its data elsewhere (ClickHouse) */
		db = st.disk_bytes, wal = shm = 0;
	gauge(f, "strobe_store_size_bytes", "Bytes of the store's files on disk (ClickHouse: its "
					   "database's active parts on every host, as db).");
	fprintf(f, "strobe_store_size_bytes{file=\"db\"} %llu\n", (unsigned long long)db);
	fprintf(f, "strobe_store_size_bytes{file=\"wal\"} %llu\n", (unsigned long long)wal);
	fprintf(f, "strobe_store_size_bytes{file=\"shm\"} %llu\n", (unsigned long long)shm);
	if (str == 0) {
		static const char *const names[] = {"series",	 "points",    "rollups",  "stacks",
						    "locations", "functions", "mappings", "strings"};
		const uint64_t vals[] = {st.series,    st.points,    st.rollups,  st.stacks,
					 st.locations, st.functions, st.mappings, st.strings};
		gauge(f, "strobe_store_rows", "What the store holds: live series, raw points, "
					      "roll-up rows, and each symbol table.");
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
			fprintf(f, "strobe_store_rows{table=\"%s\"} %llu\n", names[i],
				(unsigned long long)vals[i]);
	}
	uint64_t commits, pushes;
	strobe_store_commit_stats(r->srv->store, &commits, &pushes);
	counter(f, "strobe_store_commits_total", "Store transactions of pushes (one fsync each).");
	fprintf(f, "strobe_store_commits_total %llu\n", (unsigned long long)commits);
	counter(f, "strobe_store_committed_pushes_total",
		"Pushes written by those transactions (group commit: many per fsync).");
	fprintf(f, "strobe_store_committed_pushes_total %llu\n", (unsigned long long)pushes);
	gauge(f, "strobe_tls_enabled", "1 when the server speaks HTTPS (--tls-cert), 0 for plain HTTP.");
	fprintf(f, "strobe_tls_enabled %d\n", r->srv->tls_cert_pem != NULL);
	if (r->srv->tls_cert_pem && r->srv->tls_not_after) {
		gauge(f, "strobe_tls_certificate_expiry_seconds",
		      "When the served certificate expires (unix seconds): alert before it does.");
		fprintf(f, "strobe_tls_certificate_expiry_seconds %lld\n",
			(long long)r->srv->tls_not_after);
	}
	if (r->srv->admit) {
		srv_admit_counts ac;
		srv_admit_stats(r->srv->admit, &ac);
		gauge(f, "strobe_connections", "Open HTTP connections (now, and the most at once).");
		fprintf(f, "strobe_connections{state=\"open\"} %zu\n", ac.conns);
		fprintf(f, "strobe_connections{state=\"peak\"} %llu\n",
			(unsigned long long)ac.peak_conns);
		gauge(f, "strobe_inflight_pushes", "Pushes admitted and not yet answered (now, peak).");
		fprintf(f, "strobe_inflight_pushes{state=\"now\"} %zu\n", ac.pushes);
		fprintf(f, "strobe_inflight_pushes{state=\"peak\"} %llu\n",
			(unsigned long long)ac.peak_pushes);
		gauge(f, "strobe_inflight_body_bytes", "Request body bytes held (now, peak).");
		fprintf(f, "strobe_inflight_body_bytes{state=\"now\"} %zu\n", ac.bytes);
		fprintf(f, "strobe_inflight_body_bytes{state=\"peak\"} %llu\n",
			(unsigned long long)ac.peak_bytes);
		counter(f, "strobe_connections_closed_total",
			"Connections closed by the server before their request arrived whole: past "
			"limits.request_timeout, or past a tenth of it while near max_connections.");
		fprintf(f, "strobe_connections_closed_total{reason=\"request_timeout\"} %llu\n",
			(unsigned long long)ac.evicted_timeout);
		fprintf(f, "strobe_connections_closed_total{reason=\"busy\"} %llu\n",
			(unsigned long long)ac.evicted_busy);
	}
	if (r->srv->scraper)
		srv_scrape_metrics(r->srv->scraper, f);
	if (r->srv->notify)
		srv_notify_metrics(r->srv->notify, f);
	if (r->srv->namers)
		srv_namers_metrics(r->srv->namers, f); /* the naming cache (late_names.c) */
	write_process(f);
	if (fclose(f) != 0 || !buf) {
		free(buf);
		return srv_error(r, 500, "out of memory");
	}
	srv_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
	return 0;
}
