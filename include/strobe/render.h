/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Renderers: pictures and tables drawn from trees and profiles. The interactive SVG flame graph
 * (plain and differential) and the pprof-style top table.
 */
#ifndef STROBE_RENDER_H
#define STROBE_RENDER_H

#include <stdio.h>

#include "strobe/profile.h"
#include "strobe/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strobe_svg_opts {
	const char *title;     /* default "Flame Graph" ("Icicle Graph" inverted, "Differential
				  Flame Graph" for diffs) */
	const char *subtitle;  /* NULL = none */
	const char *countname; /* default "samples" */
	const char *nametype;  /* default "Function:" */
	const char *colors;    /* hot (default), mem, io, wakeup, chain, java, js, perl, red,
				  green, blue, aqua, yellow, purple, orange */
	int width;             /* default 1200 */
	int frame_height;      /* default 16 */
	int font_size;         /* default 12 */
	double minwidth;       /* pixels; 0 = default 0.1, < 0 = draw every frame with a value */
	double minwidth_pct;   /* > 0: also omit frames under this percentage of the total
				  (flamegraph.pl's --minwidth N%) */
	bool hash;             /* colour by a hash of the name (stable across graphs) */
	bool inverted;         /* icicle: root at the top */
	bool diff_negate;      /* diff: swap which direction is red */
} strobe_svg_opts;

/* The smallest share of the total a frame needs to be drawn with these options (minwidth over
 * the drawable width), for builders that can leave smaller frames out up front. */
double strobe_svg_min_fraction(const strobe_svg_opts *o);

/* Writes a complete, standalone SVG document. A tree with t->diff set is drawn as a differential
 * flame graph (red grew, blue shrank, grey unchanged by the change of each frame's total;
 * a frame is as wide as the larger of its base and new self value plus its children). */
int strobe_svg_write(FILE *out, const strobe_tree *t, const strobe_svg_opts *o);

#ifdef __cplusplus
}
#endif
#endif
