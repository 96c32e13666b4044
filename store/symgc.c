// SPDX-License-Identifier: Apache-2.0
/*
 * Garbage collection of symbols. Retention deletes points; the stacks, locations, functions,
 * mappings and strings that only those points used would otherwise stay forever (a service that
 * is redeployed every day brings new addresses, build IDs and often new functions). This finds
 * what the remaining points (raw and roll-ups) still reach, and rewrites the symbol tables with
 * only that, renumbered densely in the same order, in one transaction that also rewrites every
 * point's stack ids. The in-memory mirror is swapped only after the commit, so a failure leaves
 * the store as it was.
 *
 * Renumbering keeps each table's order, so a parent stack still precedes its children and a
 * point's pairs stay sorted by stack id. It reads and rewrites every point, so it runs only when
 * retention deleted something and at most once per STORE_GC_INTERVAL (and when asked).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

typedef struct gcmap {
	uint32_t *m[NTABS]; /* old id -> new id; 0 = dead (id 0 maps to 0) */
} gcmap;

static void gcmap_free(gcmap *g)
{
	for (int t = 0; t < NTABS; t++)
		free(g->m[t]);
}

/* Marks the stacks the points reach, then everything those stacks reach. */
static int mark(strobe_store *s, gcmap *g, strobe_err *err)
{
	const strobe_profile *p = s->sym;
	for (int t = 0; t < NTABS; t++)
		if (!(g->m[t] = calloc(tab_n(p, t) ? tab_n(p, t) : 1, sizeof(uint32_t))))
			return -ENOMEM;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, "SELECT data FROM points", -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "symbol gc");
	store_pair *pairs = NULL;
	size_t cap = 0, np;
	int rc, r = 0;
	uint32_t *live = g->m[TAB_STACKS];
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (store_blob_decode(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0),
				      p->stacks.n, &pairs, &cap, &np) < 0) {
			r = strobe_errf(err, -EIO, "symbol gc: a stored point is corrupt");
			break;
		}
		for (size_t i = 0; i < np; i++)
			live[pairs[i].stack] = 1;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "symbol gc");
	sqlite3_finalize(st);
	free(pairs);
	if (r < 0)
		return r;
	/* A parent's id is smaller than its child's: one pass down from the top marks them. */
	for (uint32_t i = p->stacks.n; i-- > 1;)
		if (live[i]) {
			const strobe_stack_node *n = strobe_stack_get(p, i);
			live[n->parent] = 1;
			g->m[TAB_LOCATIONS][n->location] = 1;
		}
	for (uint32_t i = 1; i < p->locations.n; i++) {
		if (!g->m[TAB_LOCATIONS][i])
			continue;
		const strobe_location *l = strobe_location_get(p, i);
		g->m[TAB_MAPPINGS][l->mapping] = 1;
		for (uint32_t k = 0; k < l->nline; k++)
			g->m[TAB_FUNCTIONS][l->line[k].function] = 1;
	}
	uint32_t *str = g->m[TAB_STRINGS];
	for (uint32_t i = 1; i < p->functions.n; i++)
		if (g->m[TAB_FUNCTIONS][i]) {
			const strobe_function *f = strobe_function_get(p, i);
			str[f->name] = str[f->system_name] = str[f->filename] = 1;
		}
	for (uint32_t i = 1; i < p->mappings.n; i++)
		if (g->m[TAB_MAPPINGS][i]) {
			const strobe_mapping *m = strobe_mapping_get(p, i);
			str[m->filename] = str[m->build_id] = 1;
		}
	return 0;
}

/* The live entries interned into a fresh profile in id order, which numbers them densely; the
 * maps get the new ids. */
static strobe_profile *rebuild(const strobe_profile *p, gcmap *g)
{
	strobe_profile *q = strobe_profile_new();
	strobe_line *lines = NULL;
	size_t lcap = 0;
	bool ok = q != NULL;
	uint32_t **m = g->m;
	for (int t = 0; t < NTABS; t++)
		m[t][0] = 0;
	for (uint32_t i = 1; ok && i < p->strings.n; i++)
		if (m[TAB_STRINGS][i])
			ok = (m[TAB_STRINGS][i] = strobe_str_intern(q, strobe_str(p, i),
								    strobe_str_len(p, i))) !=
			     UINT32_MAX;
	for (uint32_t i = 1; ok && i < p->functions.n; i++)
		if (m[TAB_FUNCTIONS][i]) {
			strobe_function f = *strobe_function_get(p, i);
			f.name = m[TAB_STRINGS][f.name];
			f.system_name = m[TAB_STRINGS][f.system_name];
			f.filename = m[TAB_STRINGS][f.filename];
			ok = (m[TAB_FUNCTIONS][i] = strobe_function_intern(q, &f)) != UINT32_MAX;
		}
	for (uint32_t i = 1; ok && i < p->mappings.n; i++)
		if (m[TAB_MAPPINGS][i]) {
			strobe_mapping mm = *strobe_mapping_get(p, i);
			mm.filename = m[TAB_STRINGS][mm.filename];
			mm.build_id = m[TAB_STRINGS][mm.build_id];
			ok = (m[TAB_MAPPINGS][i] = strobe_mapping_intern(q, &mm)) != UINT32_MAX;
		}
	for (uint32_t i = 1; ok && i < p->locations.n; i++) {
		if (!m[TAB_LOCATIONS][i])
			continue;
		const strobe_location *l = strobe_location_get(p, i);
		if (!(ok = store_lines_reserve(&lines, &lcap, l->nline) == 0))
			break;
		for (uint32_t k = 0; k < l->nline; k++) {
			lines[k] = l->line[k];
			lines[k].function = m[TAB_FUNCTIONS][l->line[k].function];
		}
		ok = (m[TAB_LOCATIONS][i] =
			      strobe_location_intern(q, m[TAB_MAPPINGS][l->mapping], l->address,
						     lines, l->nline, l->is_folded)) != UINT32_MAX;
	}
	for (uint32_t i = 1; ok && i < p->stacks.n; i++)
		if (m[TAB_STACKS][i]) {
			const strobe_stack_node *n = strobe_stack_get(p, i);
			ok = (m[TAB_STACKS][i] = strobe_stack_push(q, m[TAB_STACKS][n->parent],
								   m[TAB_LOCATIONS][n->location])) !=
			     UINT32_MAX;
		}
	free(lines);
	if (!ok) {
		strobe_profile_free(q);
		return NULL;
	}
	return q;
}

/* Every point's stack ids through the map, in the open transaction. */
static int rewrite_points(strobe_store *s, const uint32_t *smap, strobe_err *err)
{
	sqlite3_stmt *rd = NULL, *up = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT rowid, data FROM points", -1, &rd, NULL) !=
		    SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "UPDATE points SET data=?2 WHERE rowid=?1", -1, &up, NULL) !=
		    SQLITE_OK) {
		sqlite3_finalize(rd);
		return store_sqlerr(s, err, "symbol gc");
	}
	store_pair *pairs = NULL;
	size_t cap = 0, np;
	int rc, r = 0;
	while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
		if (store_blob_decode(sqlite3_column_blob(rd, 1), (size_t)sqlite3_column_bytes(rd, 1),
				      s->sym->stacks.n, &pairs, &cap, &np) < 0) {
			r = strobe_errf(err, -EIO, "symbol gc: a stored point is corrupt");
			break;
		}
		for (size_t i = 0; i < np; i++)
			pairs[i].stack = smap[pairs[i].stack];
		uint8_t *blob;
		size_t blen;
		if ((r = store_blob_encode(pairs, np, &blob, &blen)) < 0)
			break;
		sqlite3_bind_int64(up, 1, sqlite3_column_int64(rd, 0));
		sqlite3_bind_blob(up, 2, blob, (int)blen, free);
		int rc2 = sqlite3_step(up);
		sqlite3_reset(up);
		if (rc2 != SQLITE_DONE) {
			r = store_sqlerr(s, err, "symbol gc");
			break;
		}
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "symbol gc");
	sqlite3_finalize(rd);
	sqlite3_finalize(up);
	free(pairs);
	return r;
}

/* With s->mu held. */
int store_gc_locked(strobe_store *s, int64_t now_ns, strobe_err *err)
{
	gcmap g = {{0}};
	strobe_profile *q = NULL;
	int r = mark(s, &g, err), freed = 0;
	s->last_gc_ns = now_ns;
	if (r < 0)
		goto out;
	for (int t = 0; t < NTABS; t++)
		for (uint32_t i = 1; i < tab_n(s->sym, t); i++)
			freed += !g.m[t][i];
	if (!freed)
		goto out;
	if (!(q = rebuild(s->sym, &g))) {
		r = -ENOMEM;
		goto out;
	}
	r = store_exec(s, "BEGIN IMMEDIATE", err);
	if (r == 0)
		r = rewrite_points(s, g.m[TAB_STACKS], err);
	if (r == 0)
		r = store_exec(s, "DELETE FROM strings; DELETE FROM functions; DELETE FROM mappings; "
				  "DELETE FROM locations; DELETE FROM stacks;",
			       err);
	uint32_t saved[NTABS] = {0};
	if (r == 0)
		r = store_save_symbols(s, s->db, q, saved, NULL, err);
	if (r == 0)
		r = store_exec(s, "COMMIT", err);
	if (r < 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		goto out;
	}
	strobe_profile_free(s->sym);
	s->sym = q;
	store_seq_reset(s); /* it holds the old ids */
	q = NULL;
	for (int t = 0; t < NTABS; t++)
		s->saved[t] = tab_n(s->sym, t);
	sqlite3_exec(s->db, "PRAGMA incremental_vacuum;", NULL, NULL, NULL);
out:
	strobe_profile_free(q);
	gcmap_free(&g);
	if (r == -ENOMEM && err && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r < 0 ? r : freed;
}

int strobe_store_gc(strobe_store *s, int64_t now_ns, strobe_err *err)
{
	STORE_BACKEND_CALL(s, gc, now_ns, err);
	/* Renumbering: no push may hold store ids in flight (commit.c). */
	pthread_rwlock_wrlock(&s->ids_lock);
	pthread_mutex_lock(&s->mu);
	int r = store_gc_locked(s, now_ns, err);
	pthread_mutex_unlock(&s->mu);
	pthread_rwlock_unlock(&s->ids_lock);
	return r;
}
