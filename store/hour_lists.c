// SPDX-License-Identifier: Apache-2.0
/*
 * The hours' lists of points (store_impl.h, totals): the level-2 rows of the totals and group
 * totals tables list their points (offset in the hour, count, total), so that a range whose steps
 * cut an hour puts each point in its step from the hour's one row instead of reading its sixty
 * minute rows. Ingest appends to them (store_totals_add, groups.c); this file fills the lists an
 * hour row lacks (pts NULL): every hour of a store written before them, the hours an older
 * server added points to (its upsert binds NULL for the hour's list, which the upsert keeps as
 * NULL), and the hour retention cuts (summed again without a list). Each list is made from the
 * key's level-0 rows, which hold every point time of the hour, so it adds up to the hour row
 * whenever the row is right; a reader checks that it does before using it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

typedef struct hl_stmts {
	sqlite3_stmt *need, *pts, *upd;
} hl_stmts;

static int prepare(sqlite3 *db, bool groups, hl_stmts *h, strobe_err *err)
{
	/* The table and key column are fixed strings, never input. */
	const char *t = groups ? "gtotals" : "totals", *k = groups ? "grp" : "series";
	char need[200], pts[200], upd[200];
	snprintf(need, sizeof(need),
		 "SELECT time FROM %s WHERE %s=?1 AND level=2 AND time>=?2 AND time<?3 AND pts IS "
		 "NULL",
		 t, k);
	snprintf(pts, sizeof(pts),
		 "SELECT time, n, total FROM %s WHERE %s=?1 AND level=0 AND time>=?2 AND time<?3", t,
		 k);
	snprintf(upd, sizeof(upd), "UPDATE %s SET pts=?3 WHERE %s=?1 AND level=2 AND time=?2", t, k);
	if (sqlite3_prepare_v2(db, need, -1, &h->need, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, pts, -1, &h->pts, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, upd, -1, &h->upd, NULL) != SQLITE_OK)
		return store_dberr(db, err, "hour lists");
	return 0;
}

static void finalize(hl_stmts *h)
{
	sqlite3_finalize(h->need);
	sqlite3_finalize(h->pts);
	sqlite3_finalize(h->upd);
}

/* The list of one hour (start hour) of key, from its level-0 rows, into its row. buf: room for
 * the cap and one entry past it. */
static int fill_hour(sqlite3 *db, hl_stmts *h, int64_t key, int64_t hour, uint8_t *buf,
		     strobe_err *err)
{
	size_t len = 0, cap = (size_t)store_pts_cap(2);
	int rc;
	sqlite3_bind_int64(h->pts, 1, key);
	sqlite3_bind_int64(h->pts, 2, hour);
	sqlite3_bind_int64(h->pts, 3, hour + store_level_width[2]);
	while ((rc = sqlite3_step(h->pts)) == SQLITE_ROW)
		if (len <= cap)
			len += store_pts_entry(buf + len, sqlite3_column_int64(h->pts, 0) - hour,
					       sqlite3_column_int64(h->pts, 1),
					       sqlite3_column_int64(h->pts, 2));
	sqlite3_reset(h->pts);
	if (rc != SQLITE_DONE)
		return store_dberr(db, err, "hour lists");
	sqlite3_bind_int64(h->upd, 1, key);
	sqlite3_bind_int64(h->upd, 2, hour);
	/* Past the cap: given up (the empty blob), as the upsert gives it up. */
	sqlite3_bind_blob(h->upd, 3, buf, len > cap ? 0 : (int)len, SQLITE_STATIC);
	rc = sqlite3_step(h->upd);
	sqlite3_reset(h->upd);
	return rc == SQLITE_DONE ? 0 : store_dberr(db, err, "hour lists");
}

int store_hour_lists_fill(sqlite3 *db, bool groups, const int64_t *keys, size_t nkeys,
			  int64_t from, int64_t to, size_t *filled, strobe_err *err)
{
	hl_stmts h = {0};
	int64_t *hours = NULL;
	size_t cap = 0;
	uint8_t *buf = malloc((size_t)store_pts_cap(2) + STORE_PTS_ENTRY_MAX);
	int r = buf ? prepare(db, groups, &h, err) : -ENOMEM;
	for (size_t i = 0; r == 0 && i < nkeys; i++) {
		/* The hours first, then their lists: the rows are not updated under the cursor
		 * that finds them. */
		size_t n = 0;
		int rc;
		sqlite3_bind_int64(h.need, 1, keys[i]);
		sqlite3_bind_int64(h.need, 2, from);
		sqlite3_bind_int64(h.need, 3, to);
		while (r == 0 && (rc = sqlite3_step(h.need)) == SQLITE_ROW) {
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 64;
				int64_t *nh = realloc(hours, nc * sizeof(*nh));
				if (!nh) {
					r = -ENOMEM;
					break;
				}
				hours = nh;
				cap = nc;
			}
			hours[n++] = sqlite3_column_int64(h.need, 0);
		}
		if (r == 0 && rc != SQLITE_DONE)
			r = store_dberr(db, err, "hour lists");
		sqlite3_reset(h.need);
		for (size_t k = 0; r == 0 && k < n; k++)
			r = fill_hour(db, &h, keys[i], hours[k], buf, err);
		if (filled)
			*filled += n;
	}
	finalize(&h);
	free(hours);
	free(buf);
	return r;
}

/* The ids of every live series (totals' keys) or every saved group (gtotals' keys). */
static int64_t *keys_of(strobe_store *s, bool groups, size_t *n)
{
	size_t cap = groups ? s->gsaved : s->nseries;
	int64_t *k = malloc((cap ? cap : 1) * sizeof(*k));
	*n = 0;
	if (!k)
		return NULL;
	for (size_t i = 0; i < cap; i++)
		if (groups)
			k[(*n)++] = (int64_t)i + 1;
		else if (!s->series[i].dead)
			k[(*n)++] = s->series[i].id;
	return k;
}

int store_hour_lists_range(strobe_store *s, int64_t from, int64_t to, size_t *filled,
			   strobe_err *err)
{
	int r = 0;
	for (int g = 0; r == 0 && g < 2; g++) {
		size_t n;
		int64_t *k = keys_of(s, g, &n);
		r = k ? store_hour_lists_fill(s->db, g, k, n, from, to, filled, err) : -ENOMEM;
		free(k);
	}
	return r;
}

int store_hour_lists_open(strobe_store *s, strobe_err *err)
{
	/* One transaction: the lists are complete or none is written (a reader falls back to
	 * the minutes for an hour without one, so a half-filled store would only be slower). */
	int r = store_exec(s, "BEGIN IMMEDIATE", err);
	if (r == 0)
		r = store_hour_lists_range(s, INT64_MIN, INT64_MAX, NULL, err);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	if (r < 0)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}
