// SPDX-License-Identifier: Apache-2.0
/*
 * Keeping the store small and fast to read: compaction folds the raw points of every closed
 * 1-minute and 1-hour bucket of a series into one roll-up row per bucket (values summed, the
 * number of points kept, so gauges can still be averaged exactly), and retention deletes what is
 * older than the retention period, then the series left empty, and gives the pages back (and
 * then, at most hourly, the symbols nothing refers to any more: symgc.c).
 *
 * A raw row carries a `rolled` bit per level once it is inside that level's roll-up, so a point
 * that arrives late for an already compacted bucket is simply read beside the roll-up until the
 * next compaction folds it in: a query never counts a point twice or misses one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

/* One roll-up to make: a series' points in one bucket with one set of sample labels (points of
 * different processes of a service stay apart, so a pid filter still works on roll-ups). */
typedef struct bucket {
	int64_t series, start;
	void *slabels; /* points.slabels, malloc'd */
	int slen;
} bucket;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Folds the unrolled raw rows of one (series, bucket) into its roll-up row. */
static int fold_bucket(strobe_store *s, int level, const bucket *bk, int64_t *v, uint8_t *seen,
		       uint32_t **touched, store_pair **pairs, size_t *pcap, strobe_err *err)
{
	int64_t w = store_level_width[level];
	int bit = 1 << (level - 1);
	sqlite3_stmt *rd = NULL, *up = NULL, *del = NULL, *ins = NULL;
	size_t nt = 0;
	int64_t count = 0;
	int r = 0;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT rowid, n, data, level FROM points WHERE series=?1 AND "
			       "((level=0 AND (rolled & ?4)=0) OR level=?5) AND time>=?2 AND time<?3 "
			       "AND slabels=?6",
			       -1, &rd, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "UPDATE points SET rolled = rolled | ?2 WHERE rowid=?1", -1,
			       &up, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM points WHERE rowid=?", -1, &del, NULL) !=
		    SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "INSERT INTO points(series, level, time, n, data, slabels) "
			       "VALUES(?,?,?,?,?,?)",
			       -1, &ins, NULL) != SQLITE_OK) {
		r = store_sqlerr(s, err, "compaction");
		goto out;
	}
	sqlite3_bind_int64(rd, 1, bk->series);
	sqlite3_bind_int64(rd, 2, bk->start);
	sqlite3_bind_int64(rd, 3, bk->start + w);
	sqlite3_bind_int(rd, 4, bit);
	sqlite3_bind_int(rd, 5, level);
	sqlite3_bind_blob(rd, 6, bk->slen ? bk->slabels : "", bk->slen, SQLITE_STATIC);
	int rc;
	while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
		size_t np;
		r = store_blob_decode(sqlite3_column_blob(rd, 2), (size_t)sqlite3_column_bytes(rd, 2),
				      s->sym->stacks.n, pairs, pcap, &np);
		if (r < 0) {
			r = strobe_errf(err, -EIO, "store: corrupt point in series %lld",
					(long long)bk->series);
			goto out;
		}
		count += sqlite3_column_int64(rd, 1);
		for (size_t i = 0; i < np; i++) {
			uint32_t st = (*pairs)[i].stack;
			if (!seen[st]) {
				seen[st] = 1;
				(*touched)[nt++] = st;
			}
			v[st] += (*pairs)[i].value;
		}
		sqlite3_stmt *w2 = sqlite3_column_int(rd, 3) == 0 ? up : del;
		sqlite3_bind_int64(w2, 1, sqlite3_column_int64(rd, 0));
		if (w2 == up)
			sqlite3_bind_int(up, 2, bit);
		int rc2 = sqlite3_step(w2);
		sqlite3_reset(w2);
		if (rc2 != SQLITE_DONE) {
			r = store_sqlerr(s, err, "compaction");
			goto out;
		}
	}
	if (rc != SQLITE_DONE) {
		r = store_sqlerr(s, err, "compaction");
		goto out;
	}
	qsort(*touched, nt, sizeof(**touched), cmp_u32);
	if (nt > *pcap) {
		store_pair *np2 = realloc(*pairs, nt * sizeof(*np2));
		if (!np2) {
			r = -ENOMEM;
			goto out;
		}
		*pairs = np2;
		*pcap = nt;
	}
	size_t np = 0;
	for (size_t i = 0; i < nt; i++)
		if (v[(*touched)[i]])
			(*pairs)[np++] = (store_pair){(*touched)[i], v[(*touched)[i]]};
	uint8_t *blob;
	size_t blen;
	if ((r = store_blob_encode(*pairs, np, &blob, &blen)) < 0)
		goto out;
	sqlite3_bind_int64(ins, 1, bk->series);
	sqlite3_bind_int(ins, 2, level);
	sqlite3_bind_int64(ins, 3, bk->start);
	sqlite3_bind_int64(ins, 4, count);
	sqlite3_bind_blob(ins, 5, blob, (int)blen, free);
	sqlite3_bind_blob(ins, 6, bk->slen ? bk->slabels : "", bk->slen, SQLITE_STATIC);
	if (sqlite3_step(ins) != SQLITE_DONE)
		r = store_sqlerr(s, err, "compaction");
out:
	for (size_t i = 0; i < nt; i++) {
		v[(*touched)[i]] = 0;
		seen[(*touched)[i]] = 0;
	}
	sqlite3_finalize(rd);
	sqlite3_finalize(up);
	sqlite3_finalize(del);
	sqlite3_finalize(ins);
	return r;
}

int strobe_store_compact(strobe_store *s, int64_t now_ns, strobe_err *err)
{
	STORE_BACKEND_CALL(s, compact, now_ns, err);
	pthread_mutex_lock(&s->mu);
	size_t nst = s->sym->stacks.n;
	int64_t *v = calloc(nst, sizeof(*v));
	uint8_t *seen = calloc(nst, 1);
	uint32_t *touched = malloc(nst * sizeof(*touched));
	store_pair *pairs = NULL;
	size_t pcap = 0;
	int r = (!v || !seen || !touched) ? -ENOMEM : 0, done = 0;
	for (int level = 1; r == 0 && level < STORE_LEVELS; level++) {
		int64_t w = store_level_width[level];
		/* Only closed buckets: one still filling would be folded again and again. The
		 * term on STORE_ROLLED_ALL (implied by the bit's) lets SQLite read the partial
		 * index of unrolled rows instead of every raw point ever stored (named, as the
		 * planner would otherwise take points_by_time over the whole of time). */
		int64_t closed = now_ns / w * w;
		bucket *bk = NULL;
		size_t nb = 0, cap = 0;
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(s->db,
				       "SELECT DISTINCT series, time / ?1 * ?1, slabels FROM points INDEXED "
				       "BY points_unrolled WHERE level=0 AND rolled<>" STORE_ROLLED_ALL " AND time>=0 AND "
				       "time<?2 AND (rolled & ?3)=0",
				       -1, &st, NULL) != SQLITE_OK) {
			r = store_sqlerr(s, err, "compaction");
			break;
		}
		sqlite3_bind_int64(st, 1, w);
		sqlite3_bind_int64(st, 2, closed);
		sqlite3_bind_int(st, 3, 1 << (level - 1));
		while (r == 0 && sqlite3_step(st) == SQLITE_ROW) {
			if (nb == cap) {
				cap = cap ? cap * 2 : 64;
				bucket *n2 = realloc(bk, cap * sizeof(*n2));
				if (!n2) {
					r = -ENOMEM;
					break;
				}
				bk = n2;
			}
			int sl = sqlite3_column_bytes(st, 2);
			void *sv = malloc(sl ? (size_t)sl : 1);
			if (!sv) {
				r = -ENOMEM;
				break;
			}
			if (sl)
				memcpy(sv, sqlite3_column_blob(st, 2), (size_t)sl);
			bk[nb++] = (bucket){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
					    sv, sl};
		}
		sqlite3_finalize(st);
		if (r == 0 && nb)
			r = store_exec(s, "BEGIN IMMEDIATE", err);
		for (size_t i = 0; r == 0 && i < nb; i++)
			r = fold_bucket(s, level, &bk[i], v, seen, &touched, &pairs, &pcap, err);
		if (nb) {
			if (r == 0)
				r = store_exec(s, "COMMIT", err);
			else
				sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		}
		done += (int)nb;
		for (size_t i = 0; i < nb; i++)
			free(bk[i].slabels);
		free(bk);
	}
	free(v);
	free(seen);
	free(touched);
	free(pairs);
	pthread_mutex_unlock(&s->mu);
	return r < 0 ? r : done;
}

int strobe_store_retain(strobe_store *s, int64_t now_ns, strobe_err *err)
{
	STORE_BACKEND_CALL(s, retain, now_ns, err);
	if (!s->o.retention_ns)
		return 0;
	int64_t cutoff = now_ns - s->o.retention_ns;
	/* It may end in a symbol gc, which renumbers ids: wait for the pushes in flight. */
	pthread_rwlock_wrlock(&s->ids_lock);
	pthread_mutex_lock(&s->mu);
	int r = store_exec(s, "BEGIN IMMEDIATE", err), deleted = 0;
	sqlite3_stmt *st = NULL;
	/* Points older than the cutoff, and roll-ups whose bucket starts before it. The raw
	 * points kept from a bucket straddling the cutoff lose their `rolled` bit, so queries
	 * read them raw and the next compaction builds that bucket again from them alone. */
	if (r == 0 && sqlite3_prepare_v2(s->db, "DELETE FROM points WHERE level=? AND time<?", -1, &st,
					 NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	for (int level = 0; r == 0 && level < STORE_LEVELS; level++) {
		sqlite3_bind_int(st, 1, level);
		sqlite3_bind_int64(st, 2, cutoff);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_sqlerr(s, err, "retention");
		deleted += sqlite3_changes(s->db);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	/* The totals go with the raw points: each point's own row, and the minute and hour rows
	 * of the buckets before the cutoff's; the bucket straddling the cutoff is summed again
	 * from the rows of the points it keeps. */
	if (r == 0 && sqlite3_prepare_v2(s->db, "DELETE FROM totals WHERE level=?1 AND time<?2", -1,
					 &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	for (int level = 0; r == 0 && level < STORE_LEVELS; level++) {
		/* A bucket row's time is its start: every bucket that starts before the cutoff,
		 * the straddling one included. */
		sqlite3_bind_int(st, 1, level);
		sqlite3_bind_int64(st, 2, cutoff);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_sqlerr(s, err, "retention");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "INSERT INTO totals(series, level, time, n, total) SELECT "
					 "series, ?1, ?2, sum(n), sum(total) FROM totals WHERE level=0 "
					 "AND time>=?3 AND time<?2 + ?4 GROUP BY series",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	for (int level = 1; r == 0 && level < STORE_LEVELS; level++) {
		int64_t w = store_level_width[level], b = cutoff - (((cutoff % w) + w) % w);
		if (b == cutoff)
			continue; /* no bucket straddles it */
		sqlite3_bind_int(st, 1, level);
		sqlite3_bind_int64(st, 2, b);
		sqlite3_bind_int64(st, 3, cutoff);
		sqlite3_bind_int64(st, 4, w);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_sqlerr(s, err, "retention");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "UPDATE points SET rolled = rolled & ~?1 WHERE level=0 AND "
					 "time>=?2 AND time<?3 AND (rolled & ?1)",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	for (int level = 1; r == 0 && level < STORE_LEVELS; level++) {
		int64_t w = store_level_width[level], b = cutoff >= 0 ? cutoff / w * w : cutoff;
		sqlite3_bind_int(st, 1, 1 << (level - 1));
		sqlite3_bind_int64(st, 2, cutoff);
		sqlite3_bind_int64(st, 3, b + w);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_sqlerr(s, err, "retention");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	st = NULL;
	/* The group totals the same way (groups.c). */
	if (r == 0)
		r = store_groups_retain(s, cutoff, err);
	/* The hour both summed again without a list gets its list back (hour_lists.c). */
	if (r == 0) {
		int64_t w = store_level_width[2], b = cutoff - (((cutoff % w) + w) % w);
		if (b != cutoff)
			r = store_hour_lists_range(s, b, b + 1, NULL, err);
	}
	/* The span index rows of the raw points deleted above (the same cutoff). */
	if (r == 0 && sqlite3_prepare_v2(s->db, "DELETE FROM span_index WHERE time<?1", -1, &st,
					 NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	if (r == 0) {
		sqlite3_bind_int64(st, 1, cutoff);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = store_sqlerr(s, err, "retention");
	}
	sqlite3_finalize(st);
	st = NULL;
	/* Series left without points go too, from the index and from memory. */
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT id FROM series WHERE NOT EXISTS (SELECT 1 FROM "
					 "points WHERE points.series = series.id)",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "retention");
	int64_t *gone = NULL;
	size_t ngone = 0;
	while (r == 0 && sqlite3_step(st) == SQLITE_ROW) {
		int64_t *ng = realloc(gone, (ngone + 1) * sizeof(*ng));
		if (!ng) {
			r = -ENOMEM;
			break;
		}
		gone = ng;
		gone[ngone++] = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	if (r == 0 && ngone)
		r = store_exec(s,
			       "DELETE FROM series_labels WHERE series NOT IN (SELECT series FROM "
			       "points);"
			       "DELETE FROM series WHERE id NOT IN (SELECT series FROM points);",
			       err);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	else
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	if (r == 0) {
		for (size_t i = 0; i < ngone; i++)
			if (gone[i] >= 1 && (size_t)gone[i] <= s->nseries)
				s->series[gone[i] - 1].dead = true;
		/* Hand the freed pages back (auto_vacuum=INCREMENTAL). */
		if (deleted)
			sqlite3_exec(s->db, "PRAGMA incremental_vacuum;", NULL, NULL, NULL);
		/* Then the symbols only the deleted points used (symgc.c), not more than once
		 * an interval: it reads every point. A failure leaves the symbols as they were. */
		if (deleted && (!s->last_gc_ns || now_ns - s->last_gc_ns >= STORE_GC_INTERVAL))
			store_gc_locked(s, now_ns, NULL);
	}
	free(gone);
	pthread_mutex_unlock(&s->mu);
	pthread_rwlock_unlock(&s->ids_lock);
	return r < 0 ? r : deleted;
}
