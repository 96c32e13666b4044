// SPDX-License-Identifier: Apache-2.0
/*
 * JSON outputs, built with jansson: a nested call tree ({"name","self","total","children"}) for
 * programs, a flat node array for the web UI's flame graph (compact and parsed fast by a browser
 * even at a million nodes: see strobe_json_flat_write), and speedscope's file format ("sampled" profile: shared frame table,
 * one stack of frame indices per sample, weights) so profiles open at speedscope.app.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/diffsig.h"

/* jansson takes only valid UTF-8; frame names come from binaries and text files and may not be.
 * Invalid bytes are replaced by '?' so a name never vanishes from the output. */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char *c = strdup(s);
	if (!c)
		return NULL;
	for (unsigned char *q = (unsigned char *)c; *q; q++)
		if (*q >= 0x80)
			*q = '?';
	j = json_string(c);
	free(c);
	return j;
}

static json_t *tree_node_json(const strobe_tree *t, uint32_t n, int depth)
{
	const strobe_tree_node *nd = &t->nodes[n];
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "name", jstr(n ? strobe_tree_name(t, n) : "total"));
	json_object_set_new(o, "self", json_integer(nd->self[0]));
	json_object_set_new(o, "total", json_integer(nd->total[0]));
	if (t->diff) {
		json_object_set_new(o, "base_self", json_integer(nd->self[1]));
		json_object_set_new(o, "base_total", json_integer(nd->total[1]));
		if (t->sig_q && n) {
			json_object_set_new(o, "q", json_real(t->sig_q[n]));
			json_object_set_new(o, "noise", json_boolean(strobe_tree_noise(t, n)));
		}
	}
	if (nd->first_child && depth < (int)STROBE_MAX_DEPTH) {
		json_t *kids = json_array();
		for (uint32_t c = nd->first_child; c; c = t->nodes[c].next_sibling)
			json_array_append_new(kids, tree_node_json(t, c, depth + 1));
		json_object_set_new(o, "children", kids);
	}
	return o;
}

int strobe_json_tree_write(FILE *out, const strobe_tree *t, const char *type, const char *unit)
{
	json_t *root = json_object();
	if (!root)
		return -ENOMEM;
	json_object_set_new(root, "type", json_string(type));
	json_object_set_new(root, "unit", json_string(unit));
	json_object_set_new(root, "diff", json_boolean(t->diff));
	if (t->sig_q) {
		json_object_set_new(root, "confidence", json_real(t->sig_conf));
		json_object_set_new(root, "significance",
				    json_string("binomial count test per frame, Benjamini-Hochberg"));
	}
	json_object_set_new(root, "root", tree_node_json(t, 0, 0));
	int r = json_dumpf(root, out, JSON_COMPACT | JSON_ENSURE_ASCII) < 0 ? -EIO : 0;
	fputc('\n', out);
	json_decref(root);
	return r;
}

/* Writes one JSON string (escaped by jansson, invalid UTF-8 replaced as jstr does). */
static int put_jstr(FILE *out, const char *s)
{
	json_t *j = jstr(s);
	if (!j)
		return -ENOMEM;
	int r = json_dumpf(j, out, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) < 0 ? -EIO : 0;
	json_decref(j);
	return r;
}

/* Decimal digits of v at p; returns the end. */
static char *put_int(char *p, int64_t v)
{
	char tmp[20];
	int k = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	if (v < 0)
		*p++ = '-';
	do {
		tmp[k++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (k)
		*p++ = tmp[--k];
	return p;
}

/*
 * The numbers are printed by hand rather than built as jansson values: a million-node tree would
 * otherwise need four million json_t objects (hundreds of MB) to print a few tens of MB.
 * Pre-order lets the reader lay frames out in one pass: a node's x is where its parent's next
 * child starts, kept per depth.
 */
int strobe_json_flat_write(FILE *out, const strobe_tree *t, const char *type, const char *unit)
{
	int r;
	fputs("{\"type\":", out);
	if ((r = put_jstr(out, type)) < 0)
		return r;
	fputs(",\"unit\":", out);
	if ((r = put_jstr(out, unit)) < 0)
		return r;
	fprintf(out, ",\"diff\":%s,\"stride\":%d,\"names\":[", t->diff ? "true" : "false",
		t->diff ? 6 : 4);
	for (uint32_t i = 0; i < t->names.n; i++) {
		if (i)
			fputc(',', out);
		if ((r = put_jstr(out, (const char *)strobe_itab_get(&t->names, i, NULL))) < 0)
			return r;
	}
	fputs("],\"nodes\":[", out);
	/* Iterative pre-order walk: the tree may be deeper than the C stack allows recursion. */
	uint32_t n = t->n ? 0 : UINT32_MAX, depth = 0;
	bool first = true;
	while (n != UINT32_MAX) {
		const strobe_tree_node *nd = &t->nodes[n];
		/* Formatted by hand into one small buffer: printf's parsing was a third of the
		 * writer's time on big trees. 6 numbers of at most 20 characters and commas fit. */
		char line[6 * 21 + 2], *p = line;
		if (!first)
			*p++ = ',';
		p = put_int(p, nd->name);
		*p++ = ',';
		p = put_int(p, depth);
		*p++ = ',';
		p = put_int(p, nd->self[0]);
		*p++ = ',';
		p = put_int(p, nd->total[0]);
		if (t->diff) {
			*p++ = ',';
			p = put_int(p, nd->self[1]);
			*p++ = ',';
			p = put_int(p, nd->total[1]);
		}
		fwrite(line, 1, (size_t)(p - line), out);
		first = false;
		if (nd->first_child) {
			n = nd->first_child;
			depth++;
			continue;
		}
		/* Up until a node with a next sibling; the root ends the walk. */
		while (n && !t->nodes[n].next_sibling) {
			n = t->nodes[n].parent;
			depth--;
		}
		n = n ? t->nodes[n].next_sibling : UINT32_MAX;
	}
	fputc(']', out);
	if (t->diff && t->sig_q) {
		/* 1 per node, in the same pre-order, when its change is noise at the confidence:
		 * the UI draws those pale. */
		fprintf(out, ",\"confidence\":%g,\"significance\":\"binomial count test per frame, "
			     "Benjamini-Hochberg\",\"noise\":[", t->sig_conf);
		first = true;
		for (n = 0; n != UINT32_MAX;) {
			fputs(first ? "" : ",", out);
			fputc(n && strobe_tree_noise(t, n) ? '1' : '0', out);
			first = false;
			if (t->nodes[n].first_child) {
				n = t->nodes[n].first_child;
				continue;
			}
			while (n && !t->nodes[n].next_sibling)
				n = t->nodes[n].parent;
			n = n ? t->nodes[n].next_sibling : UINT32_MAX;
		}
		fputc(']', out);
	}
	fputs("}\n", out);
	return ferror(out) ? -EIO : 0;
}

static const char *speedscope_unit(const char *unit)
{
	/* speedscope knows none, nanoseconds, microseconds, milliseconds, seconds, bytes. */
	static const char *const known[] = {"nanoseconds", "microseconds", "milliseconds",
					    "seconds", "bytes"};
	for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
		if (strcmp(unit, known[i]) == 0)
			return known[i];
	return "none";
}

int strobe_speedscope_write(FILE *out, strobe_profile *p, int type, strobe_granularity g,
			    const char *name)
{
	if (type < 0 || (uint32_t)type >= p->ntypes)
		return -EINVAL;
	json_t *root = json_object(), *frames = json_array(), *samples = json_array(),
	       *weights = json_array();
	/* Frame index per profile string id, assigned on first use. */
	size_t cap = p->strings.n;
	int64_t *idx = malloc(cap * sizeof(*idx));
	uint32_t *fr = NULL;
	size_t fcap = 0, nf;
	int64_t total = 0, nframes = 0;
	int r = -ENOMEM;
	if (!root || !frames || !samples || !weights || !idx)
		goto out;
	for (size_t i = 0; i < cap; i++)
		idx[i] = -1;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (!v)
			continue;
		if ((r = strobe_stack_frames(p, strobe_sample(p, s)->stack, g, &fr, &fcap, &nf)) < 0)
			goto out;
		if (p->strings.n > cap) {
			int64_t *n2 = realloc(idx, p->strings.n * sizeof(*n2));
			if (!n2) {
				r = -ENOMEM;
				goto out;
			}
			for (size_t i = cap; i < p->strings.n; i++)
				n2[i] = -1;
			idx = n2;
			cap = p->strings.n;
		}
		json_t *stack = json_array();
		for (size_t i = 0; i < nf; i++) {
			if (idx[fr[i]] < 0) {
				idx[fr[i]] = nframes++;
				json_t *f = json_object();
				json_object_set_new(f, "name", jstr(strobe_str(p, fr[i])));
				json_array_append_new(frames, f);
			}
			json_array_append_new(stack, json_integer(idx[fr[i]]));
		}
		json_array_append_new(samples, stack);
		json_array_append_new(weights, json_integer(v));
		total += v;
	}
	json_object_set_new(root, "$schema",
			    json_string("https://www.speedscope.app/file-format-schema.json"));
	json_t *shared = json_object();
	json_object_set_new(shared, "frames", frames);
	frames = NULL;
	json_object_set_new(root, "shared", shared);
	json_t *prof = json_object();
	json_object_set_new(prof, "type", json_string("sampled"));
	json_object_set_new(prof, "name", jstr(name ? name : "strobe"));
	json_object_set_new(prof, "unit",
			    json_string(speedscope_unit(strobe_str(p, p->types[type].unit))));
	json_object_set_new(prof, "startValue", json_integer(0));
	json_object_set_new(prof, "endValue", json_integer(total));
	json_object_set_new(prof, "samples", samples);
	json_object_set_new(prof, "weights", weights);
	samples = weights = NULL;
	json_t *profs = json_array();
	json_array_append_new(profs, prof);
	json_object_set_new(root, "profiles", profs);
	json_object_set_new(root, "name", jstr(name ? name : "strobe"));
	json_object_set_new(root, "activeProfileIndex", json_integer(0));
	json_object_set_new(root, "exporter", json_string("strobe"));
	r = json_dumpf(root, out, JSON_COMPACT | JSON_ENSURE_ASCII) < 0 ? -EIO : 0;
	fputc('\n', out);
out:
	json_decref(root);
	json_decref(frames);
	json_decref(samples);
	json_decref(weights);
	free(idx);
	free(fr);
	return r;
}
