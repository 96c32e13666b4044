/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading from ClickHouse: the profile of a window (flame graphs, pprof), ranges, the label and
 * series APIs, with the SQLite store's semantics (store/query.c) so that both answer the same.
 *
 * How: the tenant's series of the type are read (a few rows each) and matched against the
 * selector here, with the same strobe_selector_match_labels the SQLite store uses, so regexes
 * and absent labels behave alike; ClickHouse then sums the samples of the matched series per
 * (series, stack) over the window (one GROUP BY, run on every shard by the Distributed table),
 * and the stacks that came back are read with their locations and functions and rebuilt into a
 * profile. Gauges (inuse_*, goroutines) are averaged per series over the window, as the SQLite
 * store does; their number of points is the number of distinct times the series has in the
 * window.
 *
 * Not yet (-ENOTSUP, answered 501): selectors on sample labels (pid, comm, span_id...). Queries whose window starts and ends on whole minutes read the
 * per-minute roll-ups for counters.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store_impl.h"
#include "ch.h"

#define RANGE_MAX_STEPS 11000 /* as the SQLite store */
#define MINUTE (60 * STROBE_NS_PER_S)

typedef struct chs { /* one series */
	uint64_t id;
	char *type;
	strobe_labelpair *labels;
	size_t nlabels;
	bool gauge;
	int64_t period;
	char *mem; /* names and values */
	/* filtered: the selector has matchers on sample labels that this series does not carry
	 * (pid, thread, span_id...), matched on its points' sample labels (as the SQLite store's
	 * deferred matchers): only its points whose slabels are one of pass[] are read. */
	bool filtered;
	char **pass;
	size_t *passlen, npass;
} chs;

typedef struct chs_set {
	chs *v;
	size_t n;
} chs_set;

static void chs_free1(chs *s)
{
	free(s->type);
	free(s->labels);
	free(s->mem);
	for (size_t k = 0; k < s->npass; k++)
		free(s->pass[k]);
	free(s->pass);
	free(s->passlen);
}

static void chs_free(chs_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		chs_free1(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* The series as the SQLite store's matching code sees one (store_series_ok and
 * store_point_passes in store/query.c), so that both stores match selectors alike. */
static store_series as_store_series(const chs *s, const char *tenant)
{
	return (store_series){.tenant = (char *)tenant, .type = s->type,
			      .labels = s->labels, .nlabels = (uint32_t)s->nlabels};
}

/* A SQL string literal of the n bytes at s, NULs included (sample labels are name\0value\0). */
static int quote_n(strobe_buf *b, const char *s, size_t n)
{
	int r = strobe_buf_add(b, "'", 1);
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (s[i] == 0)
			r = strobe_buf_add(b, "\\0", 2);
		else if (s[i] == '\\' || s[i] == '\'')
			r = strobe_buf_addf(b, "\\%c", s[i]);
		else
			r = strobe_buf_add(b, &s[i], 1);
	}
	return r ? r : strobe_buf_add(b, "'", 1);
}

static bool has_label(const chs *s, const char *name)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return true;
	return false;
}

enum { SS_ALL, SS_COUNTERS, SS_GAUGES };

/* " AND (series IN (...) OR (series, slabels) IN (...))": the points of the series of ss (all,
 * the counters or the gauges), a filtered series' only with the sample labels it passes. */
static int add_in_ss(strobe_buf *q, const chs_set *ss, int which)
{
	int r = strobe_buf_adds(q, " AND (series IN (0");
	bool tuples = false;
	for (size_t i = 0; r == 0 && i < ss->n; i++) {
		const chs *s = &ss->v[i];
		if ((which == SS_COUNTERS && s->gauge) || (which == SS_GAUGES && !s->gauge))
			continue;
		if (!s->filtered)
			r = strobe_buf_addf(q, ",%llu", (unsigned long long)s->id);
		tuples |= s->filtered;
	}
	if (r == 0)
		r = strobe_buf_adds(q, ")");
	if (r == 0 && tuples) {
		r = strobe_buf_adds(q, " OR (series, slabels) IN ((0, '')");
		for (size_t i = 0; r == 0 && i < ss->n; i++) {
			const chs *s = &ss->v[i];
			if (!s->filtered || (which == SS_COUNTERS && s->gauge) ||
			    (which == SS_GAUGES && !s->gauge))
				continue;
			for (size_t k = 0; r == 0 && k < s->npass; k++) {
				r = strobe_buf_addf(q, ",(%llu,", (unsigned long long)s->id);
				if (r == 0)
					r = quote_n(q, s->pass[k], s->passlen[k]);
				if (r == 0)
					r = strobe_buf_adds(q, ")");
			}
		}
		if (r == 0)
			r = strobe_buf_adds(q, ")");
	}
	return r ? r : strobe_buf_adds(q, ")");
}

static bool any_filtered(const chs_set *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i].filtered)
			return true;
	return false;
}

/* Selectors on sample labels: the distinct sample labels of each filtered series' points in
 * [from, to) are read (at most STORE_SLABELS_LISTED, as the SQLite store) and matched here with
 * the SQLite store's code; a filtered series none of whose points pass is dropped from ss. */
static int sample_filter(ch_store *c, const char *tenant, const char *type,
			 const strobe_selector *sel, int64_t from, int64_t to, chs_set *ss,
			 strobe_err *err)
{
	if (!any_filtered(ss))
		return 0;
	char t[128];
	strobe_buf q, ans;
	strobe_buf_init(&q, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	int r = strobe_buf_addf(&q, "SELECT series, slabels FROM %s WHERE ",
				ch_tab(c, "points", t, sizeof t));
	if (r == 0)
		r = ch_where(&q, tenant, type, "time", from, to);
	if (r == 0)
		r = strobe_buf_adds(&q, " AND series IN (0");
	for (size_t i = 0; r == 0 && i < ss->n; i++)
		if (ss->v[i].filtered)
			r = strobe_buf_addf(&q, ",%llu", (unsigned long long)ss->v[i].id);
	if (r == 0)
		r = strobe_buf_adds(&q, ") GROUP BY series, slabels LIMIT " STORE_SLABELS_LISTED
					" FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		uint64_t id = rd_u64(&rd);
		size_t len;
		const char *sl = rd_str(&rd, &len);
		if (rd.bad)
			break;
		chs *s = NULL;
		for (size_t i = 0; i < ss->n && !s; i++)
			if (ss->v[i].id == id && ss->v[i].filtered)
				s = &ss->v[i];
		if (!s)
			continue;
		store_series se = as_store_series(s, tenant);
		bool bad = false;
		if (!store_point_passes(sel, &se, sl, len, &bad)) {
			if (bad)
				r = strobe_errf(err, -EIO, "clickhouse: the sample labels of a point of "
						"series %016llx are malformed", (unsigned long long)id);
			continue;
		}
		char **np = realloc(s->pass, (s->npass + 1) * sizeof(*np));
		if (np)
			s->pass = np;
		size_t *nl = np ? realloc(s->passlen, (s->npass + 1) * sizeof(*nl)) : NULL;
		if (nl)
			s->passlen = nl;
		char *x = nl ? malloc(len ? len : 1) : NULL;
		if (!x) {
			r = -ENOMEM;
			break;
		}
		memcpy(x, sl, len);
		s->pass[s->npass] = x;
		s->passlen[s->npass++] = len;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer listing sample labels");
	/* drop the filtered series none of whose points passed */
	size_t w = 0;
	for (size_t i = 0; i < ss->n; i++) {
		if (ss->v[i].filtered && !ss->v[i].npass)
			chs_free1(&ss->v[i]);
		else
			ss->v[w++] = ss->v[i];
	}
	ss->n = w;
	strobe_buf_free(&q);
	strobe_buf_free(&ans);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}

/* The tenant's series (of type, when given) that match sel, with points in [from, to) when
 * window is set. */
static int load_series(ch_store *c, const char *tenant, const char *type,
		       const strobe_selector *sel, bool window, int64_t from, int64_t to,
		       chs_set *out, strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	char t1[128], t2[128];
	strobe_buf q, ans;
	strobe_buf_init(&q, 1u << 20);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	int r = strobe_buf_addf(&q, "SELECT series, any(type), any(names), any(values), "
				    "argMin(gauge, created), argMin(period, created) FROM %s "
				    "WHERE ",
				ch_tab(c, "series", t1, sizeof t1));
	if (r == 0)
		r = ch_where(&q, tenant, type, NULL, 0, 0);
	if (r == 0 && window) {
		r = strobe_buf_addf(&q, " AND series GLOBAL IN (SELECT DISTINCT series FROM %s WHERE ",
				    ch_tab(c, "points", t2, sizeof t2));
		if (r == 0)
			r = ch_where(&q, tenant, type, "time", from, to);
		if (r == 0)
			r = strobe_buf_adds(&q, ")");
	}
	if (r == 0)
		r = strobe_buf_adds(&q, " GROUP BY series ORDER BY series FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	size_t cap = 0;
	while (r == 0 && rd_more(&rd)) {
		chs s = {0};
		size_t tl, nn, nv;
		s.id = rd_u64(&rd);
		const char *ty = rd_str(&rd, &tl);
		nn = rd_len(&rd);
		if (rd.bad || nn > 4096)
			break;
		const char *nm[4096], *vl[4096];
		size_t nml[4096], vll[4096], bytes = 0;
		for (size_t i = 0; i < nn; i++)
			nm[i] = rd_str(&rd, &nml[i]), bytes += nml[i] + 1;
		nv = rd_len(&rd);
		if (rd.bad || nv != nn)
			break;
		for (size_t i = 0; i < nv; i++)
			vl[i] = rd_str(&rd, &vll[i]), bytes += vll[i] + 1;
		s.gauge = rd_u8(&rd);
		s.period = rd_i64(&rd);
		if (rd.bad)
			break;
		s.type = strndup(ty, tl);
		s.labels = calloc(nn ? nn : 1, sizeof(*s.labels));
		s.mem = malloc(bytes ? bytes : 1);
		if (!s.type || !s.labels || !s.mem) {
			free(s.type);
			free(s.labels);
			free(s.mem);
			r = -ENOMEM;
			break;
		}
		char *p = s.mem;
		for (size_t i = 0; i < nn; i++) {
			s.labels[i].name = p;
			memcpy(p, nm[i], nml[i]);
			p[nml[i]] = 0;
			p += nml[i] + 1;
			s.labels[i].value = p;
			memcpy(p, vl[i], vll[i]);
			p[vll[i]] = 0;
			p += vll[i] + 1;
		}
		s.nlabels = nn;
		/* the SQLite store's matching: a matcher on a sample label the series lacks is
		 * left to its points (sample_filter) */
		store_series se = as_store_series(&s, tenant);
		for (size_t k = 0; sel && k < sel->n; k++)
			s.filtered |= strobe_sample_label_name(sel->m[k].name) &&
				      !has_label(&s, sel->m[k].name);
		if (!store_series_ok(&se, tenant, sel)) {
			free(s.type);
			free(s.labels);
			free(s.mem);
			continue;
		}
		if (out->n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			chs *nvv = realloc(out->v, ncap * sizeof(*nvv));
			if (!nvv) {
				free(s.type);
				free(s.labels);
				free(s.mem);
				r = -ENOMEM;
				break;
			}
			out->v = nvv;
			cap = ncap;
		}
		out->v[out->n++] = s;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer listing series");
	strobe_buf_free(&q);
	strobe_buf_free(&ans);
	if (r < 0)
		chs_free(out);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "out of memory");
	return r;
}

/* " AND series IN (a, b, ...)" for the series s[i] with pick(s[i]). */
static int add_in(strobe_buf *q, const char *col, const uint64_t *ids, size_t n)
{
	int r = strobe_buf_addf(q, " AND %s IN (", col);
	if (r == 0)
		r = ch_ids(q, ids, n);
	return r ? r : strobe_buf_adds(q, ")");
}

/* ---- the profile of a window ------------------------------------------------------------------ */

typedef struct u64map { /* 64-bit key -> dense index, on strobe_itab's fixed keys */
	strobe_itab t;
} u64map;

static int u64map_put(u64map *m, uint64_t k, uint32_t *idx, bool *added)
{
	if (!m->t.fixed && !m->t.n)
		m->t.fixed = sizeof(uint64_t);
	return strobe_itab_intern(&m->t, &k, sizeof(k), idx, added);
}
static uint64_t u64map_key(const u64map *m, uint32_t i)
{
	uint64_t k;
	memcpy(&k, strobe_itab_get(&m->t, i, NULL), sizeof(k));
	return k;
}

/* The mean of a gauge over `count` points, rounded half away from zero (as store/query.c). */
static int64_t mean(int64_t sum, int64_t count)
{
	return count ? (int64_t)llround((double)sum / (double)count) : 0;
}

/* " FROM points WHERE <tenant, type, window>" (or the per-minute roll-ups). unfold: with an
 * ARRAY JOIN of the point's stacks and values, as columns `stack` and `value` (one row per
 * stack of a point, as the roll-ups' nested map is unfolded too). */
static int window_sql(strobe_buf *q, ch_store *c, const char *tenant, const char *type,
		      int64_t from, int64_t to, bool rollup, bool unfold)
{
	char t[128];
	int r = strobe_buf_addf(q, " FROM %s", ch_tab(c, rollup ? "points_1m" : "points", t, sizeof t));
	if (r == 0 && unfold)
		r = strobe_buf_adds(q, rollup ? " ARRAY JOIN stacksMap.stack AS stack, "
						"stacksMap.value AS value"
					      : " ARRAY JOIN stacks AS stack, values AS value");
	if (r == 0)
		r = strobe_buf_adds(q, " WHERE ");
	if (r == 0)
		r = ch_where(q, tenant, type, rollup ? "minute" : "time", from, to);
	return r;
}

/* Symbols of the stacks in `stacks` (keys) read back and rebuilt in p; sid[i] = the profile's
 * stack id of key i. */
static int rebuild(ch_store *c, strobe_profile *p, const u64map *stacks, uint32_t *sid,
		   strobe_err *err)
{
	char t[128];
	uint32_t ns = stacks->t.n;
	strobe_buf q, ans;
	strobe_buf_init(&q, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	u64map locs = {0}, fns = {0};
	uint64_t *ids = malloc((ns ? ns : 1) * sizeof(*ids));
	uint32_t *lfun = NULL, *lid = NULL, *fid = NULL;
	int64_t *lline = NULL;
	int r = ids ? 0 : -ENOMEM;
	bool *got = calloc(ns ? ns : 1, 1);
	if (!got)
		r = -ENOMEM;
	for (uint32_t i = 0; r == 0 && i < ns; i++)
		ids[i] = u64map_key(stacks, i);
	/* stacks -> their locations (root first) */
	if (r == 0)
		r = strobe_buf_addf(&q, "SELECT id, any(locations) FROM %s WHERE 1",
				    ch_tab(c, "stacks", t, sizeof t));
	if (r == 0)
		r = add_in(&q, "id", ids, ns);
	if (r == 0)
		r = strobe_buf_adds(&q, " GROUP BY id FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	/* Read into per-stack lists: rows come in any order, so first gather, then lay out. */
	uint32_t *tmpidx = NULL;
	size_t ntmp = 0;
	uint32_t *start = calloc(ns ? ns : 1, sizeof(*start)), *cnt = calloc(ns ? ns : 1,
									       sizeof(*cnt));
	if (!start || !cnt)
		r = r ? r : -ENOMEM;
	rb_rd rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		uint64_t id = rd_u64(&rd), n = rd_len(&rd);
		uint32_t k = strobe_itab_find(&stacks->t, &id, sizeof(id));
		if (rd.bad || n > 1u << 20 || k == UINT32_MAX || got[k]) {
			rd.bad = true;
			break;
		}
		got[k] = true;
		start[k] = (uint32_t)ntmp;
		cnt[k] = (uint32_t)n;
		uint32_t *x = realloc(tmpidx, (ntmp + n + 1) * sizeof(*x));
		if (!x) {
			r = -ENOMEM;
			break;
		}
		tmpidx = x;
		for (uint64_t j = 0; r == 0 && j < n; j++) {
			uint32_t li;
			bool added;
			r = u64map_put(&locs, rd_u64(&rd), &li, &added);
			tmpidx[ntmp++] = li;
		}
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer reading stacks");
	for (uint32_t i = 0; r == 0 && i < ns; i++)
		if (!got[i])
			r = strobe_errf(err, -EIO, "clickhouse: stack %016llx has samples but is not "
					"stored (a shard missing?)", (unsigned long long)ids[i]);
	/* locations -> their functions and lines */
	uint32_t nl = locs.t.n;
	uint64_t *laddr = NULL, *mstart = NULL, *mlimit = NULL, *moff = NULL;
	uint8_t *mflags = NULL, *fold = NULL;
	char **mfile = NULL, **mbuild = NULL;
	bool *lgot = NULL;
	if (r == 0) {
		free(ids);
		ids = malloc((nl ? nl : 1) * sizeof(*ids));
		laddr = calloc(nl ? nl : 1, sizeof(*laddr));
		mstart = calloc(nl ? nl : 1, sizeof(*mstart));
		mlimit = calloc(nl ? nl : 1, sizeof(*mlimit));
		moff = calloc(nl ? nl : 1, sizeof(*moff));
		mflags = calloc(nl ? nl : 1, 1);
		fold = calloc(nl ? nl : 1, 1);
		mfile = calloc(nl ? nl : 1, sizeof(*mfile));
		mbuild = calloc(nl ? nl : 1, sizeof(*mbuild));
		lgot = calloc(nl ? nl : 1, 1);
		lid = calloc(nl ? nl : 1, sizeof(*lid));
		if (!ids || !laddr || !mstart || !mlimit || !moff || !mflags || !fold || !mfile ||
		    !mbuild || !lgot || !lid)
			r = -ENOMEM;
	}
	for (uint32_t i = 0; r == 0 && i < nl; i++)
		ids[i] = u64map_key(&locs, i);
	strobe_buf_reset(&q);
	if (r == 0)
		r = strobe_buf_addf(&q, "SELECT id, any(address), any(mapping_file), any(build_id), "
					"any(mapping_start), any(mapping_limit), any(mapping_offset), "
					"any(mapping_flags), any(is_folded), any(functions), any(lines) "
					"FROM %s WHERE 1",
				    ch_tab(c, "locations", t, sizeof t));
	if (r == 0)
		r = add_in(&q, "id", ids, nl);
	if (r == 0)
		r = strobe_buf_adds(&q, " GROUP BY id FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, q.p, NULL, 0, &ans, err);
	/* lines are gathered per location: lstart/lcount into lfun/lline */
	uint32_t *lstart = NULL, *lcount = NULL;
	size_t nlines = 0;
	if (r == 0) {
		lstart = calloc(nl ? nl : 1, sizeof(*lstart));
		lcount = calloc(nl ? nl : 1, sizeof(*lcount));
		if (!lstart || !lcount)
			r = -ENOMEM;
	}
	rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		uint64_t id = rd_u64(&rd);
		uint32_t k = strobe_itab_find(&locs.t, &id, sizeof(id));
		if (k == UINT32_MAX || lgot[k]) {
			rd.bad = true;
			break;
		}
		lgot[k] = true;
		laddr[k] = rd_u64(&rd);
		size_t fl, bl;
		const char *f = rd_str(&rd, &fl), *b = rd_str(&rd, &bl);
		mfile[k] = strndup(f, fl);
		mbuild[k] = strndup(b, bl);
		mstart[k] = rd_u64(&rd);
		mlimit[k] = rd_u64(&rd);
		moff[k] = rd_u64(&rd);
		mflags[k] = rd_u8(&rd);
		fold[k] = rd_u8(&rd);
		uint64_t n = rd_len(&rd);
		if (rd.bad || n > STROBE_NAMER_MAX_LINES * 16 || !mfile[k] || !mbuild[k]) {
			r = rd.bad || n > STROBE_NAMER_MAX_LINES * 16 ? 0 : -ENOMEM;
			rd.bad = true;
			break;
		}
		uint32_t *xf = realloc(lfun, (nlines + n + 1) * sizeof(*xf));
		if (xf)
			lfun = xf;
		int64_t *xl = realloc(lline, (nlines + n + 1) * sizeof(*xl));
		if (xl)
			lline = xl;
		if (!xf || !xl) {
			r = -ENOMEM;
			break;
		}
		lstart[k] = (uint32_t)nlines;
		lcount[k] = (uint32_t)n;
		for (uint64_t j = 0; r == 0 && j < n; j++) {
			uint64_t fh = rd_u64(&rd);
			uint32_t fi = UINT32_MAX;
			bool added;
			if (fh)
				r = u64map_put(&fns, fh, &fi, &added);
			lfun[nlines + j] = fh ? fi : UINT32_MAX;
		}
		if (rd_len(&rd) != n)
			rd.bad = true;
		for (uint64_t j = 0; !rd.bad && j < n; j++)
			lline[nlines + j] = rd_i64(&rd);
		nlines += n;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer reading locations");
	for (uint32_t i = 0; r == 0 && i < nl; i++)
		if (!lgot[i])
			r = strobe_errf(err, -EIO, "clickhouse: location %016llx is not stored",
					(unsigned long long)ids[i]);
	/* functions */
	uint32_t nf = fns.t.n;
	if (r == 0) {
		free(ids);
		ids = malloc((nf ? nf : 1) * sizeof(*ids));
		fid = calloc(nf ? nf : 1, sizeof(*fid));
		if (!ids || !fid)
			r = -ENOMEM;
	}
	for (uint32_t i = 0; r == 0 && i < nf; i++)
		ids[i] = u64map_key(&fns, i);
	strobe_buf_reset(&q);
	if (r == 0 && nf) {
		r = strobe_buf_addf(&q, "SELECT id, any(name), any(system_name), any(filename), "
					"any(start_line) FROM %s WHERE 1",
				    ch_tab(c, "functions", t, sizeof t));
		if (r == 0)
			r = add_in(&q, "id", ids, nf);
		if (r == 0)
			r = strobe_buf_adds(&q, " GROUP BY id FORMAT RowBinary");
		if (r == 0)
			r = ch_exec(c, q.p, NULL, 0, &ans, err);
		rd = rd_of(&ans);
		while (r == 0 && rd_more(&rd)) {
			uint64_t id = rd_u64(&rd);
			uint32_t k = strobe_itab_find(&fns.t, &id, sizeof(id));
			size_t l1, l2, l3;
			const char *s1 = rd_str(&rd, &l1), *s2 = rd_str(&rd, &l2),
				   *s3 = rd_str(&rd, &l3);
			int64_t sl = rd_i64(&rd);
			if (rd.bad || k == UINT32_MAX || fid[k])
				break;
			strobe_function f = {.name = strobe_str_intern(p, s1, l1),
					     .system_name = strobe_str_intern(p, s2, l2),
					     .filename = strobe_str_intern(p, s3, l3),
					     .start_line = sl};
			if (f.name == UINT32_MAX || f.system_name == UINT32_MAX ||
			    f.filename == UINT32_MAX ||
			    (fid[k] = strobe_function_intern(p, &f)) == UINT32_MAX)
				r = -ENOMEM;
		}
		if (r == 0 && rd.bad)
			r = strobe_errf(err, -EIO, "clickhouse: a malformed answer reading functions");
		for (uint32_t i = 0; r == 0 && i < nf; i++)
			if (!fid[i])
				r = strobe_errf(err, -EIO, "clickhouse: function %016llx is not stored",
						(unsigned long long)ids[i]);
	}
	/* locations into p */
	strobe_line *lines = NULL;
	size_t lcap = 0;
	for (uint32_t i = 0; r == 0 && i < nl; i++) {
		uint32_t mp = 0;
		if (mfile[i][0] || mbuild[i][0] || mstart[i] || mlimit[i]) {
			strobe_mapping m = {.start = mstart[i], .limit = mlimit[i], .offset = moff[i],
					    .filename = strobe_str_intern0(p, mfile[i]),
					    .build_id = strobe_str_intern0(p, mbuild[i]),
					    .has_functions = mflags[i] & 1,
					    .has_filenames = (mflags[i] >> 1) & 1,
					    .has_line_numbers = (mflags[i] >> 2) & 1,
					    .has_inline_frames = (mflags[i] >> 3) & 1};
			if ((mp = strobe_mapping_intern(p, &m)) == UINT32_MAX) {
				r = -ENOMEM;
				break;
			}
		}
		if (lcount[i] > lcap) {
			strobe_line *x = realloc(lines, lcount[i] * sizeof(*x));
			if (!x) {
				r = -ENOMEM;
				break;
			}
			lines = x;
			lcap = lcount[i];
		}
		for (uint32_t j = 0; j < lcount[i]; j++) {
			uint32_t fi = lfun[lstart[i] + j];
			lines[j] = (strobe_line){.function = fi == UINT32_MAX ? 0 : fid[fi],
						 .line = lline[lstart[i] + j]};
		}
		if ((lid[i] = strobe_location_intern(p, mp, laddr[i], lines, lcount[i], fold[i])) ==
		    UINT32_MAX)
			r = -ENOMEM;
	}
	free(lines);
	/* stacks into p */
	for (uint32_t i = 0; r == 0 && i < ns; i++) {
		uint32_t s = 0;
		for (uint32_t j = 0; r == 0 && j < cnt[i]; j++)
			if ((s = strobe_stack_push(p, s, lid[tmpidx[start[i] + j]])) == UINT32_MAX)
				r = -ENOMEM;
		sid[i] = s;
	}
	for (uint32_t i = 0; mfile && i < nl; i++) {
		free(mfile[i]);
		free(mbuild[i]);
	}
	free(mfile);
	free(mbuild);
	free(laddr);
	free(mstart);
	free(mlimit);
	free(moff);
	free(mflags);
	free(fold);
	free(lgot);
	free(lid);
	free(fid);
	free(lfun);
	free(lline);
	free(lstart);
	free(lcount);
	free(start);
	free(cnt);
	free(tmpidx);
	free(got);
	free(ids);
	strobe_itab_free(&locs.t);
	strobe_itab_free(&fns.t);
	strobe_buf_free(&q);
	strobe_buf_free(&ans);
	return r;
}

/* "name:st:su:pt:pu" -> its five parts in buf. */
/* Values summed by stack id, in the order first seen: what a profile is built from (a window's
 * query, a stored point opened by id). */
typedef struct stack_sums {
	u64map stacks;
	int64_t *val;
	size_t cap;
} stack_sums;

static int sums_add(stack_sums *s, uint64_t stack, int64_t v)
{
	uint32_t si;
	bool added;
	int r = u64map_put(&s->stacks, stack, &si, &added);
	if (r < 0)
		return r;
	if (si >= s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 1024;
		int64_t *x = realloc(s->val, ncap * sizeof(*x));
		if (!x)
			return -ENOMEM;
		memset(x + s->cap, 0, (ncap - s->cap) * sizeof(*x));
		s->val = x;
		s->cap = ncap;
	}
	s->val[si] = (int64_t)((uint64_t)s->val[si] + (uint64_t)v);
	return 0;
}

/* p's samples from the sums: the stacks' symbols read back (rebuild), a sample per non-zero
 * sum. */
static int sums_to_profile(ch_store *c, strobe_profile *p, const stack_sums *s, strobe_err *err)
{
	uint32_t n = s->stacks.t.n;
	uint32_t *sid = calloc(n ? n : 1, sizeof(*sid));
	int r = sid ? 0 : -ENOMEM;
	if (r == 0 && n)
		r = rebuild(c, p, &s->stacks, sid, err);
	for (uint32_t i = 0; r == 0 && i < n; i++)
		if (s->val[i])
			r = strobe_sample_add(p, sid[i], 0, &s->val[i]);
	free(sid);
	return r;
}

static void sums_free(stack_sums *s)
{
	free(s->val);
	strobe_itab_free(&s->stacks.t);
}

/* The end of a call that builds a profile: *out = p on success, else p freed and r (with a
 * message for a bare -ENOMEM). */
static int profile_out(strobe_profile *p, int r, strobe_profile **out, strobe_err *err)
{
	if (r < 0) {
		strobe_profile_free(p);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		return r;
	}
	*out = p;
	return 0;
}

static int split_type(const char *type, char *buf, size_t cap, const char *part[5])
{
	snprintf(buf, cap, "%s", type);
	char *p = buf;
	for (int i = 0; i < 5; i++) {
		part[i] = p;
		char *c = strchr(p, ':');
		if (i < 4 && !c)
			return -EINVAL;
		if (c && i < 4) {
			*c = 0;
			p = c + 1;
		}
	}
	return strchr(part[4], ':') ? -EINVAL : 0;
}

int ch_query(void *ctx, const strobe_query *q, strobe_profile **out, strobe_err *err)
{
	ch_store *c = ctx;
	*out = NULL;
	if (!q->sel || !q->sel->type)
		return strobe_errf(err, -EINVAL,
				   "the query needs a profile type, e.g. "
				   "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"x\"}");
	char tb[STROBE_TYPE_MAX];
	const char *part[5];
	if (strlen(q->sel->type) >= STROBE_TYPE_MAX || split_type(q->sel->type, tb, sizeof(tb), part) < 0)
		return strobe_errf(err, -EINVAL,
				   "profile type '%.100s' is not name:sample_type:unit:period_type:"
				   "period_unit",
				   q->sel->type);
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return -ENOMEM;
	int r = strobe_profile_add_type(p, part[1], part[2]);
	p->period_type.type = strobe_str_intern0(p, part[3]);
	p->period_type.unit = strobe_str_intern0(p, part[4]);
	p->time_nanos = q->from_ns;
	p->duration_nanos = q->to_ns - q->from_ns;
	p->default_type = 0;
	chs_set ss = {0};
	if (r == 0)
		r = load_series(c, q->tenant, q->sel->type, q->sel, false, 0, 0, &ss, err);
	if (r == 0)
		r = sample_filter(c, q->tenant, q->sel->type, q->sel, q->from_ns, q->to_ns, &ss, err);
	uint64_t *cid = malloc((ss.n ? ss.n : 1) * sizeof(*cid)),
		 *gid = malloc((ss.n ? ss.n : 1) * sizeof(*gid));
	size_t nc = 0, ng = 0;
	if (!cid || !gid)
		r = -ENOMEM;
	u64map gauges = {0};
	for (size_t i = 0; r == 0 && i < ss.n; i++) {
		if (ss.v[i].period > p->period)
			p->period = ss.v[i].period;
		if (ss.v[i].gauge) {
			uint32_t gi;
			bool added;
			gid[ng++] = ss.v[i].id;
			r = u64map_put(&gauges, ss.v[i].id, &gi, &added);
		} else {
			cid[nc++] = ss.v[i].id;
		}
	}
	pthread_mutex_lock(&c->mu);
	bool rollup = c->use_rollups && q->from_ns % MINUTE == 0 && q->to_ns % MINUTE == 0;
	pthread_mutex_unlock(&c->mu);
	/* the roll-ups keep no sample labels: a filtered series is read from its points */
	rollup = rollup && !any_filtered(&ss);
	/* Which points: the counters' and the gauges' (SQL conditions). */
	strobe_buf cc, cg;
	strobe_buf_init(&cc, SIZE_MAX);
	strobe_buf_init(&cg, SIZE_MAX);
	if (r == 0)
		r = add_in_ss(&cc, &ss, SS_COUNTERS);
	if (r == 0)
		r = add_in_ss(&cg, &ss, SS_GAUGES);
	/* The query caps, before anything is summed: counters over the rows they are read from. */
	if (r == 0 && nc)
		r = ch_query_caps(c, q->tenant, q->sel->type, q->from_ns, q->to_ns, rollup, cc.p,
				  false, err);
	if (r == 0 && ng)
		r = ch_query_caps(c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false, cg.p,
				  false, err);
	/* Sums per (series, stack): counters from the roll-ups when the window is whole minutes,
	 * gauges from the points (their mean needs the number of points). */
	stack_sums sums = {0};
	int64_t *gcount = ng ? calloc(ng, sizeof(*gcount)) : NULL;
	if (ng && !gcount)
		r = -ENOMEM;
	strobe_buf sq, ans;
	strobe_buf_init(&sq, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	if (r == 0 && ng) { /* points per gauge series */
		r = strobe_buf_adds(&sq, "SELECT series, uniqExact(time)");
		if (r == 0)
			r = window_sql(&sq, c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false,
				       false);
		if (r == 0)
			r = strobe_buf_adds(&sq, cg.p);
		if (r == 0)
			r = strobe_buf_adds(&sq, " GROUP BY series FORMAT RowBinary");
		if (r == 0)
			r = ch_exec(c, sq.p, NULL, 0, &ans, err);
		rb_rd rd = rd_of(&ans);
		while (r == 0 && rd_more(&rd)) {
			uint64_t sid = rd_u64(&rd), n = rd_u64(&rd);
			uint32_t k = strobe_itab_find(&gauges.t, &sid, sizeof(sid));
			if (!rd.bad && k != UINT32_MAX)
				gcount[k] = (int64_t)n;
		}
	}
	for (int pass = 0; r == 0 && pass < 2; pass++) {
		size_t n = pass ? ng : nc;
		if (!n)
			continue;
		strobe_buf_reset(&sq);
		r = strobe_buf_adds(&sq, "SELECT series, stack, sum(value)");
		if (r == 0)
			r = window_sql(&sq, c, q->tenant, q->sel->type, q->from_ns, q->to_ns,
				       !pass && rollup, true);
		if (r == 0)
			r = strobe_buf_adds(&sq, pass ? cg.p : cc.p);
		if (r == 0)
			r = strobe_buf_adds(&sq, " GROUP BY series, stack FORMAT RowBinary");
		if (r == 0)
			r = ch_exec(c, sq.p, NULL, 0, &ans, err);
		rb_rd rd = rd_of(&ans);
		while (r == 0 && rd_more(&rd)) {
			uint64_t se = rd_u64(&rd), st = rd_u64(&rd);
			int64_t v = rd_i64(&rd);
			if (rd.bad)
				break;
			if (pass) {
				uint32_t k = strobe_itab_find(&gauges.t, &se, sizeof(se));
				v = mean(v, k == UINT32_MAX ? 0 : gcount[k]);
			}
			r = sums_add(&sums, st, v);
		}
		if (r == 0 && rd.bad)
			r = strobe_errf(err, -EIO, "clickhouse: a malformed answer summing samples");
	}
	if (r == 0)
		r = sums_to_profile(c, p, &sums, err);
	sums_free(&sums);
	free(gcount);
	free(cid);
	free(gid);
	strobe_itab_free(&gauges.t);
	strobe_buf_free(&sq);
	strobe_buf_free(&ans);
	chs_free(&ss);
	strobe_buf_free(&cc);
	strobe_buf_free(&cg);
	return profile_out(p, r, out, err);
}

/* ---- ranges ----------------------------------------------------------------------------------- */

/* The ids an answer of one UInt64 column holds, appended to out as "a,b,c" (nothing when
 * none); their number in *n. */
static int ids_of(ch_store *c, const char *sql, strobe_buf *out, size_t *n, strobe_err *err)
{
	strobe_buf ans;
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	int r = ch_exec(c, sql, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	*n = 0;
	while (r == 0 && rd_more(&rd)) {
		uint64_t id = rd_u64(&rd);
		if (rd.bad)
			break;
		r = strobe_buf_addf(out, "%s%llu", *n ? "," : "", (unsigned long long)id);
		(*n)++;
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer listing ids");
	strobe_buf_free(&ans);
	return r;
}

/* The stacks with a frame (inlined ones included) of a function named `name`, as a list of ids
 * for an IN (...): functions by name, the locations with one of them on a line, the stacks
 * through one of those locations (as store/query.c's stacks_with_function). */
static int stacks_with_function(ch_store *c, const char *name, strobe_buf *ids, size_t *n,
				strobe_err *err)
{
	char t[128];
	strobe_buf q, fl, ll;
	strobe_buf_init(&q, SIZE_MAX);
	strobe_buf_init(&fl, SIZE_MAX);
	strobe_buf_init(&ll, SIZE_MAX);
	size_t nf = 0, nl = 0;
	*n = 0;
	int r = strobe_buf_addf(&q, "SELECT DISTINCT id FROM %s WHERE name = ",
				ch_tab(c, "functions", t, sizeof t));
	if (r == 0 && (r = ch_quote(&q, name)) == 0 &&
	    (r = strobe_buf_adds(&q, " FORMAT RowBinary")) == 0)
		r = ids_of(c, q.p, &fl, &nf, err);
	if (r == 0 && nf) {
		strobe_buf_reset(&q);
		r = strobe_buf_addf(&q, "SELECT DISTINCT id FROM %s WHERE hasAny(functions, [%s]) "
					"FORMAT RowBinary",
				    ch_tab(c, "locations", t, sizeof t), fl.p);
		if (r == 0)
			r = ids_of(c, q.p, &ll, &nl, err);
	}
	if (r == 0 && nl) {
		strobe_buf_reset(&q);
		r = strobe_buf_addf(&q, "SELECT DISTINCT id FROM %s WHERE hasAny(locations, [%s]) "
					"FORMAT RowBinary",
				    ch_tab(c, "stacks", t, sizeof t), ll.p);
		if (r == 0)
			r = ids_of(c, q.p, ids, n, err);
	}
	strobe_buf_free(&q);
	strobe_buf_free(&fl);
	strobe_buf_free(&ll);
	return r;
}

int ch_range(void *ctx, const strobe_query *q, int64_t step_ns, const char *group_by,
	     const char *function, strobe_range_result *out, strobe_err *err)
{
	ch_store *c = ctx;
	memset(out, 0, sizeof(*out));
	if (step_ns <= 0)
		return strobe_errf(err, -EINVAL, "step must be positive");
	if (q->to_ns <= q->from_ns)
		return strobe_errf(err, -EINVAL, "the window is empty (to <= from)");
	int64_t nsteps = (q->to_ns - q->from_ns + step_ns - 1) / step_ns;
	if (nsteps > RANGE_MAX_STEPS)
		return strobe_errf(err, -EDQUOT,
				   "limit max_steps: %lld steps asked, at most %d; use a larger "
				   "step",
				   (long long)nsteps, RANGE_MAX_STEPS);
	if (!q->sel || !q->sel->type)
		return strobe_errf(err, -EINVAL, "the range needs a profile type");
	out->nsteps = (size_t)nsteps;
	chs_set ss = {0};
	int r = load_series(c, q->tenant, q->sel->type, q->sel, false, 0, 0, &ss, err);
	if (r == 0)
		r = sample_filter(c, q->tenant, q->sel->type, q->sel, q->from_ns, q->to_ns, &ss, err);
	uint64_t *ids = malloc((ss.n ? ss.n : 1) * sizeof(*ids));
	uint32_t *grp = malloc((ss.n ? ss.n : 1) * sizeof(*grp));
	u64map byid = {0};
	strobe_itab groups = {0};
	if (!ids || !grp)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < ss.n; i++) {
		ids[i] = ss.v[i].id;
		uint32_t k;
		bool added;
		if ((r = u64map_put(&byid, ss.v[i].id, &k, &added)) < 0)
			break;
		/* the same groups as the SQLite store's (several group_by labels included) */
		if ((r = store_range_group(&groups, ss.v[i].labels, ss.v[i].nlabels, group_by, out,
					   &grp[i])) < 0)
			break;
	}
	strobe_buf sq, ans;
	strobe_buf_init(&sq, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	/* With a function: only the values of stacks through it, but every point counted (a
	 * gauge's mean is over all its points, as in store/query.c). */
	strobe_buf fs;
	strobe_buf_init(&fs, SIZE_MAX);
	size_t nfs = 0;
	strobe_buf cond;
	strobe_buf_init(&cond, SIZE_MAX);
	if (r == 0)
		r = add_in_ss(&cond, &ss, SS_ALL);
	if (r == 0 && ss.n)
		r = ch_query_caps(c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false, cond.p,
				  true, err);
	if (r == 0 && ss.n && function)
		r = stacks_with_function(c, function, &fs, &nfs, err);
	if (r == 0 && ss.n) {
		r = strobe_buf_addf(&sq, "SELECT series, intDiv(time - %lld, %lld) AS k, ",
				    (long long)q->from_ns, (long long)step_ns);
		if (r == 0)
			r = !function ? strobe_buf_adds(&sq, "sum(arraySum(values))")
			    : nfs     ? strobe_buf_addf(&sq, "sumIf(value, stack IN (%s))", fs.p)
				      : strobe_buf_adds(&sq, "sumIf(value, 0)");
		if (r == 0)
			r = strobe_buf_adds(&sq, ", uniqExact(time)");
		if (r == 0)
			r = window_sql(&sq, c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false,
				       function != NULL);
		if (r == 0)
			r = strobe_buf_adds(&sq, cond.p);
		if (r == 0)
			r = strobe_buf_adds(&sq, " GROUP BY series, k FORMAT RowBinary");
		if (r == 0)
			r = ch_exec(c, sq.p, NULL, 0, &ans, err);
		rb_rd rd = rd_of(&ans);
		while (r == 0 && rd_more(&rd)) {
			uint64_t se = rd_u64(&rd);
			int64_t k = rd_i64(&rd), sum = rd_i64(&rd);
			int64_t n = (int64_t)rd_u64(&rd);
			uint32_t i = strobe_itab_find(&byid.t, &se, sizeof(se));
			if (rd.bad || i == UINT32_MAX || k < 0 || k >= nsteps) {
				rd.bad = true;
				break;
			}
			int64_t *v = &out->g[grp[i]].values[k];
			*v += ss.v[i].gauge ? mean(sum, n) : sum;
		}
		if (r == 0 && rd.bad)
			r = strobe_errf(err, -EIO, "clickhouse: a malformed answer summing a range");
	}
	strobe_buf_free(&fs);
	strobe_buf_free(&cond);
	strobe_buf_free(&sq);
	strobe_buf_free(&ans);
	strobe_itab_free(&byid.t);
	strobe_itab_free(&groups);
	free(ids);
	free(grp);
	chs_free(&ss);
	if (r < 0) {
		strobe_range_result_free(out);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
	}
	return r;
}

/* ---- label and series listings ---------------------------------------------------------------- */

typedef struct strv {
	char **v;
	size_t n, cap;
} strv;

static int strv_add(strv *s, const char *x)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;
		char **nv = realloc(s->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = nc;
	}
	if (!(s->v[s->n] = strdup(x)))
		return -ENOMEM;
	s->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

enum { L_NAMES, L_VALUES, L_TYPES };

/* The sample labels of the points in the window of the series in ss (a filtered one's: those
 * it passes). */
static int sample_labels(ch_store *c, const strobe_query *q, const chs_set *ss, strv *v, int what,
			 const char *name, strobe_err *err)
{
	char t[128];
	strobe_buf sq, ans;
	strobe_buf_init(&sq, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	int r = strobe_buf_addf(&sq, "SELECT DISTINCT slabels FROM %s WHERE ",
				ch_tab(c, "points", t, sizeof t));
	if (r == 0)
		r = ch_where(&sq, q->tenant, q->sel ? q->sel->type : NULL, "time", q->from_ns,
			     q->to_ns);
	if (r == 0)
		r = strobe_buf_adds(&sq, " AND slabels != ''");
	if (r == 0)
		r = add_in_ss(&sq, ss, SS_ALL);
	if (r == 0)
		r = strobe_buf_adds(&sq, " LIMIT " STORE_SLABELS_LISTED " FORMAT RowBinary");
	if (r == 0)
		r = ch_exec(c, sq.p, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		size_t l;
		const char *s = rd_str(&rd, &l);
		for (size_t i = 0; r == 0 && i < l;) {
			const char *nm = s + i, *e = memchr(nm, 0, l - i);
			if (!e || (size_t)(e + 1 - s) >= l)
				break;
			const char *val = e + 1, *e2 = memchr(val, 0, l - (size_t)(val - s));
			if (!e2)
				break;
			if (what == L_NAMES)
				r = strv_add(v, nm);
			else if (what == L_VALUES && strcmp(nm, name) == 0)
				r = strv_add(v, val);
			i = (size_t)(e2 + 1 - s);
		}
	}
	strobe_buf_free(&sq);
	strobe_buf_free(&ans);
	return r;
}

static int listing(ch_store *c, const strobe_query *q, int what, const char *name, char ***out,
		   size_t *n, strobe_err *err)
{
	*out = NULL;
	*n = 0;
	strv v = {0};
	chs_set ss = {0};
	int r = load_series(c, q->tenant, q->sel ? q->sel->type : NULL, q->sel, true, q->from_ns,
			    q->to_ns, &ss, err);
	if (r == 0)
		r = sample_filter(c, q->tenant, q->sel ? q->sel->type : NULL, q->sel, q->from_ns,
				  q->to_ns, &ss, err);
	for (size_t i = 0; r == 0 && i < ss.n; i++) {
		if (what == L_TYPES) {
			r = strv_add(&v, ss.v[i].type);
			continue;
		}
		for (size_t k = 0; r == 0 && k < ss.v[i].nlabels; k++)
			if (what == L_NAMES)
				r = strv_add(&v, ss.v[i].labels[k].name);
			else if (strcmp(ss.v[i].labels[k].name, name) == 0)
				r = strv_add(&v, ss.v[i].labels[k].value);
	}
	if (r == 0 && ss.n && (what == L_NAMES || (what == L_VALUES && strobe_sample_label_name(name))))
		r = sample_labels(c, q, &ss, &v, what, name, err);
	chs_free(&ss);
	if (r < 0) {
		for (size_t i = 0; i < v.n; i++)
			free(v.v[i]);
		free(v.v);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		return r;
	}
	if (v.n)
		qsort(v.v, v.n, sizeof(*v.v), cmp_str);
	size_t w = 0;
	for (size_t i = 0; i < v.n; i++) {
		if (w && strcmp(v.v[w - 1], v.v[i]) == 0)
			free(v.v[i]);
		else
			v.v[w++] = v.v[i];
	}
	*out = v.v;
	*n = w;
	return 0;
}

int ch_label_names(void *ctx, const strobe_query *q, char ***out, size_t *n, strobe_err *err)
{
	return listing(ctx, q, L_NAMES, NULL, out, n, err);
}

int ch_label_values(void *ctx, const strobe_query *q, const char *name, char ***out, size_t *n,
		    strobe_err *err)
{
	return listing(ctx, q, L_VALUES, name, out, n, err);
}

int ch_profile_types(void *ctx, const strobe_query *q, char ***out, size_t *n, strobe_err *err)
{
	return listing(ctx, q, L_TYPES, NULL, out, n, err);
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

int ch_series(void *ctx, const char *tenant, const strobe_selector *sels, size_t nsel,
	      int64_t from_ns, int64_t to_ns, size_t max, strobe_series_list *out,
	      strobe_err *err)
{
	ch_store *c = ctx;
	memset(out, 0, sizeof(*out));
	int r = 0;
	chs_set ss = {0};
	/* The series any selector matches (each with its sample-label matchers applied to the
	 * points), once each; without selectors, all of the tenant's with points in the window. */
	for (size_t k = 0; r == 0 && k < (nsel ? nsel : 1); k++) {
		const strobe_selector *sk = nsel ? &sels[k] : NULL;
		chs_set part = {0};
		r = load_series(c, tenant, sk ? sk->type : NULL, sk, true, from_ns, to_ns, &part, err);
		if (r == 0)
			r = sample_filter(c, tenant, sk ? sk->type : NULL, sk, from_ns, to_ns, &part,
					  err);
		chs *nv = r == 0 && part.n ? realloc(ss.v, (ss.n + part.n) * sizeof(*nv)) : ss.v;
		if (r == 0 && part.n && !nv)
			r = -ENOMEM;
		ss.v = nv;
		for (size_t i = 0; r == 0 && i < part.n; i++) {
			bool dup = false;
			for (size_t j = 0; j < ss.n && !dup; j++)
				dup = ss.v[j].id == part.v[i].id;
			if (dup)
				chs_free1(&part.v[i]);
			else
				ss.v[ss.n++] = part.v[i];
			part.v[i] = (chs){0};
		}
		chs_free(&part);
	}
	size_t cap = 0;
	for (size_t i = 0; r == 0 && i < ss.n; i++) {
		const chs *se = &ss.v[i];
		if (max && out->n >= max) {
			r = strobe_errf(err, -EDQUOT,
					"limit max_series_listed: more than %zu series match; narrow "
					"the selector or the window",
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
		size_t bytes = se->nlabels * sizeof(strobe_labelpair) + strlen(se->type) + 1;
		for (size_t j = 0; j < se->nlabels; j++)
			bytes += strlen(se->labels[j].name) + strlen(se->labels[j].value) + 2;
		char *mem = malloc(bytes);
		if (!mem) {
			r = -ENOMEM;
			break;
		}
		strobe_labelpair *l = (strobe_labelpair *)mem;
		char *p = mem + se->nlabels * sizeof(strobe_labelpair);
		strobe_series_info *e = &out->v[out->n++];
		e->type = p;
		p = stpcpy(p, se->type) + 1;
		for (size_t j = 0; j < se->nlabels; j++) {
			l[j].name = p;
			p = stpcpy(p, se->labels[j].name) + 1;
			l[j].value = p;
			p = stpcpy(p, se->labels[j].value) + 1;
		}
		e->labels = l;
		e->nlabels = se->nlabels;
		e->mem_ = mem;
	}
	chs_free(&ss);
	if (r < 0) {
		strobe_series_list_free(out);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		return r;
	}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), cmp_entry);
	return 0;
}

/* ---- exemplars and profiles by id --------------------------------------------------------------- */

int ch_exemplars(void *ctx, const strobe_query *q, int64_t step_ns, size_t per_step,
		 strobe_exemplars *out, strobe_err *err)
{
	ch_store *c = ctx;
	memset(out, 0, sizeof(*out));
	if (step_ns <= 0 || q->to_ns <= q->from_ns)
		return strobe_errf(err, -EINVAL, "exemplars need a positive step and window");
	if (per_step < 1 || per_step > STROBE_EXEMPLARS_MAX)
		return strobe_errf(err, -EINVAL, "exemplars: from 1 to %d per step",
				   STROBE_EXEMPLARS_MAX);
	if (!q->sel || !q->sel->type)
		return strobe_errf(err, -EINVAL, "exemplars need a profile type");
	size_t nsteps = (size_t)((q->to_ns - q->from_ns + step_ns - 1) / step_ns);
	if (!(out->v = calloc(nsteps * per_step, sizeof(*out->v))))
		return -ENOMEM;
	out->nsteps = nsteps;
	out->per_step = per_step;
	chs_set ss = {0};
	int r = load_series(c, q->tenant, q->sel->type, q->sel, false, 0, 0, &ss, err);
	if (r == 0)
		r = sample_filter(c, q->tenant, q->sel->type, q->sel, q->from_ns, q->to_ns, &ss, err);
	strobe_buf cond, sq, ans;
	strobe_buf_init(&cond, SIZE_MAX);
	strobe_buf_init(&sq, SIZE_MAX);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	if (r == 0)
		r = add_in_ss(&cond, &ss, SS_ALL);
	/* raw points only, counted against the query caps as the SQLite store does */
	if (r == 0 && ss.n)
		r = ch_query_caps(c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false, cond.p,
				  false, err);
	/* the heaviest per_step points of each step, chosen by ClickHouse (LIMIT n BY step) */
	if (r == 0 && ss.n) {
		r = strobe_buf_addf(&sq, "SELECT id, time, v, slabels FROM (SELECT id, time, "
					 "arraySum(values) AS v, slabels, intDiv(time - %lld, %lld) AS k",
				    (long long)q->from_ns, (long long)step_ns);
		if (r == 0)
			r = window_sql(&sq, c, q->tenant, q->sel->type, q->from_ns, q->to_ns, false,
				       false);
		if (r == 0)
			r = strobe_buf_adds(&sq, cond.p);
		if (r == 0)
			r = strobe_buf_addf(&sq, ") ORDER BY k, v DESC, id LIMIT %zu BY k FORMAT RowBinary",
					    per_step);
		if (r == 0)
			r = ch_exec(c, sq.p, NULL, 0, &ans, err);
	}
	rb_rd rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		strobe_exemplar x = {.id = rd_i64(&rd), .time_ns = rd_i64(&rd), .value = rd_i64(&rd)};
		size_t len;
		const char *sl = rd_str(&rd, &len);
		if (rd.bad || x.time_ns < q->from_ns || x.time_ns >= q->to_ns || x.id <= 0) {
			rd.bad = true;
			break;
		}
		strobe_labelpair l[STROBE_SAMPLE_LABELS_MAX];
		int n = store_slabels_decode(sl, len, l, STROBE_SAMPLE_LABELS_MAX);
		for (int i = 0; i < n; i++) {
			if (strcmp(l[i].name, "span_id") == 0)
				snprintf(x.span_id, sizeof(x.span_id), "%s", l[i].value);
			else if (strcmp(l[i].name, "trace_id") == 0)
				snprintf(x.trace_id, sizeof(x.trace_id), "%s", l[i].value);
		}
		size_t step = (size_t)((x.time_ns - q->from_ns) / step_ns);
		store_exemplar_keep(out->v + step * per_step, per_step, &x);
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer listing exemplars");
	strobe_buf_free(&cond);
	strobe_buf_free(&sq);
	strobe_buf_free(&ans);
	chs_free(&ss);
	if (r < 0) {
		strobe_exemplars_free(out);
		if (r == -ENOMEM && !err->msg[0])
			strobe_errf(err, r, "out of memory");
	}
	return r;
}

int ch_profile_by_id(void *ctx, const strobe_query *q, int64_t id, strobe_profile **out,
		     strobe_err *err)
{
	ch_store *c = ctx;
	*out = NULL;
	char t[128];
	strobe_buf sq, ans;
	strobe_buf_init(&sq, 1u << 16);
	strobe_buf_init(&ans, CH_ANSWER_MAX);
	/* the point: its tenant, series, time and sample labels */
	int r = strobe_buf_addf(&sq, "SELECT tenant, series, time, slabels FROM %s WHERE id = %lld "
				     "LIMIT 1 FORMAT RowBinary",
				 ch_tab(c, "points", t, sizeof t), (long long)id);
	if (r == 0)
		r = ch_exec(c, sq.p, NULL, 0, &ans, err);
	rb_rd rd = rd_of(&ans);
	size_t tl = 0, sll = 0;
	const char *tn = "", *sl = "";
	uint64_t series = 0;
	int64_t time = 0;
	if (r == 0 && rd_more(&rd)) {
		tn = rd_str(&rd, &tl);
		series = rd_u64(&rd);
		time = rd_i64(&rd);
		sl = rd_str(&rd, &sll);
		if (rd.bad)
			series = 0;
	}
	/* Another tenant's profile, or one the selector does not match, is as absent as a
	 * missing one (as the SQLite store answers). */
	chs_set ss = {0};
	const chs *se = NULL;
	if (r == 0 && series && tl == strlen(q->tenant) && memcmp(tn, q->tenant, tl) == 0)
		r = load_series(c, q->tenant, q->sel ? q->sel->type : NULL, q->sel, false, 0, 0, &ss,
				err);
	for (size_t i = 0; r == 0 && i < ss.n && !se; i++)
		if (ss.v[i].id == series)
			se = &ss.v[i];
	if (r == 0 && se) {
		store_series st = as_store_series(se, q->tenant);
		bool bad = false;
		if (!store_point_passes(q->sel, &st, sl, sll, &bad))
			se = NULL;
	}
	if (r == 0 && !se)
		r = strobe_errf(err, -ENOENT, "no stored profile %lld matches the selector",
				(long long)id);
	char tb[STROBE_TYPE_MAX];
	const char *part[5];
	strobe_profile *p = NULL;
	if (r == 0 && (strlen(se->type) >= STROBE_TYPE_MAX ||
		       split_type(se->type, tb, sizeof(tb), part) < 0))
		r = strobe_errf(err, -EIO, "clickhouse: series %016llx has a malformed type",
				(unsigned long long)series);
	if (r == 0 && !(p = strobe_profile_new()))
		r = -ENOMEM;
	if (r == 0) {
		r = strobe_profile_add_type(p, part[1], part[2]);
		p->period_type.type = strobe_str_intern0(p, part[3]);
		p->period_type.unit = strobe_str_intern0(p, part[4]);
		p->period = se->period;
		p->time_nanos = time;
		p->default_type = 0;
	}
	/* its stacks and values, rebuilt as a query's are */
	strobe_buf_reset(&sq);
	if (r == 0)
		r = strobe_buf_addf(&sq, "SELECT stack, value FROM %s ARRAY JOIN stacks AS stack, "
					 "values AS value WHERE id = %lld AND series = %llu "
					 "FORMAT RowBinary",
				    ch_tab(c, "points", t, sizeof t), (long long)id,
				    (unsigned long long)series);
	if (r == 0)
		r = ch_exec(c, sq.p, NULL, 0, &ans, err);
	stack_sums sums = {0};
	rd = rd_of(&ans);
	while (r == 0 && rd_more(&rd)) {
		uint64_t st = rd_u64(&rd);
		int64_t v = rd_i64(&rd);
		if (rd.bad)
			break;
		r = sums_add(&sums, st, v);
	}
	if (r == 0 && rd.bad)
		r = strobe_errf(err, -EIO, "clickhouse: a malformed answer reading a profile");
	if (r == 0)
		r = sums_to_profile(c, p, &sums, err);
	sums_free(&sums);
	strobe_buf_free(&sq);
	strobe_buf_free(&ans);
	chs_free(&ss);
	return profile_out(p, r, out, err);
}
