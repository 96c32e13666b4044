/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Significance applied to strobe's diff structures: the per-function comparison (flat and
 * cumulative, corrected together) and the per-frame call tree of a differential flame graph.
 * The statistics themselves are in strobe/significance.h; this file maps profiles onto them.
 */
#ifndef STROBE_DIFFSIG_H
#define STROBE_DIFFSIG_H

#include "strobe/significance.h"
#include "strobe/transform.h"
#include "strobe/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value of one sample of column `type`, so values divided by it are sample counts: 1 for
 * a "count" unit; the period when the period's unit is the column's; else the column's total
 * over the total of a "count" column of the same profile (the mean per sample, e.g. cpu
 * nanoseconds beside samples/count); else 1 (values taken as counts). */
double strobe_sig_per_sample(const strobe_profile *p, int type);

/* The two-profile test on every function of a comparison made with normalize=false: flat rows
 * into flat[0..n), cumulative into cum[0..n), Benjamini-Hochberg over all 2n tests at once. */
int strobe_fncmp_significance(const strobe_fncmp *c, size_t n, const int64_t totals[2],
			      double per_sample, double confidence, strobe_sig_row *flat,
			      strobe_sig_row *cum);

/* The two-profile test on every frame of a diff tree (t->diff; column 1 holds the base times
 * base_scale): each frame's total in NEW against BASE given the roots' totals, BH over the
 * frames. Fills t->sig_q (NaN for the root) and t->sig_conf, which the SVG, JSON and flat
 * writers then show (noise pale, q in tooltips). */
int strobe_tree_significance(strobe_tree *t, double base_scale, double per_sample,
			     double confidence);

/* True when frame `node` of a tree with significance is noise at its confidence. */
static inline bool strobe_tree_noise(const strobe_tree *t, uint32_t node)
{
	return t->sig_q && !(t->sig_q[node] <= 1 - t->sig_conf);
}

#ifdef __cplusplus
}
#endif
#endif
