// SPDX-License-Identifier: Apache-2.0
/*
 * Group totals: the per-point totals of the totals table (store_impl.h), summed at ingest over
 * every series of a (tenant, profile type, service_name value) and over every series of a
 * (tenant, type), so that the range a fleet's first screen asks for (24 h of every service,
 * grouped by service) reads one row per service and minute instead of one per series and
 * minute (1,000 series of 20 services: 28,800 rows instead of 1.44 M).
 *
 * The rows are written in the transaction of the points they sum (commit.c), so a group row
 * never holds a point that was not stored, nor misses one that was acknowledged. A batch of
 * pushes is summed in memory first, per (group, level, time), so that a group commit of many
 * series' points costs one upsert per row it touches rather than one per point. Compaction
 * does not touch them (totals are never folded); retention deletes them with the points and
 * sums the straddling buckets again, as it does the series' totals. A store from before them
 * gets them at open, built from its totals in one transaction (store_groups_open).
 *
 * The roll-up labels are fixed (store_group_labels): service_name is what the UI stacks by and
 * what a fleet's selectors name; each more label costs three upserts per point and batch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

const char *const store_group_labels[STORE_NGROUPS] = {"", "service_name"};

static const char *series_label(const store_series *se, const char *name)
{
	for (uint32_t i = 0; i < se->nlabels; i++)
		if (strcmp(se->labels[i].name, name) == 0)
			return se->labels[i].value;
	return "";
}

/* "tenant\0type\0label\0value\0" into a malloc'd key; its length in *len. */
static char *group_key(const char *tenant, const char *type, const char *label, const char *value,
		       size_t *len)
{
	size_t a = strlen(tenant) + 1, b = strlen(type) + 1, c = strlen(label) + 1,
	       d = strlen(value) + 1;
	char *k = malloc(a + b + c + d);
	if (!k)
		return NULL;
	memcpy(k, tenant, a);
	memcpy(k + a, type, b);
	memcpy(k + a + b, label, c);
	memcpy(k + a + b + c, value, d);
	*len = a + b + c + d;
	return k;
}

int64_t store_group_find(strobe_store *s, const char *tenant, const char *type, const char *label,
			 const char *value)
{
	size_t len;
	char *k = group_key(tenant, type, label, value, &len);
	if (!k)
		return -ENOMEM;
	uint32_t id = strobe_itab_find(&s->group_key, k, len);
	free(k);
	return id == UINT32_MAX ? 0 : (int64_t)id + 1;
}

int store_series_groups(strobe_store *s, store_series *se, int64_t grp[STORE_NGROUPS])
{
	if (!se->has_grp) {
		for (int k = 0; k < STORE_NGROUPS; k++) {
			size_t len;
			char *key = group_key(se->tenant, se->type, store_group_labels[k],
					      k ? series_label(se, store_group_labels[k]) : "", &len);
			uint32_t id;
			int r = key ? strobe_itab_intern(&s->group_key, key, len, &id, NULL) : -ENOMEM;
			free(key);
			if (r < 0)
				return -ENOMEM;
			se->grp[k] = (int64_t)id + 1;
		}
		se->has_grp = true;
	}
	/* A gauge's range is a mean per series: not in the sums (the query checks the same). */
	for (int k = 0; k < STORE_NGROUPS; k++)
		grp[k] = se->gauge ? 0 : se->grp[k];
	return 0;
}

int store_groups_save(strobe_store *s, sqlite3 *db, size_t *upto, strobe_err *err)
{
	*upto = s->group_key.n;
	if (s->gsaved >= *upto)
		return 0;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db,
			       "INSERT OR REPLACE INTO rgroups(id, tenant, type, label, value) "
			       "VALUES(?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK)
		return store_dberr(db, err, "groups");
	int r = 0;
	for (size_t i = s->gsaved; r == 0 && i < *upto; i++) {
		const char *k = strobe_itab_get(&s->group_key, (uint32_t)i, NULL);
		sqlite3_bind_int64(st, 1, (int64_t)i + 1);
		for (int c = 0; c < 4; c++) {
			sqlite3_bind_text(st, 2 + c, k, -1, SQLITE_STATIC);
			k += strlen(k) + 1;
		}
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_dberr(db, err, "groups");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return r;
}

static int cmp_grec(const void *a, const void *b)
{
	const store_grec *x = a, *y = b;
	if (x->grp != y->grp)
		return x->grp < y->grp ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

/* The rows of records rec[0..n) (sorted by group and time), each summed before its upsert;
 * a minute's and an hour's list hold one entry per distinct time. Totals wrap as the series'
 * do. pts: room for the longest list and one entry past it. */
static int add_sorted(sqlite3 *db, sqlite3_stmt *up, const store_grec *rec, size_t n,
		      uint8_t *pts, strobe_err *err)
{
	int r = 0;
	for (int level = 0; r == 0 && level < STORE_LEVELS; level++)
		for (size_t i = 0; r == 0 && i < n;) {
			int64_t g = rec[i].grp, b = store_bucket_of(rec[i].time, level);
			int64_t cnt = 0;
			uint64_t tot = 0;
			size_t plen = 0;
			while (i < n && rec[i].grp == g && store_bucket_of(rec[i].time, level) == b) {
				int64_t t = rec[i].time, tn = 0;
				uint64_t tt = 0;
				for (; i < n && rec[i].grp == g && rec[i].time == t; i++) {
					tn += rec[i].n;
					tt += (uint64_t)rec[i].total;
				}
				cnt += tn;
				tot += tt;
				if (level && plen <= (size_t)store_pts_cap(level))
					plen += store_pts_entry(pts + plen, t - b, tn, (int64_t)tt);
			}
			r = store_totals_upsert(db, up, g, level, b, cnt, (int64_t)tot,
						level ? pts : NULL, plen, "group totals", err);
		}
	return r;
}

int store_gtotals_add(sqlite3 *db, store_grec *rec, size_t n, strobe_err *err)
{
	if (!n)
		return 0;
	sqlite3_stmt *up;
	/* Room for a list up to its cap and one entry past it (then given up). */
	uint8_t *pts = malloc(STORE_HOUR_PTS_MAX + STORE_PTS_ENTRY_MAX);
	if (!pts)
		return -ENOMEM;
	if (sqlite3_prepare_v2(db, STORE_GTOTALS_UPSERT, -1, &up, NULL) != SQLITE_OK) {
		free(pts);
		return store_dberr(db, err, "group totals");
	}
	qsort(rec, n, sizeof(*rec), cmp_grec);
	int r = add_sorted(db, up, rec, n, pts, err);
	sqlite3_finalize(up);
	free(pts);
	return r;
}

static int load_groups(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT id, tenant, type, label, value FROM rgroups ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "loading groups");
	int rc, r = 0;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t len;
		char *k = group_key((const char *)sqlite3_column_text(st, 1),
				    (const char *)sqlite3_column_text(st, 2),
				    (const char *)sqlite3_column_text(st, 3),
				    (const char *)sqlite3_column_text(st, 4), &len);
		uint32_t id;
		bool added;
		if (!k || strobe_itab_intern(&s->group_key, k, len, &id, &added) < 0)
			r = -ENOMEM;
		/* Written in id order from 1 with no gaps (store_groups_save): anything else is
		 * a damaged table, and sums read through it would be wrong. */
		else if (!added || (int64_t)id + 1 != sqlite3_column_int64(st, 0))
			r = strobe_errf(err, -EIO, "store: the groups table is inconsistent at row %lld",
					(long long)sqlite3_column_int64(st, 0));
		free(k);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "loading groups");
	sqlite3_finalize(st);
	s->gsaved = s->group_key.n;
	return r;
}

/* The group rows of a store written before them, from its series' totals: each series' level-0
 * rows (one per point time) carried into its groups through the same code as ingest, a group
 * (or a chunk of one: the upserts add up, so a flush may come anywhere) at a time, so memory
 * stays bounded whatever the store's size. */
#define BUILD_CHUNK (1u << 20)
static int build_groups(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st = NULL, *up = NULL;
	store_grec *rec = malloc(BUILD_CHUNK * sizeof(*rec));
	size_t n = 0;
	uint8_t *pts = malloc(STORE_HOUR_PTS_MAX + STORE_PTS_ENTRY_MAX);
	int r = pts && rec ? store_exec(s, "CREATE TEMP TABLE sgroup(grp INT NOT NULL, series INT "
					   "NOT NULL, PRIMARY KEY(grp, series)) WITHOUT ROWID",
					err)
			   : -ENOMEM;
	if (r == 0 && sqlite3_prepare_v2(s->db, "INSERT INTO sgroup(grp, series) VALUES(?,?)", -1,
					 &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "building group totals");
	for (size_t i = 0; r == 0 && i < s->nseries; i++) {
		store_series *se = &s->series[i];
		int64_t grp[STORE_NGROUPS];
		if (se->dead || (r = store_series_groups(s, se, grp)) < 0)
			continue;
		for (int k = 0; r == 0 && k < STORE_NGROUPS; k++) {
			if (!grp[k])
				continue;
			sqlite3_bind_int64(st, 1, grp[k]);
			sqlite3_bind_int64(st, 2, se->id);
			if (sqlite3_step(st) != SQLITE_DONE)
				r = store_sqlerr(s, err, "building group totals");
			sqlite3_reset(st);
		}
	}
	sqlite3_finalize(st);
	st = NULL;
	size_t upto;
	if (r == 0)
		r = store_groups_save(s, s->db, &upto, err);
	if (r == 0)
		s->gsaved = upto;
	if (r == 0 && (sqlite3_prepare_v2(s->db,
					  "SELECT g.grp, t.time, t.n, t.total FROM sgroup g JOIN totals t "
					  "ON t.series = g.series AND t.level = 0 ORDER BY g.grp",
					  -1, &st, NULL) != SQLITE_OK ||
		       sqlite3_prepare_v2(s->db, STORE_GTOTALS_UPSERT, -1, &up, NULL) != SQLITE_OK))
		r = store_sqlerr(s, err, "building group totals");
	int rc = SQLITE_DONE;
	while (r == 0) {
		rc = sqlite3_step(st);
		int64_t g = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		if (n && (rc != SQLITE_ROW || g != rec[0].grp || n == BUILD_CHUNK)) {
			qsort(rec, n, sizeof(*rec), cmp_grec);
			r = add_sorted(s->db, up, rec, n, pts, err);
			n = 0;
		}
		if (rc != SQLITE_ROW || r < 0)
			break;
		rec[n++] = (store_grec){g, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
					sqlite3_column_int64(st, 3)};
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "building group totals");
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	free(rec);
	free(pts);
	if (r == 0)
		r = store_exec(s, "DROP TABLE temp.sgroup", err);
	return r;
}

typedef struct hsum {
	int64_t time, n, total;
} hsum;

typedef struct hacc {
	hsum *v, *tmp; /* v: sorted by time, one per hour */
	size_t n, cap;
} hacc;

/* Merges the hour rows of one key (sorted by time, as the primary key gives them) into a. */
static int hacc_merge(hacc *a, const hsum *r, size_t nr)
{
	if (a->n + nr > a->cap) {
		size_t nc = 2 * (a->n + nr);
		hsum *nv = realloc(a->v, nc * sizeof(*nv)), *nt;
		if (!nv)
			return -ENOMEM;
		a->v = nv;
		if (!(nt = realloc(a->tmp, nc * sizeof(*nt))))
			return -ENOMEM;
		a->tmp = nt;
		a->cap = nc;
	}
	size_t i = 0, k = 0, w = 0;
	while (i < a->n || k < nr) {
		if (k == nr || (i < a->n && a->v[i].time < r[k].time)) {
			a->tmp[w++] = a->v[i++];
		} else if (i == a->n || r[k].time < a->v[i].time) {
			a->tmp[w++] = r[k++];
		} else {
			hsum h = a->v[i++];
			h.n += r[k].n;
			h.total = (int64_t)((uint64_t)h.total + (uint64_t)r[k++].total);
			a->tmp[w++] = h;
		}
	}
	hsum *t = a->v;
	a->v = a->tmp;
	a->tmp = t;
	a->n = w;
	return 0;
}

/* The hour rows of the keys (series or group ids) the statement st (?1: the key) gives, summed
 * per hour into a: one seek per key, not a scan of every level. */
static int hour_sums(strobe_store *s, sqlite3_stmt *st, const int64_t *keys, size_t nkeys,
		     hacc *a, strobe_err *err)
{
	hsum *r = NULL;
	size_t cap = 0;
	int ret = 0;
	for (size_t i = 0; ret == 0 && i < nkeys; i++) {
		size_t n = 0;
		int rc;
		sqlite3_bind_int64(st, 1, keys[i]);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				hsum *nr = realloc(r, cap * sizeof(*nr));
				if (!nr) {
					ret = -ENOMEM;
					break;
				}
				r = nr;
			}
			r[n++] = (hsum){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
					sqlite3_column_int64(st, 2)};
		}
		if (ret == 0 && rc != SQLITE_DONE)
			ret = store_sqlerr(s, err, "checking group totals");
		sqlite3_reset(st);
		if (ret == 0 && n)
			ret = hacc_merge(a, r, n);
	}
	free(r);
	return ret;
}

/* Whether the group rows still add up to the series' totals: per hour, the points and totals
 * of every counter series against those of the "all series" groups. They do not after an older
 * build (one without groups) stored or deleted points in this store: then they are built again
 * (store_groups_open). 1 yes, 0 no, <0 error. Reads the hour rows only. */
static int groups_consistent(strobe_store *s, strobe_err *err)
{
	size_t ng = s->group_key.n, nks = 0, nkg = 0;
	int64_t *ks = malloc((s->nseries + 1) * sizeof(*ks)), *kg = malloc((ng + 1) * sizeof(*kg));
	hacc a = {0}, b = {0};
	sqlite3_stmt *st1 = NULL, *st2 = NULL;
	int r = ks && kg ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < s->nseries; i++)
		if (!s->series[i].dead && !s->series[i].gauge)
			ks[nks++] = s->series[i].id;
	for (size_t i = 0; r == 0 && i < ng; i++) {
		const char *k = strobe_itab_get(&s->group_key, (uint32_t)i, NULL);
		k += strlen(k) + 1;
		k += strlen(k) + 1; /* the label: "" for all series */
		if (!*k)
			kg[nkg++] = (int64_t)i + 1;
	}
	if (r == 0 && (sqlite3_prepare_v2(s->db, "SELECT time, n, total FROM totals WHERE series=?1 "
						 "AND level=2 ORDER BY time",
					  -1, &st1, NULL) != SQLITE_OK ||
		       sqlite3_prepare_v2(s->db, "SELECT time, n, total FROM gtotals WHERE grp=?1 AND "
						 "level=2 ORDER BY time",
					  -1, &st2, NULL) != SQLITE_OK))
		r = store_sqlerr(s, err, "checking group totals");
	if (r == 0)
		r = hour_sums(s, st1, ks, nks, &a, err);
	if (r == 0)
		r = hour_sums(s, st2, kg, nkg, &b, err);
	if (r == 0) {
		r = a.n == b.n;
		for (size_t i = 0; r && i < a.n; i++)
			r = a.v[i].time == b.v[i].time && a.v[i].n == b.v[i].n &&
			    a.v[i].total == b.v[i].total;
	}
	sqlite3_finalize(st1);
	sqlite3_finalize(st2);
	free(ks);
	free(kg);
	free(a.v);
	free(a.tmp);
	free(b.v);
	free(b.tmp);
	return r;
}

int store_groups_open(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_schema WHERE name='gtotals'", -1, &st,
			       NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "schema");
	int rc = sqlite3_step(st), r = 0;
	sqlite3_finalize(st);
	bool exists = rc == SQLITE_ROW;
	if (exists) {
		r = load_groups(s, err);
		if (r == 0)
			r = groups_consistent(s, err);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	/* Built here, in the transaction that creates the tables (or empties them), so that
	 * they exist only complete: a range never reads half-built group rows. */
	r = store_exec(s, "BEGIN IMMEDIATE", err);
	if (r == 0)
		r = store_exec(s, exists ? "DELETE FROM gtotals" : STORE_GROUPS_SCHEMA, err);
	if (r == 0)
		r = build_groups(s, err);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	if (r < 0)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}

int store_groups_retain(strobe_store *s, int64_t cutoff, strobe_err *err)
{
	sqlite3_stmt *del = NULL, *sum = NULL;
	int r = 0;
	/* As the series' totals (maint.c): every row of a bucket starting before the cutoff, and
	 * the straddling bucket summed again from the level-0 rows it keeps (no list: its cut
	 * minutes are split from those rows). Group by group, so each statement seeks its rows
	 * through the key: `level=? AND time<?` alone scans the whole table at every pass
	 * (seconds for a fleet's day, at every start). */
	if (sqlite3_prepare_v2(s->db, "DELETE FROM gtotals WHERE grp=?1 AND level=?2 AND time<?3",
			       -1, &del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "INSERT INTO gtotals(grp, level, time, n, total) SELECT grp, ?2, ?3, "
			       "sum(n), sum(total) FROM gtotals WHERE grp=?1 AND level=0 AND time>=?4 "
			       "AND time<?3 + ?5 GROUP BY grp",
			       -1, &sum, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	for (size_t g = 1; r == 0 && g <= s->gsaved; g++) {
		for (int level = 0; r == 0 && level < STORE_LEVELS; level++) {
			sqlite3_bind_int64(del, 1, (int64_t)g);
			sqlite3_bind_int(del, 2, level);
			sqlite3_bind_int64(del, 3, cutoff);
			if (sqlite3_step(del) != SQLITE_DONE)
				r = store_sqlerr(s, err, "retention");
			sqlite3_reset(del);
		}
		for (int level = 1; r == 0 && level < STORE_LEVELS; level++) {
			int64_t w = store_level_width[level], b = cutoff - (((cutoff % w) + w) % w);
			if (b == cutoff)
				continue;
			sqlite3_bind_int64(sum, 1, (int64_t)g);
			sqlite3_bind_int(sum, 2, level);
			sqlite3_bind_int64(sum, 3, b);
			sqlite3_bind_int64(sum, 4, cutoff);
			sqlite3_bind_int64(sum, 5, w);
			if (sqlite3_step(sum) != SQLITE_DONE)
				r = store_sqlerr(s, err, "retention");
			sqlite3_reset(sum);
		}
	}
	sqlite3_finalize(del);
	sqlite3_finalize(sum);
	return r;
}
