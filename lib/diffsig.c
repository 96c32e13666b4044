// SPDX-License-Identifier: Apache-2.0
/*
 * Significance of a diff's functions and frames (include/strobe/diffsig.h): turns profile
 * values into sample counts (the test is about samples, not nanoseconds) and runs the
 * two-profile test of lib/significance.c over a comparison or a diff tree.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/diffsig.h"

double strobe_sig_per_sample(const strobe_profile *p, int type)
{
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return 1;
	const char *unit = strobe_str(p, p->types[type].unit);
	if (strcmp(unit, "count") == 0 || strcmp(unit, "samples") == 0)
		return 1;
	if (p->period > 0 && strcmp(strobe_str(p, p->period_type.unit), unit) == 0)
		return (double)p->period;
	for (uint32_t i = 0; i < p->ntypes; i++) {
		if ((int)i == type || strcmp(strobe_str(p, p->types[i].unit), "count"))
			continue;
		int64_t n = strobe_total(p, (int)i),
			v = strobe_total(p, type);
		if (n > 0 && v > 0)
			return (double)v / (double)n;
	}
	return 1;
}

int strobe_fncmp_significance(const strobe_fncmp *c, size_t n, const int64_t totals[2],
			      double per_sample, double confidence, strobe_sig_row *flat,
			      strobe_sig_row *cum)
{
	/* 4 value arrays of 2n: base and new, flat rows then cum rows, one family. */
	double *v = malloc((n ? n : 1) * 4 * sizeof(*v));
	strobe_sig_row *rows = malloc((n ? n : 1) * 2 * sizeof(*rows));
	int r = v && rows ? 0 : -ENOMEM;
	if (r == 0) {
		double *b = v, *nw = v + 2 * n;
		for (size_t i = 0; i < n; i++) {
			b[i] = (double)c[i].flat[1];
			nw[i] = (double)c[i].flat[0];
			b[n + i] = (double)c[i].cum[1];
			nw[n + i] = (double)c[i].cum[0];
		}
		r = strobe_sig_counts(b, nw, 2 * n, (double)totals[1], (double)totals[0], per_sample,
				      confidence, rows);
	}
	if (r == 0) {
		memcpy(flat, rows, n * sizeof(*rows));
		memcpy(cum, rows + n, n * sizeof(*rows));
	}
	free(v);
	free(rows);
	return r;
}

int strobe_tree_significance(strobe_tree *t, double base_scale, double per_sample,
			     double confidence)
{
	if (!t->diff)
		return -EINVAL;
	if (!(base_scale > 0)) /* an empty NEW scales the base to 0: its values are gone */
		base_scale = 1;
	size_t n = t->n;
	/* Two doubles a node (p, then q in place of the caller's array), not a strobe_sig_row:
	 * a big diff tree has millions of frames. */
	double *p = malloc((n ? n : 1) * sizeof(*p)), *q = malloc((n ? n : 1) * sizeof(*q));
	int r = p && q ? 0 : -ENOMEM;
	if (r == 0 && !(confidence > 0 && confidence < 1 && per_sample > 0))
		r = -EINVAL;
	if (r == 0) {
		double nb = (double)t->nodes[0].total[1] / base_scale / per_sample,
		       nn = (double)t->nodes[0].total[0] / per_sample;
		/* The root is 100 % of both sides: tested it would only dilute the family. */
		p[0] = NAN;
		for (size_t i = 1; i < n; i++) {
			const strobe_tree_node *nd = &t->nodes[i];
			p[i] = strobe_sig_binom_p((double)nd->total[1] / base_scale / per_sample, nb,
						  (double)nd->total[0] / per_sample, nn);
		}
		r = strobe_sig_bh(p, n, q);
	}
	if (r == 0) {
		free(t->sig_q);
		t->sig_q = q;
		t->sig_conf = confidence;
		q = NULL;
	}
	free(p);
	free(q);
	return r;
}
