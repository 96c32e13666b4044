/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's limits on the ClickHouse backend, with the SQLite store's semantics and messages
 * (store/store.c push_resolve, store/query.c), so that the server answers the same 429s:
 *   - max_series_per_tenant and max_label_values_per_name, checked when a push makes a series
 *     that ClickHouse does not hold yet (a series known to this server, or found in the series
 *     table, is never refused: pushes to known series cost no query);
 *   - max_stacks, checked when a push brings stacks that this server has not written;
 *   - max_query_profiles and max_query_bytes, checked before a query or range sums anything.
 *
 * The counts are ClickHouse's, read through the Distributed tables, so every strobe server in
 * front of the cluster enforces the same limit. Why not transactionally: ClickHouse has no
 * transactions, so two servers making new series of one tenant at the same moment may each pass
 * the check; the tenant then ends at most one push per concurrent server past its limit (the
 * SQLite store ends exactly at it). A shard that is down is skipped by these counts
 * (skip_unavailable_shards), so pushes to the shards that are up keep their own 503-free path;
 * what lives on the down shard is not counted meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch.h"

#define SKIP_DOWN " SETTINGS skip_unavailable_shards = 1"

/* The answer of one query whose rows are all UInt64 columns, ncol of them, into v (at most
 * cap values; the rows that do not fit are an error: the caller sized the query). */
static int u64_rows(ch_store *c, const char *sql, int ncol, uint64_t *v, size_t cap, size_t *n,
		    strobe_err *err)
{
	strobe_buf ans;
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	int r = ch_exec(c, sql, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	*n = 0;
	while (r == 0 && rd_more(&rd)) {
		for (int k = 0; k < ncol && *n < cap; k++)
			v[(*n)++] = rd_u64(&rd);
		if (*n >= cap && rd_more(&rd))
			rd.bad = true;
		if (rd.bad)
			break;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer counting for a limit");
	strobe_buf_free(&ans);
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* (name, value) pairs read back from series_labels: the ones the tenant holds already. */
typedef struct lpair {
	char *name, *value;
} lpair;

/* A copy of (name, value) appended to *v (n used, cap allocated). */
static int lpair_add(lpair **v, size_t *n, size_t *cap, const char *name, size_t nl,
		     const char *value, size_t vl)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 16;
		lpair *x = realloc(*v, nc * sizeof(*x));
		if (!x)
			return -ENOMEM;
		*v = x;
		*cap = nc;
	}
	lpair *e = &(*v)[*n];
	e->name = strndup(name, nl);
	e->value = strndup(value, vl);
	if (!e->name || !e->value) {
		free(e->name);
		free(e->value);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

static bool lpair_has(const lpair *v, size_t n, const char *name, const char *value)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0 && strcmp(v[i].value, value) == 0)
			return true;
	return false;
}

/* max_label_values_per_name over the series in ns[] that ClickHouse lacks (fresh[i]). */
static int label_values_ok(ch_store *c, const char *tenant, const ch_newseries *ns, size_t nns,
			   const bool *fresh, strobe_err *err)
{
	char t[128];
	strobe_buf q, ans;
	strobe_buf_init(&q, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	/* The names involved and how many values each has in the tenant. */
	int r = strobe_buf_addf(&q, "SELECT name, uniqExact(value) FROM %s WHERE ",
				ch_tab(c, "series_labels", t, sizeof t));
	if (r == 0)
		r = ch_where(&q, tenant, NULL, NULL, 0, 0);
	if (r == 0)
		r = strobe_buf_adds(&q, " AND name IN (''");
	for (size_t i = 0; r == 0 && i < nns; i++)
		for (size_t k = 0; r == 0 && fresh[i] && k < ns[i].nlabels; k++)
			if ((r = strobe_buf_adds(&q, ",")) == 0)
				r = ch_quote(&q, ns[i].labels[k].name);
	if (r == 0)
		r = strobe_buf_adds(&q, ") GROUP BY name" SKIP_DOWN " FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	/* names and counts, as read (a few per push) */
	char **names = NULL;
	uint64_t *count = NULL;
	size_t nn = 0;
	rb_rd rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		size_t l;
		const char *s = rd_str(&rd, &l);
		uint64_t n = rd_u64(&rd);
		if (rd.bad)
			break;
		char **xn = realloc(names, (nn + 1) * sizeof(*xn));
		uint64_t *xc = xn ? realloc(count, (nn + 1) * sizeof(*xc)) : NULL;
		if (xn)
			names = xn;
		if (xc)
			count = xc;
		if (!xn || !xc || !(names[nn] = strndup(s, l))) {
			r = -ENOMEM;
			break;
		}
		count[nn++] = n;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer counting label values");
	/* The pairs of the fresh series that the tenant has already. */
	strobe_buf_reset(&q);
	if (r == 0)
		r = strobe_buf_addf(&q, "SELECT DISTINCT name, value FROM %s WHERE ",
				    ch_tab(c, "series_labels", t, sizeof t));
	if (r == 0)
		r = ch_where(&q, tenant, NULL, NULL, 0, 0);
	if (r == 0)
		r = strobe_buf_adds(&q, " AND (name, value) IN (('', '')");
	for (size_t i = 0; r == 0 && i < nns; i++)
		for (size_t k = 0; r == 0 && fresh[i] && k < ns[i].nlabels; k++) {
			if ((r = strobe_buf_adds(&q, ",(")) == 0 &&
			    (r = ch_quote(&q, ns[i].labels[k].name)) == 0 &&
			    (r = strobe_buf_adds(&q, ",")) == 0 &&
			    (r = ch_quote(&q, ns[i].labels[k].value)) == 0)
				r = strobe_buf_adds(&q, ")");
		}
	if (r == 0)
		r = strobe_buf_adds(&q, ")" SKIP_DOWN " FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	lpair *known = NULL;
	size_t nk = 0, kcap = 0;
	rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		size_t l1, l2;
		const char *s1 = rd_str(&rd, &l1), *s2 = rd_str(&rd, &l2);
		if (rd.bad)
			break;
		r = lpair_add(&known, &nk, &kcap, s1, l1, s2, l2);
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer listing label values");
	/* As the SQLite store: series by series, a value new to the tenant must leave its name at
	 * most max_label_values values, and counts for the next series of the same push. */
	for (size_t i = 0; r == 0 && i < nns; i++) {
		for (size_t k = 0; r == 0 && fresh[i] && k < ns[i].nlabels; k++) {
			const char *name = ns[i].labels[k].name, *value = ns[i].labels[k].value;
			if (lpair_has(known, nk, name, value))
				continue;
			size_t j = 0;
			while (j < nn && strcmp(names[j], name) != 0)
				j++;
			uint64_t n = j < nn ? count[j] : 0;
			if (n >= c->o.max_label_values) {
				r = strobe_errf(err, -EDQUOT,
						"limit max_label_values_per_name: label %.128s has %llu "
						"values in tenant '%s', at most %u; a value per process or "
						"request belongs on the samples (pid, span_id...), not on "
						"the series",
						name, (unsigned long long)n, tenant,
						c->o.max_label_values);
				break;
			}
			/* counted from here on, for the rest of this push */
			if (j < nn) {
				count[j]++;
			} else {
				char **xn = realloc(names, (nn + 1) * sizeof(*xn));
				uint64_t *xc = xn ? realloc(count, (nn + 1) * sizeof(*xc)) : NULL;
				if (xn)
					names = xn;
				if (xc)
					count = xc;
				if (!xn || !xc || !(names[nn] = strdup(name))) {
					r = -ENOMEM;
					break;
				}
				count[nn++] = 1;
			}
			if ((r = lpair_add(&known, &nk, &kcap, name, strlen(name), value,
					   strlen(value))) < 0)
				break;
		}
	}
	for (size_t i = 0; i < nn; i++)
		free(names[i]);
	for (size_t i = 0; i < nk; i++) {
		free(known[i].name);
		free(known[i].value);
	}
	free(names);
	free(count);
	free(known);
	strobe_buf_free(&q);
	strobe_buf_free(&ans);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}

int ch_push_limits(ch_store *c, const char *tenant, const ch_newseries *ns, size_t nns,
		   const uint64_t *stacks, size_t nstacks, strobe_err *err)
{
	char t[128];
	int r = 0;
	strobe_buf q;
	strobe_buf_init(&q, SIZE_MAX);
	bool *fresh = calloc(nns ? nns : 1, sizeof(*fresh));
	uint64_t *ids = malloc((nns ? nns : 1) * sizeof(*ids)), *got = NULL;
	if (!fresh || !ids)
		r = -ENOMEM;
	size_t nfresh = 0, ngot = 0;
	if (r == 0 && nns && (c->o.max_series || c->o.max_label_values)) {
		/* Which of the series this server has not written are in ClickHouse already. */
		for (size_t i = 0; i < nns; i++)
			ids[i] = ns[i].id;
		r = strobe_buf_addf(&q, "SELECT DISTINCT series FROM %s WHERE ",
				    ch_tab(c, "series", t, sizeof t));
		if (r == 0)
			r = ch_where(&q, tenant, NULL, NULL, 0, 0);
		if (r == 0)
			r = strobe_buf_adds(&q, " AND series IN (");
		if (r == 0)
			r = ch_ids(&q, ids, nns);
		if (r == 0)
			r = strobe_buf_adds(&q, ")" SKIP_DOWN " FORMAT RowBinary");
		if (r == 0 && !(got = malloc(nns * sizeof(*got))))
			r = -ENOMEM;
		if (r == 0)
			r = u64_rows(c, q.p, 1, got, nns, &ngot, err);
		if (r == 0)
			qsort(got, ngot, sizeof(*got), cmp_u64);
		/* fresh: not stored, and the first of its id in this push */
		for (size_t i = 0; r == 0 && i < nns; i++) {
			bool dup = false;
			for (size_t j = 0; j < i && !dup; j++)
				dup = ns[j].id == ns[i].id;
			fresh[i] = !dup && !bsearch(&ns[i].id, got, ngot, sizeof(*got), cmp_u64);
			nfresh += fresh[i];
		}
	}
	if (r == 0 && nfresh && c->o.max_series) {
		uint64_t n = 0;
		size_t one;
		strobe_buf_reset(&q);
		r = strobe_buf_addf(&q, "SELECT uniqExact(series) FROM %s WHERE ",
				    ch_tab(c, "series", t, sizeof t));
		if (r == 0)
			r = ch_where(&q, tenant, NULL, NULL, 0, 0);
		if (r == 0)
			r = strobe_buf_adds(&q, SKIP_DOWN " FORMAT RowBinary");
		if (r == 0)
			r = u64_rows(c, q.p, 1, &n, 1, &one, err);
		/* as the SQLite store: each new series needs the tenant below the limit */
		if (r == 0 && n + nfresh > c->o.max_series)
			r = strobe_errf(err, -EDQUOT,
					"limit max_series_per_tenant: tenant '%s' has %u series already",
					tenant, c->o.max_series);
	}
	if (r == 0 && nfresh && c->o.max_label_values)
		r = label_values_ok(c, tenant, ns, nns, fresh, err);
	if (r == 0 && nstacks && c->o.max_stacks) {
		uint64_t v[2] = {0};
		size_t n2;
		strobe_buf_reset(&q);
		r = strobe_buf_adds(&q, "SELECT uniqExact(id), uniqExactIf(id, id IN (");
		if (r == 0)
			r = ch_ids(&q, stacks, nstacks);
		if (r == 0)
			r = strobe_buf_addf(&q, ")) FROM %s" SKIP_DOWN " FORMAT RowBinary",
					    ch_tab(c, "stacks", t, sizeof t));
		if (r == 0)
			r = u64_rows(c, q.p, 2, v, 2, &n2, err);
		/* the stacks after this push: those stored and those it brings anew (a push that
		 * brings none is never refused, as in the SQLite store) */
		uint64_t after = v[0] + (nstacks - (v[1] < nstacks ? v[1] : nstacks));
		if (r == 0 && after > c->o.max_stacks && after > v[0])
			r = strobe_errf(err, -EDQUOT,
					"limit max_stacks: the store holds %llu distinct stacks, at "
					"most %u",
					(unsigned long long)after, c->o.max_stacks);
	}
	free(fresh);
	free(ids);
	free(got);
	strobe_buf_free(&q);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}

int ch_query_caps(ch_store *c, const char *tenant, const char *type, int64_t from, int64_t to,
		  bool rollup, const char *series_cond, bool range, strobe_err *err)
{
	uint64_t maxp = c->o.max_query_points, maxb = c->o.max_query_bytes;
	if (!maxp && !maxb)
		return 0;
	char t[128];
	strobe_buf q;
	strobe_buf_init(&q, SIZE_MAX);
	/* Rows (points, or roll-up rows) and the bytes of their stacks and values as ClickHouse
	 * holds them before compression (16 a stack: the SQLite store counts its compressed
	 * blobs, which ClickHouse does not expose per row). */
	int r = strobe_buf_addf(&q, "SELECT count(), sum(length(%s)) * 16 FROM %s WHERE ",
				rollup ? "stacksMap.stack" : "stacks",
				ch_tab(c, rollup ? "points_1m" : "points", t, sizeof t));
	if (r == 0)
		r = ch_where(&q, tenant, type, rollup ? "minute" : "time", from, to);
	if (r == 0)
		r = strobe_buf_adds(&q, series_cond);
	if (r == 0)
		r = strobe_buf_adds(&q, " FORMAT RowBinary");
	uint64_t v[2] = {0};
	size_t got;
	if (r == 0)
		r = u64_rows(c, q.p, 2, v, 2, &got, err);
	if (r == 0 && maxp && v[0] > maxp)
		r = range ? strobe_errf(err, -EDQUOT,
					"limit max_query_profiles: the range reads more than %llu "
					"stored profiles' worth of totals; narrow the selector or the "
					"window, or use a larger step",
					(unsigned long long)maxp)
			  : strobe_errf(err, -EDQUOT,
					"limit max_query_profiles: the query reads more than %llu "
					"stored profiles; narrow the selector or the window",
					(unsigned long long)maxp);
	if (r == 0 && maxb && !range && v[1] > maxb)
		r = strobe_errf(err, -EDQUOT,
				"limit max_query_bytes: the query reads more than %llu bytes of "
				"stored profiles; narrow the selector or the window",
				(unsigned long long)maxb);
	strobe_buf_free(&q);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}
