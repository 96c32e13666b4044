/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Call trees: a profile's stacks folded into a trie of frame names, the shape every picture of a
 * profile is drawn from (flame graphs, differential flame graphs, icicles, speedscope, the JSON
 * tree). A tree holds two value columns so one structure serves both a plain profile (column 0)
 * and a comparison (column 0 = new, column 1 = base). Names are interned in the tree itself, so a
 * tree can combine profiles that do not share a string table.
 *
 * Also here: turning a stack into frame names at a granularity (function, function+line,
 * address), the one place that decides what a "frame" is for every text and picture output.
 */
#ifndef STROBE_TREE_H
#define STROBE_TREE_H

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum strobe_granularity {
	STROBE_GRAN_FUNCTIONS = 0, /* "main" */
	STROBE_GRAN_LINES,         /* "main file.c:42" */
	STROBE_GRAN_ADDRESSES,     /* "main 0x4005d0" (or the bare address when unnamed) */
} strobe_granularity;

/* Frame names of a stack, root first, with inlined frames expanded (caller before callee). Names
 * are string ids of p (interned there when the granularity makes new names). *buf grows as
 * needed (realloc); *n receives the count. Unnamed frames are named after their mapping's file
 * ("[libc.so.6+0x1234]") or address ("0x1234"), never "". */
int strobe_stack_frames(strobe_profile *p, uint32_t stack, strobe_granularity g, uint32_t **buf,
			size_t *cap, size_t *n);

/* The name of a frame without a function name: "[file-basename+0xOFFSET]" when its mapping has
 * a file, else "0xADDRESS". Writes at most cap bytes (NUL included); returns the length. */
size_t strobe_unnamed_frame(char *buf, size_t cap, const char *file, uint64_t address,
			    uint64_t map_start, uint64_t map_offset);

typedef struct strobe_tree_node {
	uint32_t name;         /* id in tree->names (a NUL-terminated string) */
	uint32_t parent;       /* node id; the root (node 0) is its own parent */
	uint32_t first_child;  /* 0 = none */
	uint32_t next_sibling; /* 0 = none */
	int64_t total[2];      /* inclusive value per column */
	int64_t self[2];       /* exclusive value per column */
} strobe_tree_node;

typedef struct strobe_tree {
	strobe_itab names;     /* interned frame names; id 0 = "" (the root's name) */
	strobe_itab edges;     /* (parent, name) -> node id, for building */
	strobe_tree_node *nodes;
	uint32_t n, cap;       /* node 0 is the root */
	bool diff;             /* column 1 holds a baseline */
	/* Per node (t->n), set by strobe_tree_significance: the BH-adjusted p-value of the
	 * frame's change (NaN for the root), and the confidence it is judged at. NULL = none. */
	double *sig_q;
	double sig_conf;
} strobe_tree;

enum {
	STROBE_TREE_REVERSE = 1, /* build from leaf to root (flamegraph.pl --reverse) */
};

strobe_tree *strobe_tree_new(void);
void strobe_tree_free(strobe_tree *t);
/* Adds every sample of p, value column `type` multiplied by `scale`, into tree column `column`
 * (0 or 1). Samples with a zero value are skipped. */
int strobe_tree_add(strobe_tree *t, strobe_profile *p, int type, strobe_granularity g, int column,
		    double scale, unsigned flags);
/* Adds one stack given as names, root first, into column `column`. */
int strobe_tree_add_stack(strobe_tree *t, const char *const *names, const size_t *lens, size_t n,
			  int column, int64_t value);
/* Orders every node's children by name (byte order), as flamegraph.pl draws them. */
int strobe_tree_sort(strobe_tree *t);
static inline const char *strobe_tree_name(const strobe_tree *t, uint32_t node)
{
	return (const char *)strobe_itab_get(&t->names, t->nodes[node].name, NULL);
}

#ifdef __cplusplus
}
#endif
#endif
