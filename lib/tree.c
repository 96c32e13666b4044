// SPDX-License-Identifier: Apache-2.0
/*
 * Frame naming and call trees. strobe_stack_frames() is the single definition of what a "frame"
 * is in text and pictures (function name; function and line; or address), inlined frames
 * expanded; strobe_tree_* fold stacks into the trie that flame graphs, diffs and JSON outputs
 * are drawn from.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/tree.h"

static const char *basename_of(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

size_t strobe_unnamed_frame(char *buf, size_t cap, const char *file, uint64_t address,
			    uint64_t map_start, uint64_t map_offset)
{
	int n = file && *file ? snprintf(buf, cap, "[%s+0x%" PRIx64 "]", basename_of(file),
					 address - map_start + map_offset)
			      : snprintf(buf, cap, "0x%" PRIx64, address);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Name of one line of a location at a granularity, as a string id of p. */
static uint32_t line_name(strobe_profile *p, const strobe_location *loc, const strobe_line *ln,
			  strobe_granularity g)
{
	const strobe_function *f = ln ? strobe_function_get(p, ln->function) : NULL;
	uint32_t name = f ? f->name : 0;
	char buf[512];
	int n;
	if (!name) {
		/* Unnamed: keep where it came from so it can be told apart and symbolized later. */
		const strobe_mapping *m = strobe_mapping_get(p, loc->mapping);
		size_t len = strobe_unnamed_frame(buf, sizeof(buf),
						  loc->mapping ? strobe_str(p, m->filename) : NULL,
						  loc->address, m->start, m->offset);
		return strobe_str_intern(p, buf, len);
	}
	if (g == STROBE_GRAN_FUNCTIONS)
		return name;
	const char *fn = strobe_str(p, name);
	if (g == STROBE_GRAN_LINES) {
		if (!f->filename && !ln->line)
			return name;
		n = snprintf(buf, sizeof(buf), "%s %s:%" PRId64, fn,
			     basename_of(strobe_str(p, f->filename)), ln->line);
	} else {
		if (!loc->address)
			return name;
		n = snprintf(buf, sizeof(buf), "%s 0x%" PRIx64, fn, loc->address);
	}
	return strobe_str_intern(p, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

int strobe_stack_frames(strobe_profile *p, uint32_t stack, strobe_granularity g, uint32_t **buf,
			size_t *cap, size_t *n)
{
	/* Walk leaf to root, writing names back to front, then move them to the start. */
	size_t cnt = 0;
	for (uint32_t s = stack; s; s = strobe_stack_get(p, s)->parent) {
		const strobe_location *l = strobe_location_get(p, strobe_stack_get(p, s)->location);
		cnt += l->nline ? l->nline : 1;
	}
	if (cnt > *cap) {
		size_t nc = cnt * 2;
		uint32_t *b = realloc(*buf, nc * sizeof(**buf));
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = nc;
	}
	size_t i = cnt;
	for (uint32_t s = stack; s; s = strobe_stack_get(p, s)->parent) {
		uint32_t locid = strobe_stack_get(p, s)->location;
		/* Naming interns into the string table only, so this pointer stays valid. */
		const strobe_location *l = strobe_location_get(p, locid);
		uint32_t nline = l->nline;
		/* line[0] is the innermost inlined frame, so it is the deepest: fill from the end. */
		for (uint32_t j = 0; j < (nline ? nline : 1); j++) {
			uint32_t id = line_name(p, l, nline ? &l->line[j] : NULL, g);
			if (id == UINT32_MAX)
				return -ENOMEM;
			(*buf)[--i] = id;
		}
	}
	*n = cnt;
	return 0;
}

/* ---- trees --------------------------------------------------------------------------------- */

strobe_tree *strobe_tree_new(void)
{
	strobe_tree *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	uint32_t id;
	t->edges.fixed = 2 * sizeof(uint32_t);
	t->cap = 1024;
	t->nodes = calloc(t->cap, sizeof(*t->nodes));
	if (!t->nodes || strobe_itab_intern(&t->names, "", 1, &id, NULL) < 0) {
		strobe_tree_free(t);
		errno = ENOMEM;
		return NULL;
	}
	t->n = 1; /* the root: name "", its own parent */
	return t;
}

void strobe_tree_free(strobe_tree *t)
{
	if (!t)
		return;
	strobe_itab_free(&t->names);
	strobe_itab_free(&t->edges);
	free(t->nodes);
	free(t->sig_q);
	free(t);
}

/* The child of `parent` named `name` (a tree name id), created if missing. */
static int tree_child(strobe_tree *t, uint32_t parent, uint32_t name, uint32_t *out)
{
	uint32_t key[2] = {parent, name}, eid;
	bool added;
	int r = strobe_itab_intern(&t->edges, key, sizeof(key), &eid, &added);
	if (r < 0)
		return r;
	/* Edge ids are dense and created in the same order as nodes, so node = edge id + 1. */
	*out = eid + 1;
	if (!added)
		return 0;
	if (t->n == t->cap) {
		strobe_tree_node *nn = realloc(t->nodes, t->cap * 2 * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap *= 2;
	}
	strobe_tree_node *nd = &t->nodes[t->n++];
	memset(nd, 0, sizeof(*nd));
	nd->name = name;
	nd->parent = parent;
	nd->next_sibling = t->nodes[parent].first_child;
	t->nodes[parent].first_child = *out;
	return 0;
}

static void tree_credit(strobe_tree *t, uint32_t leaf, int column, int64_t v)
{
	t->nodes[leaf].self[column] += v;
	for (uint32_t n = leaf;; n = t->nodes[n].parent) {
		t->nodes[n].total[column] += v;
		if (!n)
			break;
	}
}

int strobe_tree_add_stack(strobe_tree *t, const char *const *names, const size_t *lens, size_t n,
			  int column, int64_t value)
{
	uint32_t node = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t nm;
		/* Names are stored NUL-terminated so strobe_tree_name() returns a C string. */
		char small[256];
		char *k = lens[i] < sizeof(small) ? small : malloc(lens[i] + 1);
		if (!k)
			return -ENOMEM;
		memcpy(k, names[i], lens[i]);
		k[lens[i]] = 0;
		int r = strobe_itab_intern(&t->names, k, lens[i] + 1, &nm, NULL);
		if (k != small)
			free(k);
		if (r < 0 || (r = tree_child(t, node, nm, &node)) < 0)
			return r;
	}
	tree_credit(t, node, column, value);
	return 0;
}

/* Tree name id of profile string sid, through the lazily filled map (grown as p's string
 * table grows while naming frames). */
static int tree_name_of(strobe_tree *t, const strobe_profile *p, uint32_t sid, uint32_t **map,
			size_t *map_n, uint32_t *out)
{
	if (sid >= *map_n) {
		size_t nn = p->strings.n > sid ? p->strings.n : sid + 1;
		uint32_t *m2 = realloc(*map, nn * sizeof(*m2));
		if (!m2)
			return -ENOMEM;
		memset(m2 + *map_n, 0xff, (nn - *map_n) * sizeof(*m2));
		*map = m2;
		*map_n = nn;
	}
	if ((*map)[sid] == UINT32_MAX) {
		size_t len;
		const char *str = strobe_itab_get(&p->strings, sid, &len);
		int r = strobe_itab_intern(&t->names, str, len, &(*map)[sid], NULL);
		if (r < 0)
			return r;
	}
	*out = (*map)[sid];
	return 0;
}

/* Recomputes total[column] from self[column]: a node's id is always larger than its parent's,
 * so one backward pass adds every subtree into its parent. */
static void tree_totals(strobe_tree *t, int column)
{
	for (uint32_t n = 0; n < t->n; n++)
		t->nodes[n].total[column] = t->nodes[n].self[column];
	for (uint32_t n = t->n - 1; n > 0; n--)
		t->nodes[t->nodes[n].parent].total[column] += t->nodes[n].total[column];
}

int strobe_tree_add(strobe_tree *t, strobe_profile *p, int type, strobe_granularity g, int column,
		    double scale, unsigned flags)
{
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return -EINVAL;
	size_t map_n = 0;
	uint32_t *map = NULL, *frames = NULL, *path = NULL;
	size_t fcap = 0, nf, path_cap = 0;
	bool reverse = flags & STROBE_TREE_REVERSE;
	/* Stacks are a tree already: the tree node of stack s is its parent stack's node plus the
	 * frames of s's leaf location. Memoising that per stack id makes building O(stack nodes)
	 * rather than O(samples x depth). Reversed stacks share no such structure. */
	uint32_t *memo = reverse ? NULL : malloc(p->stacks.n * sizeof(*memo));
	int r = -ENOMEM;
	if (!reverse && !memo)
		goto out;
	if (memo) {
		memset(memo, 0xff, p->stacks.n * sizeof(*memo));
		memo[0] = 0;
	}
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (!v)
			continue;
		if (scale != 1.0)
			v = (int64_t)((double)v * scale + (v < 0 ? -0.5 : 0.5));
		uint32_t stack = strobe_sample(p, s)->stack, node = 0;
		if (reverse) {
			if ((r = strobe_stack_frames(p, stack, g, &frames, &fcap, &nf)) < 0)
				goto out;
			for (size_t i = nf; i-- > 0;) {
				uint32_t nm;
				if ((r = tree_name_of(t, p, frames[i], &map, &map_n, &nm)) < 0 ||
				    (r = tree_child(t, node, nm, &node)) < 0)
					goto out;
			}
		} else {
			/* Climb to the nearest memoised ancestor, then come back down. */
			size_t depth = 0;
			for (uint32_t a = stack; memo[a] == UINT32_MAX; a = strobe_stack_get(p, a)->parent) {
				if (depth == path_cap) {
					path_cap = path_cap ? path_cap * 2 : 64;
					uint32_t *np = realloc(path, path_cap * sizeof(*np));
					if (!np) {
						r = -ENOMEM;
						goto out;
					}
					path = np;
				}
				path[depth++] = a;
			}
			while (depth) {
				uint32_t a = path[--depth];
				const strobe_stack_node *sn = strobe_stack_get(p, a);
				node = memo[sn->parent];
				const strobe_location *l = strobe_location_get(p, sn->location);
				uint32_t nl = l->nline ? l->nline : 1;
				for (uint32_t j = nl; j-- > 0;) { /* outermost inlined frame first */
					uint32_t sid = line_name(p, l, l->nline ? &l->line[j] : NULL, g), nm;
					if (sid == UINT32_MAX) {
						r = -ENOMEM;
						goto out;
					}
					if ((r = tree_name_of(t, p, sid, &map, &map_n, &nm)) < 0 ||
					    (r = tree_child(t, node, nm, &node)) < 0)
						goto out;
				}
				memo[a] = node;
			}
			node = memo[stack];
		}
		t->nodes[node].self[column] += v;
	}
	tree_totals(t, column);
	r = 0;
out:
	free(map);
	free(frames);
	free(memo);
	free(path);
	return r;
}

static const strobe_tree *sort_tree;
static int child_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return strcmp(strobe_tree_name(sort_tree, x), strobe_tree_name(sort_tree, y));
}

int strobe_tree_sort(strobe_tree *t)
{
	uint32_t *kids = NULL;
	size_t cap = 0;
	/* qsort has no context argument in C17; the tree is passed through a file-scope pointer,
	 * which makes this function non-reentrant (documented in the header's spirit: trees are
	 * built and sorted by one thread). */
	sort_tree = t;
	for (uint32_t n = 0; n < t->n; n++) {
		size_t k = 0;
		for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling) {
			if (k == cap) {
				cap = cap ? cap * 2 : 64;
				uint32_t *nk = realloc(kids, cap * sizeof(*nk));
				if (!nk) {
					free(kids);
					return -ENOMEM;
				}
				kids = nk;
			}
			kids[k++] = c;
		}
		if (k < 2)
			continue;
		qsort(kids, k, sizeof(*kids), child_cmp);
		t->nodes[n].first_child = kids[0];
		for (size_t i = 0; i + 1 < k; i++)
			t->nodes[kids[i]].next_sibling = kids[i + 1];
		t->nodes[kids[k - 1]].next_sibling = 0;
	}
	free(kids);
	return 0;
}
