// SPDX-License-Identifier: Apache-2.0
/*
 * The interactive SVG flame graph, plain and differential, written by hand: it is one of the
 * pictures strobe exists to draw, and no library draws it.
 *
 * Layout follows flamegraph.pl's conventions (root "all" at the bottom, or at the top for an
 * icicle; children left to right in name order; width proportional to the inclusive value;
 * frames narrower than --minwidth pixels left out, their value still inside their parent's
 * width). Each frame is a <g> with a <title> (the tooltip), a <rect> and a <text>, plus data-x /
 * data-w attributes in value units so the embedded script can zoom without recomputing.
 *
 * Differential graphs: a frame's width is the larger of its base and new value (computed
 * bottom-up so children always fit), so a frame that exists only in the base still appears; its
 * colour is the change of its inclusive value, red = grew, blue = shrank, near-white = the
 * same, the intensity relative to the largest change in the graph.
 *
 * The script (hover details, click to zoom, reset, regex search with the matched share counted
 * once per sample even when matches nest) is strobe's own.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/render.h"

typedef struct layout {
	const strobe_tree *t;
	const strobe_svg_opts *o;
	FILE *out;
	double *w;        /* per node: width in value units (column 0, or max(base,new) for diffs) */
	double total;     /* w[0] */
	double scale;     /* pixels per value unit */
	double minval;    /* frames narrower than this (value units) are omitted */
	int width, fh, fs, xpad, ypad1, ypad2, height, maxdepth;
	double maxdelta;  /* diffs: largest |new - base| of a non-root frame */
	uint32_t *stack;  /* DFS scratch */
	double *xs;       /* DFS: x (value units) per depth */
	size_t omitted;
} layout;

/* XML text with &, <, >, " escaped, control bytes dropped and invalid UTF-8 replaced, so a
 * name from any binary keeps the document well-formed. */
static void xml_escape(FILE *f, const char *s, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t chars = 0;
	while (*p && chars < max_chars) {
		unsigned char c = *p;
		if (c < 0x80) {
			switch (c) {
			case '&': fputs("&amp;", f); break;
			case '<': fputs("&lt;", f); break;
			case '>': fputs("&gt;", f); break;
			case '"': fputs("&quot;", f); break;
			default:
				if (c >= 0x20)
					fputc(c, f);
				else if (c == '\t')
					fputc(' ', f);
			}
			p++;
			chars++;
			continue;
		}
		size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
		size_t k = 1;
		while (n && k < n && (p[k] & 0xc0) == 0x80)
			k++;
		if (n && k == n) {
			fwrite(p, 1, n, f);
			p += n;
		} else {
			fputs("\xef\xbf\xbd", f); /* U+FFFD */
			p++;
		}
		chars++;
	}
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Deterministic stand-ins for flamegraph.pl's rand(): from the name (with --hash, so the same
 * function has the same colour in every graph) or from the node id (varied but reproducible). */
static void frame_rgb(const layout *L, uint32_t node, int *r, int *g, int *b)
{
	const char *name = strobe_tree_name(L->t, node);
	uint32_t h = L->o->hash ? name_hash(name) : (node * 2654435761u) ^ 0x9e3779b9u;
	double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0, v3 = ((h >> 16) & 0xff) / 255.0;
	const char *pal = L->o->colors ? L->o->colors : "hot";
	if (!strcmp(pal, "java") || !strcmp(pal, "js") || !strcmp(pal, "perl")) {
		/* Language palettes: green for managed code, aqua for inlined/builtin, yellow for
		 * C++, orange for the kernel, red otherwise (flamegraph.pl's scheme). */
		size_t n = strlen(name);
		if (n >= 4 && !strcmp(name + n - 4, "_[k]"))
			pal = "orange";
		else if (n >= 4 && (!strcmp(name + n - 4, "_[j]") || !strcmp(name + n - 4, "_[i]")))
			pal = "aqua";
		else if (strstr(name, "::"))
			pal = "yellow";
		else if (strchr(name, '/') || strchr(name, '.'))
			pal = "green";
		else
			pal = "red";
	}
	if (!strcmp(pal, "mem")) {
		*r = 0; *g = 190 + (int)(50 * v2); *b = (int)(210 * v1);
	} else if (!strcmp(pal, "io")) {
		*r = 80 + (int)(60 * v1); *g = *r; *b = 190 + (int)(55 * v2);
	} else if (!strcmp(pal, "wakeup")) {
		*r = 170 + (int)(40 * v1); *g = 160 + (int)(50 * v1); *b = 150 + (int)(60 * v1);
	} else if (!strcmp(pal, "chain")) {
		*r = 65 + (int)(30 * v1); *g = *r; *b = 190 + (int)(55 * v2);
	} else if (!strcmp(pal, "red")) {
		*r = 200 + (int)(55 * v1); *g = 50 + (int)(80 * v1); *b = *g;
	} else if (!strcmp(pal, "green")) {
		*g = 200 + (int)(55 * v1); *r = 50 + (int)(60 * v1); *b = *r;
	} else if (!strcmp(pal, "blue")) {
		*b = 205 + (int)(50 * v1); *r = 80 + (int)(60 * v1); *g = *r;
	} else if (!strcmp(pal, "aqua")) {
		*r = 50 + (int)(60 * v1); *g = 165 + (int)(55 * v1); *b = *g;
	} else if (!strcmp(pal, "yellow")) {
		*r = 175 + (int)(55 * v1); *g = *r; *b = 50 + (int)(20 * v1);
	} else if (!strcmp(pal, "purple")) {
		*r = 190 + (int)(65 * v1); *g = 80 + (int)(60 * v1); *b = *r;
	} else if (!strcmp(pal, "orange")) {
		*r = 190 + (int)(65 * v1); *g = 90 + (int)(65 * v1); *b = 0;
	} else { /* hot */
		*r = 205 + (int)(50 * v3); *g = (int)(230 * v1); *b = (int)(55 * v2);
	}
}

/* Diff colour: white at no change, saturating to red (grew) or blue (shrank). */
static void diff_rgb(const layout *L, uint32_t node, int *r, int *g, int *b)
{
	const strobe_tree_node *n = &L->t->nodes[node];
	double d = (double)(n->total[0] - n->total[1]);
	if (L->o->diff_negate)
		d = -d;
	double k = L->maxdelta > 0 ? fabs(d) / L->maxdelta : 0;
	int c = 250 - (int)(k * 210 + 0.5);
	if (d > 0) {
		*r = 250; *g = c; *b = c;
	} else if (d < 0) {
		*r = c; *g = c; *b = 250;
	} else {
		*r = 235; *g = 235; *b = 235;
	}
}

static void fmt_num(char *buf, size_t cap, double v)
{
	/* Values are integers in every format strobe reads; keep them exact up to 2^53. */
	if (fabs(v) < 9007199254740992.0 && v == floor(v))
		snprintf(buf, cap, "%.0f", v);
	else
		snprintf(buf, cap, "%.2f", v);
}

static void with_commas(char *out, size_t cap, int64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v < 0 ? -v : v);
	size_t o = 0;
	if (v < 0 && o + 1 < cap)
		out[o++] = '-';
	for (int i = 0; i < n && o + 1 < cap; i++) {
		out[o++] = tmp[i];
		if ((n - i - 1) % 3 == 0 && i != n - 1 && o + 1 < cap)
			out[o++] = ',';
	}
	out[o] = 0;
}

static void write_title(const layout *L, uint32_t node)
{
	const strobe_tree_node *n = &L->t->nodes[node];
	const char *cn = L->o->countname ? L->o->countname : "samples";
	FILE *f = L->out;
	char a[40], b[40], c[40];
	fputs("<title>", f);
	xml_escape(f, node ? strobe_tree_name(L->t, node) : "all", SIZE_MAX);
	if (!L->t->diff) {
		with_commas(a, sizeof(a), n->total[0]);
		fprintf(f, " (%s %s, %.2f%%)</title>", a, cn,
			L->total > 0 ? 100.0 * (double)n->total[0] / L->total : 0.0);
		return;
	}
	int64_t dt = n->total[0] - n->total[1], ds = n->self[0] - n->self[1];
	with_commas(a, sizeof(a), n->total[1]);
	with_commas(b, sizeof(b), n->total[0]);
	with_commas(c, sizeof(c), dt);
	fprintf(f, " (total: base %s, new %s, delta %s%s %s", a, b, dt > 0 ? "+" : "", c, cn);
	if (n->total[1])
		fprintf(f, " (%+.2f%%)", 100.0 * (double)dt / (double)n->total[1]);
	with_commas(a, sizeof(a), n->self[1]);
	with_commas(b, sizeof(b), n->self[0]);
	with_commas(c, sizeof(c), ds);
	fprintf(f, "; self: base %s, new %s, delta %s%s)</title>", a, b, ds > 0 ? "+" : "", c);
}

static void write_frame(layout *L, uint32_t node, int depth, double x)
{
	FILE *f = L->out;
	double px = L->xpad + x * L->scale, pw = L->w[node] * L->scale;
	double y = L->o->inverted ? L->ypad1 + depth * L->fh
				  : L->height - L->ypad2 - (depth + 1) * L->fh;
	int r, g, b;
	if (!node)
		r = 250, g = 250, b = 250;
	if (node && L->t->diff)
		diff_rgb(L, node, &r, &g, &b);
	else if (node)
		frame_rgb(L, node, &r, &g, &b);
	char xs[32], ws[32];
	fmt_num(xs, sizeof(xs), x);
	fmt_num(ws, sizeof(ws), L->w[node]);
	fprintf(f, "<g class=\"f\" data-x=\"%s\" data-w=\"%s\" data-d=\"%d\">", xs, ws, depth);
	write_title(L, node);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
		   "rx=\"2\" ry=\"2\"/>",
		px, y, pw, L->fh - 1, r, g, b);
	/* Text: as many characters as fit (about 0.59 em each), with ".." when cut. */
	size_t fit = (size_t)((pw - 6) / (L->fs * 0.59));
	const char *name = node ? strobe_tree_name(L->t, node) : "all";
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", px + 3, y + L->fh / 2.0 + L->fs / 2.0 - 2);
	if (fit >= 3) {
		size_t len = strlen(name);
		if (len <= fit) {
			xml_escape(f, name, SIZE_MAX);
		} else {
			xml_escape(f, name, fit - 2);
			fputs("..", f);
		}
	}
	fputs("</text></g>\n", f);
}

static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"(function () {\n"
	"  var svg = document.documentElement, W = +svg.getAttribute('data-width'),\n"
	"      XP = +svg.getAttribute('data-xpad'), FS = +svg.getAttribute('data-fs'),\n"
	"      TOTAL = +svg.getAttribute('data-total');\n"
	"  var frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	"  var details = document.getElementById('details'), matched = document.getElementById('matched');\n"
	"  var unzoom = document.getElementById('unzoom'), searchBtn = document.getElementById('search');\n"
	"  var view = {x: 0, w: TOTAL, d: -1}, current = null;\n"
	"  frames.forEach(function (g) {\n"
	"    g.fx = +g.getAttribute('data-x'); g.fw = +g.getAttribute('data-w');\n"
	"    g.fd = +g.getAttribute('data-d');\n"
	"    g.fname = g.querySelector('title').textContent.replace(/ \\((\\d[\\d,]* |total: ).*$/, '');\n"
	"  });\n"
	"  function fit(g, pw) {\n"
	"    var t = g.querySelector('text'), n = Math.floor((pw - 6) / (FS * 0.59)), s = g.fname;\n"
	"    t.textContent = n < 3 ? '' : (s.length <= n ? s : s.slice(0, n - 2) + '..');\n"
	"  }\n"
	"  function draw() {\n"
	"    var scale = (W - 2 * XP) / view.w;\n"
	"    frames.forEach(function (g) {\n"
	"      var inside = g.fx >= view.x && g.fx + g.fw <= view.x + view.w + 1e-9;\n"
	"      var above = g.fd <= view.d && g.fx <= view.x && g.fx + g.fw >= view.x + view.w - 1e-9;\n"
	"      if (!inside && !above) { g.style.display = 'none'; return; }\n"
	"      g.style.display = '';\n"
	"      var x = above ? 0 : g.fx - view.x, w = above ? view.w : g.fw;\n"
	"      var pw = w * scale, r = g.querySelector('rect');\n"
	"      if (pw < 0.1) { g.style.display = 'none'; return; }\n"
	"      r.setAttribute('x', XP + x * scale); r.setAttribute('width', pw);\n"
	"      g.querySelector('text').setAttribute('x', XP + x * scale + 3);\n"
	"      g.style.opacity = above && g.fd < view.d ? 0.6 : 1;\n"
	"      fit(g, pw);\n"
	"    });\n"
	"    unzoom.style.opacity = view.d >= 0 ? 1 : 0.2;\n"
	"  }\n"
	"  function zoom(g) { view = {x: g.fx, w: g.fw, d: g.fd}; draw(); }\n"
	"  function reset() { view = {x: 0, w: TOTAL, d: -1}; draw(); }\n"
	"  frames.forEach(function (g) {\n"
	"    g.addEventListener('click', function () { zoom(g); });\n"
	"    g.addEventListener('mouseover', function () {\n"
	"      details.textContent = g.querySelector('title').textContent; });\n"
	"    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  });\n"
	"  unzoom.addEventListener('click', reset);\n"
	"  function search(re) {\n"
	"    var rx;\n"
	"    try { rx = new RegExp(re); } catch (e) { matched.textContent = 'bad regex'; return; }\n"
	"    var spans = [];\n"
	"    frames.forEach(function (g) {\n"
	"      var r = g.querySelector('rect');\n"
	"      if (!r.hasAttribute('data-fill')) r.setAttribute('data-fill', r.getAttribute('fill'));\n"
	"      if (g.fd > 0 && rx.test(g.fname)) {\n"
	"        r.setAttribute('fill', 'rgb(230,0,230)'); spans.push([g.fx, g.fx + g.fw]);\n"
	"      } else r.setAttribute('fill', r.getAttribute('data-fill'));\n"
	"    });\n"
	"    /* A sample under two nested matches counts once: merge the intervals. */\n"
	"    spans.sort(function (a, b) { return a[0] - b[0]; });\n"
	"    var sum = 0, end = -1;\n"
	"    spans.forEach(function (s) {\n"
	"      if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; }\n"
	"      else if (s[1] > end) { sum += s[1] - end; end = s[1]; }\n"
	"    });\n"
	"    matched.textContent = 'Matched: ' + (100 * sum / TOTAL).toFixed(2) + '%';\n"
	"    searchBtn.textContent = 'Reset Search';\n"
	"    svg.setAttribute('data-matched', (100 * sum / TOTAL).toFixed(2));\n"
	"  }\n"
	"  function clearSearch() {\n"
	"    frames.forEach(function (g) { var r = g.querySelector('rect');\n"
	"      if (r.hasAttribute('data-fill')) r.setAttribute('fill', r.getAttribute('data-fill')); });\n"
	"    matched.textContent = ' '; searchBtn.textContent = 'Search';\n"
	"    svg.removeAttribute('data-matched');\n"
	"  }\n"
	"  searchBtn.addEventListener('click', function () {\n"
	"    if (svg.hasAttribute('data-matched')) { clearSearch(); return; }\n"
	"    var re = prompt('Search (regular expression):', ''); if (re) search(re);\n"
	"  });\n"
	"  window.addEventListener('keydown', function (e) {\n"
	"    if ((e.ctrlKey || e.metaKey) && e.key === 'f') {\n"
	"      e.preventDefault(); var re = prompt('Search (regular expression):', ''); if (re) search(re);\n"
	"    } else if (e.key === 'Escape') { reset(); clearSearch(); }\n"
	"  });\n"
	"  window.strobeFlame = {zoom: function (name) { var g = frames.filter(function (f) {\n"
	"    return f.fname === name; })[0]; if (g) zoom(g); return !!g; }, reset: reset, search: search,\n"
	"    clearSearch: clearSearch};\n"
	"})();\n"
	"]]></script>\n";

enum { SVG_XPAD = 10 };

double strobe_svg_min_fraction(const strobe_svg_opts *o)
{
	int width = o->width > 0 ? o->width : 1200;
	double minwidth = o->minwidth > 0 ? o->minwidth : 0.1;
	/* A little under the renderer's own cut, so rounding never drops a frame it would draw. */
	return 0.999 * minwidth / (width - 2.0 * SVG_XPAD);
}

int strobe_svg_write(FILE *out, const strobe_tree *t, const strobe_svg_opts *o)
{
	layout L = {.t = t, .o = o, .out = out};
	L.width = o->width > 0 ? o->width : 1200;
	L.fh = o->frame_height > 0 ? o->frame_height : 16;
	L.fs = o->font_size > 0 ? o->font_size : 12;
	L.xpad = SVG_XPAD;
	L.ypad1 = L.fs * 3 + (o->subtitle ? L.fs * 2 : 0);
	L.ypad2 = L.fs * 2 + 10;
	double minwidth = o->minwidth > 0 ? o->minwidth : 0.1;
	int r = -ENOMEM;
	L.w = malloc((t->n ? t->n : 1) * sizeof(*L.w));
	L.stack = malloc((t->n + 1) * sizeof(*L.stack));
	L.xs = malloc((t->n + 1) * sizeof(*L.xs));
	int *depth = malloc((t->n + 1) * sizeof(*depth));
	if (!L.w || !L.stack || !L.xs || !depth)
		goto out;
	/* Widths: a node's id is larger than its parent's, so a backward pass sums children. */
	for (uint32_t i = 0; i < t->n; i++)
		L.w[i] = t->diff ? fmax((double)t->nodes[i].self[0], (double)t->nodes[i].self[1])
				 : (double)t->nodes[i].total[0];
	if (t->diff)
		for (uint32_t i = t->n; i-- > 1;)
			L.w[t->nodes[i].parent] += L.w[i];
	L.total = L.w[0];
	L.scale = L.total > 0 ? (L.width - 2.0 * L.xpad) / L.total : 0;
	L.minval = L.scale > 0 ? minwidth / L.scale : 0;
	/* Depths of visible frames, and the diff colour range. */
	L.maxdepth = 0;
	depth[0] = 0;
	for (uint32_t i = 1; i < t->n; i++) {
		depth[i] = depth[t->nodes[i].parent] + 1;
		if (L.w[i] >= L.minval && L.w[i] > 0 && depth[i] > L.maxdepth)
			L.maxdepth = depth[i];
		if (t->diff) {
			double d = fabs((double)(t->nodes[i].total[0] - t->nodes[i].total[1]));
			if (d > L.maxdelta)
				L.maxdelta = d;
		}
	}
	L.height = L.ypad1 + L.ypad2 + (L.maxdepth + 1) * L.fh;
	const char *title = o->title ? o->title
			    : t->diff    ? "Differential Flame Graph"
			    : o->inverted ? "Icicle Graph"
					  : "Flame Graph";
	char tot[32];
	fmt_num(tot, sizeof(tot), L.total);
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\" data-width=\"%d\" data-xpad=\"%d\" "
		"data-fs=\"%d\" data-total=\"%s\" data-diff=\"%d\">\n",
		L.width, L.height, L.width, L.height, L.width, L.xpad, L.fs, tot, t->diff ? 1 : 0);
	fprintf(out,
		"<style>text { font-family: Verdana, sans-serif; font-size: %dpx; fill: #000; }\n"
		"g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
		"g.f text { pointer-events: none; }\n"
		"#title { text-anchor: middle; font-size: %dpx; }\n"
		"#subtitle { text-anchor: middle; fill: #555; }\n"
		"#unzoom, #search { cursor: pointer; }\n"
		"#search, #matched { text-anchor: end; }</style>\n",
		L.fs, L.fs + 5);
	fprintf(out,
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", L.width, L.height,
		t->diff ? "rgb(248,248,248)" : "rgb(250,246,238)");
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"%d\">", L.width / 2, L.fs * 2);
	xml_escape(out, title, SIZE_MAX);
	fputs("</text>\n", out);
	if (o->subtitle) {
		fprintf(out, "<text id=\"subtitle\" x=\"%d\" y=\"%d\">", L.width / 2, L.fs * 4);
		xml_escape(out, o->subtitle, SIZE_MAX);
		fputs("</text>\n", out);
	}
	fprintf(out, "<text id=\"unzoom\" x=\"%d\" y=\"%d\" style=\"opacity:0.2\">Reset Zoom</text>\n",
		L.xpad, L.fs * 2);
	fprintf(out, "<text id=\"search\" x=\"%d\" y=\"%d\">Search</text>\n", L.width - L.xpad,
		L.fs * 2);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", L.xpad,
		L.height - L.ypad2 / 2 + 2);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", L.width - L.xpad,
		L.height - L.ypad2 / 2 + 2);
	/* Frames, depth first; a frame too narrow to draw hides its whole subtree. */
	size_t sp = 0;
	if (L.total > 0) {
		L.stack[sp] = 0;
		L.xs[sp++] = 0;
	}
	while (sp) {
		sp--;
		uint32_t n = L.stack[sp];
		double x = L.xs[sp];
		if (L.w[n] < L.minval || L.w[n] <= 0) {
			L.omitted++;
			continue;
		}
		write_frame(&L, n, depth[n], x);
		/* Children from the parent's left edge in name order; each carries its own x, so
		 * the order they are popped in changes only the order of the output. */
		double cx = x;
		for (uint32_t c = t->nodes[n].first_child; c; c = t->nodes[c].next_sibling) {
			L.stack[sp] = c;
			L.xs[sp++] = cx;
			cx += L.w[c];
		}
	}
	fputs(script, out);
	fputs("</svg>\n", out);
	r = ferror(out) ? -EIO : 0;
out:
	free(L.w);
	free(L.stack);
	free(L.xs);
	free(depth);
	return r;
}
