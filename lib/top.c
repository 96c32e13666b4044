// SPDX-License-Identifier: Apache-2.0
/*
 * Per-function statistics and the top table. flat = value of samples whose leaf frame is the
 * function; cum = value of samples with the function anywhere on the stack, counted once per
 * sample even under recursion. These are the numbers `go tool pprof -top` prints, and the ones
 * diff and gate compare.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/transform.h"

int strobe_fnstats(strobe_profile *p, int type, strobe_granularity g, strobe_fnstat **out,
		   size_t *n)
{
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return -EINVAL;
	/* Indexed by string id (names are string ids of p); seen[] de-duplicates recursion. */
	size_t cap = p->strings.n;
	int64_t *flat = calloc(cap, sizeof(*flat)), *cum = calloc(cap, sizeof(*cum));
	uint32_t *seen = calloc(cap, sizeof(*seen));
	uint32_t *frames = NULL;
	size_t fcap = 0, nf;
	int r = -ENOMEM;
	if (!flat || !cum || !seen)
		goto out;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (!v)
			continue;
		if ((r = strobe_stack_frames(p, strobe_sample(p, s)->stack, g, &frames, &fcap, &nf)) < 0)
			goto out;
		if (p->strings.n > cap) { /* granularity made new names */
			size_t nc = p->strings.n * 2;
			int64_t *f2 = realloc(flat, nc * sizeof(*f2)), *c2;
			if (f2)
				flat = f2;
			c2 = realloc(cum, nc * sizeof(*c2));
			if (c2)
				cum = c2;
			uint32_t *s2 = realloc(seen, nc * sizeof(*s2));
			if (s2)
				seen = s2;
			if (!f2 || !c2 || !s2) {
				r = -ENOMEM;
				goto out;
			}
			memset(flat + cap, 0, (nc - cap) * sizeof(*flat));
			memset(cum + cap, 0, (nc - cap) * sizeof(*cum));
			memset(seen + cap, 0, (nc - cap) * sizeof(*seen));
			cap = nc;
		}
		if (nf)
			flat[frames[nf - 1]] += v;
		for (size_t i = 0; i < nf; i++) {
			if (seen[frames[i]] == s)
				continue;
			seen[frames[i]] = s;
			cum[frames[i]] += v;
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < cap && i < p->strings.n; i++)
		k += cum[i] != 0 || flat[i] != 0;
	strobe_fnstat *st = malloc((k ? k : 1) * sizeof(*st));
	if (!st)
		goto out;
	k = 0;
	for (size_t i = 0; i < cap && i < p->strings.n; i++)
		if (cum[i] || flat[i])
			st[k++] = (strobe_fnstat){strobe_str(p, (uint32_t)i), flat[i], cum[i]};
	*out = st;
	*n = k;
	r = 0;
out:
	free(flat);
	free(cum);
	free(seen);
	free(frames);
	return r;
}

static const struct scale {
	const char *unit, *suffix;
	double factor;
} scales[] = {
	{"nanoseconds", "hrs", 3600e9}, {"nanoseconds", "mins", 60e9},
	{"nanoseconds", "s", 1e9},      {"nanoseconds", "ms", 1e6},
	{"nanoseconds", "us", 1e3},     {"nanoseconds", "ns", 1},
	{"bytes", "TB", 1099511627776.0}, {"bytes", "GB", 1073741824.0},
	{"bytes", "MB", 1048576.0},     {"bytes", "kB", 1024.0},
	{"bytes", "B", 1},
};

/* The largest scale of `unit` in which |v| is at least 1 (the smallest for v = 0); -1 when the
 * unit has no scales (counts). */
static int pick_scale(int64_t v, const char *unit)
{
	double a = fabs((double)v);
	int last = -1;
	for (int i = 0; i < (int)(sizeof(scales) / sizeof(*scales)); i++) {
		if (strcmp(unit, scales[i].unit) != 0)
			continue;
		if (a >= scales[i].factor)
			return i;
		last = i;
	}
	return last;
}

static void format_scaled(char *buf, size_t cap, int64_t v, int scale)
{
	if (scale < 0) {
		snprintf(buf, cap, "%" PRId64, v);
		return;
	}
	int n = snprintf(buf, cap, "%.2f", (double)v / scales[scale].factor);
	/* As pprof prints them: "12.00" -> "12", and a zero has no unit. */
	if (n > 3 && (size_t)n < cap && strcmp(buf + n - 3, ".00") == 0)
		buf[n -= 3] = 0;
	if (strcmp(buf, "0") == 0 || strcmp(buf, "-0") == 0) {
		snprintf(buf, cap, "0");
		return;
	}
	strncat(buf, scales[scale].suffix, cap - strlen(buf) - 1);
}

void strobe_format_value(char *buf, size_t cap, int64_t v, const char *unit)
{
	format_scaled(buf, cap, v, pick_scale(v, unit));
}

static int by_flat(const void *a, const void *b)
{
	const strobe_fnstat *x = a, *y = b;
	if (x->flat != y->flat)
		return llabs(x->flat) > llabs(y->flat) ? -1 : 1;
	if (x->cum != y->cum)
		return llabs(x->cum) > llabs(y->cum) ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int by_cum(const void *a, const void *b)
{
	const strobe_fnstat *x = a, *y = b;
	if (x->cum != y->cum)
		return llabs(x->cum) > llabs(y->cum) ? -1 : 1;
	return by_flat(a, b);
}

int strobe_top_write(FILE *out, strobe_profile *p, int type, strobe_granularity g, size_t limit,
		     bool cum_order)
{
	strobe_fnstat *st;
	size_t n;
	int r = strobe_fnstats(p, type, g, &st, &n);
	if (r < 0)
		return r;
	qsort(st, n, sizeof(*st), cum_order ? by_cum : by_flat);
	const char *unit = strobe_str(p, p->types[type].unit);
	int64_t total = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		total += llabs(strobe_sample_values(p, s)[type]);
	size_t shown = limit && limit < n ? limit : n;
	int64_t shown_flat = 0;
	for (size_t i = 0; i < shown; i++)
		shown_flat += st[i].flat;
	/* One unit for the whole table, as pprof's default "minimum": the scale of the smallest
	 * non-zero value shown (flat, else cum), so columns line up and compare at a glance. */
	int64_t minv = 0;
	for (size_t i = 0; i < shown; i++) {
		int64_t v = llabs(st[i].flat) ? llabs(st[i].flat) : llabs(st[i].cum);
		if (v && (!minv || v < minv))
			minv = v;
	}
	int sc = pick_scale(minv ? minv : total, unit);
	char a[32], b[32], c[32];
	double pct = total ? 100.0 * (double)shown_flat / (double)total : 0;
	format_scaled(a, sizeof(a), shown_flat, sc);
	format_scaled(b, sizeof(b), total, sc);
	fprintf(out, "Type: %s\n", strobe_str(p, p->types[type].type));
	if (p->duration_nanos) {
		format_scaled(c, sizeof(c), p->duration_nanos, pick_scale(p->duration_nanos,
									"nanoseconds"));
		fprintf(out, "Duration: %s\n", c);
	}
	fprintf(out, "Showing nodes accounting for %s, %.2f%% of %s total\n", a, pct, b);
	if (shown < n)
		fprintf(out, "Showing top %zu nodes out of %zu\n", shown, n);
	fprintf(out, "%10s %6s %6s %10s %6s\n", "flat", "flat%", "sum%", "cum", "cum%");
	double sum = 0;
	for (size_t i = 0; i < shown; i++) {
		double fp = total ? 100.0 * (double)st[i].flat / (double)total : 0;
		double cp = total ? 100.0 * (double)st[i].cum / (double)total : 0;
		sum += fp;
		format_scaled(a, sizeof(a), st[i].flat, sc);
		format_scaled(c, sizeof(c), st[i].cum, sc);
		fprintf(out, "%10s %5.2f%% %5.2f%% %10s %5.2f%%  %s\n", a, fp, sum, c, cp, st[i].name);
	}
	free(st);
	return ferror(out) ? -EIO : 0;
}

/* ---- comparing two profiles by function ---------------------------------------------------- */

static int fncmp_add(strobe_itab *names, strobe_fncmp **arr, size_t *cap, const strobe_fnstat *st,
		     size_t n, int col, double scale)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t id;
		bool added;
		size_t len = strlen(st[i].name);
		int r = strobe_itab_intern(names, st[i].name, len, &id, &added);
		if (r < 0)
			return r;
		if (id >= *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			while (nc <= id)
				nc *= 2;
			strobe_fncmp *a = realloc(*arr, nc * sizeof(*a));
			if (!a)
				return -ENOMEM;
			*arr = a;
			*cap = nc;
		}
		strobe_fncmp *c = &(*arr)[id];
		if (added) {
			memset(c, 0, sizeof(*c));
			if (!(c->name = strndup(st[i].name, len)))
				return -ENOMEM;
		}
		c->flat[col] += (int64_t)llround((double)st[i].flat * scale);
		c->cum[col] += (int64_t)llround((double)st[i].cum * scale);
	}
	return 0;
}

int strobe_fncompare(strobe_profile *base, int btype, strobe_profile *cur, int ctype,
		     strobe_granularity g, bool normalize, strobe_fncmp **out, size_t *n,
		     int64_t totals[2])
{
	strobe_fnstat *bs = NULL, *cs = NULL;
	size_t bn = 0, cn = 0, cap = 0;
	strobe_itab names = {0};
	strobe_fncmp *arr = NULL;
	int r;
	if ((r = strobe_fnstats(base, btype, g, &bs, &bn)) < 0 ||
	    (r = strobe_fnstats(cur, ctype, g, &cs, &cn)) < 0)
		goto out;
	int64_t bt = strobe_total(base, btype), ct = strobe_total(cur, ctype);
	double scale = normalize && bt ? (double)ct / (double)bt : 1.0;
	if ((r = fncmp_add(&names, &arr, &cap, cs, cn, 0, 1.0)) < 0 ||
	    (r = fncmp_add(&names, &arr, &cap, bs, bn, 1, scale)) < 0)
		goto out;
	totals[0] = ct;
	totals[1] = (int64_t)llround((double)bt * scale);
	*out = arr;
	*n = names.n;
	arr = NULL;
	names.n = 0;
out:
	/* On failure an id may have been interned without its entry: free only what exists. */
	strobe_fncmp_free(arr, names.n < cap ? names.n : cap);
	strobe_itab_free(&names);
	free(bs);
	free(cs);
	return r;
}

void strobe_fncmp_free(strobe_fncmp *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++)
		free(c[i].name);
	free(c);
}
