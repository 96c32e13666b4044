/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Choosing a writer by output format: one dispatcher for the CLI's files (convert, merge,
 * record) and the server's query and diff responses, so that a format means the same bytes
 * wherever it is asked for.
 *
 * Ownership: nothing is kept; the profile and tree are the caller's, and the writers only read
 * them (the tree formats build a tree of their own and free it).
 */
#ifndef STROBE_WRITER_H
#define STROBE_WRITER_H

#include <stddef.h>
#include <stdio.h>

#include "strobe/codec.h"
#include "strobe/tree.h"

typedef struct strobe_write_opts {
	const char *name; /* speedscope: the profile's name (the output file's) */
	size_t top_rows;  /* top: at most this many rows (0 = all) */
	/* svg: the heading and the line under it (what the graph shows: type, selector, window);
	 * NULL: the renderer's default heading, no second line */
	const char *title, *subtitle;
} strobe_write_opts;

/* Writes sample type `type` of p to f as fmt (pprof, folded, speedscope, json, flat, svg, top);
 * the tree formats at granularity g. opts may be NULL. -EINVAL for a format that cannot be
 * written; else the writer's 0/-errno. */
int strobe_write_profile(FILE *f, strobe_profile *p, strobe_format fmt, int type,
			 strobe_granularity g, const strobe_write_opts *opts);

/* Writes a built tree (a diff tree too) as json, flat or svg; type and unit name its values
 * (an svg counts "samples" when the unit is "count"). opts (titles) may be NULL. -EINVAL for
 * another format. */
int strobe_write_tree(FILE *f, const strobe_tree *t, strobe_format fmt, const char *type,
		      const char *unit, const strobe_write_opts *opts);

/* The Content-Type of a format's bytes. */
const char *strobe_format_mime(strobe_format fmt);

#endif
