// SPDX-License-Identifier: Apache-2.0
/*
 * Group commit: how many concurrent pushes become durable with one fsync. A push does its work
 * (decoding, mapping stacks into the store's tables, encoding its points) in its own thread,
 * then queues itself here and sleeps; the committer thread takes everything queued, writes it
 * in one SQLite transaction through its own connection (the symbol rows interned since the last
 * commit, the rows of new series, the points), commits (one fsync of the WAL with
 * synchronous=FULL) and wakes every push of the batch with the outcome. While it commits, the
 * next pushes queue up, so the batch grows with the load and a lone push waits for one commit.
 *
 * A push is acknowledged only after the commit that holds it returned: kill -9 after a 200
 * loses nothing. If the transaction fails, every push of the batch fails and nothing of them is
 * stored; the symbols they interned stay in memory and are written by the next commit (the
 * saved[] marks did not move).
 *
 * Locks: the store's mu guards the in-memory tables; the committer holds it only while it reads
 * them (the new symbol rows, new series), never across the fsync, so pushes keep mapping and
 * queries keep running while a commit is on the disk. qmu guards the queue.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

/* The group rows of every point of batch b (their groups found under mu, in commit_batch). */
static int add_groups(sqlite3 *db, store_pending *b, strobe_err *err)
{
	size_t n = 0;
	for (store_pending *p = b; p; p = p->next)
		n += p->npt * STORE_NGROUPS;
	store_grec *rec = malloc((n ? n : 1) * sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	n = 0;
	for (store_pending *p = b; p; p = p->next)
		for (size_t i = 0; i < p->npt; i++)
			for (int k = 0; k < STORE_NGROUPS; k++)
				if (p->pt[i].grp[k])
					rec[n++] = (store_grec){p->pt[i].grp[k], p->pt[i].time, 1,
								p->pt[i].total};
	int r = store_gtotals_add(db, rec, n, err);
	free(rec);
	return r;
}

static int commit_batch(strobe_store *s, store_pending *b, strobe_err *err)
{
	sqlite3 *db = s->wdb;
	uint32_t n[NTABS];
	size_t *wrote = NULL, nw = 0, cap = 0;
	sqlite3_stmt *ins = NULL, *tot = NULL, *span = NULL;
	pthread_mutex_lock(&s->mu);
	for (int t = 0; t < NTABS; t++)
		n[t] = tab_n(s->sym, t);
	int r = store_db_exec(db, "BEGIN IMMEDIATE", err);
	if (r == 0)
		r = store_save_symbols(s, db, s->sym, s->saved, n, err);
	for (store_pending *p = b; r == 0 && p; p = p->next)
		for (size_t i = 0; r == 0 && i < p->npt; i++) {
			store_series *se = &s->series[p->pt[i].series];
			/* Its groups (groups.c), whose rows it adds to below. */
			if ((r = store_series_groups(s, se, p->pt[i].grp)) < 0)
				break;
			/* Retention may have dropped the series (it had no points left) between
			 * the push finding it and this commit: this point brings it back. */
			if (se->dead) {
				se->dead = false;
				se->saved = false;
			}
			if (se->saved)
				continue;
			if (nw == cap) {
				cap = cap ? cap * 2 : 16;
				size_t *nwr = realloc(wrote, cap * sizeof(*nwr));
				if (!nwr) {
					r = -ENOMEM;
					break;
				}
				wrote = nwr;
			}
			/* Marked now so the batch writes it once; undone below if the
			 * transaction fails (no other commit runs in between). */
			se->saved = true;
			wrote[nw++] = p->pt[i].series;
			r = store_series_write(s, db, se, err);
		}
	size_t gupto = 0;
	if (r == 0)
		r = store_groups_save(s, db, &gupto, err);
	pthread_mutex_unlock(&s->mu);
	if (r == 0 && sqlite3_prepare_v2(db,
					 "INSERT INTO points(series, level, time, n, data, slabels) "
					 "VALUES(?, 0, ?, 1, ?, ?)",
					 -1, &ins, NULL) != SQLITE_OK)
		r = store_dberr(db, err, "points");
	if (r == 0 && sqlite3_prepare_v2(db, STORE_TOTALS_UPSERT, -1, &tot, NULL) != SQLITE_OK)
		r = store_dberr(db, err, "totals");
	if (r == 0 && sqlite3_prepare_v2(db, STORE_SPAN_INSERT, -1, &span, NULL) != SQLITE_OK)
		r = store_dberr(db, err, "span index");
	for (store_pending *p = b; r == 0 && p; p = p->next)
		for (size_t i = 0; r == 0 && i < p->npt; i++) {
			sqlite3_bind_int64(ins, 1, p->pt[i].series_id);
			sqlite3_bind_int64(ins, 2, p->pt[i].time);
			sqlite3_bind_blob(ins, 3, p->pt[i].blob, (int)p->pt[i].blen, SQLITE_STATIC);
			sqlite3_bind_blob(ins, 4, p->pt[i].slabels ? p->pt[i].slabels : "",
					  (int)p->pt[i].slen, SQLITE_STATIC);
			int rc = sqlite3_step(ins);
			sqlite3_reset(ins);
			if (rc != SQLITE_DONE)
				r = store_dberr(db, err, "inserting a point");
			/* Its totals in the same transaction: a range never sees a point
			 * without them, nor totals of a point that was not stored. */
			if (r == 0)
				r = store_totals_add(db, tot, p->pt[i].series_id, p->pt[i].time, 1,
						     p->pt[i].total, err);
			/* Its span and trace IDs, so a query by span reads its points alone. */
			if (r == 0)
				r = store_span_index_add(db, span, sqlite3_last_insert_rowid(db),
							 p->pt[i].series_id, p->pt[i].time,
							 p->pt[i].slabels, p->pt[i].slen, err);
		}
	/* The group totals of the whole batch, summed per row first (groups.c). */
	if (r == 0)
		r = add_groups(db, b, err);
	sqlite3_finalize(ins);
	sqlite3_finalize(tot);
	sqlite3_finalize(span);
	if (r == 0)
		r = store_db_exec(db, "COMMIT", err);
	if (r < 0)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	pthread_mutex_lock(&s->mu);
	if (r == 0) {
		for (int t = 0; t < NTABS; t++)
			if (s->saved[t] < n[t])
				s->saved[t] = n[t];
		if (s->gsaved < gupto)
			s->gsaved = gupto;
	} else {
		for (size_t i = 0; i < nw; i++)
			s->series[wrote[i]].saved = false;
	}
	pthread_mutex_unlock(&s->mu);
	free(wrote);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}

static void *committer_main(void *arg)
{
	strobe_store *s = arg;
	pthread_mutex_lock(&s->qmu);
	for (;;) {
		while (!s->qhead && !s->qstop)
			pthread_cond_wait(&s->qcv, &s->qmu);
		if (!s->qhead)
			break; /* stopping, and nothing left to write */
		store_pending *b = s->qhead;
		s->qhead = NULL;
		s->qtail = &s->qhead;
		pthread_mutex_unlock(&s->qmu);
		strobe_err err = {{0}};
		int r = commit_batch(s, b, &err);
		pthread_mutex_lock(&s->qmu);
		uint64_t n = 0;
		for (store_pending *p = b, *next; p; p = next, n++) {
			next = p->next; /* p may be gone once signalled and qmu is let go */
			p->r = r;
			if (r < 0)
				p->err = err;
			p->done = true; /* its owner frees it only once it holds qmu again */
			/* Each push sleeps on its own condition: a broadcast woke every waiting
			 * push at every commit, most of them only to sleep again. */
			pthread_cond_signal(&p->cv);
		}
		if (r == 0) { /* a failed transaction wrote nothing: not a commit */
			s->ncommits++;
			s->ncommitted += n;
		}
	}
	pthread_mutex_unlock(&s->qmu);
	return NULL;
}

int store_committer_start(strobe_store *s, strobe_err *err)
{
	pthread_mutex_init(&s->qmu, NULL);
	pthread_cond_init(&s->qcv, NULL);
	s->qhead = NULL;
	s->qtail = &s->qhead;
	int e = pthread_create(&s->committer, NULL, committer_main, s);
	if (e)
		return strobe_errf(err, -e, "store: cannot start the committer thread: %s",
				   strerror(e));
	s->committer_on = true;
	return 0;
}

void store_committer_stop(strobe_store *s)
{
	if (!s->committer_on)
		return;
	pthread_mutex_lock(&s->qmu);
	s->qstop = true;
	pthread_cond_signal(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
	pthread_join(s->committer, NULL);
	s->committer_on = false;
	pthread_mutex_destroy(&s->qmu);
	pthread_cond_destroy(&s->qcv);
}

int store_commit_wait(strobe_store *s, store_pending *p, strobe_err *err)
{
	p->next = NULL;
	p->done = false;
	pthread_cond_init(&p->cv, NULL);
	pthread_mutex_lock(&s->qmu);
	if (s->qstop) {
		pthread_mutex_unlock(&s->qmu);
		pthread_cond_destroy(&p->cv);
		return strobe_errf(err, -ESHUTDOWN, "store: closing");
	}
	*s->qtail = p;
	s->qtail = &p->next;
	pthread_cond_signal(&s->qcv);
	while (!p->done)
		pthread_cond_wait(&p->cv, &s->qmu);
	pthread_mutex_unlock(&s->qmu);
	pthread_cond_destroy(&p->cv);
	if (p->r < 0 && err)
		*err = p->err;
	return p->r;
}

int strobe_store_commit_stats(strobe_store *s, uint64_t *commits, uint64_t *pushes)
{
	STORE_BACKEND_CALL(s, commit_stats, commits, pushes);
	pthread_mutex_lock(&s->qmu);
	*commits = s->ncommits;
	*pushes = s->ncommitted;
	pthread_mutex_unlock(&s->qmu);
	return 0;
}
