// SPDX-License-Identifier: Apache-2.0
/*
 * The series listing (GET /api/v1/series): the label sets of a tenant's series that match any of
 * a list of selectors and have data in a window, as Prometheus's and Pyroscope's series APIs list
 * them, for UIs that offer the series to pick from and for checking what a push created.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

/* One entry in one allocation: the pair array, then the strings. */
static int entry_from(const store_series *se, strobe_series_info *e)
{
	size_t sz = strlen(se->type) + 1;
	for (uint32_t i = 0; i < se->nlabels; i++)
		sz += strlen(se->labels[i].name) + strlen(se->labels[i].value) + 2;
	char *mem = malloc(se->nlabels * sizeof(strobe_labelpair) + sz);
	if (!mem)
		return -ENOMEM;
	strobe_labelpair *l = (strobe_labelpair *)mem;
	char *p = mem + se->nlabels * sizeof(strobe_labelpair);
	e->type = p;
	p = stpcpy(p, se->type) + 1;
	for (uint32_t i = 0; i < se->nlabels; i++) {
		l[i].name = p;
		p = stpcpy(p, se->labels[i].name) + 1;
		l[i].value = p;
		p = stpcpy(p, se->labels[i].value) + 1;
	}
	e->labels = l;
	e->nlabels = se->nlabels;
	e->mem_ = mem;
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const strobe_series_info *x = a, *y = b;
	int c = strcmp(x->type, y->type);
	for (size_t i = 0; !c && i < x->nlabels && i < y->nlabels; i++) {
		c = strcmp(x->labels[i].name, y->labels[i].name);
		if (!c)
			c = strcmp(x->labels[i].value, y->labels[i].value);
	}
	return c ? c : (x->nlabels > y->nlabels) - (x->nlabels < y->nlabels);
}

int strobe_store_series(strobe_store *s, const char *tenant, const strobe_selector *sels,
			size_t nsel, int64_t from_ns, int64_t to_ns, size_t max,
			strobe_series_list *out, strobe_err *err)
{
	STORE_BACKEND_CALL(s, series, tenant, sels, nsel, from_ns, to_ns, max, out, err);
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->mu);
	uint8_t *taken = calloc(s->nseries ? s->nseries : 1, 1);
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int r = taken ? 0 : -ENOMEM;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT 1 FROM points WHERE series=?1 AND level=0 AND "
					 "time>=?2 AND time<?3 UNION ALL SELECT 1 FROM points WHERE "
					 "series=?1 AND level>0 AND time>=?2 AND time<?3 LIMIT 1",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "series listing");
	/* No selector = every series of the tenant. */
	for (size_t k = 0; r == 0 && k < (nsel ? nsel : 1); k++) {
		size_t *idx = NULL, nidx = 0;
		r = store_match_series(s, tenant, nsel ? &sels[k] : NULL, &idx, &nidx, err);
		for (size_t i = 0; r == 0 && i < nidx; i++) {
			if (taken[idx[i]])
				continue;
			store_series *se = &s->series[idx[i]];
			sqlite3_bind_int64(st, 1, se->id);
			sqlite3_bind_int64(st, 2, from_ns);
			sqlite3_bind_int64(st, 3, to_ns);
			int rc = sqlite3_step(st);
			sqlite3_reset(st);
			if (rc == SQLITE_DONE)
				continue;
			if (rc != SQLITE_ROW) {
				r = store_sqlerr(s, err, "series listing");
				break;
			}
			/* a matcher on pid, comm...: a point of that process in the window */
			int m = store_series_sample_match(s, nsel ? &sels[k] : NULL, se, from_ns, to_ns,
							  err);
			if (m <= 0) {
				r = m;
				continue;
			}
			taken[idx[i]] = 1;
			if (max && out->n >= max) {
				r = strobe_errf(err, -EDQUOT,
						"limit max_series_listed: more than %zu series match; "
						"narrow the selector or the window",
						max);
				break;
			}
			if (out->n == cap) {
				cap = cap ? cap * 2 : 16;
				strobe_series_info *nv = realloc(out->v, cap * sizeof(*nv));
				if (!nv) {
					r = -ENOMEM;
					break;
				}
				out->v = nv;
			}
			if ((r = entry_from(se, &out->v[out->n])) == 0)
				out->n++;
		}
		free(idx);
	}
	sqlite3_finalize(st);
	free(taken);
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		strobe_series_list_free(out);
		if (r == -ENOMEM && err && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		return r;
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_entry);
	return 0;
}

void strobe_series_list_free(strobe_series_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].mem_);
	free(l->v);
	memset(l, 0, sizeof(*l));
}
