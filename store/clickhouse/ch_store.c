/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ClickHouse backend: opening (the URL, the schema on every host), talking to ClickHouse
 * over its HTTP interface with libcurl, and the maintenance calls (retention drops whole day
 * partitions). Ingest is in ch_push.c, the queries in ch_query.c; docs/clickhouse.md has the
 * schema and why it is so.
 *
 * Connections: idle CURL handles are kept in a pool, so a request reuses a kept-alive
 * connection to ClickHouse instead of opening one (a push is a few requests). Hosts: the URL
 * may name several; each request goes to the host that answered last and, when it cannot be
 * reached, to the next ones in order. With a cluster, any host reaches every shard through the
 * Distributed tables, so any of them will do.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../backend.h"
#include "ch.h"
#include "strobe/codec.h"

/* ---- small things ---------------------------------------------------------------------------- */

uint64_t ch_hash(uint64_t seed, const void *p, size_t n)
{
	/* FNV-1a with a final avalanche (splitmix64): ids of content, where a collision would merge
	 * two stacks; at 64 bits, a billion distinct stacks collide with odds of about 3 in 100. */
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h ? h : 1;
}

int64_t ch_point_id(ch_store *c)
{
	pthread_mutex_lock(&c->mu);
	uint64_t n = c->id_next++;
	pthread_mutex_unlock(&c->mu);
	/* 53 bits, so that JSON readers that hold numbers as doubles (JavaScript: the UI) keep it
	 * whole; a lookup then finds another point of the same id with odds of N / 2^53 (N points
	 * stored: 3 in 10 million for 30 days of 1,000 pushes a second) */
	int64_t id = (int64_t)(ch_hash(c->id_seed, &n, sizeof(n)) >> 11);
	return id ? id : 1;
}

bool ch_known_has(const ch_known *k, uint64_t h)
{
	if (!k->cap)
		return false;
	for (size_t i = h & (k->cap - 1);; i = (i + 1) & (k->cap - 1)) {
		if (k->slot[i] == h)
			return true;
		if (!k->slot[i])
			return false;
	}
}

int ch_known_add(ch_known *k, uint64_t h)
{
	if (k->n >= CH_KNOWN_MAX) /* forgetting costs only a repeated (deduplicated) insert */
		ch_known_free(k);
	if (2 * (k->n + 1) > k->cap) {
		size_t nc = k->cap ? 2 * k->cap : 4096;
		uint64_t *ns = calloc(nc, sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		for (size_t i = 0; i < k->cap; i++) {
			if (!k->slot[i])
				continue;
			size_t j = k->slot[i] & (nc - 1);
			while (ns[j])
				j = (j + 1) & (nc - 1);
			ns[j] = k->slot[i];
		}
		free(k->slot);
		k->slot = ns;
		k->cap = nc;
	}
	size_t i = h & (k->cap - 1);
	while (k->slot[i] && k->slot[i] != h)
		i = (i + 1) & (k->cap - 1);
	if (!k->slot[i]) {
		k->slot[i] = h;
		k->n++;
	}
	return 0;
}

void ch_known_free(ch_known *k)
{
	free(k->slot);
	memset(k, 0, sizeof(*k));
}

int rb_u8(strobe_buf *b, uint8_t v) { return strobe_buf_add(b, &v, 1); }
int rb_u64(strobe_buf *b, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	return strobe_buf_add(b, x, 8);
}
int rb_i64(strobe_buf *b, int64_t v) { return rb_u64(b, (uint64_t)v); }
int rb_len(strobe_buf *b, uint64_t n)
{
	uint8_t x[10];
	size_t k = 0;
	do {
		x[k] = (uint8_t)(n & 0x7f);
		n >>= 7;
		if (n)
			x[k] |= 0x80;
		k++;
	} while (n);
	return strobe_buf_add(b, x, k);
}
int rb_str(strobe_buf *b, const char *s, size_t n)
{
	int r = rb_len(b, n);
	return r < 0 ? r : strobe_buf_add(b, s, n);
}

uint8_t rd_u8(rb_rd *r)
{
	if (r->bad || r->end - r->p < 1)
		return r->bad = true, 0;
	return *r->p++;
}
uint64_t rd_u64(rb_rd *r)
{
	if (r->bad || r->end - r->p < 8)
		return r->bad = true, 0;
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += 8;
	return v;
}
int64_t rd_i64(rb_rd *r) { return (int64_t)rd_u64(r); }
uint64_t rd_len(rb_rd *r)
{
	uint64_t v = 0;
	for (int sh = 0; sh < 64; sh += 7) {
		uint8_t x = rd_u8(r);
		v |= (uint64_t)(x & 0x7f) << sh;
		if (!(x & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}
const char *rd_str(rb_rd *r, size_t *n)
{
	uint64_t l = rd_len(r);
	if (r->bad || (uint64_t)(r->end - r->p) < l) {
		r->bad = true;
		*n = 0;
		return "";
	}
	const char *s = (const char *)r->p;
	r->p += l;
	*n = (size_t)l;
	return s;
}

int ch_quote(strobe_buf *b, const char *s)
{
	int r = strobe_buf_add(b, "'", 1);
	for (; r == 0 && *s; s++) {
		if (*s == '\\' || *s == '\'')
			r = strobe_buf_add(b, "\\", 1);
		if (r == 0)
			r = strobe_buf_add(b, s, 1);
	}
	return r ? r : strobe_buf_add(b, "'", 1);
}

int ch_where(strobe_buf *q, const char *tenant, const char *type, const char *col, int64_t from,
	     int64_t to)
{
	int r = strobe_buf_adds(q, "tenant = ");
	if (r == 0)
		r = ch_quote(q, tenant);
	if (r == 0 && type && (r = strobe_buf_adds(q, " AND type = ")) == 0)
		r = ch_quote(q, type);
	if (r == 0 && col)
		r = strobe_buf_addf(q, " AND %s >= %lld AND %s < %lld", col, (long long)from, col,
				    (long long)to);
	return r;
}

int ch_ids(strobe_buf *q, const uint64_t *ids, size_t n)
{
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = strobe_buf_addf(q, "%s%llu", i ? "," : "", (unsigned long long)ids[i]);
	return r;
}

const char *ch_local(const ch_store *c, const char *base, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s.%s_l", c->db, base);
	return buf;
}

const char *ch_tab(const ch_store *c, const char *base, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s.%s%s", c->db, base, c->cluster ? "" : "_l");
	return buf;
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
	strobe_buf *b = ctx;
	return strobe_buf_add(b, p, sz * n) == 0 ? sz * n : 0;
}

static CURL *pool_get(ch_store *c)
{
	pthread_mutex_lock(&c->mu);
	CURL *h = c->npool ? c->pool[--c->npool] : NULL;
	pthread_mutex_unlock(&c->mu);
	return h ? h : curl_easy_init();
}

static void pool_put(ch_store *c, CURL *h)
{
	pthread_mutex_lock(&c->mu);
	if (c->npool < CH_POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (h)
		curl_easy_cleanup(h);
}

/* ClickHouse's error codes that mean "not now" rather than "never": the network and a shard
 * (209 SOCKET_TIMEOUT, 210 NETWORK_ERROR, 159 TIMEOUT_EXCEEDED, 279 ALL_CONNECTION_TRIES_FAILED,
 * 252 TOO_MANY_PARTS, 286 UNKNOWN_STATUS_OF_INSERT, 285 TOO_FEW_LIVE_REPLICAS, 319
 * UNKNOWN_STATUS_OF_INSERT, 1000 POCO_EXCEPTION: a refused connection to a shard). */
static bool transient(const char *msg)
{
	static const int codes[] = {209, 210, 159, 279, 252, 285, 286, 319, 1000, 202, 242};
	const char *p = strstr(msg, "Code: ");
	if (!p)
		return false;
	int code = atoi(p + 6);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (code == codes[i])
			return true;
	return false;
}

/* One attempt on host i: 0, -EAGAIN (unreachable: try another), -EIO/-EAGAIN with a message. */
static int exec_one(ch_store *c, size_t i, const char *sql, const void *body, size_t blen,
		    strobe_buf *out, strobe_err *err)
{
	CURL *h = pool_get(c);
	if (!h)
		return strobe_errf(err, -EIO, "clickhouse: libcurl is not available (%s)",
				   curl_easy_strerror(CURLE_FAILED_INIT));
	strobe_buf url, ans;
	strobe_buf_init(&url, 1u << 20);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	uint8_t *gz = NULL;
	size_t gzlen = 0;
	int r = strobe_buf_addf(&url, "http://%s/?log_queries=0", c->host[i]);
	/* A SELECT's text is the whole body, and may name thousands of ids (IN lists). */
	if (r == 0 && !body)
		r = strobe_buf_adds(&url, "&max_query_size=268435456");
	if (r == 0 && body) {
		char *e = curl_easy_escape(h, sql, 0);
		/* into a shard's local table (ch_push.c): 200 means that shard has the rows */
		r = e ? strobe_buf_addf(&url, "&query=%s", e) : -ENOMEM;
		if (r == 0 && c->insert_quorum > 1)
			r = strobe_buf_addf(&url, "&insert_quorum=%d", c->insert_quorum);
		curl_free(e);
		if (r == 0 && (r = strobe_gzip(body, blen, &gz, &gzlen)) < 0)
			r = -ENOMEM;
	}
	struct curl_slist *hd = NULL;
	if (body)
		hd = curl_slist_append(hd, "Content-Encoding: gzip");
	char ebuf[CURL_ERROR_SIZE] = "";
	long code = 0;
	CURLcode cr = CURLE_OK;
	if (r == 0) {
		curl_easy_setopt(h, CURLOPT_URL, url.p);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? (const char *)gz : sql);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(body ? gzlen : strlen(sql)));
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &ans);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
		curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
		cr = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	}
	curl_slist_free_all(hd);
	free(gz);
	if (r < 0) {
		r = strobe_errf(err, r, "clickhouse: out of memory building a request");
	} else if (cr != CURLE_OK) {
		r = strobe_errf(err, -EAGAIN, "clickhouse at %s: %s", c->host[i],
				ebuf[0] ? ebuf : curl_easy_strerror(cr));
	} else if (code != 200) {
		/* ClickHouse's exception text, its first line, as the reason. */
		size_t l = ans.len;
		const char *m = ans.p ? ans.p : "";
		const char *nl = memchr(m, '\n', l);
		if (nl)
			l = (size_t)(nl - m);
		if (l > 400)
			l = 400;
		char msg[420];
		snprintf(msg, sizeof msg, "%.*s", (int)l, m);
		r = strobe_errf(err, transient(msg) || code == 503 ? -EAGAIN : -EIO,
				"clickhouse at %s: HTTP %ld: %s", c->host[i], code, msg);
		r = r == -EAGAIN ? -EAGAIN : -EIO;
		if (r == -EAGAIN)
			r = -EBUSY; /* reached, but refused for now: no other host will do better */
	}
	if (r == 0 && out) {
		strobe_buf_free(out);
		*out = ans;
	} else {
		strobe_buf_free(&ans);
	}
	strobe_buf_free(&url);
	pool_put(c, h);
	return r;
}

int ch_exec_on(ch_store *c, size_t host, const char *sql, const void *body, size_t blen,
	       strobe_buf *out, strobe_err *err)
{
	int r = exec_one(c, host, sql, body, blen, out, err);
	return r == -EBUSY ? -EAGAIN : r;
}

int ch_exec(ch_store *c, const char *sql, const void *body, size_t blen, strobe_buf *out,
	    strobe_err *err)
{
	pthread_mutex_lock(&c->mu);
	size_t first = c->good;
	pthread_mutex_unlock(&c->mu);
	int r = -EAGAIN;
	char why[CH_HOSTS_MAX > 4 ? 1024 : 512] = "";
	for (size_t k = 0; k < c->nhosts; k++) {
		size_t i = (first + k) % c->nhosts;
		r = exec_one(c, i, sql, body, blen, out, err);
		if (r != -EAGAIN) {
			if (r == 0 && i != first) {
				pthread_mutex_lock(&c->mu);
				c->good = i;
				pthread_mutex_unlock(&c->mu);
			}
			return r == -EBUSY ? -EAGAIN : r;
		}
		size_t wl = strlen(why);
		snprintf(why + wl, sizeof why - wl, "%s%s", wl ? "; " : "", err->msg);
	}
	if (c->nhosts > 1)
		strobe_errf(err, -EAGAIN, "clickhouse: no host answered: %s", why);
	return r;
}

int ch_exec_shard(ch_store *c, size_t shard, const char *sql, const void *body, size_t blen,
		  strobe_err *err)
{
	int r = strobe_errf(err, -EAGAIN, "clickhouse: shard %zu has no host", shard + 1);
	char why[1024] = "";
	size_t tried = 0;
	for (size_t i = 0; i < c->nhosts; i++) {
		if (c->shard_of[i] != shard)
			continue;
		r = exec_one(c, i, sql, body, blen, NULL, err);
		if (r != -EAGAIN)
			return r == -EBUSY ? -EAGAIN : r;
		size_t wl = strlen(why);
		snprintf(why + wl, sizeof why - wl, "%s%s", wl ? "; " : "", err->msg);
		tried++;
	}
	if (tried > 1)
		strobe_errf(err, -EAGAIN, "clickhouse: no replica of shard %zu answered: %s",
			    shard + 1, why);
	return r;
}

/* ---- the schema ------------------------------------------------------------------------------ */

/* Per host: the local tables (MergeTree family), then, with a cluster, the Distributed tables
 * over them. Times are Int64 nanoseconds; a partition is one UTC day (intDiv by 86400e9), so
 * retention drops whole partitions, which is cheap (18.16 has no TTL clause). The sharding key
 * is the `shard` column, written by ch_push.c: one hash per push, so a push lands on one shard
 * in one block, whole or not at all. */
#define DAY "86400000000000"
/* Each statement: the table it makes (for a replicated engine's ZooKeeper path; NULL: no
 * engine), its engine family, and its text, where %1$s is the database and %2$s the engine. */
static const struct {
	const char *table, *engine, *sql;
} schema[] = {
	{NULL, NULL, "CREATE DATABASE IF NOT EXISTS %1$s"},
	/* The points: one row per (series, time), its stacks and their values as two parallel
	 * arrays sorted by stack id (a point's values summed per stack, zeros dropped). Measured
	 * against the row per (point, stack) it replaced (docs/clickhouse.md): the tenant, type,
	 * series, time, sample labels and shard are stored once per point instead of once per
	 * stack. ORDER BY puts a series' points together and in time order, so a query reads a
	 * few ranges of granules; queries unfold the arrays with ARRAY JOIN. id: the point's own
	 * (random, positive), by which an exemplar names one stored profile. */
	{"points", "MergeTree",
	 "CREATE TABLE IF NOT EXISTS %1$s.points_l (tenant String, type String, series UInt64, "
	 "time Int64, stacks Array(UInt64), values Array(Int64), slabels String, shard UInt64, "
	 "id Int64) "
	 "ENGINE = %2$s PARTITION BY intDiv(time, " DAY ") ORDER BY (tenant, type, series, time)"},
	/* Per-minute roll-ups, one row per (series, minute) with the stacks' sums as a nested
	 * map: sumMap as rows arrive (the materialized view), and SummingMergeTree sums a nested
	 * column whose name ends in "Map" key by key as parts merge. With replicas, the view's
	 * table is replicated itself: a replica that fetches a points part does not run the view
	 * on it, it fetches the view's part too. */
	{"points_1m", "SummingMergeTree",
	 "CREATE MATERIALIZED VIEW IF NOT EXISTS %1$s.points_1m_l ENGINE = %2$s "
	 "PARTITION BY intDiv(minute, " DAY ") ORDER BY (tenant, type, series, minute) "
	 "AS SELECT tenant, type, series, intDiv(time, 60000000000) * 60000000000 AS minute, "
	 "sumMap(stacks, values).1 AS `stacksMap.stack`, sumMap(stacks, values).2 AS "
	 "`stacksMap.value` FROM %1$s.points_l GROUP BY tenant, type, series, minute"},
	/* Series: (tenant, type, labels) -> id, its labels as two arrays (18.16 has no Map). */
	{"series", "ReplacingMergeTree",
	 "CREATE TABLE IF NOT EXISTS %1$s.series_l (tenant String, type String, series UInt64, "
	 "names Array(String), values Array(String), gauge UInt8, period Int64, created Int64, "
	 "shard UInt64) ENGINE = %2$s ORDER BY (tenant, type, series)"},
	/* The label index: (tenant, name, value) -> series. */
	{"series_labels", "ReplacingMergeTree",
	 "CREATE MATERIALIZED VIEW IF NOT EXISTS %1$s.series_labels_l ENGINE = %2$s "
	 "ORDER BY (tenant, name, value, series) AS SELECT tenant, name, value, series "
	 "FROM %1$s.series_l ARRAY JOIN names AS name, values AS value"},
	/* Symbols, by content hash: inserted again by every server that does not know them yet,
	 * made one by ReplacingMergeTree's merges (and by GROUP BY id when read). */
	{"stacks", "ReplacingMergeTree",
	 "CREATE TABLE IF NOT EXISTS %1$s.stacks_l (id UInt64, locations Array(UInt64), "
	 "shard UInt64) ENGINE = %2$s ORDER BY id"},
	{"locations", "ReplacingMergeTree",
	 "CREATE TABLE IF NOT EXISTS %1$s.locations_l (id UInt64, address UInt64, "
	 "mapping_file String, build_id String, mapping_start UInt64, mapping_limit UInt64, "
	 "mapping_offset UInt64, mapping_flags UInt8, is_folded UInt8, functions Array(UInt64), "
	 "lines Array(Int64), shard UInt64) ENGINE = %2$s ORDER BY id"},
	{"functions", "ReplacingMergeTree",
	 "CREATE TABLE IF NOT EXISTS %1$s.functions_l (id UInt64, name String, system_name String, "
	 "filename String, start_line Int64, shard UInt64) ENGINE = %2$s ORDER BY id"},
};
static const char *const dist_tabs[] = {"points", "points_1m", "series", "series_labels",
					"stacks", "locations", "functions"};

static int create_schema(ch_store *c, size_t host, strobe_err *err)
{
	int r = 0;
	char sql[2048], eng[512];
	for (size_t i = 0; r == 0 && i < sizeof(schema) / sizeof(schema[0]); i++) {
		/* Replicas (replicated=1): every replica of a shard creates the same table under one
		 * ZooKeeper path; {shard} and {replica} are the macros of each ClickHouse's config.
		 * The database is in the path, so that two databases on one cluster stay apart. */
		if (schema[i].engine && c->replicated)
			snprintf(eng, sizeof eng, "Replicated%s('/clickhouse/tables/{shard}/%s/%s', "
				 "'{replica}')", schema[i].engine, c->db, schema[i].table);
		else
			snprintf(eng, sizeof eng, "%s", schema[i].engine ? schema[i].engine : "");
		snprintf(sql, sizeof sql, schema[i].sql, c->db, eng);
		r = ch_exec_on(c, host, sql, NULL, 0, NULL, err);
	}
	for (size_t i = 0; r == 0 && c->cluster && i < sizeof(dist_tabs) / sizeof(dist_tabs[0]);
	     i++) {
		const char *t = dist_tabs[i];
		bool keyed = strcmp(t, "points_1m") && strcmp(t, "series_labels");
		snprintf(sql, sizeof sql,
			 "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_l ENGINE = Distributed(%s, %s, "
			 "%s_l, %s)",
			 c->db, t, c->db, t, c->cluster, c->db, t, keyed ? "shard" : "rand()");
		r = ch_exec_on(c, host, sql, NULL, 0, NULL, err);
	}
	return r;
}

/* ---- open, close, maintenance ---------------------------------------------------------------- */

static bool name_ok(const char *s, size_t n)
{
	if (!n || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static void ch_close(void *ctx)
{
	ch_store *c = ctx;
	if (!c)
		return;
	for (size_t i = 0; i < c->nhosts; i++)
		free(c->host[i]);
	for (size_t i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	ch_known_free(&c->known_sym);
	ch_known_free(&c->known_series);
	free(c->db);
	free(c->cluster);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* clickhouse://HOST:PORT[|HOST:PORT...][,HOST:PORT...]/DB[?cluster=NAME][&replicated=1]
 * [&insert_quorum=N] */
static int parse_url(ch_store *c, const char *url, strobe_err *err)
{
	const char *p = url + strlen("clickhouse://"), *slash = strchr(p, '/');
	if (!slash || slash == p)
		return strobe_errf(err, -EINVAL, "store: '%.200s': want clickhouse://HOST:PORT"
				   "[|REPLICA:PORT...][,SHARD:PORT...]/DB[?cluster=NAME]", url);
	size_t shard = 0;
	for (const char *h = p; h < slash;) {
		const char *e = h;
		while (e < slash && *e != ',' && *e != '|')
			e++;
		size_t n = (size_t)(e - h);
		if (!n || n > 255 || !memchr(h, ':', n) || memchr(h, '@', n))
			return strobe_errf(err, -EINVAL, "store: '%.200s': host %zu is not HOST:PORT "
					   "(no credentials in the URL)", url, c->nhosts + 1);
		if (c->nhosts == CH_HOSTS_MAX)
			return strobe_errf(err, -EINVAL, "store: '%.200s': more than %d hosts", url,
					   CH_HOSTS_MAX);
		c->shard_of[c->nhosts] = shard;
		if (!(c->host[c->nhosts++] = strndup(h, n)))
			return -ENOMEM;
		if (e < slash && *e == ',')
			shard++;
		h = e + (e < slash);
	}
	c->nshards = shard + 1;
	const char *db = slash + 1, *q = strchr(db, '?');
	size_t dl = q ? (size_t)(q - db) : strlen(db);
	if (!name_ok(db, dl))
		return strobe_errf(err, -EINVAL, "store: '%.200s': the database name must be 1 to 64 "
				   "letters, digits or _", url);
	if (!(c->db = strndup(db, dl)))
		return -ENOMEM;
	/* Parameters: cluster=NAME, replicated=1 (the local tables are ReplicatedMergeTree and
	 * friends, kept by ZooKeeper), insert_quorum=N (replicas that must have a push's rows
	 * before its 200: ReplicatedMergeTree's quorum insert, docs/clickhouse.md). */
	for (const char *pp = q; pp && *pp;) {
		pp++; /* '?' or '&' */
		const char *e = strchr(pp, '&');
		size_t n = e ? (size_t)(e - pp) : strlen(pp);
		if (n > 8 && strncmp(pp, "cluster=", 8) == 0 && name_ok(pp + 8, n - 8) && !c->cluster) {
			if (!(c->cluster = strndup(pp + 8, n - 8)))
				return -ENOMEM;
		} else if (n == 12 && strncmp(pp, "replicated=", 11) == 0 &&
			   (pp[11] == '0' || pp[11] == '1')) {
			c->replicated = pp[11] == '1';
		} else if (n > 14 && n < 17 && strncmp(pp, "insert_quorum=", 14) == 0 &&
			   strspn(pp + 14, "0123456789") >= n - 14 && atoi(pp + 14) >= 1) {
			c->insert_quorum = atoi(pp + 14);
		} else {
			return strobe_errf(err, -EINVAL, "store: '%.200s': the parameters are "
					   "cluster=NAME (letters, digits, _), replicated=0|1 and "
					   "insert_quorum=N (1-99)",
					   url);
		}
		pp = e;
	}
	/* Without a cluster the hosts are one server's alternatives (replicas). */
	if (!c->cluster) {
		for (size_t i = 0; i < c->nhosts; i++)
			c->shard_of[i] = 0;
		c->nshards = 1;
	}
	return 0;
}

void *store_ch_open(const strobe_store_opts *o, strobe_err *err)
{
	ch_store *c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->o = *o;
	c->o.store = NULL;
	c->o.dir = NULL;
	c->use_rollups = true;
	/* point ids: random, from a seed per server (ch_point_id) */
	if (getrandom(&c->id_seed, sizeof(c->id_seed), 0) != sizeof(c->id_seed))
		c->id_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	int r = parse_url(c, o->store, err);
	/* The schema on every host: each holds its shard's local tables and its own Distributed
	 * tables. A host that cannot be reached now is skipped if another one answered (it gets
	 * its schema when this server, or another, starts with it up). */
	size_t made = 0;
	strobe_err first = {{0}};
	for (size_t i = 0; r == 0 && i < c->nhosts; i++) {
		strobe_err e = {{0}};
		int hr = create_schema(c, i, &e);
		if (hr == 0)
			made++;
		else if (!first.msg[0])
			first = e;
		if (hr < 0 && hr != -EAGAIN)
			r = strobe_errf(err, hr, "store: creating the schema: %s", e.msg);
	}
	if (r == 0 && !made)
		r = strobe_errf(err, -EAGAIN, "store: no ClickHouse host could be reached: %s",
				first.msg);
	if (r < 0) {
		ch_close(c);
		errno = -r;
		return NULL;
	}
	return c;
}

/* Retention: a day's partition goes once all of it is older than now - retention (a point
 * lives at most one day longer than the retention, as partitions are whole days). On every
 * host, since each holds its shard's partitions. */
static int ch_retain(void *ctx, int64_t now_ns, strobe_err *err)
{
	ch_store *c = ctx;
	if (!c->o.retention_ns)
		return 0;
	int64_t day = 86400 * STROBE_NS_PER_S;
	int64_t keep_from = (now_ns - c->o.retention_ns) / day; /* partitions below: all old */
	int dropped = 0, r = 0;
	for (size_t h = 0; h < c->nhosts; h++) {
		static const char *const tabs[] = {"points_l", "points_1m_l"};
		for (size_t t = 0; t < 2; t++) {
			char sql[512];
			const char *tab = t ? ".inner.points_1m_l" : "points_l";
			snprintf(sql, sizeof sql,
				 "SELECT DISTINCT partition FROM system.parts WHERE database = '%s' "
				 "AND table = '%s' AND active FORMAT TabSeparated",
				 c->db, tab);
			(void)tabs;
			strobe_buf out = {0};
			strobe_buf_init(&out, 1u << 20);
			int hr = ch_exec_on(c, h, sql, NULL, 0, &out, err);
			for (char *p = out.p, *e; hr == 0 && p && *p; p = e + 1) {
				long long part = strtoll(p, &e, 10);
				if (*e != '\n')
					break;
				if (part >= keep_from)
					continue;
				snprintf(sql, sizeof sql, "ALTER TABLE %s.`%s` DROP PARTITION %lld",
					 c->db, tab, part);
				if ((hr = ch_exec_on(c, h, sql, NULL, 0, NULL, err)) == 0)
					dropped++;
			}
			strobe_buf_free(&out);
			if (hr < 0 && r == 0)
				r = hr;
		}
	}
	/* The symbols only the dropped points used, as the SQLite store: after a drop, at most
	 * once an hour (it reads every point's stacks). Its failure leaves them for next time. */
	pthread_mutex_lock(&c->mu);
	bool gc = dropped && (!c->last_gc_ns || now_ns - c->last_gc_ns >= CH_GC_INTERVAL_NS);
	pthread_mutex_unlock(&c->mu);
	strobe_err ge = {{0}};
	if (r == 0 && gc)
		ch_gc(c, now_ns, &ge);
	return r < 0 ? r : dropped;
}

static int ch_compact(void *ctx, int64_t now_ns, strobe_err *err)
{
	return 0; /* roll-ups are made as rows arrive (the materialized view) */
}

static void ch_use_rollups(void *ctx, bool on)
{
	ch_store *c = ctx;
	pthread_mutex_lock(&c->mu);
	c->use_rollups = on;
	pthread_mutex_unlock(&c->mu);
}

static void ch_use_totals(void *ctx, bool on) {}

static int ch_stats(void *ctx, strobe_store_stats *st)
{
	ch_store *c = ctx;
	memset(st, 0, sizeof(*st));
	char sql[1024], t1[128], t2[128], t3[128], t4[128], t5[128];
	snprintf(sql, sizeof sql,
		 "SELECT (SELECT uniqExact(tenant, series) FROM %s), (SELECT count() FROM %s), "
		 "(SELECT uniqExact(id) FROM %s), (SELECT uniqExact(id) FROM %s), "
		 "(SELECT uniqExact(id) FROM %s) FORMAT TabSeparated",
		 ch_tab(c, "series", t1, sizeof t1), ch_tab(c, "points", t2, sizeof t2),
		 ch_tab(c, "stacks", t3, sizeof t3), ch_tab(c, "locations", t4, sizeof t4),
		 ch_tab(c, "functions", t5, sizeof t5));
	strobe_buf out;
	strobe_buf_init(&out, 4096);
	strobe_err err = {{0}};
	int r = ch_exec(c, sql, NULL, 0, &out, &err);
	unsigned long long v[5] = {0};
	/* a point is a row (one per series and time), as in the SQLite store */
	if (r == 0 && (!out.p || sscanf(out.p, "%llu\t%llu\t%llu\t%llu\t%llu", &v[0], &v[1], &v[2],
					&v[3], &v[4]) != 5))
		r = -EIO;
	strobe_buf_free(&out);
	if (r < 0)
		return r;
	st->series = v[0];
	st->points = v[1];
	st->stacks = v[2];
	st->locations = v[3];
	st->functions = v[4];
	/* bytes on disk: every host's active parts of the database (a host down counts 0) */
	for (size_t h = 0; h < c->nhosts; h++) {
		char q2[256];
		snprintf(q2, sizeof q2, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = "
			 "'%s' AND active FORMAT TabSeparated", c->db);
		strobe_buf_init(&out, 4096);
		if (ch_exec_on(c, h, q2, NULL, 0, &out, &err) == 0 && out.p)
			st->disk_bytes += strtoull(out.p, NULL, 10);
		strobe_buf_free(&out);
	}
	return 0;
}

static int ch_commit_stats(void *ctx, uint64_t *commits, uint64_t *pushes)
{
	ch_store *c = ctx;
	pthread_mutex_lock(&c->mu);
	*commits = c->inserts;
	*pushes = c->pushes;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* The tenant's oldest and newest point (Pyroscope's GetProfileStats): min and max of time over
 * its points on every shard, which ORDER BY (tenant, ...) makes a read of the tenant's granules
 * of the time column only. Raw points are all there is (the roll-ups are made from them and
 * dropped with them), so, unlike SQLite's, no roll-up level is asked after. 0 and 0: none. */
static int ch_time_span(void *ctx, const char *tenant, int64_t *oldest, int64_t *newest,
			strobe_err *err)
{
	ch_store *c = ctx;
	*oldest = *newest = 0;
	char t[128];
	strobe_buf sql, out;
	strobe_buf_init(&sql, 1u << 16);
	strobe_buf_init(&out, 4096);
	int r = strobe_buf_addf(&sql, "SELECT count(), min(time), max(time) FROM %s WHERE ",
				ch_tab(c, "points", t, sizeof t));
	if (r == 0)
		r = ch_where(&sql, tenant, NULL, NULL, 0, 0);
	if (r == 0)
		r = strobe_buf_adds(&sql, " FORMAT TabSeparated");
	if (r < 0)
		r = strobe_errf(err, -ENOMEM, "clickhouse: out of memory");
	else
		r = ch_exec(c, sql.p, NULL, 0, &out, err);
	unsigned long long n = 0;
	long long lo = 0, hi = 0;
	if (r == 0 && (!out.p || sscanf(out.p, "%llu\t%lld\t%lld", &n, &lo, &hi) != 3))
		r = strobe_errf(err, -EIO, "clickhouse: unexpected answer to the time span: '%.80s'",
				out.p ? out.p : "");
	if (r == 0 && n) {
		*oldest = lo;
		*newest = hi;
	}
	strobe_buf_free(&sql);
	strobe_buf_free(&out);
	return r;
}

const store_backend store_ch_backend = {
	.name = "clickhouse",
	.close = ch_close,
	.push = ch_push,
	.query = ch_query,
	.range = ch_range,
	.label_names = ch_label_names,
	.label_values = ch_label_values,
	.profile_types = ch_profile_types,
	.exemplars = ch_exemplars,
	.profile_by_id = ch_profile_by_id,
	.series = ch_series,
	.compact = ch_compact,
	.retain = ch_retain,
	.gc = ch_gc,
	.use_rollups = ch_use_rollups,
	.use_totals = ch_use_totals,
	.stats_get = ch_stats,
	.commit_stats = ch_commit_stats,
	.time_span = ch_time_span,
};
