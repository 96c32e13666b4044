// SPDX-License-Identifier: Apache-2.0
/*
 * The rows a push leaves in the embedded store, written through a connection the caller gives
 * (the committer's, in its transaction, commit.c; symgc.c's when it rewrites the symbol
 * tables): a series' row and its label index, the symbol rows interned since the last commit,
 * and a point's totals at every roll-up level with its entry in its minute's list of points.
 * The codecs of that list and of a point's sample labels are here too, for their readers.
 * Nothing here takes the store's locks: the callers hold what they need.
 */
#include <errno.h>
#include <string.h>

#include "store_impl.h"
#include "strobe/wire.h"

/* The roll-up levels' widths (store_impl.h, STORE_LEVELS). */
const int64_t store_level_width[STORE_LEVELS] = {0, 60 * STROBE_NS_PER_S,
						 3600 * STROBE_NS_PER_S};

int store_series_write(strobe_store *s, sqlite3 *db, store_series *se, strobe_err *err)
{
	(void)s;
	sqlite3_stmt *st = NULL;
	size_t blen = 0;
	for (uint32_t i = 0; i < se->nlabels; i++)
		blen += strlen(se->labels[i].name) + strlen(se->labels[i].value) + 2;
	const char *blob = se->nlabels ? se->labels[0].name : "";
	if (sqlite3_prepare_v2(db,
			       "INSERT OR REPLACE INTO series(id, tenant, type, labels, period, "
			       "average) VALUES(?,?,?,?,?,?)",
			       -1, &st, NULL) != SQLITE_OK)
		return store_dberr(db, err, "series");
	sqlite3_bind_int64(st, 1, se->id);
	sqlite3_bind_text(st, 2, se->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, se->type, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 4, blob, (int)blen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, se->period);
	sqlite3_bind_int(st, 6, se->gauge && !strobe_type_is_gauge(se->type));
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return store_dberr(db, err, "series");
	if (sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO series_labels VALUES(?,?,?)", -1, &st,
			       NULL) != SQLITE_OK)
		return store_dberr(db, err, "series_labels");
	for (uint32_t i = 0; i < se->nlabels; i++) {
		sqlite3_bind_text(st, 1, se->labels[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, se->labels[i].value, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, se->id);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			sqlite3_finalize(st);
			return store_dberr(db, err, "series_labels");
		}
	}
	sqlite3_finalize(st);
	return 0;
}


/* One point's total into the totals table at every level (ins: STORE_TOTALS_UPSERT), with its
 * entry in its minute's and its hour's lists of points. */
int64_t store_bucket_of(int64_t time, int level)
{
	int64_t w = store_level_width[level];
	return level ? time - (((time % w) + w) % w) : time;
}

int store_totals_upsert(sqlite3 *db, sqlite3_stmt *up, int64_t key, int level, int64_t t,
			int64_t n, int64_t total, const uint8_t *pts, size_t plen, const char *what,
			strobe_err *err)
{
	sqlite3_bind_int64(up, 1, key);
	sqlite3_bind_int(up, 2, level);
	sqlite3_bind_int64(up, 3, t);
	sqlite3_bind_int64(up, 4, n);
	sqlite3_bind_int64(up, 5, total);
	/* A list past its cap is given up by the statement (too busy a bucket: split from
	 * level 0). Static: pts outlives the step, and every step binds column 6 afresh. */
	if (pts)
		sqlite3_bind_blob(up, 6, pts, (int)plen, SQLITE_STATIC);
	else
		sqlite3_bind_null(up, 6);
	sqlite3_bind_int(up, 7, store_pts_cap(level));
	int rc = sqlite3_step(up);
	sqlite3_reset(up);
	return rc == SQLITE_DONE ? 0 : store_dberr(db, err, what);
}

int store_totals_add(sqlite3 *db, sqlite3_stmt *ins, int64_t series, int64_t time, int64_t n,
		     int64_t total, strobe_err *err)
{
	for (int level = 0; level < STORE_LEVELS; level++) {
		int64_t t = store_bucket_of(time, level);
		uint8_t e[STORE_PTS_ENTRY_MAX];
		size_t elen = level ? store_pts_entry(e, time - t, n, total) : 0;
		int r = store_totals_upsert(db, ins, series, level, t, n, total, level ? e : NULL,
					    elen, "totals", err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The entry's three varints (offset, count, zigzag total), written with the protobuf wire
 * helpers (read by store_pts_next, store_impl.h): the same bytes as protobuf's varints. */
size_t store_pts_entry(uint8_t *buf, int64_t off, int64_t n, int64_t total)
{
	uint8_t *o = strobe_wire_put_varint(buf, (uint64_t)off);
	o = strobe_wire_put_varint(o, (uint64_t)n);
	o = strobe_wire_put_varint(o, strobe_wire_zigzag(total));
	return (size_t)(o - buf);
}

/* Writes p's symbol rows from saved[t] up to n[t] (n NULL: all of p) of each table t, through
 * db: the committer's new rows, or a whole rebuilt table set (symgc.c). */
int store_save_symbols(strobe_store *s, sqlite3 *db, const strobe_profile *p,
		       const uint32_t *saved, const uint32_t *nt, strobe_err *err)
{
	(void)s;
	static const char *const q[NTABS] = {
		"INSERT OR REPLACE INTO strings VALUES(?,?)",
		"INSERT OR REPLACE INTO functions VALUES(?,?,?,?,?)",
		"INSERT OR REPLACE INTO mappings VALUES(?,?,?,?,?,?,?)",
		"INSERT OR REPLACE INTO locations VALUES(?,?,?,?,?)",
		"INSERT OR REPLACE INTO stacks VALUES(?,?,?)",
	};
	for (int t = 0; t < NTABS; t++) {
		uint32_t n = nt ? nt[t] : tab_n(p, t);
		if (saved[t] >= n)
			continue;
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(db, q[t], -1, &st, NULL) != SQLITE_OK)
			return store_dberr(db, err, "saving symbols");
		for (uint32_t id = saved[t] ? saved[t] : 1; id < n; id++) {
			sqlite3_bind_int64(st, 1, id);
			switch (t) {
			case TAB_STRINGS:
				sqlite3_bind_blob(st, 2, strobe_str(p, id), (int)strobe_str_len(p, id),
						  SQLITE_STATIC);
				break;
			case TAB_FUNCTIONS: {
				const strobe_function *f = strobe_function_get(p, id);
				sqlite3_bind_int64(st, 2, f->name);
				sqlite3_bind_int64(st, 3, f->system_name);
				sqlite3_bind_int64(st, 4, f->filename);
				sqlite3_bind_int64(st, 5, f->start_line);
				break;
			}
			case TAB_MAPPINGS: {
				const strobe_mapping *m = strobe_mapping_get(p, id);
				sqlite3_bind_int64(st, 2, (int64_t)m->start);
				sqlite3_bind_int64(st, 3, (int64_t)m->limit);
				sqlite3_bind_int64(st, 4, (int64_t)m->offset);
				sqlite3_bind_int64(st, 5, m->filename);
				sqlite3_bind_int64(st, 6, m->build_id);
				sqlite3_bind_int64(st, 7,
						   m->has_functions | m->has_filenames << 1 |
							   m->has_line_numbers << 2 |
							   m->has_inline_frames << 3);
				break;
			}
			case TAB_LOCATIONS: {
				const strobe_location *l = strobe_location_get(p, id);
				sqlite3_bind_int64(st, 2, l->mapping);
				sqlite3_bind_int64(st, 3, (int64_t)l->address);
				sqlite3_bind_int64(st, 4, l->is_folded);
				sqlite3_bind_blob(st, 5, l->line, (int)(l->nline * sizeof(strobe_line)),
						  SQLITE_STATIC);
				break;
			}
			case TAB_STACKS: {
				const strobe_stack_node *sn = strobe_stack_get(p, id);
				sqlite3_bind_int64(st, 2, sn->parent);
				sqlite3_bind_int64(st, 3, sn->location);
				break;
			}
			}
			int rc = sqlite3_step(st);
			sqlite3_reset(st);
			if (rc != SQLITE_DONE) {
				sqlite3_finalize(st);
				return store_dberr(db, err, "saving symbols");
			}
		}
		sqlite3_finalize(st);
	}
	return 0;
}

/* A point's sample labels (points.slabels, written by store.c's slabels_encode at push) read
 * back for every reader of points: query.c, spans.c, exemplars.c and ClickHouse's query. */
int store_slabels_decode(const char *in, size_t len, strobe_labelpair *l, size_t cap)
{
	size_t n = 0, i = 0;
	while (i < len) {
		const char *name = in + i, *e = memchr(name, 0, len - i);
		if (!e || (size_t)(e + 1 - in) >= len || n == cap)
			return -EIO;
		const char *value = e + 1, *e2 = memchr(value, 0, len - (size_t)(value - in));
		if (!e2)
			return -EIO;
		l[n++] = (strobe_labelpair){name, value};
		i = (size_t)(e2 + 1 - in);
	}
	return (int)n;
}
