// SPDX-License-Identifier: Apache-2.0
/*
 * Exemplars of a range: per step, the few stored profiles that weigh most in it. A timeline
 * shows where a spike is; its exemplars say which profiles made it (and, where their samples
 * carry span_id or trace_id, which requests), and the id of each opens that exact profile
 * (strobe_store_profile_by_id). Opt-in (/api/v1/range?exemplars=N), as it reads the window's
 * raw points themselves rather than the totals: each read point counts against the query caps
 * (max_query_profiles, max_query_bytes) like any query's.
 *
 * Raw points only: a roll-up is many profiles, not one, and its raw rows are kept (marked
 * rolled) until retention, so every profile of the window is there to be ranked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

void strobe_exemplars_free(strobe_exemplars *e)
{
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* Into the step's slots (heaviest first), if it is heavy enough (store_impl.h: the ClickHouse
 * store's exemplars keep theirs with it too). */
void store_exemplar_keep(strobe_exemplar *slot, size_t k, const strobe_exemplar *x)
{
	if (slot[k - 1].id && slot[k - 1].value >= x->value)
		return;
	size_t i = k - 1;
	while (i > 0 && (!slot[i - 1].id || slot[i - 1].value < x->value)) {
		slot[i] = slot[i - 1];
		i--;
	}
	slot[i] = *x;
}

static void ids_of(strobe_exemplar *x, const void *blob, size_t len)
{
	strobe_labelpair l[STROBE_SAMPLE_LABELS_MAX];
	int n = store_slabels_decode(blob, len, l, STROBE_SAMPLE_LABELS_MAX);
	for (int i = 0; i < n; i++) {
		if (strcmp(l[i].name, "span_id") == 0)
			snprintf(x->span_id, sizeof(x->span_id), "%s", l[i].value);
		else if (strcmp(l[i].name, "trace_id") == 0)
			snprintf(x->trace_id, sizeof(x->trace_id), "%s", l[i].value);
	}
}

int strobe_store_exemplars(strobe_store *s, const strobe_query *q, int64_t step_ns,
			   size_t per_step, strobe_exemplars *out, strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	STORE_BACKEND_CALL(s, exemplars, q, step_ns, per_step, out, err);
	if (step_ns <= 0 || q->to_ns <= q->from_ns)
		return strobe_errf(err, -EINVAL, "exemplars need a positive step and window");
	if (per_step < 1 || per_step > STROBE_EXEMPLARS_MAX)
		return strobe_errf(err, -EINVAL, "exemplars: from 1 to %d per step",
				   STROBE_EXEMPLARS_MAX);
	size_t nsteps = (size_t)((q->to_ns - q->from_ns + step_ns - 1) / step_ns);
	if (!(out->v = calloc(nsteps * per_step, sizeof(*out->v))))
		return -ENOMEM;
	out->nsteps = nsteps;
	out->per_step = per_step;
	pthread_mutex_lock(&s->mu);
	size_t *idx = NULL, nidx = 0;
	sqlite3_stmt *st = NULL;
	store_pair *pairs = NULL;
	size_t cap = 0;
	uint64_t rows = 0, bytes = 0;
	int r = store_match_series(s, q->tenant, q->sel, &idx, &nidx, err);
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT rowid, time, data, slabels FROM points WHERE "
					 "series=?1 AND level=0 AND time>=?2 AND time<?3",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "exemplars");
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		const store_series *se = &s->series[idx[i]];
		sqlite3_bind_int64(st, 1, se->id);
		sqlite3_bind_int64(st, 2, q->from_ns);
		sqlite3_bind_int64(st, 3, q->to_ns);
		int rc;
		while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			const void *sl = sqlite3_column_blob(st, 3);
			size_t sll = (size_t)sqlite3_column_bytes(st, 3);
			bool bad = false;
			if (!store_point_passes(q->sel, se, sl, sll, &bad)) {
				if (bad)
					r = strobe_errf(err, -EIO, "store: the sample labels of a "
								   "point of series %lld are corrupt",
							(long long)se->id);
				continue;
			}
			size_t blen = (size_t)sqlite3_column_bytes(st, 2), np;
			rows++;
			bytes += blen;
			if ((s->o.max_query_points && rows > s->o.max_query_points) ||
			    (s->o.max_query_bytes && bytes > s->o.max_query_bytes)) {
				r = strobe_errf(err, -EDQUOT,
						"limit %s: exemplars read more stored profiles than "
						"the query caps allow; narrow the selector or the window",
						rows > s->o.max_query_points ? "max_query_profiles"
									     : "max_query_bytes");
				break;
			}
			if (store_blob_decode(sqlite3_column_blob(st, 2), blen, s->sym->stacks.n,
					      &pairs, &cap, &np) < 0) {
				r = strobe_errf(err, -EIO, "store: a stored point of series %lld is "
							   "corrupt",
						(long long)se->id);
				break;
			}
			strobe_exemplar x = {.id = sqlite3_column_int64(st, 0),
					     .time_ns = sqlite3_column_int64(st, 1)};
			for (size_t k = 0; k < np; k++)
				x.value += pairs[k].value;
			ids_of(&x, sl, sll);
			size_t step = (size_t)((x.time_ns - q->from_ns) / step_ns);
			store_exemplar_keep(out->v + step * per_step, per_step, &x);
		}
		if (r == 0 && rc != SQLITE_DONE)
			r = store_sqlerr(s, err, "exemplars");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->mu);
	free(pairs);
	free(idx);
	if (r < 0)
		strobe_exemplars_free(out);
	return r;
}
