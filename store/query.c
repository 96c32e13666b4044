// SPDX-License-Identifier: Apache-2.0
/*
 * Reading the store: which series a selector matches (through the inverted label index), which
 * rows cover a window (roll-ups for the whole buckets inside it, raw points at its edges), and
 * the merged profile, per-step totals and label listings built from them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"

/* ---- selectors and series -------------------------------------------------------------------- */

static const char *label_value(const strobe_labelpair *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, name) == 0)
			return l[i].value;
	return "";
}

bool strobe_selector_match_labels(const strobe_selector *s, const strobe_labelpair *l, size_t n)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const strobe_matcher *m = &s->m[i];
		const char *v = label_value(l, n, m->name);
		bool ok;
		switch (m->op) {
		case STROBE_MATCH_EQ: ok = strcmp(v, m->value) == 0; break;
		case STROBE_MATCH_NEQ: ok = strcmp(v, m->value) != 0; break;
		case STROBE_MATCH_RE: ok = m->has_re && regexec(&m->re, v, 0, NULL, 0) == 0; break;
		default: ok = m->has_re && regexec(&m->re, v, 0, NULL, 0) != 0; break;
		}
		if (!ok)
			return false;
	}
	return true;
}

bool strobe_sample_label_name(const char *name)
{
	static const char *const names[] = {"pid",     "tid",     "comm",     "exe",
					    "process", "thread",  "lock_addr", "span_id",
					    "trace_id", "profile_id"};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

static bool has_label(const strobe_labelpair *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, name) == 0)
			return true;
	return false;
}

/* A matcher left to the points: on a sample label the series does not carry. Data stored before
 * pid, comm and exe moved to the samples has them on its series, and is matched there. */
static bool deferred(const strobe_matcher *m, const store_series *se)
{
	return strobe_sample_label_name(m->name) && !has_label(se->labels, se->nlabels, m->name);
}

static bool matcher_ok(const strobe_matcher *m, const char *v)
{
	switch (m->op) {
	case STROBE_MATCH_EQ: return strcmp(v, m->value) == 0;
	case STROBE_MATCH_NEQ: return strcmp(v, m->value) != 0;
	case STROBE_MATCH_RE: return m->has_re && regexec(&m->re, v, 0, NULL, 0) == 0;
	default: return m->has_re && regexec(&m->re, v, 0, NULL, 0) != 0;
	}
}

static bool series_ok(const store_series *se, const char *tenant, const strobe_selector *sel)
{
	if (se->dead || strcmp(se->tenant, tenant) != 0 ||
	    (sel && sel->type && strcmp(sel->type, se->type) != 0))
		return false;
	for (size_t i = 0; sel && i < sel->n; i++)
		if (!deferred(&sel->m[i], se) &&
		    !matcher_ok(&sel->m[i], label_value(se->labels, se->nlabels, sel->m[i].name)))
			return false;
	return true;
}

/* Whether a point with sample labels (points.slabels) passes the series' deferred matchers. */
static bool point_ok(const strobe_selector *sel, const store_series *se, const void *blob,
		     size_t len, bool *bad)
{
	strobe_labelpair l[STROBE_SAMPLE_LABELS_MAX];
	int n = store_slabels_decode(blob, len, l, STROBE_SAMPLE_LABELS_MAX);
	if (n < 0) {
		*bad = true;
		return false;
	}
	for (size_t i = 0; i < sel->n; i++)
		if (deferred(&sel->m[i], se) &&
		    !matcher_ok(&sel->m[i], label_value(l, (size_t)n, sel->m[i].name)))
			return false;
	return true;
}

int store_series_sample_match(strobe_store *s, const strobe_selector *sel, const store_series *se,
			      int64_t from, int64_t to, strobe_err *err)
{
	bool filter = false;
	for (size_t k = 0; sel && k < sel->n; k++)
		filter |= deferred(&sel->m[k], se);
	if (!filter)
		return 1;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT DISTINCT slabels FROM points WHERE series=?1 AND time>=?2 AND "
			       "time<?3 LIMIT " STORE_SLABELS_LISTED,
			       -1, &st, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "listing");
	sqlite3_bind_int64(st, 1, se->id);
	sqlite3_bind_int64(st, 2, from);
	sqlite3_bind_int64(st, 3, to);
	int rc, r = 0;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		bool bad = false;
		if (point_ok(sel, se, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0),
			     &bad))
			r = 1;
		else if (bad)
			r = strobe_errf(err, -EIO, "store: the sample labels of a point of series "
						   "%lld are corrupt",
					(long long)se->id);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "listing");
	sqlite3_finalize(st);
	return r;
}

int store_match_series(strobe_store *s, const char *tenant, const strobe_selector *sel,
		       size_t **out, size_t *n, strobe_err *err)
{
	*out = NULL;
	*n = 0;
	size_t cap = 0;
	/* An equality matcher with a value narrows the candidates through the inverted index
	 * (label name, value) -> series; the other matchers are checked on those. */
	const strobe_matcher *eq = NULL;
	for (size_t i = 0; sel && i < sel->n; i++)
		if (sel->m[i].op == STROBE_MATCH_EQ && sel->m[i].value[0] &&
		    !strobe_sample_label_name(sel->m[i].name)) { /* may be on the points only */
			eq = &sel->m[i];
			break;
		}
	sqlite3_stmt *st = NULL;
	if (eq) {
		if (sqlite3_prepare_v2(s->db,
				       "SELECT series FROM series_labels WHERE name=? AND value=?",
				       -1, &st, NULL) != SQLITE_OK)
			return store_sqlerr(s, err, "label index");
		sqlite3_bind_text(st, 1, eq->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, eq->value, -1, SQLITE_STATIC);
	}
	size_t i = 0;
	for (;;) {
		size_t idx;
		if (st) {
			int rc = sqlite3_step(st);
			if (rc == SQLITE_DONE)
				break;
			if (rc != SQLITE_ROW) {
				sqlite3_finalize(st);
				free(*out);
				*out = NULL;
				return store_sqlerr(s, err, "label index");
			}
			int64_t id = sqlite3_column_int64(st, 0);
			if (id < 1 || (size_t)id > s->nseries)
				continue;
			idx = (size_t)id - 1;
		} else {
			if (i >= s->nseries)
				break;
			idx = i++;
		}
		if (!series_ok(&s->series[idx], tenant, sel))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			size_t *no = realloc(*out, cap * sizeof(*no));
			if (!no) {
				sqlite3_finalize(st);
				free(*out);
				*out = NULL;
				return -ENOMEM;
			}
			*out = no;
		}
		(*out)[(*n)++] = idx;
	}
	sqlite3_finalize(st);
	return 0;
}

/* ---- planning and scanning ------------------------------------------------------------------- */

typedef struct seg {
	int64_t a, b;
	int level;
} seg;

static int64_t floordiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* Splits [a, b) into the whole buckets of `level` it contains and, recursively, finer pieces
 * at its edges. Raw rows not yet folded into a used roll-up are read beside it. */
static void plan(int64_t a, int64_t b, int level, seg *out, size_t *n)
{
	if (a >= b)
		return;
	if (level == 0) {
		out[(*n)++] = (seg){a, b, 0};
		return;
	}
	int64_t w = store_level_width[level];
	int64_t a2 = -floordiv(-a, w) * w, b2 = floordiv(b, w) * w;
	if (a2 >= b2) {
		plan(a, b, level - 1, out, n);
		return;
	}
	plan(a, a2, level - 1, out, n);
	out[(*n)++] = (seg){a2, b2, level};
	plan(b2, b, level - 1, out, n);
}

typedef struct scanner {
	strobe_store *s;
	sqlite3_stmt *st, *byid;
	sqlite3_stmt *unrolled; /* raw rows not in a level's roll-up, through points_unrolled */
	store_pair *pairs;
	size_t cap;
	uint64_t rows, bytes; /* read so far, against the query cost caps */
	const strobe_selector *sel; /* its matchers on sample labels filter the points */
} scanner;

typedef int (*row_fn)(void *ctx, int64_t n, const store_pair *p, size_t np);

/* The rows (n, data, slabels) of series `series` that the bound statement st gives, filtered
 * by the selector's sample-label matchers, each counted against the query caps. */
static int scan_stmt(scanner *sc, sqlite3_stmt *st, int64_t series, row_fn fn, void *ctx,
		     strobe_err *err)
{
	int rc, r = 0;
	const strobe_store_opts *o = &sc->s->o;
	const store_series *se = &sc->s->series[series - 1];
	bool filter = false;
	for (size_t i = 0; sc->sel && i < sc->sel->n; i++)
		filter |= deferred(&sc->sel->m[i], se);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t np;
		if (filter) {
			bool bad = false;
			if (!point_ok(sc->sel, se, sqlite3_column_blob(st, 2),
				      (size_t)sqlite3_column_bytes(st, 2), &bad)) {
				if (bad) {
					r = strobe_errf(err, -EIO,
							"store: the sample labels of a point of "
							"series %lld are corrupt",
							(long long)series);
					break;
				}
				continue;
			}
		}
		sc->rows++;
		sc->bytes += (uint64_t)sqlite3_column_bytes(st, 1);
		if (o->max_query_points && sc->rows > o->max_query_points) {
			r = strobe_errf(err, -EDQUOT,
					"limit max_query_profiles: the query reads more than %llu "
					"stored profiles; narrow the selector or the window",
					(unsigned long long)o->max_query_points);
			break;
		}
		if (o->max_query_bytes && sc->bytes > o->max_query_bytes) {
			r = strobe_errf(err, -EDQUOT,
					"limit max_query_bytes: the query reads more than %llu bytes "
					"of stored profiles; narrow the selector or the window",
					(unsigned long long)o->max_query_bytes);
			break;
		}
		r = store_blob_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
				      sc->s->sym->stacks.n, &sc->pairs, &sc->cap, &np);
		if (r < 0) {
			r = strobe_errf(err, -EIO, "store: a stored point of series %lld is corrupt",
					(long long)series);
			break;
		}
		if ((r = fn(ctx, sqlite3_column_int64(st, 0), sc->pairs, np)) < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(sc->s, err, "reading points");
	sqlite3_reset(st);
	return r;
}

static int scan_rows(scanner *sc, int64_t series, int level, int64_t a, int64_t b, int mask,
		     row_fn fn, void *ctx, strobe_err *err)
{
	/* The raw rows a roll-up does not cover yet come from the partial index of such rows:
	 * the table's index would visit every raw point under the roll-up to test its bit. */
	sqlite3_stmt *st = mask ? sc->unrolled : sc->st;
	sqlite3_bind_int64(st, 1, series);
	sqlite3_bind_int(st, 2, level);
	sqlite3_bind_int64(st, 3, a);
	sqlite3_bind_int64(st, 4, b);
	sqlite3_bind_int(st, 5, mask);
	return scan_stmt(sc, st, series, fn, ctx, err);
}

/* The points of one series that the span index gave (store/spans.c), read by row id: raw
 * points only, which roll-ups never replace, so nothing is counted twice or missed. */
static int scan_span(scanner *sc, const store_span_plan_t *sp, int64_t series, row_fn fn,
		     void *ctx, strobe_err *err)
{
	if (!sc->byid && sqlite3_prepare_v2(sc->s->db,
					    "SELECT n, data, slabels FROM points WHERE rowid=?1 AND "
					    "level=0",
					    -1, &sc->byid, NULL) != SQLITE_OK)
		return store_sqlerr(sc->s, err, "reading points");
	size_t lo = 0, hi = sp->n; /* the first hit of the series */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sp->hit[mid].series < series)
			lo = mid + 1;
		else
			hi = mid;
	}
	int r = 0;
	for (size_t i = lo; r == 0 && i < sp->n && sp->hit[i].series == series; i++) {
		sqlite3_bind_int64(sc->byid, 1, sp->hit[i].point);
		r = scan_stmt(sc, sc->byid, series, fn, ctx, err);
	}
	return r;
}

/* Every row of one series that together cover [a, b) exactly once. */
static int scan_window(scanner *sc, int64_t series, int64_t a, int64_t b, row_fn fn, void *ctx,
		       strobe_err *err)
{
	seg segs[2 * STORE_LEVELS + 1];
	size_t ns = 0;
	plan(a, b, sc->s->use_rollups ? STORE_LEVELS - 1 : 0, segs, &ns);
	for (size_t i = 0; i < ns; i++) {
		int r;
		if (segs[i].level == 0) {
			r = scan_rows(sc, series, 0, segs[i].a, segs[i].b, 0, fn, ctx, err);
		} else {
			r = scan_rows(sc, series, segs[i].level, segs[i].a, segs[i].b, 0, fn, ctx, err);
			if (r == 0)
				r = scan_rows(sc, series, 0, segs[i].a, segs[i].b,
					      1 << (segs[i].level - 1), fn, ctx, err);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int scanner_init(scanner *sc, strobe_store *s, const strobe_selector *sel,
			strobe_err *err)
{
	memset(sc, 0, sizeof(*sc));
	sc->s = s;
	sc->sel = sel;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT n, data, slabels FROM points WHERE series=?1 AND level=?2 AND "
			       "time>=?3 AND time<?4 AND (rolled & ?5)=0",
			       -1, &sc->st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT n, data, slabels FROM points INDEXED BY points_unrolled WHERE "
			       "series=?1 AND level=0 AND ?2=0 AND rolled<>" STORE_ROLLED_ALL " AND "
			       "time>=?3 AND time<?4 AND (rolled & ?5)=0",
			       -1, &sc->unrolled, NULL) != SQLITE_OK)
		return store_sqlerr(s, err, "reading points");
	return 0;
}

static void scanner_free(scanner *sc)
{
	sqlite3_finalize(sc->st);
	sqlite3_finalize(sc->unrolled);
	sqlite3_finalize(sc->byid);
	free(sc->pairs);
}

/* ---- merged profile -------------------------------------------------------------------------- */

/* An accumulator over stack ids, sized to the stacks a query touches rather than to every stack
 * of the store (a query of one small service in a store of millions of stacks used to allocate
 * and clear arrays for all of them, twice): values dense in the order stacks were first seen,
 * found through an open-addressing table of (stack + 1, index). The order is kept so that the
 * merged profile comes out in the same order as before. */
typedef struct acc_slot {
	uint32_t key; /* stack + 1; 0 = empty */
	uint32_t idx; /* into touched[] and v[] */
} acc_slot;

typedef struct acc {
	acc_slot *slots;
	uint32_t mask;      /* nslots - 1 */
	uint32_t *touched;  /* stacks in the order first seen */
	int64_t *v;         /* v[i]: the sum of touched[i] */
	size_t nt, cap;
	bool oom;           /* a growth failed: the query fails */
} acc;

static int acc_init(acc *a)
{
	memset(a, 0, sizeof(*a));
	a->cap = 1024;
	a->slots = calloc(2 * a->cap, sizeof(*a->slots));
	a->mask = (uint32_t)(2 * a->cap - 1);
	a->touched = malloc(a->cap * sizeof(*a->touched));
	a->v = malloc(a->cap * sizeof(*a->v));
	return a->slots && a->touched && a->v ? 0 : -ENOMEM;
}

static void acc_free(acc *a)
{
	free(a->slots);
	free(a->touched);
	free(a->v);
}

static inline uint32_t acc_hash(uint32_t stack)
{
	return (stack * 0x9e3779b1u) ^ (stack >> 16);
}

/* Twice the room, the table rebuilt from touched[]. */
static int acc_grow(acc *a)
{
	size_t nc = a->cap * 2;
	acc_slot *ns = calloc(2 * nc, sizeof(*ns));
	uint32_t *nt = realloc(a->touched, nc * sizeof(*nt));
	if (nt)
		a->touched = nt;
	int64_t *nv = realloc(a->v, nc * sizeof(*nv));
	if (nv)
		a->v = nv;
	if (!ns || !nt || !nv) {
		free(ns);
		return -ENOMEM;
	}
	uint32_t mask = (uint32_t)(2 * nc - 1);
	for (size_t i = 0; i < a->nt; i++) {
		uint32_t h = acc_hash(a->touched[i]) & mask;
		while (ns[h].key)
			h = (h + 1) & mask;
		ns[h] = (acc_slot){a->touched[i] + 1, (uint32_t)i};
	}
	free(a->slots);
	a->slots = ns;
	a->mask = mask;
	a->cap = nc;
	return 0;
}

static inline void acc_add(acc *a, uint32_t stack, int64_t v)
{
	uint32_t h = acc_hash(stack) & a->mask;
	for (;;) {
		acc_slot *sl = &a->slots[h];
		if (sl->key == stack + 1) {
			a->v[sl->idx] += v;
			return;
		}
		if (!sl->key)
			break;
		h = (h + 1) & a->mask;
	}
	if (a->nt == a->cap) {
		if (acc_grow(a) < 0) {
			a->oom = true;
			return;
		}
		h = acc_hash(stack) & a->mask;
		while (a->slots[h].key)
			h = (h + 1) & a->mask;
	}
	a->slots[h] = (acc_slot){stack + 1, (uint32_t)a->nt};
	a->touched[a->nt] = stack;
	a->v[a->nt++] = v;
}

static void acc_clear(acc *a)
{
	memset(a->slots, 0, ((size_t)a->mask + 1) * sizeof(*a->slots));
	a->nt = 0;
}

/* The mean of a gauge over `count` points, rounded half away from zero. */
static int64_t mean(int64_t sum, int64_t count)
{
	return count ? (int64_t)llround((double)sum / (double)count) : 0;
}

typedef struct qctx {
	acc *dst;
	int64_t count;
} qctx;

static int q_row(void *ctx, int64_t n, const store_pair *p, size_t np)
{
	qctx *q = ctx;
	q->count += n;
	for (size_t i = 0; i < np; i++)
		acc_add(q->dst, p[i].stack, p[i].value);
	return 0;
}

/* "name:st:su:pt:pu" -> its five parts in buf. */
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

/* The merged profile of q; with `given`, of those points alone (one profile by its id). */
static int query_merged(strobe_store *s, const strobe_query *q, const store_span_plan_t *given,
			strobe_profile **out, strobe_err *err)
{
	STORE_BACKEND_CALL(s, query, q, out, err);
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
	if (r < 0) {
		strobe_profile_free(p);
		return r;
	}
	p->period_type.type = strobe_str_intern0(p, part[3]);
	p->period_type.unit = strobe_str_intern0(p, part[4]);
	p->time_nanos = q->from_ns;
	p->duration_nanos = q->to_ns - q->from_ns;
	p->default_type = 0;

	pthread_mutex_lock(&s->mu);
	size_t *idx = NULL, nidx = 0;
	acc tot = {0}, ser = {0};
	scanner sc = {0};
	store_remap m = {0};
	store_span_plan_t sp = {0};
	r = store_match_series(s, q->tenant, q->sel, &idx, &nidx, err);
	if (r == 0)
		r = scanner_init(&sc, s, q->sel, err);
	if (r == 0 && nidx && !given)
		r = store_span_plan(s, q->sel, q->from_ns, q->to_ns, &sp, err);
	if (r == 0 && (acc_init(&tot) < 0 || acc_init(&ser) < 0))
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		store_series *se = &s->series[idx[i]];
		if (se->period > p->period)
			p->period = se->period;
		/* Counters go straight into the total; a gauge is summed per series first and
		 * its mean over the window added. */
		qctx c = {se->gauge ? &ser : &tot, 0};
		if (given)
			r = scan_span(&sc, given, se->id, q_row, &c, err);
		else if (sp.active && !has_label(se->labels, se->nlabels, sp.name))
			r = scan_span(&sc, &sp, se->id, q_row, &c, err);
		else
			r = scan_window(&sc, se->id, q->from_ns, q->to_ns, q_row, &c, err);
		if (r == 0 && se->gauge) {
			for (size_t k = 0; k < ser.nt; k++)
				acc_add(&tot, ser.touched[k], mean(ser.v[k], c.count));
			acc_clear(&ser);
		}
		if (tot.oom || ser.oom)
			r = -ENOMEM;
	}
	if (r == 0 && store_remap_init(&m, s->sym) < 0)
		r = -ENOMEM;
	for (size_t k = 0; r == 0 && k < tot.nt; k++) {
		uint32_t st = tot.touched[k];
		int64_t v = tot.v[k];
		if (!v)
			continue;
		uint32_t os = store_map_stack(p, s->sym, &m, st);
		if (os == UINT32_MAX)
			r = -ENOMEM;
		else
			r = strobe_sample_add(p, os, 0, &v);
	}
	store_remap_free(&m);
	scanner_free(&sc);
	store_span_plan_free(&sp);
	acc_free(&tot);
	acc_free(&ser);
	free(idx);
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		strobe_profile_free(p);
		if (r == -ENOMEM && err && !err->msg[0])
			strobe_errf(err, r, "out of memory");
		return r;
	}
	*out = p;
	return 0;
}

int strobe_store_query(strobe_store *s, const strobe_query *q, strobe_profile **out,
		       strobe_err *err)
{
	return query_merged(s, q, NULL, out, err);
}

int strobe_store_profile_by_id(strobe_store *s, const strobe_query *q, int64_t id,
			       strobe_profile **out, strobe_err *err)
{
	*out = NULL;
	STORE_BACKEND_CALL(s, profile_by_id, q, id, out, err);
	sqlite3_stmt *st;
	int64_t series = 0;
	pthread_mutex_lock(&s->mu);
	int r = sqlite3_prepare_v2(s->db, "SELECT series FROM points WHERE rowid=?1 AND level=0", -1,
				   &st, NULL) == SQLITE_OK
			? 0
			: store_sqlerr(s, err, "reading points");
	if (r == 0) {
		sqlite3_bind_int64(st, 1, id);
		if (sqlite3_step(st) == SQLITE_ROW)
			series = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	/* Another tenant's profile, or one the selector does not match, is as absent as a
	 * missing one: the answer must not tell them apart. */
	if (r == 0 && (series < 1 || (size_t)series > s->nseries ||
		       !series_ok(&s->series[series - 1], q->tenant, q->sel)))
		r = strobe_errf(err, -ENOENT, "no stored profile %lld matches the selector",
				(long long)id);
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		return r;
	store_span_hit h = {series, id};
	store_span_plan_t one = {.active = true, .hit = &h, .n = 1};
	return query_merged(s, q, &one, out, err);
}

bool store_point_passes(const strobe_selector *sel, const store_series *se, const void *slabels,
			size_t len, bool *bad)
{
	bool filter = false;
	for (size_t i = 0; sel && i < sel->n; i++)
		filter |= deferred(&sel->m[i], se);
	return !filter || point_ok(sel, se, slabels, len, bad);
}

bool store_series_ok(const store_series *se, const char *tenant, const strobe_selector *sel)
{
	return series_ok(se, tenant, sel);
}

/* ---- totals per step ------------------------------------------------------------------------- */

#define RANGE_MAX_STEPS 11000 /* Prometheus's limit on points per series */

typedef struct rctx {
	int64_t sum, count;
	const int8_t *has; /* per stack: contains the function (1) or not (0); NULL = all */
} rctx;

static int r_row(void *ctx, int64_t n, const store_pair *p, size_t np)
{
	rctx *c = ctx;
	c->count += n;
	for (size_t i = 0; i < np; i++)
		if (!c->has || c->has[p[i].stack])
			c->sum += p[i].value;
	return 0;
}

/* has[stack] = whether any frame of the stack (inlined ones included) is function `name`. */
static int8_t *stacks_with_function(const strobe_profile *p, const char *name)
{
	uint32_t sid = strobe_itab_find(&p->strings, name, strlen(name) + 1);
	uint8_t *fn = calloc(p->functions.n, 1);
	uint8_t *loc = calloc(p->locations.n, 1);
	int8_t *has = calloc(p->stacks.n, 1);
	if (!fn || !loc || !has) {
		free(fn);
		free(loc);
		free(has);
		return NULL;
	}
	if (sid != UINT32_MAX) {
		for (uint32_t i = 1; i < p->functions.n; i++)
			fn[i] = strobe_function_get(p, i)->name == sid;
		for (uint32_t i = 1; i < p->locations.n; i++) {
			const strobe_location *l = strobe_location_get(p, i);
			for (uint32_t k = 0; k < l->nline && !loc[i]; k++)
				loc[i] = fn[l->line[k].function];
		}
		/* A parent's id is always smaller than its child's, so one pass in id order
		 * settles every stack. */
		for (uint32_t i = 1; i < p->stacks.n; i++) {
			const strobe_stack_node *n = strobe_stack_get(p, i);
			has[i] = (int8_t)(loc[n->location] || has[n->parent]);
		}
	}
	free(fn);
	free(loc);
	return has;
}

/* ---- totals per step from the totals table --------------------------------------------------- */

/* A range without a function filter needs only each point's total, which ingest keeps in the
 * totals table (store_impl.h) per point and per minute and hour bucket: a bucket whose whole
 * span lies inside one step of the window is read as one row, and a minute that a step boundary
 * (or the window's edge) cuts is split from its own row's list of points; only a minute without
 * a usable list (written before the lists, re-summed by retention, or too busy to keep one) has
 * its points' rows read one by one. Each point is counted once, through the coarsest bucket
 * that fits, so the sums are those of decoding every profile (tested), at a cost of one row per
 * minute of the window, whatever its alignment, instead of every profile of the window. */
typedef struct tplan {
	int64_t from, to, step;
} tplan;

/* Whether the bucket [t, t + w) is inside the window and inside one step. */
static bool tp_usable(const tplan *p, int64_t t, int64_t w)
{
	return t >= p->from && t + w <= p->to &&
	       (t - p->from) / p->step == (t + w - 1 - p->from) / p->step;
}

/* The group of a series with labels l in a range answer (its group_by labels' values, "" without
 * group_by): its index in out->g in *g, a new zeroed group added the first time. The key is
 * the values each followed by its NUL (a value holds none), so no two combinations share one.
 * -ENOMEM. Shared with the ClickHouse backend. */
int store_range_group(strobe_itab *groups, const strobe_labelpair *l, size_t nl,
		      const char *group_by, strobe_range_result *out, uint32_t *g)
{
	char kb[512], *key = kb;
	size_t klen = 0, nby = 0, cap = sizeof(kb);
	const char *vals[64];
	for (const char *p = group_by; p && *p && nby < 64;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		const char *v = "";
		for (size_t i = 0; i < nl; i++)
			if (strlen(l[i].name) == n && memcmp(l[i].name, p, n) == 0)
				v = l[i].value;
		vals[nby++] = v;
		size_t vl = strlen(v) + 1;
		if (klen + vl > cap) {
			size_t nc = 2 * (klen + vl);
			char *nk = key == kb ? malloc(nc) : realloc(key, nc);
			if (!nk) {
				if (key != kb)
					free(key);
				return -ENOMEM;
			}
			if (key == kb)
				memcpy(nk, kb, klen);
			key = nk;
			cap = nc;
		}
		memcpy(key + klen, v, vl);
		klen += vl;
		p = e ? e + 1 : p + n;
	}
	if (!nby)
		key[klen++] = 0; /* no grouping: the one group "" */
	bool added;
	int r = strobe_itab_intern(groups, key, klen, g, &added);
	if (key != kb)
		free(key);
	if (r < 0 || !added)
		return r;
	strobe_range_group *ng = realloc(out->g, (out->n + 1) * sizeof(*ng));
	if (!ng)
		return -ENOMEM;
	out->g = ng;
	strobe_range_group gr = {.value = strdup(nby ? vals[0] : ""),
				 .values = calloc(out->nsteps ? out->nsteps : 1, sizeof(int64_t))};
	bool okm = gr.value && gr.values;
	if (okm && nby > 1) {
		okm = (gr.by = calloc(nby, sizeof(*gr.by))) != NULL;
		for (size_t i = 0; okm && i < nby; i++, gr.nby++)
			okm = (gr.by[i] = strdup(vals[i])) != NULL;
	}
	out->g[out->n++] = gr; /* freed with the result even when incomplete */
	return okm ? 0 : -ENOMEM;
}

static int range_group_of(strobe_itab *groups, const store_series *se, const char *group_by,
			  strobe_range_result *out, uint32_t *g)
{
	return store_range_group(groups, se->labels, se->nlabels, group_by, out, g);
}

typedef struct tpt {
	int64_t t, n, total;
} tpt;

/* One series' sums and counts per step, and the rows read against the cost cap. */
typedef struct tsum {
	const tplan *p;
	int64_t *sum, *cnt;
	uint64_t rows, cap; /* cap: rows allowed, 0 = none */
	int64_t *fall;      /* cut minutes to read point by point */
	size_t nfall;
	int64_t *hour; /* hours without a usable list, to read minute by minute (ascending) */
	size_t nhour, caphour;
	bool use_hours; /* read the hour rows first (else the minutes, as an older store's) */
	tpt *ent;       /* one list's entries, decoded */
	size_t capent;
} tsum;

static int ts_add(tsum *ts, int64_t t, int64_t n, int64_t total, strobe_err *err)
{
	/* The cost cap: a totals row is a few dozen bytes read without decoding, so 16 of them
	 * count as one stored profile. */
	if (ts->cap && ++ts->rows > ts->cap)
		return strobe_errf(err, -EDQUOT,
				   "limit max_query_profiles: the range reads more than %llu stored "
				   "profiles' worth of totals; narrow the selector or the window, or "
				   "use a larger step",
				   (unsigned long long)(ts->cap / 16));
	if (t < ts->p->from || t >= ts->p->to)
		return 0;
	size_t k = (size_t)((t - ts->p->from) / ts->p->step);
	ts->cnt[k] += n;
	ts->sum[k] = (int64_t)((uint64_t)ts->sum[k] + (uint64_t)total);
	return 0;
}

/* A cut minute or hour (start m, width w, row's n and total) from its list of points: 1 when
 * the list was usable and added, 0 when it is absent, given up or does not add up to the row
 * (read the minutes, or the points). */
static int ts_split(tsum *ts, int64_t m, int64_t w, int64_t n, int64_t total, const uint8_t *pts,
		    size_t len, strobe_err *err)
{
	if (!pts || !len)
		return 0;
	/* Decoded once into ts->ent (an entry takes at least 3 bytes), checked, then added. */
	size_t need = len / 3 + 1, ne = 0;
	if (need > ts->capent) {
		tpt *nv = realloc(ts->ent, need * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		ts->ent = nv;
		ts->capent = need;
	}
	int64_t sn = 0, st = 0;
	for (size_t pos = 0; pos < len; ne++) {
		tpt *e = &ts->ent[ne];
		if (store_pts_next(pts, len, &pos, &e->t, &e->n, &e->total) < 0 || e->t < 0 ||
		    e->t >= w)
			return 0;
		sn += e->n;
		st = (int64_t)((uint64_t)st + (uint64_t)e->total);
	}
	if (sn != n || st != total)
		return 0;
	for (size_t i = 0; i < ne; i++) {
		int r = ts_add(ts, m + ts->ent[i].t, ts->ent[i].n, ts->ent[i].total, err);
		if (r < 0)
			return r;
	}
	return 1;
}

static int ts_rows(strobe_store *s, sqlite3_stmt *st, tsum *ts, int level, strobe_err *err)
{
	int64_t wm = store_level_width[1], wh = store_level_width[2];
	int rc, r = 0;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t t = sqlite3_column_int64(st, 0), n = sqlite3_column_int64(st, 1);
		int64_t total = sqlite3_column_int64(st, 2);
		const uint8_t *pts =
			sqlite3_column_type(st, 3) == SQLITE_BLOB ? sqlite3_column_blob(st, 3) : NULL;
		size_t plen = (size_t)sqlite3_column_bytes(st, 3);
		if (level == 0) {
			r = ts_add(ts, t, n, total, err);
			continue;
		}
		if (level == 2) {
			/* An hour inside one step is one row; one that a step boundary or the
			 * window's edge cuts is split from its list; the rest (no usable list)
			 * are read from their minutes, after this scan. */
			if (tp_usable(ts->p, t, wh)) {
				r = ts_add(ts, t, n, total, err);
				continue;
			}
			if (!ts->use_hours)
				continue; /* its minutes are read by the caller */
			int used = ts_split(ts, t, wh, n, total, pts, plen, err);
			if (used < 0)
				r = used;
			if (r < 0 || used)
				continue;
			if (ts->nhour == ts->caphour) {
				size_t nc = ts->caphour ? 2 * ts->caphour : 32;
				int64_t *nh = realloc(ts->hour, nc * sizeof(*nh));
				if (!nh)
					return -ENOMEM;
				ts->hour = nh;
				ts->caphour = nc;
			}
			ts->hour[ts->nhour++] = t;
			continue;
		}
		if (tp_usable(ts->p, t - (((t % wh) + wh) % wh), wh))
			continue; /* counted with its hour */
		if (tp_usable(ts->p, t, wm)) {
			r = ts_add(ts, t, n, total, err);
			continue;
		}
		int used = ts_split(ts, t, wm, n, total, pts, plen, err);
		if (used != 0) {
			r = used < 0 ? used : 0;
			continue;
		}
		/* No usable list: the minute's points, from their own rows, after this scan
		 * (a statement of its own, so that the scan's cursor is not disturbed). */
		int64_t *nf = realloc(ts->fall, (ts->nfall + 1) * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		ts->fall = nf;
		ts->fall[ts->nfall++] = t;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = store_sqlerr(s, err, "range");
	sqlite3_reset(st);
	return r;
}

static int ts_scan(strobe_store *s, sqlite3_stmt *bk, tsum *ts, int64_t key, int level,
		   int64_t a, int64_t b, strobe_err *err)
{
	sqlite3_bind_int64(bk, 1, key);
	sqlite3_bind_int(bk, 2, level);
	sqlite3_bind_int64(bk, 3, a);
	sqlite3_bind_int64(bk, 4, b);
	return ts_rows(s, bk, ts, level, err);
}

/* One key's (a series' or a group's, by the statement bk) sums and counts per step into
 * ts->sum and ts->cnt: the hours that meet the window (whole, or split from their lists), then
 * the minutes of the hours without a usable list (runs of adjacent ones read by one scan),
 * then the points of the cut minutes without a usable list. */
static int ts_key(strobe_store *s, sqlite3_stmt *bk, tsum *ts, int64_t key, size_t nsteps,
		  strobe_err *err)
{
	const tplan *p = ts->p;
	int64_t wm = store_level_width[1], wh = store_level_width[2];
	int64_t mfrom = p->from - (((p->from % wm) + wm) % wm);
	int64_t hfrom = p->from - (((p->from % wh) + wh) % wh);
	memset(ts->sum, 0, nsteps * sizeof(*ts->sum));
	memset(ts->cnt, 0, nsteps * sizeof(*ts->cnt));
	ts->nfall = ts->nhour = 0;
	/* Without the lists (a comparison), as before them: the hours inside one step, then
	 * every minute of the window but theirs. */
	int r = ts->use_hours	     ? ts_scan(s, bk, ts, key, 2, hfrom, p->to, err)
		: wh <= p->step ? ts_scan(s, bk, ts, key, 2, p->from, p->to, err)
				: 0;
	if (r == 0 && !ts->use_hours)
		r = ts_scan(s, bk, ts, key, 1, mfrom, p->to, err);
	for (size_t k = 0; r == 0 && k < ts->nhour;) {
		size_t e = k + 1;
		while (e < ts->nhour && ts->hour[e] == ts->hour[e - 1] + wh)
			e++;
		int64_t a = ts->hour[k] > mfrom ? ts->hour[k] : mfrom, b = ts->hour[e - 1] + wh;
		r = ts_scan(s, bk, ts, key, 1, a, b < p->to ? b : p->to, err);
		k = e;
	}
	for (size_t k = 0; r == 0 && k < ts->nfall; k++)
		r = ts_scan(s, bk, ts, key, 0, ts->fall[k], ts->fall[k] + wm, err);
	return r;
}

/* Which group totals (groups.c) answer a range of the series idx[0..nidx): the index of the
 * roll-up label in store_group_labels, or -1 for the series' own totals. They do when every
 * matcher of the selector names that label (the "all series" groups: no matcher), the group-by
 * is that label or nothing, the type is given, and no matched series is a gauge (a gauge's
 * range is a mean per series, and gauges are left out of the groups): then the series a group
 * holds are exactly the matched series with its value, and the sums are the same. */
static int range_group_label(strobe_store *s, const strobe_query *q, const char *group_by,
			     const size_t *idx, size_t nidx)
{
	if (!s->use_group_totals || !q->sel || !q->sel->type)
		return -1;
	bool by = group_by && *group_by;
	int k;
	for (k = 0; k < STORE_NGROUPS; k++) {
		const char *l = store_group_labels[k];
		bool ok = *l ? !by || strcmp(group_by, l) == 0 : !by && q->sel->n == 0;
		for (size_t i = 0; ok && i < q->sel->n; i++)
			ok = strcmp(q->sel->m[i].name, l) == 0;
		if (ok)
			break;
	}
	if (k == STORE_NGROUPS)
		return -1;
	for (size_t i = 0; i < nidx; i++)
		if (s->series[idx[i]].gauge)
			return -1;
	return k;
}

/* The range from the group totals of label store_group_labels[k]: the answer's groups made
 * from the matched series in their order (as range_totals makes them, so that even the groups
 * of series without data in the window are there, in the same order), then each distinct
 * value's group rows added into its answer group. */
static int range_groups(strobe_store *s, const strobe_query *q, int k, int64_t step_ns,
			size_t nsteps, const size_t *idx, size_t nidx, const char *group_by,
			strobe_range_result *out, strobe_err *err)
{
	tplan p = {q->from_ns, q->to_ns, step_ns};
	sqlite3_stmt *bk = NULL;
	strobe_itab groups = {0}, seen = {0};
	int64_t *sum = calloc(nsteps, sizeof(*sum)), *cnt = calloc(nsteps, sizeof(*cnt));
	uint64_t mq = s->o.max_query_points;
	tsum ts = {&p, sum, cnt, 0, mq > UINT64_MAX / 16 ? 0 : mq * 16, NULL, 0, NULL, 0, 0,
		   s->use_hour_lists, NULL, 0};
	const char *label = store_group_labels[k];
	int r = sum && cnt ? 0 : -ENOMEM;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT time, n, total, pts FROM gtotals WHERE grp=?1 AND "
					 "level=?2 AND time>=?3 AND time<?4",
					 -1, &bk, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "range");
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		store_series *se = &s->series[idx[i]];
		uint32_t g, v;
		bool added;
		if ((r = range_group_of(&groups, se, group_by, out, &g)) < 0)
			break;
		const char *val = *label ? label_value(se->labels, se->nlabels, label) : "";
		if (strobe_itab_intern(&seen, val, strlen(val) + 1, &v, &added) < 0) {
			r = -ENOMEM;
			break;
		}
		if (!added)
			continue;
		int64_t id = store_group_find(s, q->tenant, se->type, label, val);
		if (id < 0) {
			r = (int)id;
			break;
		}
		if (!id)
			continue; /* nothing of it was ever stored */
		if ((r = ts_key(s, bk, &ts, id, nsteps, err)) < 0)
			break;
		for (size_t j = 0; j < nsteps; j++)
			out->g[g].values[j] += sum[j];
	}
	sqlite3_finalize(bk);
	free(ts.fall);
	free(ts.hour);
	free(ts.ent);
	free(sum);
	free(cnt);
	strobe_itab_free(&groups);
	strobe_itab_free(&seen);
	return r;
}

static int range_totals(strobe_store *s, const strobe_query *q, int64_t step_ns, size_t nsteps,
			const size_t *idx, size_t nidx, const char *group_by,
			strobe_range_result *out, strobe_err *err)
{
	int k = range_group_label(s, q, group_by, idx, nidx);
	if (k >= 0)
		return range_groups(s, q, k, step_ns, nsteps, idx, nidx, group_by, out, err);
	tplan p = {q->from_ns, q->to_ns, step_ns};
	sqlite3_stmt *bk = NULL;
	strobe_itab groups = {0};
	int64_t *sum = calloc(nsteps, sizeof(*sum)), *cnt = calloc(nsteps, sizeof(*cnt));
	uint64_t mq = s->o.max_query_points;
	tsum ts = {&p, sum, cnt, 0, mq > UINT64_MAX / 16 ? 0 : mq * 16, NULL, 0, NULL, 0, 0,
		   s->use_hour_lists, NULL, 0};
	int r = sum && cnt ? 0 : -ENOMEM;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT time, n, total, pts FROM totals WHERE series=?1 AND "
					 "level=?2 AND time>=?3 AND time<?4",
					 -1, &bk, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "range");
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		store_series *se = &s->series[idx[i]];
		uint32_t g;
		if ((r = range_group_of(&groups, se, group_by, out, &g)) < 0)
			break;
		if ((r = ts_key(s, bk, &ts, se->id, nsteps, err)) < 0)
			break;
		for (size_t k2 = 0; k2 < nsteps; k2++)
			out->g[g].values[k2] += se->gauge ? mean(sum[k2], cnt[k2]) : sum[k2];
	}
	sqlite3_finalize(bk);
	free(ts.fall);
	free(ts.hour);
	free(ts.ent);
	free(sum);
	free(cnt);
	strobe_itab_free(&groups);
	return r;
}

int strobe_store_range(strobe_store *s, const strobe_query *q, int64_t step_ns,
		       const char *group_by, const char *function, strobe_range_result *out,
		       strobe_err *err)
{
	STORE_BACKEND_CALL(s, range, q, step_ns, group_by, function, out, err);
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
	out->nsteps = (size_t)nsteps;
	pthread_mutex_lock(&s->mu);
	size_t *idx = NULL, nidx = 0;
	scanner sc = {0};
	int8_t *has = NULL;
	strobe_itab groups = {0};
	int r = store_match_series(s, q->tenant, q->sel, &idx, &nidx, err);
	/* The totals hold whole points: a selector with a matcher on sample labels (pid,
	 * comm...) that some series leaves to its points needs the points themselves. */
	bool by_point = false;
	for (size_t i = 0; r == 0 && i < nidx && !by_point; i++)
		for (size_t k = 0; q->sel && k < q->sel->n; k++)
			by_point |= deferred(&q->sel->m[k], &s->series[idx[i]]);
	if (r == 0 && !function && !by_point && s->use_totals) {
		r = range_totals(s, q, step_ns, out->nsteps, idx, nidx, group_by, out, err);
		nidx = 0; /* done */
	}
	if (r == 0 && nidx)
		r = scanner_init(&sc, s, q->sel, err);
	if (r == 0 && function && !(has = stacks_with_function(s->sym, function)))
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		store_series *se = &s->series[idx[i]];
		uint32_t g;
		if ((r = range_group_of(&groups, se, group_by, out, &g)) < 0)
			break;
		for (int64_t k = 0; r == 0 && k < nsteps; k++) {
			int64_t a = q->from_ns + k * step_ns, b = a + step_ns;
			if (b > q->to_ns)
				b = q->to_ns;
			rctx c = {0, 0, has};
			r = scan_window(&sc, se->id, a, b, r_row, &c, err);
			out->g[g].values[k] += se->gauge ? mean(c.sum, c.count) : c.sum;
		}
	}
	scanner_free(&sc);
	free(has);
	free(idx);
	strobe_itab_free(&groups);
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		strobe_range_result_free(out);
	return r;
}

void strobe_range_result_free(strobe_range_result *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->g[i].value);
		free(r->g[i].values);
		for (size_t k = 0; k < r->g[i].nby; k++)
			free(r->g[i].by[k]);
		free(r->g[i].by);
	}
	free(r->g);
	memset(r, 0, sizeof(*r));
}

/* ---- label listings -------------------------------------------------------------------------- */

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

static void strv_sort_uniq(strv *s)
{
	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), cmp_str);
	size_t w = 1;
	for (size_t i = 1; i < s->n; i++) {
		if (strcmp(s->v[i], s->v[w - 1]) == 0)
			free(s->v[i]);
		else
			s->v[w++] = s->v[i];
	}
	s->n = w;
}

void strobe_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

enum { L_NAMES, L_VALUES, L_TYPES };

static int listing(strobe_store *s, const strobe_query *q, int what, const char *name,
		   char ***out, size_t *n, strobe_err *err)
{
	*out = NULL;
	*n = 0;
	strv v = {0};
	pthread_mutex_lock(&s->mu);
	size_t *idx = NULL, nidx = 0;
	sqlite3_stmt *st = NULL;
	int r = store_match_series(s, q->tenant, q->sel, &idx, &nidx, err);
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT 1 FROM points WHERE series=? AND level=0 AND "
					 "time>=? AND time<? UNION ALL SELECT 1 FROM points WHERE "
					 "series=?1 AND level>0 AND time>=?2 AND time<?3 LIMIT 1",
					 -1, &st, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "listing");
	/* The distinct sample labels of a series' points in the window, for the names and values
	 * of pid, comm... that ride on the points, and for the selectors that match them. */
	sqlite3_stmt *sl = NULL;
	if (r == 0 && sqlite3_prepare_v2(s->db,
					 "SELECT DISTINCT slabels FROM points WHERE series=?1 AND "
					 "time>=?2 AND time<?3 LIMIT " STORE_SLABELS_LISTED,
					 -1, &sl, NULL) != SQLITE_OK)
		r = store_sqlerr(s, err, "listing");
	for (size_t i = 0; r == 0 && i < nidx; i++) {
		store_series *se = &s->series[idx[i]];
		bool filter = false;
		for (size_t k = 0; q->sel && k < q->sel->n; k++)
			filter |= deferred(&q->sel->m[k], se);
		if (filter || what == L_NAMES ||
		    (what == L_VALUES && strobe_sample_label_name(name) &&
		     !has_label(se->labels, se->nlabels, name))) {
			sqlite3_bind_int64(sl, 1, se->id);
			sqlite3_bind_int64(sl, 2, q->from_ns);
			sqlite3_bind_int64(sl, 3, q->to_ns);
			bool found = false;
			int rc;
			while (r == 0 && (rc = sqlite3_step(sl)) == SQLITE_ROW) {
				const void *b = sqlite3_column_blob(sl, 0);
				size_t len = (size_t)sqlite3_column_bytes(sl, 0);
				bool bad = false;
				if (filter && !point_ok(q->sel, se, b, len, &bad) && !bad)
					continue;
				strobe_labelpair l[STROBE_SAMPLE_LABELS_MAX];
				int nl = store_slabels_decode(b, len, l, STROBE_SAMPLE_LABELS_MAX);
				if (bad || nl < 0) {
					r = strobe_errf(err, -EIO, "store: the sample labels of a "
								   "point of series %lld are corrupt",
							(long long)se->id);
					break;
				}
				found = true;
				for (int k = 0; r == 0 && k < nl; k++)
					if (what == L_NAMES)
						r = strv_add(&v, l[k].name);
					else if (what == L_VALUES && strcmp(l[k].name, name) == 0)
						r = strv_add(&v, l[k].value);
			}
			if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
				r = store_sqlerr(s, err, "listing");
			sqlite3_reset(sl);
			if (r < 0 || !found)
				continue;
		} else {
			sqlite3_bind_int64(st, 1, se->id);
			sqlite3_bind_int64(st, 2, q->from_ns);
			sqlite3_bind_int64(st, 3, q->to_ns);
			int rc = sqlite3_step(st);
			sqlite3_reset(st);
			if (rc == SQLITE_DONE)
				continue;
			if (rc != SQLITE_ROW) {
				r = store_sqlerr(s, err, "listing");
				break;
			}
		}
		if (what == L_TYPES) {
			r = strv_add(&v, se->type);
			continue;
		}
		for (uint32_t k = 0; r == 0 && k < se->nlabels; k++) {
			if (what == L_NAMES)
				r = strv_add(&v, se->labels[k].name);
			else if (strcmp(se->labels[k].name, name) == 0)
				r = strv_add(&v, se->labels[k].value);
		}
	}
	sqlite3_finalize(st);
	sqlite3_finalize(sl);
	free(idx);
	pthread_mutex_unlock(&s->mu);
	if (r < 0) {
		strobe_strv_free(v.v, v.n);
		return r;
	}
	strv_sort_uniq(&v);
	*out = v.v;
	*n = v.n;
	return 0;
}

int strobe_store_label_names(strobe_store *s, const strobe_query *q, char ***out, size_t *n,
			     strobe_err *err)
{
	STORE_BACKEND_CALL(s, label_names, q, out, n, err);
	return listing(s, q, L_NAMES, NULL, out, n, err);
}

int strobe_store_label_values(strobe_store *s, const strobe_query *q, const char *name,
			      char ***out, size_t *n, strobe_err *err)
{
	STORE_BACKEND_CALL(s, label_values, q, name, out, n, err);
	return listing(s, q, L_VALUES, name, out, n, err);
}

int strobe_store_profile_types(strobe_store *s, const strobe_query *q, char ***out, size_t *n,
			       strobe_err *err)
{
	STORE_BACKEND_CALL(s, profile_types, q, out, n, err);
	return listing(s, q, L_TYPES, NULL, out, n, err);
}
