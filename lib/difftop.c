// SPDX-License-Identifier: Apache-2.0
/*
 * The ranking of functions by change between two profiles (`strobe diff -t top` and the
 * server's /api/v1/diff?format=top): flat and cumulative deltas per function, largest first,
 * with the base scaled to the new total when normalised.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/transform.h"

static int cmp_delta(const void *a, const void *b)
{
	const strobe_fncmp *x = a, *y = b;
	int64_t dx = llabs(x->flat[0] - x->flat[1]), dy = llabs(y->flat[0] - y->flat[1]);
	if (dx != dy)
		return dx > dy ? -1 : 1;
	int64_t cx = llabs(x->cum[0] - x->cum[1]), cy = llabs(y->cum[0] - y->cum[1]);
	if (cx != cy)
		return cx > cy ? -1 : 1;
	return strcmp(x->name, y->name);
}

int strobe_diff_top_write(FILE *f, strobe_profile *base, int bt, strobe_profile *cur, int ct,
			  strobe_granularity g, bool norm, size_t limit)
{
	strobe_fncmp *c;
	size_t n;
	int64_t tot[2];
	int r = strobe_fncompare(base, bt, cur, ct, g, norm, &c, &n, tot);
	if (r < 0)
		return r;
	if (n) /* qsort wants a non-NULL base even for 0 elements */
		qsort(c, n, sizeof(*c), cmp_delta);
	const char *unit = strobe_str(cur, cur->types[ct].unit);
	char a[32], b[32], d[32];
	strobe_format_value(a, sizeof(a), tot[1], unit);
	strobe_format_value(b, sizeof(b), tot[0], unit);
	fprintf(f, "Type: %s\nTotal: base %s%s, new %s\n", strobe_str(cur, cur->types[ct].type), a,
		norm ? " (normalised)" : "", b);
	fprintf(f, "%10s %10s %10s %8s %10s  %s\n", "base flat", "new flat", "delta", "delta%",
		"cum delta", "name");
	for (size_t i = 0; i < n && (!limit || i < limit); i++) {
		int64_t delta = c[i].flat[0] - c[i].flat[1];
		if (!delta && c[i].cum[0] == c[i].cum[1])
			continue;
		double pp = (tot[0] ? 100.0 * (double)c[i].flat[0] / (double)tot[0] : 0) -
			    (tot[1] ? 100.0 * (double)c[i].flat[1] / (double)tot[1] : 0);
		strobe_format_value(a, sizeof(a), c[i].flat[1], unit);
		strobe_format_value(b, sizeof(b), c[i].flat[0], unit);
		strobe_format_value(d, sizeof(d), delta, unit);
		char cd[32], ds[40], cds[40];
		int64_t cdelta = c[i].cum[0] - c[i].cum[1];
		strobe_format_value(cd, sizeof(cd), cdelta, unit);
		snprintf(ds, sizeof(ds), "%s%s", delta > 0 ? "+" : "", d);
		snprintf(cds, sizeof(cds), "%s%s", cdelta > 0 ? "+" : "", cd);
		fprintf(f, "%10s %10s %10s %+7.2f%% %10s  %s\n", a, b, ds, pp, cds, c[i].name);
	}
	strobe_fncmp_free(c, n);
	return ferror(f) ? -EIO : 0;
}

