// SPDX-License-Identifier: Apache-2.0
/*
 * Call trees in the shape Grafana draws flame graphs from (querier.v1.FlameGraph): one row of
 * numbers per depth, each node as (x offset from the end of the previous node on its row, total,
 * self, name index), and, for a comparison (FlameGraphDiff), the same three numbers for each side
 * followed by the name. Rows are written left to right in the tree's child order, so a reader
 * rebuilds every node's x by summing offsets and totals along its row. Pure: a strobe_tree in,
 * arrays out, so tests/unit/test_flamegraph.c checks it without a server.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

static int cmp_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x > y ? -1 : x < y;
}

static int64_t weight(const strobe_tree_node *n, int ncol)
{
	int64_t a = llabs(n->total[0]), b = ncol > 1 ? llabs(n->total[1]) : 0;
	return a > b ? a : b;
}

/* The smallest weight a node needs to be kept: that of the max_nodes-th heaviest node (the root
 * not counted), or 0 when every node fits. */
static int threshold(const strobe_tree *t, int ncol, size_t max_nodes, int64_t *out)
{
	*out = 0;
	if (!max_nodes || t->n <= max_nodes + 1)
		return 0;
	int64_t *v = malloc((t->n - 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 1; i < t->n; i++)
		v[i - 1] = weight(&t->nodes[i], ncol);
	qsort(v, t->n - 1, sizeof(*v), cmp_desc);
	*out = v[max_nodes - 1];
	if (*out == 0)
		*out = 1; /* zero-weight nodes are never worth a place */
	free(v);
	return 0;
}

static int row_push(srv_flame_row *row, const int64_t *vals, size_t n)
{
	if (row->n + n > row->cap) {
		size_t nc = row->cap ? row->cap * 2 : 32;
		while (nc < row->n + n)
			nc *= 2;
		int64_t *nv = realloc(row->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		row->v = nv;
		row->cap = nc;
	}
	memcpy(row->v + row->n, vals, n * sizeof(*vals));
	row->n += n;
	return 0;
}

typedef struct frame {
	uint32_t node, depth;
	int64_t x[2]; /* this node's left edge per column */
} frame;

int srv_flame_build(const strobe_tree *t, int ncol, size_t max_nodes, srv_flame *f)
{
	memset(f, 0, sizeof(*f));
	if (ncol < 1 || ncol > 2 || !t->n)
		return -EINVAL;
	f->ncol = ncol;
	int64_t thr;
	int rc = threshold(t, ncol, max_nodes, &thr);
	/* name ids of the tree -> indices in f->names, assigned in the order names are met */
	uint32_t maxname = 0;
	for (uint32_t i = 0; i < t->n; i++)
		if (t->nodes[i].name > maxname)
			maxname = t->nodes[i].name;
	uint32_t *map = rc ? NULL : calloc((size_t)maxname + 1, sizeof(*map));
	f->names = rc ? NULL : calloc((size_t)maxname + 2, sizeof(*f->names));
	frame *st = rc ? NULL : malloc(t->n * sizeof(*st));
	if (!map || !f->names || !st) {
		rc = -ENOMEM;
		goto out;
	}
	f->names[f->nnames++] = "total"; /* the root, as Pyroscope names it */
	size_t sp = 0;
	st[sp++] = (frame){0, 0, {0, 0}};
	while (sp) {
		frame fr = st[--sp];
		const strobe_tree_node *n = &t->nodes[fr.node];
		if (fr.depth >= f->nrows) {
			size_t nr = f->nrows ? f->nrows * 2 : 16;
			srv_flame_row *rows = realloc(f->rows, nr * sizeof(*rows));
			if (!rows) {
				rc = -ENOMEM;
				goto out;
			}
			memset(rows + f->nrows, 0, (nr - f->nrows) * sizeof(*rows));
			f->rows = rows;
			f->nrows = nr;
		}
		if (fr.depth + 1 > f->depth)
			f->depth = fr.depth + 1;
		srv_flame_row *row = &f->rows[fr.depth];
		uint32_t idx = 0;
		if (fr.node) {
			if (!map[n->name]) {
				map[n->name] = (uint32_t)f->nnames;
				f->names[f->nnames++] = strobe_tree_name(t, fr.node);
			}
			idx = map[n->name];
		}
		int64_t vals[7];
		size_t k = 0;
		for (int c = 0; c < ncol; c++) {
			vals[k++] = fr.x[c] - row->end[c];
			vals[k++] = n->total[c];
			vals[k++] = n->self[c];
			row->end[c] = fr.x[c] + n->total[c];
			if (n->self[c] > f->max_self)
				f->max_self = n->self[c];
		}
		vals[k++] = idx;
		if ((rc = row_push(row, vals, k)) < 0)
			goto out;
		/* Children go on the stack right to left, so the leftmost is written first; each
		 * starts where its left siblings end. */
		size_t first = sp;
		int64_t x[2] = {fr.x[0], fr.x[1]};
		for (uint32_t c = n->first_child; c; c = t->nodes[c].next_sibling) {
			if (weight(&t->nodes[c], ncol) < thr || weight(&t->nodes[c], ncol) == 0)
				continue;
			st[sp++] = (frame){c, fr.depth + 1, {x[0], x[1]}};
			for (int k2 = 0; k2 < ncol; k2++)
				x[k2] += t->nodes[c].total[k2];
		}
		for (size_t a = first, b = sp; b > a + 1; a++, b--) {
			frame tmp = st[a];
			st[a] = st[b - 1];
			st[b - 1] = tmp;
		}
	}
	f->total[0] = t->nodes[0].total[0];
	f->total[1] = ncol > 1 ? t->nodes[0].total[1] : 0;
out:
	free(map);
	free(st);
	if (rc < 0)
		srv_flame_free(f);
	return rc;
}

void srv_flame_free(srv_flame *f)
{
	for (size_t i = 0; f->rows && i < f->nrows; i++)
		free(f->rows[i].v);
	free(f->rows);
	free(f->names);
	memset(f, 0, sizeof(*f));
}

/* Folds fine buckets into steps: per step the sum of its buckets, or with average the sum over
 * the buckets that hold data (a non-zero value), so a step is the mean of its points' totals
 * however many points fall in it. */
void srv_fold_steps(const int64_t *fine, size_t nfine, size_t per_step, bool average,
		    double *out, bool *has, size_t nsteps)
{
	for (size_t s = 0; s < nsteps; s++) {
		double sum = 0;
		size_t cnt = 0;
		for (size_t k = s * per_step; k < (s + 1) * per_step && k < nfine; k++) {
			sum += (double)fine[k];
			cnt += fine[k] != 0;
		}
		has[s] = cnt > 0;
		out[s] = average && cnt ? sum / (double)cnt : sum;
	}
}
