// SPDX-License-Identifier: Apache-2.0
/*
 * The embedded store: one SQLite database in the data directory, holding the symbol tables
 * (strings, functions, mappings, locations, stacks: each entity once for the whole store), the
 * series with an inverted label index, and the points (series, time, zstd blob of (stack id,
 * value) pairs) with their roll-ups. This file opens and loads it and ingests pushes; the
 * committer writes them (commit.c) as rows (rows.c) through connections of db.c; queries are
 * in query.c, compaction and retention in maint.c.
 *
 * The symbol tables are mirrored in memory as a strobe_profile whose ids are the row ids, so
 * ingest deduplicates stacks and frames with the profile model's hash tables and writes only the
 * rows that are new: no SELECT per frame.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store_impl.h"
#include "strobe/pprof_view.h"

/* auto_vacuum must be chosen before the first table exists; INCREMENTAL lets retention hand
 * pages back without rewriting the whole file (a full VACUUM would copy it). */
static const char schema[] =
	"PRAGMA auto_vacuum=INCREMENTAL;"
	"CREATE TABLE IF NOT EXISTS strings(id INTEGER PRIMARY KEY, s BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS functions(id INTEGER PRIMARY KEY, name INT, system_name INT,"
	" filename INT, start_line INT);"
	"CREATE TABLE IF NOT EXISTS mappings(id INTEGER PRIMARY KEY, start INT, lim INT, off INT,"
	" filename INT, build_id INT, flags INT);"
	"CREATE TABLE IF NOT EXISTS locations(id INTEGER PRIMARY KEY, mapping INT, address INT,"
	" folded INT, lines BLOB);"
	"CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, parent INT, location INT);"
	"CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL,"
	" type TEXT NOT NULL, labels BLOB NOT NULL, period INT, average INT NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS series_labels(name TEXT, value TEXT, series INT,"
	" PRIMARY KEY(name, value, series)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS points(series INT NOT NULL, level INT NOT NULL,"
	" time INT NOT NULL, n INT NOT NULL, rolled INT NOT NULL DEFAULT 0, data BLOB NOT NULL,"
	" slabels BLOB NOT NULL DEFAULT X'');"
	"CREATE INDEX IF NOT EXISTS points_by_series ON points(series, level, time);"
	"CREATE INDEX IF NOT EXISTS points_by_time ON points(level, time);"
	/* Raw points not yet in every roll-up (store_impl.h, STORE_ROLLED_ALL). Built from the
	 * points at the first open of an older store. */
	"CREATE INDEX IF NOT EXISTS points_unrolled ON points(series, time) WHERE level=0 AND "
	"rolled<>" STORE_ROLLED_ALL ";";

/* ---- series ---------------------------------------------------------------------------------- */

static int series_key(const char *tenant, const char *type, const strobe_labelpair *l, size_t n,
		      char **out, size_t *len)
{
	size_t sz = strlen(tenant) + strlen(type) + 2;
	for (size_t i = 0; i < n; i++)
		sz += strlen(l[i].name) + strlen(l[i].value) + 2;
	char *k = malloc(sz), *p = k;
	if (!k)
		return -ENOMEM;
	p = stpcpy(p, tenant) + 1;
	p = stpcpy(p, type) + 1;
	for (size_t i = 0; i < n; i++) {
		p = stpcpy(p, l[i].name) + 1;
		p = stpcpy(p, l[i].value) + 1;
	}
	*out = k;
	*len = sz;
	return 0;
}

/* Fills a series entry (labels sorted) from its key. */
static int series_from_key(store_series *se, const char *key, size_t len)
{
	const char *end = key + len;
	const char *tenant = key, *type = tenant + strlen(tenant) + 1;
	const char *l = type + strlen(type) + 1;
	uint32_t n = 0;
	for (const char *q = l; q < end; q += strlen(q) + 1)
		n++;
	n /= 2;
	char *mem = malloc(n * sizeof(strobe_labelpair) + len);
	if (!mem)
		return -ENOMEM;
	se->labels = (strobe_labelpair *)mem;
	char *str = mem + n * sizeof(strobe_labelpair);
	memcpy(str, key, len);
	se->tenant = str;
	se->type = str + (type - key);
	char *q = str + (l - key);
	for (uint32_t i = 0; i < n; i++) {
		se->labels[i].name = q;
		q += strlen(q) + 1;
		se->labels[i].value = q;
		q += strlen(q) + 1;
	}
	se->nlabels = n;
	se->gauge = strobe_type_is_gauge(se->type);
	return 0;
}

static int series_add_mem(strobe_store *s, const char *key, size_t len, size_t *idx)
{
	uint32_t id;
	bool added;
	if (strobe_itab_intern(&s->series_key, key, len, &id, &added) < 0)
		return -ENOMEM;
	if (!added) {
		*idx = id;
		return 0;
	}
	if (s->nseries == s->capseries) {
		size_t nc = s->capseries ? s->capseries * 2 : 64;
		store_series *ns = realloc(s->series, nc * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		s->series = ns;
		s->capseries = nc;
	}
	store_series *se = &s->series[s->nseries];
	memset(se, 0, sizeof(*se));
	if (series_from_key(se, key, len) < 0)
		return -ENOMEM;
	se->id = (int64_t)s->nseries + 1;
	se->dead = true; /* live once its row is written */
	*idx = s->nseries++;
	return 0;
}

/* The per-point totals (query.c's range reads them instead of decoding profiles): a store
 * from before they existed gets them here, at open, from its raw points, in the transaction
 * that creates the table, so the table exists only with every total in it. Done at open rather
 * than lazily because a range over a half-migrated store would need both ways at once; it
 * decodes every raw point once (measured in docs/BENCHMARKS.md, Fleet). */
static int migrate_totals(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st = NULL, *ins = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_schema WHERE name='totals'", -1, &st,
			       NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "schema");
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 0;
	int r = store_exec(s, "BEGIN IMMEDIATE", err);
	if (r == 0)
		r = store_exec(s, STORE_TOTALS_SCHEMA, err);
	if (r == 0 && (sqlite3_prepare_v2(s->db, "SELECT series, time, n, data FROM points WHERE "
					  "level=0", -1, &st, NULL) != SQLITE_OK ||
		       sqlite3_prepare_v2(s->db, STORE_TOTALS_UPSERT, -1, &ins, NULL) != SQLITE_OK))
		r = store_sqlerr(s, err, "computing totals");
	store_pair *pairs = NULL;
	size_t cap = 0, np;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		/* Any stack id is fine here: only the values are summed. */
		if (store_blob_decode(sqlite3_column_blob(st, 3), (size_t)sqlite3_column_bytes(st, 3),
				      UINT32_MAX, &pairs, &cap, &np) < 0) {
			r = strobe_errf(err, -EIO, "store: a stored point of series %lld is corrupt",
					(long long)sqlite3_column_int64(st, 0));
			break;
		}
		uint64_t sum = 0;
		for (size_t i = 0; i < np; i++)
			sum += (uint64_t)pairs[i].value;
		r = store_totals_add(s->db, ins, sqlite3_column_int64(st, 0),
				     sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
				     (int64_t)sum, err);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "computing totals");
	free(pairs);
	sqlite3_finalize(st);
	sqlite3_finalize(ins);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	else
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}

/* Columns added since the first release of the schema, added to older databases. */
static int has_column(strobe_store *s, const char *sql, const char *col, bool *has,
		      strobe_err *err)
{
	sqlite3_stmt *st;
	*has = false;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "schema");
	while (sqlite3_step(st) == SQLITE_ROW)
		*has |= strcmp((const char *)sqlite3_column_text(st, 0), col) == 0;
	sqlite3_finalize(st);
	return 0;
}

static int migrate(strobe_store *s, strobe_err *err)
{
	bool has_average, has_slabels;
	int r = has_column(s, "SELECT name FROM pragma_table_info('series')", "average",
			   &has_average, err);
	if (r == 0 && !has_average)
		r = store_exec(s, "ALTER TABLE series ADD COLUMN average INT NOT NULL DEFAULT 0",
			       err);
	/* The sample labels of a point (pid, comm...): older points have none, and their
	 * series carry those labels instead, which the selectors still match. */
	if (r == 0)
		r = has_column(s, "SELECT name FROM pragma_table_info('points')", "slabels",
			       &has_slabels, err);
	if (r == 0 && !has_slabels)
		r = store_exec(s, "ALTER TABLE points ADD COLUMN slabels BLOB NOT NULL DEFAULT X''",
			       err);
	if (r == 0)
		r = migrate_totals(s, err);
	/* The minutes' lists of points (store_impl.h): an older totals table gets the column,
	 * NULL in its rows, which readers take as "read the points' own rows". */
	bool has_pts;
	if (r == 0)
		r = has_column(s, "SELECT name FROM pragma_table_info('totals')", "pts", &has_pts,
			       err);
	if (r == 0 && !has_pts)
		r = store_exec(s, "ALTER TABLE totals ADD COLUMN pts BLOB", err);
	return r;
}

/* ---- open and load --------------------------------------------------------------------------- */

static int load_symbols(strobe_store *s, strobe_err *err)
{
	static const char *const q[NTABS] = {
		"SELECT id, s FROM strings ORDER BY id",
		"SELECT id, name, system_name, filename, start_line FROM functions ORDER BY id",
		"SELECT id, start, lim, off, filename, build_id, flags FROM mappings ORDER BY id",
		"SELECT id, mapping, address, folded, lines FROM locations ORDER BY id",
		"SELECT id, parent, location FROM stacks ORDER BY id",
	};
	strobe_profile *p = s->sym;
	for (int t = 0; t < NTABS; t++) {
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(s->db, q[t], -1, &st, NULL) != SQLITE_OK)
			return store_sqlerr(s, err, "loading symbols");
		int rc;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			int64_t id = sqlite3_column_int64(st, 0);
			uint32_t got = UINT32_MAX;
			switch (t) {
			case TAB_STRINGS:
				got = strobe_str_intern(p, sqlite3_column_blob(st, 1),
							(size_t)sqlite3_column_bytes(st, 1));
				break;
			case TAB_FUNCTIONS: {
				strobe_function f = {
					.name = (uint32_t)sqlite3_column_int64(st, 1),
					.system_name = (uint32_t)sqlite3_column_int64(st, 2),
					.filename = (uint32_t)sqlite3_column_int64(st, 3),
					.start_line = sqlite3_column_int64(st, 4)};
				got = strobe_function_intern(p, &f);
				break;
			}
			case TAB_MAPPINGS: {
				int64_t fl = sqlite3_column_int64(st, 6);
				strobe_mapping m = {
					.start = (uint64_t)sqlite3_column_int64(st, 1),
					.limit = (uint64_t)sqlite3_column_int64(st, 2),
					.offset = (uint64_t)sqlite3_column_int64(st, 3),
					.filename = (uint32_t)sqlite3_column_int64(st, 4),
					.build_id = (uint32_t)sqlite3_column_int64(st, 5),
					.has_functions = fl & 1, .has_filenames = (fl >> 1) & 1,
					.has_line_numbers = (fl >> 2) & 1,
					.has_inline_frames = (fl >> 3) & 1};
				got = strobe_mapping_intern(p, &m);
				break;
			}
			case TAB_LOCATIONS: {
				size_t bl = (size_t)sqlite3_column_bytes(st, 4);
				if (bl % sizeof(strobe_line))
					break;
				/* Copy: the blob is not aligned for strobe_line. */
				strobe_line *lines = malloc(bl ? bl : 1);
				if (!lines)
					break;
				if (bl)
					memcpy(lines, sqlite3_column_blob(st, 4), bl);
				got = strobe_location_intern(
					p, (uint32_t)sqlite3_column_int64(st, 1),
					(uint64_t)sqlite3_column_int64(st, 2), lines,
					(uint32_t)(bl / sizeof(strobe_line)),
					sqlite3_column_int64(st, 3) != 0);
				free(lines);
				break;
			}
			case TAB_STACKS:
				got = strobe_stack_push(p, (uint32_t)sqlite3_column_int64(st, 1),
							(uint32_t)sqlite3_column_int64(st, 2));
				break;
			}
			if ((int64_t)got != id) {
				sqlite3_finalize(st);
				return strobe_errf(err, -EIO,
						   "store: symbol table %d is inconsistent at row %lld",
						   t, (long long)id);
			}
		}
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return store_sqlerr(s, err, "loading symbols");
		s->saved[t] = tab_n(p, t);
	}
	return 0;
}

static int load_series(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT id, tenant, type, labels, period, average FROM series "
			       "ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "loading series");
	int rc, r = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *tenant = (const char *)sqlite3_column_text(st, 1);
		const char *type = (const char *)sqlite3_column_text(st, 2);
		size_t tl = strlen(tenant), yl = strlen(type), bl = (size_t)sqlite3_column_bytes(st, 3);
		char *key = malloc(tl + yl + 2 + bl);
		if (!key) {
			r = -ENOMEM;
			break;
		}
		memcpy(key, tenant, tl + 1);
		memcpy(key + tl + 1, type, yl + 1);
		if (bl)
			memcpy(key + tl + yl + 2, sqlite3_column_blob(st, 3), bl);
		/* Dead series keep their slot (ids are never reused), so fill the gaps. */
		while ((int64_t)s->nseries + 1 < id) {
			char gap[40];
			int gl = snprintf(gap, sizeof(gap) - 1, "\001gap%zu", s->nseries);
			gap[gl + 1] = 0; /* empty type */
			size_t idx;
			if ((r = series_add_mem(s, gap, (size_t)gl + 2, &idx)) < 0)
				break;
		}
		size_t idx;
		if (r == 0)
			r = series_add_mem(s, key, tl + yl + 2 + bl, &idx);
		free(key);
		if (r < 0)
			break;
		if ((int64_t)idx + 1 != id) {
			r = strobe_errf(err, -EIO, "store: duplicate series row %lld", (long long)id);
			break;
		}
		s->series[idx].dead = false;
		s->series[idx].saved = true;
		s->series[idx].period = sqlite3_column_int64(st, 4);
		if (sqlite3_column_int(st, 5))
			s->series[idx].gauge = true;
	}
	sqlite3_finalize(st);
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "loading series");
	return r;
}

strobe_store *strobe_store_open(const strobe_store_opts *o, strobe_err *err)
{
	if (o->store && strncmp(o->store, "clickhouse://", 13) == 0) {
		strobe_store *cs = calloc(1, sizeof(*cs));
		if (!cs) {
			errno = ENOMEM;
			return NULL;
		}
		cs->be = &store_ch_backend;
		if (!(cs->be_ctx = store_ch_open(o, err))) {
			int e = errno ? errno : EIO;
			free(cs);
			errno = e;
			return NULL;
		}
		return cs;
	}
	if (o->store && *o->store) {
		strobe_errf(err, -EINVAL, "store: '%.200s' is not a store this server knows (a "
			    "clickhouse://HOST:PORT/DB URL, or none for SQLite in the data directory)",
			    o->store);
		errno = EINVAL;
		return NULL;
	}
	if (mkdir(o->dir, 0750) < 0 && errno != EEXIST) {
		int e = errno;
		strobe_errf(err, -e, "store: cannot create %s: %s", o->dir, strerror(e));
		errno = e;
		return NULL;
	}
	strobe_store *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->o = *o;
	s->use_rollups = true;
	s->use_totals = true;
	s->use_group_totals = true;
	s->use_hour_lists = true;
	s->use_span_index = true;
	pthread_mutex_init(&s->mu, NULL);
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->ids_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	s->sym = strobe_profile_new();
	/* SQLite takes an empty file for a new database; a strobe.db that exists but is empty was
	 * a store once (SQLite writes its header at creation), so say so instead of starting
	 * afresh over it. */
	size_t pl = strlen(o->dir) + 16;
	char *dbp = malloc(pl), *walp = malloc(pl);
	struct stat sb;
	int r = dbp && walp ? 0 : -ENOMEM;
	if (r == 0) {
		snprintf(dbp, pl, "%s/strobe.db", o->dir);
		snprintf(walp, pl, "%s/strobe.db-wal", o->dir);
	}
	if (r == 0 && stat(dbp, &sb) == 0 && sb.st_size == 0 &&
	    (stat(walp, &sb) < 0 || sb.st_size == 0))
		r = strobe_errf(err, -EIO, "store: %s is empty (0 bytes): a store truncated to "
				"nothing? The server does not start on it; if the directory holds no "
				"data to keep, delete the file (docs/server.md, Recovery)",
				dbp);
	free(dbp);
	free(walp);
	if (r == 0)
		r = !s->sym ? -ENOMEM : store_db_open(s, &s->db, err);
	/* The connection queries read through: a page cache of 64 MiB instead of SQLite's 2 MiB,
	 * so that the index pages a range or flame graph over many series walks (a day of
	 * totals of 1,000 series is about 40 MiB) stay in the process instead of being read and
	 * copied from the kernel's cache again at every query. */
	if (r == 0)
		sqlite3_exec(s->db, "PRAGMA cache_size=-65536;", NULL, NULL, NULL);
	if (r == 0)
		r = store_db_check(s, err);
	if (r == 0)
		r = store_exec(s, schema, err);
	if (r == 0)
		r = migrate(s, err);
	if (r == 0)
		r = store_span_migrate(s, err);
	if (r == 0)
		r = load_symbols(s, err);
	if (r == 0)
		r = load_series(s, err);
	if (r == 0)
		r = store_groups_open(s, err);
	if (r == 0)
		r = store_hour_lists_open(s, err);
	if (r == 0)
		r = store_db_open(s, &s->wdb, err);
	if (r == 0)
		r = store_committer_start(s, err);
	if (r < 0) {
		strobe_store_close(s);
		errno = -r;
		return NULL;
	}
	return s;
}

void strobe_store_close(strobe_store *s)
{
	if (!s)
		return;
	if (s->be) {
		s->be->close(s->be_ctx);
		free(s);
		return;
	}
	store_committer_stop(s);
	if (s->wdb)
		sqlite3_close(s->wdb);
	if (s->db)
		sqlite3_close(s->db);
	strobe_profile_free(s->sym);
	for (size_t i = 0; i < s->nseries; i++)
		free(s->series[i].labels);
	free(s->series);
	strobe_itab_free(&s->series_key);
	strobe_itab_free(&s->group_key);
	store_seq_reset(s);
	pthread_mutex_destroy(&s->mu);
	pthread_rwlock_destroy(&s->ids_lock);
	free(s);
}

void strobe_store_use_totals(strobe_store *s, bool on)
{
	if (s->be) {
		s->be->use_totals(s->be_ctx, on);
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->use_totals = on;
	pthread_mutex_unlock(&s->mu);
}

void strobe_store_use_group_totals(strobe_store *s, bool on)
{
	if (s->be)
		return; /* the embedded store's alone */
	pthread_mutex_lock(&s->mu);
	s->use_group_totals = on;
	pthread_mutex_unlock(&s->mu);
}

void strobe_store_use_hour_lists(strobe_store *s, bool on)
{
	if (s->be)
		return; /* the embedded store's alone */
	pthread_mutex_lock(&s->mu);
	s->use_hour_lists = on;
	pthread_mutex_unlock(&s->mu);
}

void strobe_store_use_rollups(strobe_store *s, bool on)
{
	if (s->be) {
		s->be->use_rollups(s->be_ctx, on);
		return;
	}
	pthread_mutex_lock(&s->mu);
	s->use_rollups = on;
	pthread_mutex_unlock(&s->mu);
}

/* ---- ingest ---------------------------------------------------------------------------------- */

/* Maps of one pushed profile's ids to the store's, filled lazily; 0 = not yet mapped (id 0 is
 * always 0). */
static uint32_t map_str(strobe_profile *dst, const strobe_profile *p, store_remap *m, uint32_t id)
{
	if (!id || m->str[id])
		return m->str[id];
	return m->str[id] = strobe_str_intern(dst, strobe_str(p, id), strobe_str_len(p, id));
}

static uint32_t map_loc(strobe_profile *dst, const strobe_profile *p, store_remap *m, uint32_t id)
{
	if (!id || m->loc[id])
		return m->loc[id];
	const strobe_location *l = strobe_location_get(p, id);
	uint32_t mp = 0;
	if (l->mapping && !(mp = m->map[l->mapping])) {
		strobe_mapping mm = *strobe_mapping_get(p, l->mapping);
		mm.filename = map_str(dst, p, m, mm.filename);
		mm.build_id = map_str(dst, p, m, mm.build_id);
		mp = m->map[l->mapping] = strobe_mapping_intern(dst, &mm);
		if (mp == UINT32_MAX)
			return UINT32_MAX;
	}
	if (store_lines_reserve(&m->lines, &m->lcap, l->nline) < 0)
		return UINT32_MAX;
	for (uint32_t i = 0; i < l->nline; i++) {
		m->lines[i] = l->line[i];
		uint32_t f = l->line[i].function;
		if (f && !m->fn[f]) {
			strobe_function ff = *strobe_function_get(p, f);
			ff.name = map_str(dst, p, m, ff.name);
			ff.system_name = map_str(dst, p, m, ff.system_name);
			ff.filename = map_str(dst, p, m, ff.filename);
			if ((m->fn[f] = strobe_function_intern(dst, &ff)) == UINT32_MAX)
				return UINT32_MAX;
		}
		m->lines[i].function = f ? m->fn[f] : 0;
	}
	return m->loc[id] = strobe_location_intern(dst, mp, l->address, m->lines, l->nline,
						   l->is_folded);
}

uint32_t store_map_stack(strobe_profile *dst, const strobe_profile *p, store_remap *m, uint32_t id)
{
	if (!id || m->stack[id])
		return m->stack[id];
	/* Climb to the nearest mapped ancestor, then push back down: no recursion on deep
	 * stacks. */
	size_t n = 0, cap = 64;
	uint32_t *chain = malloc(cap * sizeof(*chain)), cur = id;
	if (!chain)
		return UINT32_MAX;
	while (cur && !m->stack[cur]) {
		if (n == cap) {
			uint32_t *nc = realloc(chain, (cap *= 2) * sizeof(*nc));
			if (!nc) {
				free(chain);
				return UINT32_MAX;
			}
			chain = nc;
		}
		chain[n++] = cur;
		cur = strobe_stack_get(p, cur)->parent;
	}
	uint32_t parent = cur ? m->stack[cur] : 0;
	while (n) {
		uint32_t sid = chain[--n];
		uint32_t loc = map_loc(dst, p, m, strobe_stack_get(p, sid)->location);
		if (loc == UINT32_MAX || (parent = strobe_stack_push(dst, parent, loc)) ==
						 UINT32_MAX) {
			free(chain);
			return UINT32_MAX;
		}
		m->stack[sid] = parent;
	}
	free(chain);
	return parent;
}

int store_remap_init(store_remap *m, const strobe_profile *src)
{
	memset(m, 0, sizeof(*m));
	m->str = calloc(src->strings.n, sizeof(uint32_t));
	m->fn = calloc(src->functions.n, sizeof(uint32_t));
	m->map = calloc(src->mappings.n, sizeof(uint32_t));
	m->loc = calloc(src->locations.n, sizeof(uint32_t));
	m->stack = calloc(src->stacks.n, sizeof(uint32_t));
	return m->str && m->fn && m->map && m->loc && m->stack ? 0 : -ENOMEM;
}

void store_remap_free(store_remap *m)
{
	free(m->str);
	free(m->fn);
	free(m->map);
	free(m->loc);
	free(m->stack);
	free(m->lines);
}

static size_t tenant_series(const strobe_store *s, const char *tenant)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nseries; i++)
		n += !s->series[i].dead && strcmp(s->series[i].tenant, tenant) == 0;
	return n;
}

/* A series about to be made, against max_label_values: each of its label values new to the
 * tenant must leave that name at most max_label_values values. Only a new value is counted
 * (its series scanned once, as tenant_series does): new series are rare, pushes to known ones
 * never get here. */
static int label_values_ok(strobe_store *s, const char *tenant, const store_series *ns,
			   strobe_err *err)
{
	for (uint32_t k = 0; k < ns->nlabels; k++) {
		const char *name = ns->labels[k].name, *value = ns->labels[k].value;
		strobe_itab seen = {0};
		bool known = false;
		int r = 0;
		for (size_t i = 0; r == 0 && !known && i < s->nseries; i++) {
			const store_series *se = &s->series[i];
			if (se->dead || strcmp(se->tenant, tenant) != 0)
				continue;
			for (uint32_t j = 0; j < se->nlabels; j++) {
				if (strcmp(se->labels[j].name, name) != 0)
					continue;
				const char *v = se->labels[j].value;
				if (strcmp(v, value) == 0) {
					known = true;
				} else {
					uint32_t id;
					bool added;
					r = strobe_itab_intern(&seen, v, strlen(v), &id, &added);
				}
				break;
			}
		}
		uint32_t n = seen.n;
		strobe_itab_free(&seen);
		if (r < 0)
			return r;
		if (!known && n >= s->o.max_label_values)
			return strobe_errf(err, -EDQUOT,
					   "limit max_label_values_per_name: label %.128s has %u values "
					   "in tenant '%s', at most %u; a value per process or request "
					   "belongs on the samples (pid, span_id...), not on the series",
					   name, n, tenant, s->o.max_label_values);
	}
	return 0;
}

/* An item's samples: all of its profile's, or the subset it names (one label set of a profile
 * split by per-sample labels); sample i (1-based) of the item is item_sid(i) of the profile. */
static uint32_t item_ns(const strobe_push_item *it)
{
	return it->view ? it->view->nsamples : it->samples ? it->nsamples : strobe_nsamples(it->profile);
}

static uint32_t item_sid(const strobe_push_item *it, uint32_t i)
{
	return it->samples ? it->samples[i - 1] : i;
}

/* One (item, sample type) of a push: the series it goes to and the point it becomes. */
typedef struct push_col {
	char type[STROBE_TYPE_MAX];
	char *key; /* series key */
	size_t klen, series;
	uint32_t item, ty;
	int64_t time;
} push_col;

/* Under the store's lock, and only what needs it: every sample's stack mapped into the
 * store's tables (interning what is new) and every column resolved to its series, a new or
 * revived series made live in memory (its row is written by the committer with the push's
 * points). On an error the series made here are dead again; nobody else has seen them, since
 * all of this runs under the lock. */
static int push_resolve(strobe_store *s, const strobe_push_req *rq, uint32_t **gst, push_col *cols,
			size_t ncols, size_t *made, strobe_err *err)
{
	int r = 0;
	size_t nmade = 0;
	uint32_t before = s->sym->stacks.n;
	for (size_t it = 0; r == 0 && it < rq->nitems; it++) {
		const strobe_push_item *item = &rq->items[it];
		const strobe_profile *p = item->profile;
		if (item->view) {
			r = store_map_view(s, item->view, gst[it]);
			continue;
		}
		store_remap m;
		if (store_remap_init(&m, p) < 0)
			r = -ENOMEM;
		uint32_t ns = item_ns(item);
		for (uint32_t i = 1; r == 0 && i <= ns; i++)
			if ((gst[it][i] = store_map_stack(s->sym, p, &m,
							  strobe_sample(p, item_sid(item, i))->stack)) ==
			    UINT32_MAX)
				r = -ENOMEM;
		store_remap_free(&m);
	}
	/* The symbol tables live in memory whole (so ingest never reads the database); the cap
	 * on stacks bounds them. A push that crossed it is refused: what it interned stays
	 * (unused rows, written by the next commit), so the table ends at most one push past. */
	if (r == 0 && s->o.max_stacks && s->sym->stacks.n > s->o.max_stacks &&
	    s->sym->stacks.n > before)
		r = strobe_errf(err, -EDQUOT,
				"limit max_stacks: the store holds %u distinct stacks, at most %u",
				s->sym->stacks.n - 1, s->o.max_stacks);
	for (size_t c = 0; r == 0 && c < ncols; c++) {
		size_t idx;
		if ((r = series_add_mem(s, cols[c].key, cols[c].klen, &idx)) < 0)
			break;
		store_series *se = &s->series[idx];
		cols[c].series = idx;
		if (!se->dead)
			continue;
		if (s->o.max_series && tenant_series(s, rq->tenant) >= s->o.max_series) {
			r = strobe_errf(err, -EDQUOT,
					"limit max_series_per_tenant: tenant '%s' has %u series already",
					rq->tenant, s->o.max_series);
			break;
		}
		if (s->o.max_label_values && (r = label_values_ok(s, rq->tenant, se, err)) < 0)
			break;
		se->period = rq->items[cols[c].item].profile->period;
		/* Pyroscope's aggregationType=average: fixed when the series is made. */
		se->gauge = strobe_type_is_gauge(se->type) || rq->items[cols[c].item].average;
		se->dead = false;
		se->saved = false;
		made[nmade++] = idx;
	}
	if (r < 0)
		for (size_t i = 0; i < nmade; i++)
			s->series[made[i]].dead = true;
	return r;
}

/* The samples 1..ns in the order of their store stack ids: an LSD radix sort, 8 bits a pass,
 * passes whose byte is the same for all skipped (qsort was a tenth of ingest's CPU, once per
 * sample type). Done once per profile and shared by its sample types. */
static int order_by_stack(const uint32_t *gst, uint32_t ns, uint32_t **out)
{
	uint32_t *a = malloc(((size_t)ns + 1) * sizeof(*a)), *t = malloc(((size_t)ns + 1) * sizeof(*t));
	if (!a || !t) {
		free(a);
		free(t);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ns; i++)
		a[i] = i + 1;
	for (int shift = 0; shift < 32; shift += 8) {
		size_t cnt[257] = {0};
		for (uint32_t i = 0; i < ns; i++)
			cnt[((gst[a[i]] >> shift) & 0xff) + 1]++;
		bool one = false;
		for (int k = 1; k <= 256; k++)
			one |= cnt[k] == ns;
		if (one)
			continue;
		for (int k = 1; k <= 256; k++)
			cnt[k] += cnt[k - 1];
		for (uint32_t i = 0; i < ns; i++)
			t[cnt[(gst[a[i]] >> shift) & 0xff]++] = a[i];
		uint32_t *x = a;
		a = t;
		t = x;
	}
	free(t);
	*out = a;
	return 0;
}

/* The item's sample labels in points.slabels' form (name\0value\0..., sorted by name, as the
 * item gives them), checked: the push layer validated names and values as it does series
 * labels. */
static int slabels_encode(const strobe_push_item *item, store_point *pt, strobe_err *err)
{
	if (!item->nslabels)
		return 0;
	if (item->nslabels > STROBE_SAMPLE_LABELS_MAX)
		return strobe_errf(err, -EINVAL, "limit max_labels: more than %d sample labels",
				   STROBE_SAMPLE_LABELS_MAX);
	size_t len = 0;
	for (size_t i = 0; i < item->nslabels; i++)
		len += strlen(item->slabels[i].name) + strlen(item->slabels[i].value) + 2;
	char *q = pt->slabels = malloc(len);
	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < item->nslabels; i++) {
		q = stpcpy(q, item->slabels[i].name) + 1;
		q = stpcpy(q, item->slabels[i].value) + 1;
	}
	pt->slen = len;
	return 0;
}

/* Outside the lock: one column's (stack, value) pairs, summed per stack, zstd'd. `order` is
 * the samples sorted by stack. */
static int push_encode(const strobe_push_item *it, const uint32_t *gst, const uint32_t *order,
		       uint32_t ty, store_pair *pairs, store_point *pt, strobe_push_accepted *a)
{
	const strobe_profile *p = it->profile;
	const int64_t *vv = it->view ? it->view->values : NULL;
	uint32_t ns = item_ns(it), nt = p->ntypes;
	size_t w = 0;
	int64_t total = 0;
	for (uint32_t k = 0; k < ns; k++) {
		uint32_t i = order[k];
		int64_t v = vv ? vv[(size_t)(i - 1) * nt + ty]
			       : strobe_sample_values(p, item_sid(it, i))[ty];
		if (!v)
			continue;
		/* Unsigned adds: hostile values wrap instead of overflowing (as the model's
		 * sums of one sample's values do). */
		total = (int64_t)((uint64_t)total + (uint64_t)v);
		if (w && pairs[w - 1].stack == gst[i])
			pairs[w - 1].value = (int64_t)((uint64_t)pairs[w - 1].value + (uint64_t)v);
		else
			pairs[w++] = (store_pair){gst[i], v};
	}
	/* Values of one stack that cancel out leave no pair, as no value does. */
	size_t nz = 0;
	for (size_t i = 0; i < w; i++)
		if (pairs[i].value)
			pairs[nz++] = pairs[i];
	a->stacks = (uint32_t)nz;
	a->total = total;
	pt->total = total;
	return store_blob_encode(pairs, nz, &pt->blob, &pt->blen);
}

int strobe_store_push(strobe_store *s, const strobe_push_req *rq, strobe_push_result *res,
		      strobe_err *err)
{
	STORE_BACKEND_CALL(s, push, rq, res, err);
	memset(res, 0, sizeof(*res));
	size_t ncols = 0, maxns = 0;
	for (size_t i = 0; i < rq->nitems; i++) {
		ncols += rq->items[i].profile->ntypes;
		if (item_ns(&rq->items[i]) > maxns)
			maxns = item_ns(&rq->items[i]);
	}
	push_col *cols = calloc(ncols ? ncols : 1, sizeof(*cols));
	uint32_t **gst = calloc(rq->nitems ? rq->nitems : 1, sizeof(*gst));
	size_t *made = calloc(ncols ? ncols : 1, sizeof(*made));
	store_pair *pairs = malloc((maxns + 1) * sizeof(*pairs));
	store_pending pend = {0};
	pend.pt = calloc(ncols ? ncols : 1, sizeof(*pend.pt));
	res->acc = calloc(ncols ? ncols : 1, sizeof(*res->acc));
	int r = (!cols || !gst || !made || !pairs || !pend.pt || !res->acc) ? -ENOMEM : 0;
	/* Checks, type names and series keys first, without the lock. */
	size_t c = 0;
	for (size_t it = 0; r == 0 && it < rq->nitems; it++) {
		const strobe_push_item *item = &rq->items[it];
		const strobe_profile *p = item->profile;
		int64_t t = item->time_ns ? item->time_ns : p->time_nanos ? p->time_nanos : rq->now_ns;
		if (s->o.retention_ns && t < rq->now_ns - s->o.retention_ns) {
			r = strobe_errf(err, -EDQUOT,
					"limit retention: the profile's time is older than the "
					"retention period; give a later time");
			break;
		}
		if (p->ntypes == 0) {
			r = strobe_errf(err, -EINVAL, "the profile has no sample types");
			break;
		}
		if (!(gst[it] = malloc(((size_t)item_ns(item) + 1) * sizeof(**gst)))) {
			r = -ENOMEM;
			break;
		}
		/* The series labels: the request's and the item's (per-sample labels), merged by
		 * name (both sorted, no name in both). */
		const strobe_labelpair *labels = rq->labels;
		size_t nlabels = rq->nlabels;
		strobe_labelpair *merged = NULL;
		if (item->nlabels) {
			if (!(merged = malloc((rq->nlabels + item->nlabels) * sizeof(*merged)))) {
				r = -ENOMEM;
				break;
			}
			size_t a = 0, b = 0;
			nlabels = 0;
			while (a < rq->nlabels || b < item->nlabels)
				merged[nlabels++] =
					b == item->nlabels ||
							(a < rq->nlabels &&
							 strcmp(rq->labels[a].name, item->labels[b].name) < 0)
						? rq->labels[a++]
						: item->labels[b++];
			labels = merged;
		}
		for (uint32_t ty = 0; r == 0 && ty < p->ntypes; ty++, c++) {
			cols[c].item = (uint32_t)it;
			cols[c].ty = ty;
			cols[c].time = t;
			if ((r = strobe_profile_type_names(p, item->name, ty, cols[c].type, err)) == 0)
				r = series_key(rq->tenant, cols[c].type, labels, nlabels, &cols[c].key,
					       &cols[c].klen);
		}
		free(merged);
	}
	bool ids_held = r == 0 && ncols;
	if (ids_held) {
		pthread_rwlock_rdlock(&s->ids_lock);
		pthread_mutex_lock(&s->mu);
		r = push_resolve(s, rq, gst, cols, ncols, made, err);
		pthread_mutex_unlock(&s->mu);
	}
	uint32_t *order = NULL, order_item = UINT32_MAX;
	for (c = 0; r == 0 && c < ncols; c++) {
		if (cols[c].item != order_item) {
			free(order);
			order = NULL;
			order_item = cols[c].item;
			if ((r = order_by_stack(gst[order_item], item_ns(&rq->items[order_item]),
						&order)) < 0)
				break;
		}
		strobe_push_accepted *a = &res->acc[c];
		store_point *pt = &pend.pt[c];
		pt->series = cols[c].series;
		pt->series_id = (int64_t)cols[c].series + 1;
		pt->time = cols[c].time;
		snprintf(a->type, sizeof(a->type), "%s", cols[c].type);
		a->time_ns = cols[c].time;
		r = push_encode(&rq->items[cols[c].item], gst[cols[c].item], order, cols[c].ty, pairs,
				pt, a);
		if (r == 0)
			r = slabels_encode(&rq->items[cols[c].item], pt, err);
		pend.npt = c + 1;
	}
	free(order);
	/* Durable before we return: the committer writes this push with whatever else is
	 * waiting, in one transaction and one fsync. A push that fails after its series were
	 * made leaves them live but empty (another push may already use them), as a listing of
	 * points in a window shows nothing for them. */
	if (r == 0 && ncols)
		r = store_commit_wait(s, &pend, err);
	if (ids_held)
		pthread_rwlock_unlock(&s->ids_lock);
	if (r == 0)
		res->n = ncols;
	else
		strobe_push_result_free(res);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	for (size_t i = 0; i < pend.npt; i++) {
		free(pend.pt[i].blob);
		free(pend.pt[i].slabels);
	}
	free(pend.pt);
	for (size_t i = 0; cols && i < ncols; i++)
		free(cols[i].key);
	for (size_t i = 0; gst && i < rq->nitems; i++)
		free(gst[i]);
	free(cols);
	free(gst);
	free(made);
	free(pairs);
	return r;
}

void strobe_push_result_free(strobe_push_result *r)
{
	free(r->acc);
	r->acc = NULL;
	r->n = 0;
}

int strobe_store_stats_get(strobe_store *s, strobe_store_stats *st)
{
	STORE_BACKEND_CALL(s, stats_get, st);
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->nseries; i++)
		st->series += !s->series[i].dead;
	st->strings = s->sym->strings.n - 1;
	st->functions = s->sym->functions.n - 1;
	st->mappings = s->sym->mappings.n - 1;
	st->locations = s->sym->locations.n - 1;
	st->stacks = s->sym->stacks.n - 1;
	sqlite3_stmt *q;
	int r = 0;
	if (sqlite3_prepare_v2(s->db, "SELECT level = 0, count(*) FROM points GROUP BY level = 0", -1,
			       &q, NULL) == SQLITE_OK) {
		while (sqlite3_step(q) == SQLITE_ROW) {
			if (sqlite3_column_int(q, 0))
				st->points = (uint64_t)sqlite3_column_int64(q, 1);
			else
				st->rollups = (uint64_t)sqlite3_column_int64(q, 1);
		}
		sqlite3_finalize(q);
	} else {
		r = -EIO;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}
