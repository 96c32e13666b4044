// SPDX-License-Identifier: Apache-2.0
/*
 * The span index: span_id and trace_id -> the stored points (profiles) whose samples carry them.
 * Span and trace IDs ride on samples, never on series (one per request would exhaust the
 * series), so without an index a query for one span reads and decodes every point of every
 * matching series in the window to find the few that carry it: a scan that grows with the store.
 * With it, the query reads the index rows of the IDs asked for and then only those points.
 *
 * Written at ingest, in the point's own transaction (commit.c): one row per (kind, ID, point)
 * with the point's series and time, so a lookup can keep to the window without touching the
 * points. Only raw points (level 0) are indexed: roll-ups keep their raw rows (marked rolled)
 * until retention deletes both, so a span's raw points are always there to read, and retention
 * deletes index rows by the same time cutoff. Symbol gc rewrites points in place (their row ids
 * stay), so the index survives it.
 *
 * Which queries use it: a selector whose matcher on span_id or trace_id is an equality, or a
 * regex that is a plain alternation of IDs (`span_id=~"(a|b)"`, what /api/v1/query?span_id=a,b
 * and Connect's SelectMergeSpanProfile build). The matcher is still applied to each point read,
 * so the answer is the scan's, exactly; a series that has the label on the series itself (data
 * from before the label moved to samples) is scanned as before.
 *
 * Databases from before the index get it at open, filled from their raw points with sample
 * labels (one pass, in one transaction).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

#define SPAN_ID_MAX 128 /* longer IDs are not indexed (their queries scan) */

static int span_kind(const char *name)
{
	return strcmp(name, "span_id") == 0 ? 0 : strcmp(name, "trace_id") == 0 ? 1 : -1;
}

int store_span_index_add(sqlite3 *db, sqlite3_stmt *ins, int64_t point, int64_t series,
			 int64_t time, const char *slabels, size_t slen, strobe_err *err)
{
	if (!slen)
		return 0;
	strobe_labelpair l[STROBE_SAMPLE_LABELS_MAX];
	int n = store_slabels_decode(slabels, slen, l, STROBE_SAMPLE_LABELS_MAX);
	for (int i = 0; i < n; i++) {
		int kind = span_kind(l[i].name);
		size_t vl = strlen(l[i].value);
		if (kind < 0 || !vl || vl > SPAN_ID_MAX)
			continue;
		sqlite3_bind_int(ins, 1, kind);
		sqlite3_bind_text(ins, 2, l[i].value, (int)vl, SQLITE_STATIC);
		sqlite3_bind_int64(ins, 3, point);
		sqlite3_bind_int64(ins, 4, series);
		sqlite3_bind_int64(ins, 5, time);
		int rc = sqlite3_step(ins);
		sqlite3_reset(ins);
		if (rc != SQLITE_DONE)
			return store_dberr(db, err, "span index");
	}
	return 0;
}

int store_span_migrate(strobe_store *s, strobe_err *err)
{
	sqlite3_stmt *st = NULL, *ins = NULL;
	bool had = false;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT 1 FROM sqlite_master WHERE type='table' AND name='span_index'",
			       -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "span index");
	had = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	st = NULL;
	int r = store_exec(s, STORE_SPAN_SCHEMA, err);
	if (r < 0 || had)
		return r;
	/* A database from before the index: its raw points with sample labels, indexed once. */
	r = store_exec(s, "BEGIN IMMEDIATE", err);
	if (r == 0 &&
	    (sqlite3_prepare_v2(s->db,
				"SELECT rowid, series, time, slabels FROM points WHERE level=0 AND "
				"length(slabels) > 0",
				-1, &st, NULL) != SQLITE_OK ||
	     sqlite3_prepare_v2(s->db, STORE_SPAN_INSERT, -1, &ins, NULL) != SQLITE_OK))
		r = store_sqlerr(s, err, "span index backfill");
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW)
		r = store_span_index_add(s->db, ins, sqlite3_column_int64(st, 0),
					 sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
					 sqlite3_column_blob(st, 3),
					 (size_t)sqlite3_column_bytes(st, 3), err);
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "span index backfill");
	sqlite3_finalize(st);
	sqlite3_finalize(ins);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	if (r < 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		/* without its rows the table would be taken as complete next time */
		sqlite3_exec(s->db, "DROP TABLE IF EXISTS span_index", NULL, NULL, NULL);
	}
	return r;
}

/* Whether c may appear in an ID of an alternation the index answers. */
static bool id_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '_' || c == '-' || c == ':'; /* no '.': a regex's any-character */
}

static int cmp_hit(const void *a, const void *b)
{
	const store_span_hit *x = a, *y = b;
	if (x->series != y->series)
		return x->series < y->series ? -1 : 1;
	return x->point < y->point ? -1 : x->point > y->point;
}

int store_span_plan(strobe_store *s, const strobe_selector *sel, int64_t from, int64_t to,
		    store_span_plan_t *out, strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!s->use_span_index || !sel)
		return 0;
	const strobe_matcher *m = NULL;
	for (size_t i = 0; i < sel->n && !m; i++) {
		const strobe_matcher *c = &sel->m[i];
		if (span_kind(c->name) < 0 || !c->value[0])
			continue;
		if (c->op == STROBE_MATCH_EQ)
			m = c;
		else if (c->op == STROBE_MATCH_RE) {
			/* a(|b)*, or the same in one pair of parentheses */
			const char *v = c->value;
			size_t len = strlen(v);
			bool paren = len >= 2 && v[0] == '(' && v[len - 1] == ')';
			bool ok = len > (paren ? 2u : 0u);
			for (size_t k = paren; ok && k < len - paren; k++)
				ok = id_char(v[k]) || (v[k] == '|' && k > paren && v[k - 1] != '|' &&
						       k + 1 < len - paren);
			if (ok)
				m = c;
		}
	}
	if (!m)
		return 0;
	/* The IDs, split in a copy. */
	const char *v = m->value;
	size_t len = strlen(v);
	if (m->op == STROBE_MATCH_RE && v[0] == '(') {
		v++;
		len -= 2;
	}
	char *ids = strndup(v, len);
	if (!ids)
		return -ENOMEM;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT series, point FROM span_index WHERE kind=?1 AND id=?2 AND "
			       "time>=?3 AND time<?4",
			       -1, &st, NULL) != SQLITE_OK) {
		free(ids);
		return store_sqlerr(s, err, "span index");
	}
	int r = 0;
	size_t cap = 0;
	char *save = NULL;
	for (char *id = strtok_r(ids, m->op == STROBE_MATCH_RE ? "|" : "", &save); r == 0 && id;
	     id = strtok_r(NULL, "|", &save)) {
		sqlite3_bind_int(st, 1, span_kind(m->name));
		sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, from);
		sqlite3_bind_int64(st, 4, to);
		int rc;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			if (out->n == cap) {
				cap = cap ? cap * 2 : 64;
				store_span_hit *nh = realloc(out->hit, cap * sizeof(*nh));
				if (!nh) {
					r = -ENOMEM;
					break;
				}
				out->hit = nh;
			}
			out->hit[out->n++] = (store_span_hit){sqlite3_column_int64(st, 0),
							      sqlite3_column_int64(st, 1)};
		}
		if (r == 0 && rc != SQLITE_DONE)
			r = store_sqlerr(s, err, "span index");
		sqlite3_reset(st);
		if (m->op == STROBE_MATCH_EQ)
			break; /* the whole value is the one ID */
	}
	sqlite3_finalize(st);
	free(ids);
	if (r < 0) {
		store_span_plan_free(out);
		return r;
	}
	/* By series, each point once (an ID asked for twice finds its points twice). */
	if (out->n)
		qsort(out->hit, out->n, sizeof(*out->hit), cmp_hit);
	size_t w = 0;
	for (size_t i = 0; i < out->n; i++)
		if (!w || cmp_hit(&out->hit[w - 1], &out->hit[i]) != 0)
			out->hit[w++] = out->hit[i];
	out->n = w;
	out->name = m->name;
	out->active = true;
	return 0;
}

void store_span_plan_free(store_span_plan_t *p)
{
	free(p->hit);
	memset(p, 0, sizeof(*p));
}

void strobe_store_use_span_index(strobe_store *s, bool on)
{
	if (s->be) /* SQLite's index only */
		return;
	pthread_mutex_lock(&s->mu);
	s->use_span_index = on;
	pthread_mutex_unlock(&s->mu);
}
