// SPDX-License-Identifier: Apache-2.0
/*
 * GET /api/v1/leaks: the stacks whose in-use memory grows. The window is cut into steps; each
 * step's merged profile (gauges average over the step per series, then sum across series, as
 * every query does) gives each stack's in-use value then. Per stack, the Theil–Sen slope of
 * value over time (lib/slope.c) is its growth; the Mann–Kendall test says whether it grows at
 * all, Benjamini–Hochberg over every stack tested keeps the count of false leaks at the
 * confidence asked, and Sen's interval must lie above zero. What is left is ranked by growth per
 * hour. A stack is its function names, root first, so the same code path in profiles of
 * different processes, or before and after a restart, is one series.
 *
 * Steps in which no profile of the selection exists are skipped, not taken as zero: a gap in the
 * data is not memory freed. Within a step that has data, a stack it lacks had nothing in use.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "server_impl.h"
#include "strobe/slope.h"
#include "strobe/tree.h"

#define LEAKS_MAX_STEPS 720u
#define LEAKS_DEFAULT_STEPS 60
#define LEAKS_MAX_STACKS 20000u /* distinct stacks over the window */
/* stacks x steps: the doubles held while the steps are read (32 MiB) */
#define LEAKS_MAX_CELLS (4u << 20)
#define LEAKS_MIN_POINTS 4      /* below, no interval or test means anything */

/* Whether the full type is an in-use series: any inuse_* sample type, or a memory profile's
 * bare space/objects (the in-use heap as @datadog/pprof names it). */
static bool inuse_type(const char *t)
{
	const char *a = strchr(t, ':');
	if (!a)
		return false;
	if (strncmp(a + 1, "inuse_", 6) == 0)
		return true;
	return strncmp(t, "memory:", 7) == 0 &&
	       (strncmp(a + 1, "space:", 6) == 0 || strncmp(a + 1, "objects:", 8) == 0);
}

typedef struct leak {
	uint32_t id;
	strobe_slope s;
	double q;
} leak;

static int by_growth(const void *a, const void *b)
{
	const leak *x = a, *y = b;
	return x->s.slope > y->s.slope ? -1 : x->s.slope < y->s.slope ? 1 : (x->id > y->id) - (x->id < y->id);
}

typedef struct acc {
	strobe_itab keys; /* stack key: frame names joined by '\n', root first */
	double **v;       /* v[stack][step] */
	size_t cap, nsteps;
} acc;

static int add_profile(acc *a, strobe_profile *p, size_t k, strobe_err *err)
{
	uint32_t *fr = NULL;
	size_t fcap = 0, nf;
	char *key = NULL;
	size_t kcap = 0;
	int rc = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p) && rc == 0; s++) {
		int64_t val = strobe_sample_values(p, s)[0];
		if (!val)
			continue;
		if ((rc = strobe_stack_frames(p, strobe_sample(p, s)->stack, STROBE_GRAN_FUNCTIONS, &fr,
					      &fcap, &nf)) < 0)
			break;
		size_t len = 0;
		for (size_t i = 0; i < nf; i++) {
			size_t l = strobe_str_len(p, fr[i]);
			if (len + l + 2 > kcap) {
				size_t nc = (len + l + 2) * 2;
				char *k2 = realloc(key, nc);
				if (!k2) {
					rc = -ENOMEM;
					break;
				}
				key = k2;
				kcap = nc;
			}
			if (i)
				key[len++] = '\n';
			memcpy(key + len, strobe_str(p, fr[i]), l);
			len += l;
		}
		if (rc < 0)
			break;
		uint32_t id;
		bool added;
		if ((rc = strobe_itab_intern(&a->keys, key ? key : "", len, &id, &added)) < 0)
			break;
		if (added) {
			if (a->keys.n > LEAKS_MAX_STACKS ||
			    (uint64_t)a->keys.n * a->nsteps > LEAKS_MAX_CELLS) {
				rc = strobe_errf(err, -EDQUOT,
						 "query: more than %zu distinct stacks in the window at "
						 "%zu steps (limit of /api/v1/leaks: %u stacks, %u "
						 "stacks x steps); narrow the selector or take fewer steps",
						 (size_t)a->keys.n - 1, a->nsteps, LEAKS_MAX_STACKS,
						 LEAKS_MAX_CELLS);
				break;
			}
			if (id >= a->cap) {
				size_t nc = a->cap ? a->cap * 2 : 256;
				double **v2 = realloc(a->v, nc * sizeof(*v2));
				if (!v2) {
					rc = -ENOMEM;
					break;
				}
				memset(v2 + a->cap, 0, (nc - a->cap) * sizeof(*v2));
				a->v = v2;
				a->cap = nc;
			}
			if (!(a->v[id] = calloc(a->nsteps, sizeof(double)))) {
				rc = -ENOMEM;
				break;
			}
		}
		a->v[id][k] += (double)val;
	}
	free(fr);
	free(key);
	return rc;
}

/* A number, or null where it is infinite (an interval without an end at this many points). */
static json_t *fin(double d)
{
	return isfinite(d) ? json_real(d) : json_null();
}

static int arg_double(srv_req *r, const char *name, double lo, double hi, double *out)
{
	const char *s = srv_arg(r, name);
	if (!s)
		return 0;
	char *end;
	double d = strtod(s, &end);
	if (!*s || *end || !(d >= lo && d <= hi)) {
		srv_error(r, 400, "%s must be a number from %g to %g", name, lo, hi);
		return -1;
	}
	*out = d;
	return 0;
}

int srv_leaks(srv_req *r)
{
	double conf = 0.99, limit = 20;
	if (arg_double(r, "confidence", 0.5, 0.9999, &conf) < 0 ||
	    arg_double(r, "limit", 1, 1000, &limit) < 0)
		return 0;
	if (limit != floor(limit))
		return srv_error(r, 400, "limit must be an integer from 1 to 1000");
	strobe_selector sel;
	int64_t from, to, step;
	strobe_err err = {{0}};
	if (srv_selector(r, "query", true, &sel) < 0)
		return 0;
	if (!sel.type || !inuse_type(sel.type)) {
		srv_error(r, 400,
			  "query: leaks need an in-use type (memory:inuse_space:bytes:space:bytes or "
			  "another inuse_*), not '%.200s'",
			  sel.type ? sel.type : "(none)");
		strobe_selector_free(&sel);
		return 0;
	}
	if (srv_window(r, "from", "to", &from, &to) < 0) {
		strobe_selector_free(&sel);
		return 0;
	}
	const char *st = srv_arg(r, "step");
	if (st) {
		if (strobe_duration_parse(st, &step, &err) < 0 || step <= 0) {
			strobe_selector_free(&sel);
			return srv_error(r, 400, "step: %s", err.msg[0] ? err.msg : "must be positive");
		}
	} else {
		step = (to - from) / LEAKS_DEFAULT_STEPS;
		if (step < STROBE_NS_PER_S)
			step = STROBE_NS_PER_S;
	}
	uint64_t nsteps = (uint64_t)((to - from + step - 1) / step);
	if (nsteps > LEAKS_MAX_STEPS || nsteps < LEAKS_MIN_POINTS) {
		strobe_selector_free(&sel);
		return srv_error(r, 400,
				 "step: the window holds %llu steps of it; it must hold %d to %u",
				 (unsigned long long)nsteps, LEAKS_MIN_POINTS, LEAKS_MAX_STEPS);
	}
	acc a = {.nsteps = nsteps};
	bool *has = calloc(nsteps, sizeof(*has));
	int rc = has ? 0 : -ENOMEM;
	char *unit = NULL;
	for (size_t k = 0; k < nsteps && rc == 0; k++) {
		int64_t f = from + (int64_t)k * step, t = f + step < to ? f + step : to;
		strobe_query q = {r->tenant, &sel, f, t};
		strobe_profile *p = NULL;
		rc = strobe_store_query(r->srv->store, &q, &p, &err);
		if (rc == 0 && strobe_nsamples(p)) {
			srv_name_late(r, &p);
			has[k] = true;
			if (!unit && p->ntypes)
				unit = strdup(strobe_str(p, p->types[0].unit));
			rc = add_profile(&a, p, k, &err);
		}
		strobe_profile_free(p);
	}
	size_t nkeys = a.keys.n, npts = 0, nl = 0;
	for (size_t k = 0; has && k < nsteps; k++)
		npts += has[k];
	leak *l = rc == 0 && nkeys ? calloc(nkeys, sizeof(*l)) : NULL;
	double *x = rc == 0 ? calloc(nsteps, sizeof(*x)) : NULL, *y = x ? calloc(nsteps, sizeof(*y)) : NULL;
	double *pv = nkeys ? calloc(nkeys, sizeof(*pv)) : NULL, *qv = nkeys ? calloc(nkeys, sizeof(*qv)) : NULL;
	if (rc == 0 && (!x || !y || (nkeys && (!l || !pv || !qv))))
		rc = -ENOMEM;
	/* Each stack's trend over the steps with data; time in hours, so slopes are per hour. */
	for (uint32_t id = 0; rc == 0 && npts >= LEAKS_MIN_POINTS && id < nkeys; id++) {
		size_t m = 0;
		for (size_t k = 0; k < nsteps; k++)
			if (has[k]) {
				x[m] = ((double)k + 0.5) * (double)step / 3.6e12;
				y[m++] = a.v[id][k];
			}
		int e = strobe_theil_sen(x, y, m, conf, &l[nl].s);
		if (e < 0) {
			rc = e;
			break;
		}
		l[nl].id = id;
		pv[nl] = l[nl].s.p_up;
		nl++;
	}
	if (rc == 0 && nl)
		rc = strobe_bh_adjust(pv, qv, nl);
	size_t nout = 0;
	for (size_t i = 0; rc == 0 && i < nl; i++) {
		l[i].q = qv[i];
		if (qv[i] <= 1 - conf && l[i].s.lo > 0 && l[i].s.slope > 0)
			l[nout++] = l[i];
	}
	if (nout)
		qsort(l, nout, sizeof(*l), by_growth);
	json_t *arr = json_array();
	for (size_t i = 0; rc == 0 && arr && i < nout && i < (size_t)limit; i++) {
		size_t klen;
		const char *key = strobe_itab_get(&a.keys, l[i].id, &klen);
		json_t *frames = json_array(), *pts = json_array();
		for (size_t b = 0, e = 0; frames && e <= klen; e++)
			if (e == klen || key[e] == '\n') {
				json_array_append_new(frames, json_stringn(key + b, e - b));
				b = e + 1;
			}
		for (size_t k = 0; pts && k < nsteps; k++)
			if (has[k])
				json_array_append_new(
					pts, json_pack("[I, f]",
						       (json_int_t)((from + (int64_t)k * step + step / 2) / 1000000),
						       a.v[l[i].id][k]));
		size_t nfr = json_array_size(frames);
		json_array_append_new(
			arr, json_pack("{s:s, s:o, s:f, s:f, s:o, s:f, s:f, s:f, s:o}", "leaf",
				       nfr ? json_string_value(json_array_get(frames, nfr - 1)) : "",
				       "stack", frames, "growth_per_hour", l[i].s.slope, "lo_per_hour",
				       l[i].s.lo, "hi_per_hour", fin(l[i].s.hi), "tau", l[i].s.tau, "p",
				       l[i].s.p_up, "q", l[i].q, "points", pts));
	}
	json_t *j = NULL;
	if (rc == 0)
		j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:I, s:I, s:o}", "type", sel.type, "unit",
			      unit ? unit : "", "from_ms", (json_int_t)(from / 1000000), "to_ms",
			      (json_int_t)(to / 1000000), "step_ms", (json_int_t)(step / 1000000),
			      "confidence", conf, "steps_with_data", (json_int_t)npts, "stacks_tested",
			      (json_int_t)nl, "leaks", arr);
	else
		json_decref(arr);
	for (size_t i = 0; i < nkeys; i++)
		free(a.v[i]);
	free(a.v);
	strobe_itab_free(&a.keys);
	free(has);
	free(l);
	free(x);
	free(y);
	free(pv);
	free(qv);
	free(unit);
	strobe_selector_free(&sel);
	if (rc < 0)
		return srv_fail(r, rc, &err);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(j);
	if (!s)
		return srv_error(r, 500, "out of memory");
	srv_reply(r, 200, "application/json", s, strlen(s));
	return 0;
}
