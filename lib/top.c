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

/* Units as pprof knows them (internal/measurement): a value in the profile's unit is converted
 * to the base unit of its kind (bytes, nanoseconds) by `from`, then shown in the largest unit
 * of the kind in which it is at least 1. */
typedef struct unit {
	const char *name; /* shown suffix */
	int kind;         /* 1 = memory, 2 = time */
	double factor;    /* in base units */
} unit;

static const unit units[] = {
	{"B", 1, 1}, {"kB", 1, 1024.0}, {"MB", 1, 1048576.0}, {"GB", 1, 1073741824.0},
	{"TB", 1, 1099511627776.0}, {"PB", 1, 1125899906842624.0},
	{"ns", 2, 1}, {"us", 2, 1e3}, {"ms", 2, 1e6}, {"s", 2, 1e9}, {"hrs", 2, 3600e9},
};

/* The unit a sample type's unit string names (pprof's sniffing: lower case, a plural "s"
 * dropped), or NULL for counts and unknown units. */
static const unit *sniff_unit(const char *name)
{
	static const struct {
		const char *alias;
		int idx;
	} aliases[] = {
		{"b", 0},          {"byte", 0},        {"kb", 1},     {"kbyte", 1},
		{"kilobyte", 1},   {"mb", 2},          {"mbyte", 2},  {"megabyte", 2},
		{"gb", 3},         {"gbyte", 3},       {"gigabyte", 3}, {"tb", 4},
		{"terabyte", 4},   {"pb", 5},          {"petabyte", 5}, {"ns", 6},
		{"nanosecond", 6}, {"us", 7},          {"microsecond", 7}, {"ms", 8},
		{"millisecond", 8}, {"s", 9},          {"sec", 9},    {"second", 9},
		{"hour", 10},      {"hr", 10},
	};
	char low[32];
	size_t n = strlen(name);
	if (n >= sizeof(low))
		return NULL;
	for (size_t i = 0; i <= n; i++)
		low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
	if (n > 2 && low[n - 1] == 's')
		low[n - 1] = 0;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(*aliases); i++)
		if (strcmp(low, aliases[i].alias) == 0)
			return &units[aliases[i].idx];
	return NULL;
}

/* Largest unit of from's kind in which |v| (in `from`) is at least 1; the kind's default
 * (B, s) for zero. NULL when `from` is no known unit. */
static const unit *auto_unit(int64_t v, const unit *from)
{
	if (!from)
		return NULL;
	double base = fabs((double)v) * from->factor;
	const unit *best = NULL;
	for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
		if (units[i].kind == from->kind && base / units[i].factor >= 1.0 &&
		    (!best || units[i].factor >= best->factor))
			best = &units[i];
	if (!best)
		best = from->kind == 1 ? &units[0] : &units[9];
	return best;
}

static void format_in(char *buf, size_t cap, int64_t v, const unit *from, const unit *to)
{
	if (!from || !to) {
		snprintf(buf, cap, "%" PRId64, v);
		return;
	}
	int n = snprintf(buf, cap, "%.2f", (double)v * from->factor / to->factor);
	/* As pprof prints them: "12.00" -> "12", and a zero has no unit. */
	if (n > 3 && (size_t)n < cap && strcmp(buf + n - 3, ".00") == 0)
		buf[n - 3] = 0;
	if (strcmp(buf, "0") == 0 || strcmp(buf, "-0") == 0) {
		snprintf(buf, cap, "0");
		return;
	}
	strncat(buf, to->name, cap - strlen(buf) - 1);
}

void strobe_format_value(char *buf, size_t cap, int64_t v, const char *unit_name)
{
	const unit *from = sniff_unit(unit_name);
	format_in(buf, cap, v, from, auto_unit(v, from));
}

/* pprof's percentage column: "  100%", "12.34%", or two significant digits below 1%. */
static void format_pct(char *buf, size_t cap, int64_t v, int64_t total)
{
	double r = total ? fabs((double)v / (double)total) * 100 : 0;
	if (r >= 99.95 && r <= 100.05)
		snprintf(buf, cap, "  100%%");
	else if (r >= 1.0)
		snprintf(buf, cap, "%5.2f%%", r);
	else
		snprintf(buf, cap, "%5.2g%%", r);
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
	int64_t total = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		total += llabs(strobe_sample_values(p, s)[type]);
	strobe_top_info info = {strobe_str(p, p->types[type].type),
				strobe_str(p, p->types[type].unit), total, p->duration_nanos};
	r = strobe_top_print(out, st, n, &info, limit, cum_order);
	free(st);
	return r;
}

int strobe_top_print(FILE *out, strobe_fnstat *st, size_t n, const strobe_top_info *info,
		     size_t limit, bool cum_order)
{
	qsort(st, n, sizeof(*st), cum_order ? by_cum : by_flat);
	const char *unit_name = info->unit;
	int64_t total = info->total;
	size_t shown = limit && limit < n ? limit : n;
	int64_t shown_flat = 0;
	for (size_t i = 0; i < shown; i++)
		shown_flat += st[i].flat;
	/* One unit for the whole table, chosen as pprof's default ("minimum") does: the unit of
	 * the smallest non-zero value shown (flat, else cum), or of 100 times it when the total
	 * needs a larger unit, so columns line up and compare at a glance. */
	const unit *from = sniff_unit(unit_name);
	int64_t minv = 0;
	for (size_t i = 0; i < shown; i++) {
		int64_t v = llabs(st[i].flat) ? llabs(st[i].flat) : llabs(st[i].cum);
		if (v && (!minv || v < minv))
			minv = v;
	}
	if (!minv)
		minv = total;
	const unit *to = auto_unit(minv, from);
	if (to && to != auto_unit(total, from) && minv * 100 < total)
		to = auto_unit(100 * minv, from);
	char a[32], b[32], c[32], pf[16], ps[16], pc[16];
	format_in(a, sizeof(a), shown_flat, from, to);
	format_in(b, sizeof(b), total, from, to);
	format_pct(pf, sizeof(pf), shown_flat, total);
	fprintf(out, "Type: %s\n", info->type);
	if (info->duration_nanos) {
		strobe_format_value(c, sizeof(c), info->duration_nanos, "nanoseconds");
		fprintf(out, "Duration: %s\n", c);
	}
	fprintf(out, "Showing nodes accounting for %s, %s of %s total\n", a,
		pf + strspn(pf, " "), b);
	if (shown < n)
		fprintf(out, "Showing top %zu nodes out of %zu\n", shown, n);
	fprintf(out, "%10s %6s %6s %10s %6s\n", "flat", "flat%", "sum%", "cum", "cum%");
	int64_t sum = 0;
	for (size_t i = 0; i < shown; i++) {
		sum += st[i].flat;
		format_in(a, sizeof(a), st[i].flat, from, to);
		format_in(c, sizeof(c), st[i].cum, from, to);
		format_pct(pf, sizeof(pf), st[i].flat, total);
		format_pct(ps, sizeof(ps), sum, total);
		format_pct(pc, sizeof(pc), st[i].cum, total);
		fprintf(out, "%10s %s %s %10s %s  %s\n", a, pf, ps, c, pc, st[i].name);
	}
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
