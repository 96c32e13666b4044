// SPDX-License-Identifier: Apache-2.0
/*
 * The ranking of functions by change between two profiles (`strobe diff -t top` and the
 * server's /api/v1/diff?format=top): flat and cumulative deltas per function, largest first,
 * with the base scaled to the new total when normalised, and each change's significance (p of
 * the flat change, q of flat and cumulative after Benjamini-Hochberg, "noise" when neither is
 * significant at the confidence asked).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/diffsig.h"
#include "strobe/transform.h"

typedef struct row {
	const strobe_fncmp *c;
	const strobe_sig_row *flat, *cum;
} row;

static int cmp_delta(const void *a, const void *b)
{
	const strobe_fncmp *x = ((const row *)a)->c, *y = ((const row *)b)->c;
	/* Raw values here; the order is the same as of normalised ones up to rounding, so compare
	 * the changes of share, which is what is shown. */
	double dx = fabs(((const row *)a)->flat->change), dy = fabs(((const row *)b)->flat->change);
	if (dx != dy)
		return dx > dy ? -1 : 1;
	double cx = fabs(((const row *)a)->cum->change), cy = fabs(((const row *)b)->cum->change);
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void fmt_p(char *buf, size_t cap, double p)
{
	if (isnan(p))
		snprintf(buf, cap, "-");
	else if (p >= 0.01 || p == 0)
		snprintf(buf, cap, "%.2f", p);
	else
		snprintf(buf, cap, "%.1e", p);
}

int strobe_diff_top_rows_write(FILE *f, const strobe_diff_top_in *in)
{
	const strobe_fncmp *c = in->c;
	size_t n = in->n;
	row *rs = malloc((n ? n : 1) * sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		rs[i] = (row){&c[i], &in->flat[i], &in->cum[i]};
	if (n) /* qsort wants a non-NULL base even for 0 elements */
		qsort(rs, n, sizeof(*rs), cmp_delta);
	double scale = in->norm && in->totals[1] ? (double)in->totals[0] / (double)in->totals[1]
						  : 1.0;
	const char *unit = in->unit;
	char a[32], b[32], d[32];
	strobe_format_value(a, sizeof(a), (int64_t)llround((double)in->totals[1] * scale), unit);
	strobe_format_value(b, sizeof(b), in->totals[0], unit);
	fprintf(f, "Type: %s\nTotal: base %s%s, new %s\n", in->type, a, in->norm ? " (normalised)" : "",
		b);
	fprintf(f, "Significance: %s, Benjamini-Hochberg over flat and cum, %g%% confidence; "
		   "noise = neither change significant\n",
		in->method, 100 * in->confidence);
	fprintf(f, "%10s %10s %10s %8s %10s %8s %8s %8s %5s  %s\n", "base flat", "new flat",
		"delta", "delta%", "cum delta", "p flat", "q flat", "q cum", "", "name");
	size_t shown = 0;
	for (size_t i = 0; i < n && (!in->limit || shown < in->limit); i++) {
		const strobe_fncmp *x = rs[i].c;
		int64_t bf = (int64_t)llround((double)x->flat[1] * scale),
			bc = (int64_t)llround((double)x->cum[1] * scale);
		int64_t delta = x->flat[0] - bf, cdelta = x->cum[0] - bc;
		if (!delta && cdelta == 0)
			continue;
		shown++;
		double pp = 100.0 * rs[i].flat->change;
		strobe_format_value(a, sizeof(a), bf, unit);
		strobe_format_value(b, sizeof(b), x->flat[0], unit);
		strobe_format_value(d, sizeof(d), delta, unit);
		char cd[32], ds[40], cds[40], p[16], qf[16], qc[16];
		strobe_format_value(cd, sizeof(cd), cdelta, unit);
		snprintf(ds, sizeof(ds), "%s%s", delta > 0 ? "+" : "", d);
		snprintf(cds, sizeof(cds), "%s%s", cdelta > 0 ? "+" : "", cd);
		fmt_p(p, sizeof(p), rs[i].flat->p);
		fmt_p(qf, sizeof(qf), rs[i].flat->q);
		fmt_p(qc, sizeof(qc), rs[i].cum->q);
		bool sig = rs[i].flat->significant || rs[i].cum->significant;
		fprintf(f, "%10s %10s %10s %+7.2f%% %10s %8s %8s %8s %5s  %s\n", a, b, ds, pp, cds, p,
			qf, qc, sig ? "" : "noise", x->name);
	}
	free(rs);
	return ferror(f) ? -EIO : 0;
}

int strobe_diff_top_write(FILE *f, strobe_profile *base, int bt, strobe_profile *cur, int ct,
			  strobe_granularity g, bool norm, size_t limit, double confidence)
{
	strobe_fncmp *c;
	size_t n;
	int64_t tot[2];
	/* Raw values: the test needs the counts; the table scales the base itself. */
	int r = strobe_fncompare(base, bt, cur, ct, g, false, &c, &n, tot);
	if (r < 0)
		return r;
	strobe_sig_row *rows = malloc((n ? n : 1) * 2 * sizeof(*rows));
	r = rows ? 0 : -ENOMEM;
	/* One per-sample value for both sides: the new profile's (the base's would do as well;
	 * they differ only when the two were recorded differently). */
	double ps = strobe_sig_per_sample(cur, ct);
	if (r == 0)
		r = strobe_fncmp_significance(c, n, tot, ps, confidence, rows, rows + n);
	if (r == 0) {
		strobe_diff_top_in in = {
			.c = c, .n = n, .totals = {tot[0], tot[1]}, .flat = rows, .cum = rows + n,
			.type = strobe_str(cur, cur->types[ct].type),
			.unit = strobe_str(cur, cur->types[ct].unit), .norm = norm, .limit = limit,
			.confidence = confidence, .method = "binomial count test"};
		r = strobe_diff_top_rows_write(f, &in);
	}
	free(rows);
	strobe_fncmp_free(c, n);
	return r;
}
