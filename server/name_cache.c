// SPDX-License-Identifier: Apache-2.0
/*
 * The naming cache: what server/late_names.c found for a (tenant, build ID, address), kept in
 * a SQLite table beside the debug-info store (<data_dir>/debuginfo/names.sqlite), so that an
 * address is resolved from debug info once and then never again, not even after a restart.
 * Without it the first query after a restart opened every debug file its profiles need and
 * built their tables (1.89x the time of data named on the host in bench/symbolize.sh); with it
 * that query reads rows.
 *
 * A row holds the frames of one looked-up address (the address in the object, after the
 * caller adjustment), leaf first, inlined frames expanded, or none (the object was found but
 * names nothing there). An upload of a new file for a build ID deletes that build ID's rows of
 * the tenant (srv_name_cache_forget), so names from an executable's symbol table give way to
 * the debug file uploaded after it. Misses (no debug info anywhere) are never stored: debug
 * info that arrives later must name what came before.
 *
 * The table is bounded by rows (max_rows): the oldest rows go first, by insertion order (the
 * rowid), which costs a range delete after each batch rather than a write per hit. It is a
 * cache: a damaged or missing file is recreated, and a row that does not decode is a miss.
 * Its own file (not the profile store) because the store may be ClickHouse, while debug info
 * always lives under data_dir.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_impl.h"

#define BLOB_VERSION 1
#define MAX_STR 4096     /* a name or file longer than this is cut (the symbolizer cuts at 1024) */
#define MAX_FRAMES 64    /* STROBE_NAMER_MAX_LINES */

struct srv_name_cache {
	pthread_mutex_t mu; /* one connection, one user at a time */
	sqlite3 *db;
	sqlite3_stmt *get, *has, *put, *forget, *trim;
	uint64_t max_rows;
	/* Counters for /metrics. */
	uint64_t hits, misses, stored, dropped;
};

static const char SCHEMA[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;" /* a cache: a lost last batch costs lookups, not data */
	"CREATE TABLE IF NOT EXISTS names("
	"  id INTEGER PRIMARY KEY,"
	"  tenant TEXT NOT NULL, build_id TEXT NOT NULL, addr INTEGER NOT NULL,"
	"  frames BLOB NOT NULL);"
	"CREATE UNIQUE INDEX IF NOT EXISTS names_key ON names(tenant, build_id, addr);";

static void close_db(srv_name_cache *c)
{
	sqlite3_finalize(c->get);
	sqlite3_finalize(c->has);
	sqlite3_finalize(c->put);
	sqlite3_finalize(c->forget);
	sqlite3_finalize(c->trim);
	sqlite3_close(c->db);
	c->get = c->has = c->put = c->forget = c->trim = NULL;
	c->db = NULL;
}

static int open_db(srv_name_cache *c, const char *path)
{
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
						  SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(c->db, 5000);
	if (sqlite3_exec(c->db, SCHEMA, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db,
			       "SELECT frames FROM names WHERE tenant=?1 AND build_id=?2 AND addr=?3",
			       -1, &c->get, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db,
			       "SELECT 1 FROM names WHERE tenant=?1 AND build_id=?2 LIMIT 1", -1,
			       &c->has, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db,
			       "INSERT OR REPLACE INTO names(tenant, build_id, addr, frames) "
			       "VALUES (?1, ?2, ?3, ?4)",
			       -1, &c->put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db, "DELETE FROM names WHERE tenant=?1 AND build_id=?2", -1,
			       &c->forget, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(c->db,
			       "DELETE FROM names WHERE id <= (SELECT max(id) FROM names) - ?1", -1,
			       &c->trim, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	close_db(c);
	return -EIO;
}

srv_name_cache *srv_name_cache_open(const char *data_dir, uint64_t max_rows)
{
	srv_name_cache *c = calloc(1, sizeof(*c));
	char *path = NULL;
	if (!c || asprintf(&path, "%s/debuginfo/names.sqlite", data_dir) < 0) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->max_rows = max_rows ? max_rows : 1;
	int r = open_db(c, path);
	if (r < 0) { /* damaged: it is only a cache, start it again */
		unlink(path);
		char wal[4200];
		snprintf(wal, sizeof wal, "%s-wal", path);
		unlink(wal);
		snprintf(wal, sizeof wal, "%s-shm", path);
		unlink(wal);
		r = open_db(c, path);
	}
	free(path);
	if (r < 0) {
		pthread_mutex_destroy(&c->mu);
		free(c);
		errno = -r;
		return NULL;
	}
	return c;
}

void srv_name_cache_close(srv_name_cache *c)
{
	if (!c)
		return;
	close_db(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* ---- the blob: version, count, then per frame line, column, start_line (int64 LE) and three
 * strings (u16 length, 0xffff for none, then the bytes) ------------------------------------ */

static void put64(unsigned char **p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++)
		*(*p)++ = (unsigned char)(u >> (8 * i));
}

static void putstr(unsigned char **p, const char *s)
{
	if (!s) {
		*(*p)++ = 0xff;
		*(*p)++ = 0xff;
		return;
	}
	size_t n = strlen(s);
	if (n > MAX_STR)
		n = MAX_STR;
	*(*p)++ = (unsigned char)(n & 0xff);
	*(*p)++ = (unsigned char)(n >> 8);
	memcpy(*p, s, n);
	*p += n;
}

void *srv_name_cache_encode(const strobe_sym_frame *fr, int n, size_t *len)
{
	if (n < 0)
		n = 0;
	if (n > MAX_FRAMES)
		n = MAX_FRAMES;
	size_t cap = 2;
	for (int i = 0; i < n; i++)
		cap += 24 + 6 + 3 * (size_t)MAX_STR;
	/* Sized for the worst case, then cut to what was written. */
	unsigned char *b = malloc(cap), *p = b;
	if (!b)
		return NULL;
	*p++ = BLOB_VERSION;
	*p++ = (unsigned char)n;
	for (int i = 0; i < n; i++) {
		put64(&p, fr[i].line);
		put64(&p, fr[i].column);
		put64(&p, fr[i].start_line);
		putstr(&p, fr[i].function);
		/* The same pointer as function when alike: stored as none, read back as function. */
		putstr(&p, fr[i].system_name == fr[i].function ? NULL : fr[i].system_name);
		putstr(&p, fr[i].file);
	}
	*len = (size_t)(p - b);
	unsigned char *fit = realloc(b, *len);
	return fit ? fit : b;
}

static bool get64(const unsigned char **p, const unsigned char *e, int64_t *v)
{
	if (e - *p < 8)
		return false;
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)(*p)[i] << (8 * i);
	*p += 8;
	*v = (int64_t)u;
	return true;
}

/* A string of the blob, copied NUL-terminated into *w (the decode buffer, sized for it). */
static bool getstr(const unsigned char **p, const unsigned char *e, char **w, const char **out)
{
	if (e - *p < 2)
		return false;
	size_t n = (size_t)(*p)[0] | (size_t)(*p)[1] << 8;
	*p += 2;
	if (n == 0xffff) {
		*out = NULL;
		return true;
	}
	if (n > MAX_STR || (size_t)(e - *p) < n)
		return false;
	memcpy(*w, *p, n);
	(*w)[n] = 0;
	*out = *w;
	*w += n + 1;
	*p += n;
	return true;
}

/* The frames of a blob into fr (strings in buf, which holds at least len + 3 * MAX_FRAMES
 * bytes); their count, or -1 when the blob does not decode. */
int srv_name_cache_decode(const void *blob, size_t len, char *buf, strobe_sym_frame *fr, int max)
{
	const unsigned char *p = blob, *e = p + len;
	if (len < 2 || p[0] != BLOB_VERSION || p[1] > MAX_FRAMES || p[1] > max)
		return -1;
	int n = p[1];
	p += 2;
	char *w = buf;
	for (int i = 0; i < n; i++) {
		strobe_sym_frame f = {0};
		if (!get64(&p, e, &f.line) || !get64(&p, e, &f.column) ||
		    !get64(&p, e, &f.start_line) || !getstr(&p, e, &w, &f.function) ||
		    !getstr(&p, e, &w, &f.system_name) || !getstr(&p, e, &w, &f.file))
			return -1;
		if (!f.system_name)
			f.system_name = f.function;
		fr[i] = f;
	}
	return p == e ? n : -1;
}

int srv_name_cache_get(srv_name_cache *c, const char *tenant, const char *bid, uint64_t addr,
		       strobe_sym_frame *fr, int max, char *buf, size_t cap)
{
	if (!c)
		return -ENOENT;
	int n = -ENOENT;
	pthread_mutex_lock(&c->mu);
	if (!c->db)
		goto out;
	sqlite3_bind_text(c->get, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(c->get, 2, bid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(c->get, 3, (sqlite3_int64)addr);
	if (sqlite3_step(c->get) == SQLITE_ROW) {
		const void *b = sqlite3_column_blob(c->get, 0);
		size_t len = (size_t)sqlite3_column_bytes(c->get, 0);
		/* the strings, NUL-terminated, fit in the blob's length plus a byte each */
		if (b && len + 3 * MAX_FRAMES + 1 <= cap)
			n = srv_name_cache_decode(b, len, buf, fr, max);
		if (n < 0)
			n = -ENOENT; /* does not decode: named again, and the row replaced */
	}
	sqlite3_reset(c->get);
	sqlite3_clear_bindings(c->get);
out:
	if (n >= 0)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->mu);
	return n;
}

bool srv_name_cache_has(srv_name_cache *c, const char *tenant, const char *bid)
{
	if (!c)
		return false;
	bool has = false;
	pthread_mutex_lock(&c->mu);
	if (c->db) {
		sqlite3_bind_text(c->has, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(c->has, 2, bid, -1, SQLITE_STATIC);
		has = sqlite3_step(c->has) == SQLITE_ROW;
		sqlite3_reset(c->has);
		sqlite3_clear_bindings(c->has);
	}
	pthread_mutex_unlock(&c->mu);
	return has;
}

int srv_name_cache_put(srv_name_cache *c, const char *tenant, const srv_name_row *rows,
		       size_t n)
{
	if (!c || !n)
		return 0;
	int r = 0;
	pthread_mutex_lock(&c->mu);
	if (!c->db || sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		pthread_mutex_unlock(&c->mu);
		return -EIO;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		sqlite3_bind_text(c->put, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(c->put, 2, rows[i].build_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(c->put, 3, (sqlite3_int64)rows[i].addr);
		sqlite3_bind_blob(c->put, 4, rows[i].blob, (int)rows[i].len, SQLITE_STATIC);
		if (sqlite3_step(c->put) != SQLITE_DONE)
			r = -EIO;
		sqlite3_reset(c->put);
		sqlite3_clear_bindings(c->put);
	}
	if (r == 0) {
		sqlite3_bind_int64(c->trim, 1, (sqlite3_int64)c->max_rows);
		if (sqlite3_step(c->trim) != SQLITE_DONE)
			r = -EIO;
		else
			c->dropped += (uint64_t)sqlite3_changes(c->db);
		sqlite3_reset(c->trim);
	}
	if (sqlite3_exec(c->db, r == 0 ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
		r = -EIO;
	if (r == 0)
		c->stored += n;
	pthread_mutex_unlock(&c->mu);
	return r;
}

int srv_name_cache_forget(srv_name_cache *c, const char *tenant, const char *bid)
{
	if (!c)
		return 0;
	int r = 0;
	pthread_mutex_lock(&c->mu);
	if (c->db) {
		sqlite3_bind_text(c->forget, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(c->forget, 2, bid, -1, SQLITE_STATIC);
		if (sqlite3_step(c->forget) != SQLITE_DONE)
			r = -EIO;
		sqlite3_reset(c->forget);
		sqlite3_clear_bindings(c->forget);
	}
	pthread_mutex_unlock(&c->mu);
	return r;
}

void srv_name_cache_counts(srv_name_cache *c, srv_name_cache_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	st->hits = c->hits;
	st->misses = c->misses;
	st->stored = c->stored;
	st->dropped = c->dropped;
	pthread_mutex_unlock(&c->mu);
}
