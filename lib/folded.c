// SPDX-License-Identifier: Apache-2.0
/*
 * Folded stacks, the flattest text form of a profile and FlameGraph's lingua franca: one line per
 * stack, frames root first separated by ';', then a space and a count ("main;work;hash 42").
 * Also reads the two-count form difffolded.pl writes ("stack base new"), as a profile with the
 * sample types base and new.
 *
 * Written by hand: the format is a line split, and speed matters (it is the input of the
 * flame graph benchmark). Strict where FlameGraph is lax, since silently skipping a malformed
 * line loses samples: a line without a count is an error naming the line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/stack_text.h"

/* Parses a trailing " <integer>" of [s, *end); on success moves *end before the space. */
static bool take_count(const char *s, const char **end, int64_t *out)
{
	const char *e = *end, *d = e;
	while (d > s && d[-1] >= '0' && d[-1] <= '9')
		d--;
	if (d == e || e - d > 18)
		return false;
	const char *sign = d;
	if (sign > s && sign[-1] == '-')
		sign--;
	if (sign == s || (sign[-1] != ' ' && sign[-1] != '\t'))
		return false;
	int64_t v = 0;
	for (const char *q = d; q < e; q++)
		v = v * 10 + (*q - '0');
	*out = sign < d ? -v : v;
	*end = sign - 1;
	return true;
}

int strobe_folded_decode(const char *buf, size_t len, const char *name, strobe_profile **out,
			 strobe_err *err)
{
	strobe_stack_parser sp = {0};
	strobe_profile *prof = NULL;
	int r = -ENOMEM;
	int ncounts = 0; /* 1 or 2, fixed by the first data line */
	size_t lineno = 0, nlines = 0;
	if (!(prof = strobe_profile_new()) || strobe_stack_parser_init(&sp, prof, true) < 0)
		goto fail;
	const char *p = buf, *end = buf + len;
	while (p < end) {
		lineno++;
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *next = nl ? nl + 1 : end;
		while (le > p && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t'))
			le--;
		if (le == p || *p == '#') { /* blank lines and comments */
			p = next;
			continue;
		}
		int64_t v[2];
		const char *e = le;
		if (!take_count(p, &e, &v[1])) {
			r = strobe_errf(err, -EINVAL,
					"%s:%zu: folded line has no count (expected \"frame;frame;... "
					"COUNT\")",
					name, lineno);
			goto fail;
		}
		int n = take_count(p, &e, &v[0]) ? 2 : 1;
		if (!ncounts) {
			ncounts = n;
			if ((r = n == 2 ? strobe_profile_add_type(prof, "base", "count")
				 : strobe_profile_add_type(prof, "samples", "count")) < 0 ||
			    (n == 2 && (r = strobe_profile_add_type(prof, "new", "count")) < 0))
				goto fail;
		} else if (n != ncounts) {
			/* One count where two were expected means the "count" was part of a frame
			 * name; in two-count files every line has both. */
			if (ncounts == 2) {
				r = strobe_errf(err, -EINVAL,
						"%s:%zu: expected two counts (base new) as on the "
						"lines before",
						name, lineno);
				goto fail;
			}
			/* A one-count file whose stack ends in a number-named frame. */
			e = le;
			take_count(p, &e, &v[1]);
		}
		if (ncounts == 1)
			v[0] = v[1];
		uint32_t stack;
		if ((r = strobe_stack_parse(&sp, p, (size_t)(e - p), name, lineno, &stack, err)) < 0)
			goto fail;
		if ((r = strobe_sample_add(prof, stack, 0, v)) < 0)
			goto fail;
		nlines++;
		p = next;
	}
	if (!nlines) {
		r = strobe_errf(err, -EINVAL, "%s: no stacks in folded input", name);
		goto fail;
	}
	strobe_stack_parser_free(&sp);
	*out = prof;
	return 0;
fail:
	if (r == -ENOMEM)
		strobe_errf(err, r, "%s: out of memory", name);
	strobe_stack_parser_free(&sp);
	strobe_profile_free(prof);
	return r;
}

typedef struct fline {
	char *text;
	size_t len;
	int64_t value;
} fline;

static int fline_cmp(const void *a, const void *b)
{
	const fline *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->text, y->text, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

int strobe_folded_write(FILE *out, strobe_profile *p, int type, strobe_granularity g)
{
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return -EINVAL;
	/* Different samples can print the same line (labels differ, or addresses fold into one
	 * function): sum them by their frame-name sequence first. */
	strobe_itab keys = {0};
	int64_t *sums = NULL;
	size_t scap = 0;
	uint32_t *frames = NULL;
	size_t fcap = 0, nf;
	fline *lines = NULL;
	int r = -ENOMEM;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (!v)
			continue;
		if ((r = strobe_stack_frames(p, strobe_sample(p, s)->stack, g, &frames, &fcap, &nf)) < 0)
			goto out;
		uint32_t id;
		bool added;
		if ((r = strobe_itab_intern(&keys, frames, nf * sizeof(*frames), &id, &added)) < 0)
			goto out;
		if (id >= scap) {
			scap = scap ? scap * 2 : 1024;
			int64_t *ns = realloc(sums, scap * sizeof(*ns));
			if (!ns) {
				r = -ENOMEM;
				goto out;
			}
			sums = ns;
		}
		sums[id] = added ? v : sums[id] + v;
	}
	lines = calloc(keys.n ? keys.n : 1, sizeof(*lines));
	if (!lines)
		goto out;
	for (uint32_t k = 0; k < keys.n; k++) {
		size_t klen;
		const uint32_t *ids = strobe_itab_get(&keys, k, &klen);
		size_t n = klen / sizeof(uint32_t), tl = 0;
		for (size_t i = 0; i < n; i++)
			tl += strobe_str_len(p, ids[i]) + 1;
		char *t = malloc(tl + 1);
		if (!t) {
			r = -ENOMEM;
			goto out;
		}
		size_t o = 0;
		for (size_t i = 0; i < n; i++) {
			size_t l = strobe_str_len(p, ids[i]);
			if (i)
				t[o++] = ';';
			memcpy(t + o, strobe_str(p, ids[i]), l);
			o += l;
		}
		t[o] = 0;
		lines[k] = (fline){t, o, sums[k]};
	}
	qsort(lines, keys.n, sizeof(*lines), fline_cmp);
	for (uint32_t k = 0; k < keys.n; k++) {
		fwrite(lines[k].text, 1, lines[k].len, out);
		fprintf(out, " %lld\n", (long long)lines[k].value);
	}
	r = ferror(out) ? -EIO : 0;
out:
	if (lines)
		for (uint32_t k = 0; k < keys.n; k++)
			free(lines[k].text);
	free(lines);
	free(sums);
	free(frames);
	strobe_itab_free(&keys);
	return r;
}

/* ---- folded text straight to a call tree -------------------------------------------------- */

typedef struct fline_ref {
	const char *p;   /* line start */
	size_t len;      /* length of the frames part */
	int64_t value;
} fline_ref;

static int fref_cmp(const void *a, const void *b)
{
	const fline_ref *x = a, *y = b;
	int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Pass 1 of strobe_tree_from_folded: the lines, their counts, the total, sorted. -ENOTSUP for
 * two counts a line (difffolded: the caller takes the profile path). */
static int fold_lines(const char *buf, size_t len, const char *name, fline_ref **out, size_t *nout,
		      int64_t *total_out, strobe_err *err)
{
	fline_ref *lines = NULL;
	size_t n = 0, cap = 0, lineno = 0;
	int64_t total = 0;
	bool sorted = true;
	for (const char *p = buf, *end = buf + len; p < end;) {
		lineno++;
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *next = nl ? nl + 1 : end;
		while (le > p && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t'))
			le--;
		if (le == p || *p == '#') {
			p = next;
			continue;
		}
		int64_t v, v2;
		const char *e = le;
		if (!take_count(p, &e, &v)) {
			free(lines);
			return strobe_errf(err, -EINVAL,
					   "%s:%zu: folded line has no count (expected \"frame;frame;... "
					   "COUNT\")",
					   name, lineno);
		}
		const char *e2 = e;
		if (take_count(p, &e2, &v2)) {
			free(lines);
			return -ENOTSUP;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			fline_ref *nl2 = realloc(lines, cap * sizeof(*nl2));
			if (!nl2) {
				free(lines);
				return -ENOMEM;
			}
			lines = nl2;
		}
		lines[n] = (fline_ref){p, (size_t)(e - p), v};
		if (n && sorted && fref_cmp(&lines[n - 1], &lines[n]) > 0)
			sorted = false;
		n++;
		total += v < 0 ? -v : v;
		p = next;
	}
	if (!n) {
		free(lines);
		return strobe_errf(err, -EINVAL, "%s: no stacks in folded input", name);
	}
	if (!sorted)
		qsort(lines, n, sizeof(*lines), fref_cmp);
	*out = lines;
	*nout = n;
	*total_out = total;
	return 0;
}

/* Pass 2's open path: the nodes of the frames open at each depth (node[0] is the root), each
 * one's previous sibling (to unlink it when it is dropped), the last child opened under each,
 * and where each frame ends in the current line. */
typedef struct fold_walk {
	uint32_t node[STROBE_MAX_DEPTH + 1], prev_sib[STROBE_MAX_DEPTH + 1];
	uint32_t last_child[STROBE_MAX_DEPTH + 1];
	size_t fend[STROBE_MAX_DEPTH + 1];
	size_t depth; /* open frames below the root */
	double min_total;
} fold_walk;

/* Closes the open frames deeper than `keep`, deepest first. A frame whose total is below the
 * threshold when it closes is dropped with its subtree (the newest nodes, so the node array is
 * just cut back); its value stays in its ancestors' totals, which is all a flame graph draws of
 * it. */
static void fold_close(strobe_tree *t, fold_walk *w, size_t keep)
{
	for (size_t k = w->depth; k > keep; k--) {
		uint32_t id = w->node[k];
		if ((double)llabs(t->nodes[id].total[0]) < w->min_total) {
			t->n = id; /* the subtree is ids [id, n) */
			if (w->prev_sib[k])
				t->nodes[w->prev_sib[k]].next_sibling = 0;
			else
				t->nodes[w->node[k - 1]].first_child = 0;
			w->last_child[k - 1] = w->prev_sib[k];
		}
	}
	w->depth = keep;
}

/* Opens frame f[0..flen) under the deepest open one; it ends at `end` in its line. */
static int fold_open(strobe_tree *t, fold_walk *w, const char *f, size_t flen, size_t end)
{
	char small[256];
	char *k = flen < sizeof(small) ? small : malloc(flen + 1);
	uint32_t nm;
	if (!k)
		return -ENOMEM;
	memcpy(k, f, flen);
	k[flen] = 0;
	int r = strobe_itab_intern(&t->names, k, flen + 1, &nm, NULL);
	if (k != small)
		free(k);
	if (r < 0)
		return r;
	if (t->n == t->cap) {
		strobe_tree_node *nn = realloc(t->nodes, t->cap * 2 * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap *= 2;
	}
	size_t d = w->depth;
	uint32_t id = t->n++, par = w->node[d];
	memset(&t->nodes[id], 0, sizeof(t->nodes[id]));
	t->nodes[id].name = nm;
	t->nodes[id].parent = par;
	d++;
	w->prev_sib[d] = w->last_child[d - 1];
	if (w->prev_sib[d])
		t->nodes[w->prev_sib[d]].next_sibling = id;
	else
		t->nodes[par].first_child = id;
	w->last_child[d - 1] = id;
	w->last_child[d] = 0;
	w->node[d] = id;
	w->fend[d] = end;
	w->depth = d;
	return 0;
}

int strobe_tree_from_folded(strobe_tree *t, const char *buf, size_t len, const char *name,
			    double min_fraction, strobe_err *err)
{
	fline_ref *lines = NULL;
	size_t n = 0;
	int64_t total = 0;
	int r = fold_lines(buf, len, name, &lines, &n, &total, err);
	if (r < 0)
		goto out;
	/* Pass 2: walk the sorted lines keeping the open path; a line shares its leading frames
	 * with the previous one, so only the frames past the shared prefix are closed and
	 * opened. */
	fold_walk *w = calloc(1, sizeof(*w));
	if (!w) {
		r = -ENOMEM;
		goto out;
	}
	w->min_total = min_fraction * (double)total;
	const fline_ref *prev = NULL;
	for (size_t i = 0; i < n && !r; i++) {
		const fline_ref *l = &lines[i];
		/* Frames shared with the previous line: equal bytes up to a frame end that is a
		 * frame end in both. */
		size_t common = 0;
		if (prev) {
			size_t m = prev->len < l->len ? prev->len : l->len, d = 0;
			while (d < m && prev->p[d] == l->p[d])
				d++;
			while (common < w->depth && w->fend[common + 1] <= d &&
			       (w->fend[common + 1] == l->len || l->p[w->fend[common + 1]] == ';'))
				common++;
		}
		fold_close(t, w, common);
		/* Open the rest of this line's frames. */
		size_t off = common ? w->fend[common] + 1 : 0;
		while (off <= l->len) {
			const char *f = l->p + off;
			const char *semi = memchr(f, ';', l->len - off);
			size_t flen = semi ? (size_t)(semi - f) : l->len - off;
			if (flen > STROBE_MAX_NAME || w->depth + 1 > STROBE_MAX_DEPTH) {
				r = strobe_errf(err, -EINVAL, "%s: stack \"%.40s...\" has a frame name over "
						"%u bytes or is deeper than %u frames", name, l->p,
						STROBE_MAX_NAME, STROBE_MAX_DEPTH);
				break;
			}
			if ((r = fold_open(t, w, f, flen, off + flen)) < 0 || !semi)
				break;
			off += flen + 1;
		}
		if (r)
			break;
		for (size_t k = 0; k <= w->depth; k++)
			t->nodes[w->node[k]].total[0] += l->value;
		t->nodes[w->node[w->depth]].self[0] += l->value;
		prev = l;
	}
	if (!r) /* close what is still open */
		fold_close(t, w, 0);
	free(w);
out:
	if (r == -ENOMEM)
		strobe_errf(err, r, "%s: out of memory", name);
	free(lines);
	return r;
}
