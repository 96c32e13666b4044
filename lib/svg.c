// SPDX-License-Identifier: Apache-2.0
/*
 * The interactive SVG flame graph, plain and differential, written by hand: it is one of the
 * pictures strobe exists to draw, and no library draws it.
 *
 * Layout follows flamegraph.pl's conventions (root "all" at the bottom, or at the top for an
 * icicle; children left to right in name order; width proportional to the inclusive value;
 * frames narrower than minwidth pixels left out, their value still inside their parent's width;
 * perf's "_[k]"-style annotations colour a frame but are not shown). Each frame is a
 * <g class="f" data-x data-w data-d> holding a <title> (the tooltip), a <rect> and a <text>;
 * data-x / data-w are integers in value units, so the embedded script zooms and measures
 * search matches exactly, without reading pixels back.
 *
 * Colours: by default from a hash of the whole name (like flamegraph.pl 1.0+: one function, one
 * colour, in every graph); with `hash`, from its first characters, so similar names (one
 * module's functions) get similar colours.
 *
 * Differential graphs: a frame is as wide as the larger of its base and new self value plus its
 * children (computed bottom-up so children always fit), so a frame that exists only in the base
 * still appears, at its base width. The colour is the change of the frame's inclusive (total)
 * value: red grew, blue shrank, grey the same, the intensity relative to the largest change in
 * the graph. Total rather than self (difffolded's choice) because a change spread thinly over
 * many callees still shows on the caller that owns it, and a change's path from the root is
 * coloured all the way to where it starts; the tooltip gives both total and self deltas.
 *
 * Speed: a 200,000-stack profile can have a million frames. Output goes through one fixed
 * buffer with hand-written number formatting (printf's float path was most of the time), and
 * the layout is three linear passes over flat arrays; nothing is allocated per frame.
 *
 * The script (hover details, click to zoom, reset, regex search with the matched share counted
 * once per sample even when matches nest, case toggle) is strobe's own.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/buf.h"
#include "strobe/diffsig.h"
#include "strobe/render.h"

enum { SVG_XPAD = 10, WBUF_CAP = 1 << 18 };

/* ---- output buffer ----------------------------------------------------------------------- */

/* b: at most WBUF_CAP bytes, all of them allocated up front (wbuf_open), so that writing into
 * it never fails: it is written out to f whenever the next piece would not fit. */
typedef struct wbuf {
	FILE *f;
	strobe_buf b;
	int err;
} wbuf;

static int wbuf_open(wbuf *w, FILE *f)
{
	w->f = f;
	strobe_buf_init(&w->b, WBUF_CAP);
	return strobe_buf_reserve(&w->b, WBUF_CAP);
}

static void wflush(wbuf *w)
{
	if (w->b.len && fwrite(w->b.p, 1, w->b.len, w->f) != w->b.len)
		w->err = -EIO;
	strobe_buf_reset(&w->b);
}

/* Room for `k` more bytes (k <= WBUF_CAP), to be counted with strobe_buf_commit. */
static inline char *wroom(wbuf *w, size_t k)
{
	if (w->b.len + k > WBUF_CAP)
		wflush(w);
	return w->b.p + w->b.len;
}

static void wput(wbuf *w, const char *s, size_t len)
{
	while (len) {
		size_t k = len < WBUF_CAP / 2 ? len : WBUF_CAP / 2;
		memcpy(wroom(w, k), s, k);
		strobe_buf_commit(&w->b, k);
		s += k;
		len -= k;
	}
}

#define WLIT(w, lit) wput((w), (lit), sizeof(lit) - 1)

static inline void wstr(wbuf *w, const char *s)
{
	wput(w, s, strlen(s));
}

static inline void wchar(wbuf *w, char c)
{
	*wroom(w, 1) = c;
	strobe_buf_commit(&w->b, 1);
}

static void wu64(wbuf *w, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	wput(w, tmp + i, sizeof(tmp) - (size_t)i);
}

static void wi64(wbuf *w, int64_t v)
{
	if (v < 0) {
		wchar(w, '-');
		wu64(w, -(uint64_t)v);
	} else {
		wu64(w, (uint64_t)v);
	}
}

/* 1234567 -> "1,234,567", as flamegraph.pl prints counts. */
static void wcommas(wbuf *w, int64_t v)
{
	char tmp[32];
	int i = sizeof(tmp), k = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do {
		if (k && k % 3 == 0)
			tmp[--i] = ',';
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
		k++;
	} while (u);
	if (v < 0)
		tmp[--i] = '-';
	wput(w, tmp + i, sizeof(tmp) - (size_t)i);
}

/* v with `dec` decimals (1 or 2), rounded half away from zero: printf("%.1f") without its cost. */
static void wfix(wbuf *w, double v, int dec)
{
	double m = dec == 1 ? 10.0 : 100.0;
	if (!(fabs(v) < 9e15 / m)) { /* also NaN: never in practice, but stay well-formed */
		wchar(w, '0');
		return;
	}
	int64_t t = llround(v * m);
	if (t < 0) {
		wchar(w, '-');
		t = -t;
	}
	int64_t ip = t / (int64_t)m, fp = t % (int64_t)m;
	wu64(w, (uint64_t)ip);
	wchar(w, '.');
	if (dec == 2)
		wchar(w, (char)('0' + fp / 10)), fp %= 10;
	wchar(w, (char)('0' + fp));
}

/* ---- names ---------------------------------------------------------------------------------- */

/* Length of the next valid XML character encoded as UTF-8 at p (strict: no overlong forms, no
 * surrogates, nothing past U+10FFFF, not U+FFFE/U+FFFF), or 0 when the bytes are invalid. */
static size_t utf8_valid(const unsigned char *p)
{
	unsigned c = p[0];
	if (c >= 0xc2 && c <= 0xdf)
		return (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80)
			return 0;
		if (c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* Writes up to `max_chars` characters of s[0..len) as XML text: &, <, >, " escaped, a tab as a
 * space, other control bytes and invalid UTF-8 as U+FFFD, so a name from any binary keeps the
 * document well-formed. s must be NUL-terminated at or after s + len (every name and option
 * string is): the multi-byte checks stop at that NUL. */
static void wxml(wbuf *w, const char *s, size_t len, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	size_t chars = 0;
	while (p < end && chars < max_chars) {
		/* A run of plain bytes is copied at once: most names are nothing else. */
		const unsigned char *q = p;
		while (q < end && chars < max_chars && *q >= 0x20 && *q < 0x80 && *q != '&' &&
		       *q != '<' && *q != '>' && *q != '"')
			q++, chars++;
		if (q != p) {
			wput(w, (const char *)p, (size_t)(q - p));
			p = q;
			continue;
		}
		unsigned char c = *p;
		chars++;
		if (c < 0x80) {
			switch (c) {
			case '&': WLIT(w, "&amp;"); break;
			case '<': WLIT(w, "&lt;"); break;
			case '>': WLIT(w, "&gt;"); break;
			case '"': WLIT(w, "&quot;"); break;
			case '\t': wchar(w, ' '); break;
			default: WLIT(w, "\xef\xbf\xbd"); /* other control bytes */
			}
			p++;
			continue;
		}
		size_t n = utf8_valid(p);
		if (n && p + n <= end) {
			wput(w, (const char *)p, n);
			p += n;
		} else {
			WLIT(w, "\xef\xbf\xbd"); /* U+FFFD */
			p++;
		}
	}
}

/* Characters in s[0..len) as wxml counts them (each invalid byte is one). */
static size_t char_count(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

/* Display length: perf-style annotations (_[k] kernel, _[w] waker, _[i] inlined, _[j] JIT)
 * choose the colour and are not shown, as in flamegraph.pl. */
static size_t display_len(const char *name, size_t len)
{
	if (len >= 4 && name[len - 4] == '_' && name[len - 3] == '[' && name[len - 1] == ']' &&
	    name[len - 2] && strchr("kwij", name[len - 2]))
		return len - 4;
	return len;
}

/* ---- colours -------------------------------------------------------------------------------- */

static double name_rand(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a, then a final mix so short names spread too */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return (h >> 8) / 16777216.0;
}

/* --hash: a value from the first few characters, weighted towards the first, so names that
 * start alike get alike colours; a "module`" prefix is skipped. */
static double name_prefix_hash(const char *s, size_t len, bool reversed)
{
	const char *tick = reversed ? NULL : memchr(s, '`', len);
	if (tick) {
		len -= (size_t)(tick + 1 - s);
		s = tick + 1;
	}
	double v = 0, max = 1, wt = 1;
	for (size_t i = 0; i < len && i < 3; i++) {
		unsigned char c = (unsigned char)(reversed ? s[len - 1 - i] : s[i]);
		double mod = 10 + (double)i;
		v += fmod(c, mod) / (mod - 1) * wt;
		max += wt;
		wt *= 0.7;
	}
	return 1 - v / max;
}

static bool ends_with(const char *s, size_t len, const char *suf)
{
	size_t k = strlen(suf);
	return len >= k && memcmp(s + len - k, suf, k) == 0;
}

/* The palette a multi-palette scheme (java, js, perl, wakeup, chain) picks for one name. */
static const char *pick_palette(const char *pal, const char *s, size_t len)
{
	if (!strcmp(pal, "java")) {
		if (ends_with(s, len, "_[j]"))
			return "green";
		if (ends_with(s, len, "_[i]"))
			return "aqua";
		const char *t = s[0] == 'L' ? s + 1 : s;
		static const char *const pkgs[] = {"java/", "javax/", "jdk/", "net/", "org/",
						   "com/",  "io/",    "sun/"};
		for (size_t i = 0; i < sizeof(pkgs) / sizeof(*pkgs); i++)
			if (!strncmp(t, pkgs[i], strlen(pkgs[i])))
				return "green";
		if (strstr(s, ":::"))
			return "green";
		if (strstr(s, "::"))
			return "yellow";
		if (ends_with(s, len, "_[k]"))
			return "orange";
		return "red";
	}
	if (!strcmp(pal, "perl")) {
		if (strstr(s, "::"))
			return "yellow";
		if (strstr(s, "Perl") || strstr(s, ".pl"))
			return "green";
		if (ends_with(s, len, "_[k]"))
			return "orange";
		return "red";
	}
	if (!strcmp(pal, "js")) {
		if (ends_with(s, len, "_[j]"))
			return memchr(s, '/', len) ? "green" : "aqua";
		if (strstr(s, "::"))
			return "yellow";
		const char *sl = memchr(s, '/', len);
		if (sl && strstr(sl, ".js"))
			return "green";
		if (memchr(s, ':', len))
			return "aqua";
		if (len == 1 && s[0] == ' ')
			return "green";
		if (strstr(s, "_[k]"))
			return "orange";
		return "red";
	}
	if (!strcmp(pal, "wakeup"))
		return "aqua";
	if (!strcmp(pal, "chain"))
		return strstr(s, "_[w]") ? "aqua" : "blue";
	return pal;
}

/* flamegraph.pl's palettes, from three values in [0, 1). */
static void palette_rgb(const char *pal, double v1, double v2, double v3, int rgb[3])
{
	int r, g, b;
	if (!strcmp(pal, "mem")) {
		r = 0, g = 190 + (int)(50 * v2), b = (int)(210 * v1);
	} else if (!strcmp(pal, "io")) {
		r = g = 80 + (int)(60 * v1), b = 190 + (int)(55 * v2);
	} else if (!strcmp(pal, "red")) {
		r = 200 + (int)(55 * v1), g = b = 50 + (int)(80 * v1);
	} else if (!strcmp(pal, "green")) {
		g = 200 + (int)(55 * v1), r = b = 50 + (int)(60 * v1);
	} else if (!strcmp(pal, "blue")) {
		b = 205 + (int)(50 * v1), r = g = 80 + (int)(60 * v1);
	} else if (!strcmp(pal, "aqua")) {
		r = 50 + (int)(60 * v1), g = b = 165 + (int)(55 * v1);
	} else if (!strcmp(pal, "yellow")) {
		r = g = 175 + (int)(55 * v1), b = 50 + (int)(20 * v1);
	} else if (!strcmp(pal, "purple")) {
		r = b = 190 + (int)(65 * v1), g = 80 + (int)(60 * v1);
	} else if (!strcmp(pal, "orange")) {
		r = 190 + (int)(65 * v1), g = 90 + (int)(65 * v1), b = 0;
	} else { /* hot, and any name we do not know */
		r = 205 + (int)(50 * v3), g = (int)(230 * v1), b = (int)(55 * v2);
	}
	rgb[0] = r, rgb[1] = g, rgb[2] = b;
}

typedef struct layout {
	const strobe_tree *t;
	const strobe_svg_opts *o;
	wbuf w;
	const char *pal, *countname;
	uint32_t *order;  /* nodes in preorder, children in sibling (name) order */
	int32_t *depth;   /* per node; -1 = not drawn (too narrow, or under a frame that is) */
	int64_t *wv;      /* per node: width in value units */
	int64_t *xv;      /* per node: left edge in value units */
	int64_t total;    /* wv[0] */
	int64_t rtotal;   /* root's column-0 total, the 100% of plain percentages */
	double scale;     /* pixels per value unit */
	int width, fh, fs, height, maxdepth;
	int ypad1, ypad2; /* room above the frames (title, subtitle) and below (details line) */
	double maxdelta;  /* diffs: largest |new - base| of a non-root frame */
} layout;

static void frame_rgb(const layout *L, uint32_t node, const char *name, size_t len, int rgb[3])
{
	if (!node) {
		rgb[0] = rgb[1] = rgb[2] = 250;
		return;
	}
	if (len == 2 && !strcmp(name, "--")) { /* separators flamegraph.pl greys out */
		rgb[0] = rgb[1] = rgb[2] = 160;
		return;
	}
	if (len == 1 && name[0] == '-') {
		rgb[0] = rgb[1] = rgb[2] = 200;
		return;
	}
	if (L->t->diff) {
		/* White-grey at no change, saturating to red (grew) or blue (shrank). */
		const strobe_tree_node *n = &L->t->nodes[node];
		double d = (double)n->total[0] - (double)n->total[1];
		if (L->o->diff_negate)
			d = -d;
		double k = L->maxdelta > 0 ? fabs(d) / L->maxdelta : 0;
		int c = 250 - (int)(k * 210 + 0.5);
		if (strobe_tree_noise(L->t, node)) {
			/* Not significant: a pale tint keeps the direction readable without
			 * the weight of a real change. */
			int p = d == 0 ? 235 : 226;
			if (d > 0)
				rgb[0] = 246, rgb[1] = rgb[2] = p;
			else if (d < 0)
				rgb[0] = rgb[1] = p, rgb[2] = 246;
			else
				rgb[0] = rgb[1] = rgb[2] = p;
			return;
		}
		if (d > 0)
			rgb[0] = 250, rgb[1] = rgb[2] = c;
		else if (d < 0)
			rgb[0] = rgb[1] = c, rgb[2] = 250;
		else
			rgb[0] = rgb[1] = rgb[2] = 235;
		return;
	}
	double v1, v2, v3;
	if (L->o->hash) {
		v1 = name_prefix_hash(name, len, false);
		v2 = v3 = name_prefix_hash(name, len, true);
	} else {
		v1 = v2 = v3 = name_rand(name);
	}
	palette_rgb(pick_palette(L->pal, name, len), v1, v2, v3, rgb);
}

static void write_title(layout *L, uint32_t node, const char *name, size_t dlen)
{
	const strobe_tree_node *n = &L->t->nodes[node];
	wbuf *w = &L->w;
	WLIT(w, "<title>");
	if (node)
		wxml(w, name, dlen, SIZE_MAX);
	else
		WLIT(w, "all");
	if (!L->t->diff) {
		WLIT(w, " (");
		wcommas(w, n->total[0]);
		wchar(w, ' ');
		wstr(w, L->countname);
		WLIT(w, ", ");
		wfix(w, L->rtotal > 0 ? 100.0 * (double)n->total[0] / (double)L->rtotal : 0.0, 2);
		WLIT(w, "%)</title>");
		return;
	}
	int64_t dt = n->total[0] - n->total[1], ds = n->self[0] - n->self[1];
	WLIT(w, " (total: base ");
	wcommas(w, n->total[1]);
	WLIT(w, ", new ");
	wcommas(w, n->total[0]);
	WLIT(w, ", delta ");
	if (dt > 0)
		wchar(w, '+');
	wcommas(w, dt);
	wchar(w, ' ');
	wstr(w, L->countname);
	if (n->total[1]) {
		WLIT(w, " (");
		double pct = 100.0 * (double)dt / (double)n->total[1];
		if (pct >= 0)
			wchar(w, '+');
		wfix(w, pct, 2);
		WLIT(w, "%)");
	}
	WLIT(w, "; self: base ");
	wcommas(w, n->self[1]);
	WLIT(w, ", new ");
	wcommas(w, n->self[0]);
	WLIT(w, ", delta ");
	if (ds > 0)
		wchar(w, '+');
	wcommas(w, ds);
	if (L->t->sig_q && node) {
		char s[96];
		double q = L->t->sig_q[node];
		snprintf(s, sizeof(s), "; %s at %g%% confidence (q %.2g)",
			 strobe_tree_noise(L->t, node) ? "noise" : "significant",
			 100 * L->t->sig_conf, q);
		wstr(w, s);
	}
	WLIT(w, ")</title>");
}

static void write_frame(layout *L, uint32_t node)
{
	wbuf *w = &L->w;
	int depth = L->depth[node];
	double px = SVG_XPAD + (double)L->xv[node] * L->scale, pw = (double)L->wv[node] * L->scale;
	int y = L->o->inverted ? L->ypad1 + depth * L->fh : L->height - L->ypad2 - (depth + 1) * L->fh;
	size_t len = 0;
	const char *name = node ? strobe_itab_get(&L->t->names, L->t->nodes[node].name, &len) : "all";
	/* The stored length counts the NUL; a name holding an earlier NUL ends there. */
	len = node ? strnlen(name, len) : 3;
	size_t dlen = node ? display_len(name, len) : 3;
	int rgb[3];
	frame_rgb(L, node, name, len, rgb);

	WLIT(w, "<g class=\"f\" data-x=\"");
	wi64(w, L->xv[node]);
	WLIT(w, "\" data-w=\"");
	wi64(w, L->wv[node]);
	WLIT(w, "\" data-d=\"");
	wi64(w, depth);
	WLIT(w, "\">");
	write_title(L, node, name, dlen);
	WLIT(w, "<rect x=\"");
	wfix(w, px, 1);
	WLIT(w, "\" y=\"");
	wi64(w, y);
	WLIT(w, "\" width=\"");
	wfix(w, pw, 1);
	WLIT(w, "\" height=\"");
	wi64(w, L->fh - 1);
	WLIT(w, "\" fill=\"rgb(");
	wi64(w, rgb[0]);
	wchar(w, ',');
	wi64(w, rgb[1]);
	wchar(w, ',');
	wi64(w, rgb[2]);
	WLIT(w, ")\" rx=\"2\" ry=\"2\"/><text x=\"");
	wfix(w, px + 3, 1);
	WLIT(w, "\" y=\"");
	wfix(w, y + (L->fh - 1) / 2.0 + L->fs * 0.35, 1);
	WLIT(w, "\">");
	/* As many characters as fit (about 0.59 em each), with ".." when cut; none under 3. */
	double fitd = (pw - 6) / (L->fs * 0.59);
	size_t fit = fitd > 0 ? (size_t)fitd : 0;
	if (fit >= 3) {
		if (char_count(name, dlen) <= fit) {
			wxml(w, name, dlen, SIZE_MAX);
		} else {
			wxml(w, name, dlen, fit - 2);
			WLIT(w, "..");
		}
	}
	WLIT(w, "</text></g>\n");
}

/* ---- the script ------------------------------------------------------------------------------ */

static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"(function () {\n"
	"  var svg = document.documentElement;\n"
	"  function attr(n) { return svg.getAttribute(n); }\n"
	"  function byId(id) { return document.getElementById(id); }\n"
	"  var W = +attr('data-width'), XP = +attr('data-xpad'), FS = +attr('data-fs'),\n"
	"      TOTAL = +attr('data-total'), NT = attr('data-nt') || '', CN = attr('data-cn') || '';\n"
	"  /* The tooltip is 'name (N unit, P%)' (or the diff form): the name is what precedes it. */\n"
	"  var SUFFIX = attr('data-diff') === '1' ? / \\(total: base [\\s\\S]*$/ :\n"
	"    new RegExp(' \\\\(-?[\\\\d,]+ ' + CN.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&') +\n"
	"               ', -?[\\\\d.]+%\\\\)$');\n"
	"  var details = byId('details'), matched = byId('matched'), unzoom = byId('unzoom'),\n"
	"      searchBtn = byId('search'), icBtn = byId('ic'), box = byId('frames');\n"
	"  var frames = [], view = {x: 0, w: TOTAL, d: -1}, term = null, ic = false;\n"
	"  for (var i = 0, gs = box.children; i < gs.length; i++) {\n"
	"    var g = gs[i], t = g.firstElementChild, r = t.nextElementSibling;\n"
	"    frames.push({g: g, t: t, r: r, txt: r.nextElementSibling, fill: r.getAttribute('fill'),\n"
	"      x: +g.getAttribute('data-x'), w: +g.getAttribute('data-w'),\n"
	"      d: +g.getAttribute('data-d'), name: t.textContent.replace(SUFFIX, '')});\n"
	"    g.fi = i;\n"
	"  }\n"
	"  function frameOf(e) {\n"
	"    for (var n = e.target; n && n !== box; n = n.parentNode) if (n.fi !== undefined) return frames[n.fi];\n"
	"    return null;\n"
	"  }\n"
	"  function fit(f, pw) {\n"
	"    var n = Math.floor((pw - 6) / (FS * 0.59)), s = f.name;\n"
	"    f.txt.textContent = n < 3 ? '' : (s.length <= n ? s : s.slice(0, n - 2) + '..');\n"
	"  }\n"
	"  function draw() {\n"
	"    var scale = (W - 2 * XP) / view.w, right = view.x + view.w;\n"
	"    frames.forEach(function (f) {\n"
	"      var inside = f.x >= view.x && f.x + f.w <= right;\n"
	"      var above = !inside && f.d < view.d && f.x <= view.x && f.x + f.w >= right;\n"
	"      var pw = (above ? view.w : f.w) * scale;\n"
	"      if ((!inside && !above) || pw < 0.1) { f.g.style.display = 'none'; return; }\n"
	"      var px = XP + (above ? 0 : f.x - view.x) * scale;\n"
	"      f.g.style.display = '';\n"
	"      f.r.setAttribute('x', px.toFixed(1)); f.r.setAttribute('width', pw.toFixed(1));\n"
	"      f.txt.setAttribute('x', (px + 3).toFixed(1));\n"
	"      f.g.style.opacity = above ? 0.5 : '';\n"
	"      fit(f, pw);\n"
	"    });\n"
	"    unzoom.style.opacity = view.d >= 0 ? 1 : 0.2;\n"
	"    if (term !== null) search(term);\n"
	"  }\n"
	"  function zoom(f) { view = {x: f.x, w: f.w, d: f.d}; draw(); }\n"
	"  function reset() { if (view.d >= 0) { view = {x: 0, w: TOTAL, d: -1}; draw(); } }\n"
	"  box.addEventListener('click', function (e) { var f = frameOf(e); if (f) zoom(f); });\n"
	"  box.addEventListener('mouseover', function (e) {\n"
	"    var f = frameOf(e); if (f) details.textContent = NT + ' ' + f.t.textContent; });\n"
	"  box.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  unzoom.addEventListener('click', reset);\n"
	"  /* Highlights matching frames and returns the share of the zoomed view under any match,\n"
	"     each sample once: matches nest (a match's callee can match too), so the matched\n"
	"     intervals are merged before they are summed. */\n"
	"  function search(re) {\n"
	"    var rx;\n"
	"    try { rx = new RegExp(re, ic ? 'i' : ''); } catch (e) { matched.textContent = 'bad regex'; return -1; }\n"
	"    term = re;\n"
	"    var spans = [], lo = view.x, hi = view.x + view.w;\n"
	"    frames.forEach(function (f) {\n"
	"      if (f.d > 0 && rx.test(f.name)) {\n"
	"        f.r.setAttribute('fill', 'rgb(230,0,230)');\n"
	"        var a = Math.max(f.x, lo), b = Math.min(f.x + f.w, hi);\n"
	"        if (b > a) spans.push([a, b]);\n"
	"      } else f.r.setAttribute('fill', f.fill);\n"
	"    });\n"
	"    spans.sort(function (p, q) { return p[0] - q[0]; });\n"
	"    var sum = 0, end = -Infinity;\n"
	"    spans.forEach(function (s) {\n"
	"      if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; }\n"
	"      else if (s[1] > end) { sum += s[1] - end; end = s[1]; }\n"
	"    });\n"
	"    var pct = view.w > 0 ? 100 * sum / view.w : 0;\n"
	"    matched.textContent = 'Matched: ' + pct.toFixed(2) + '%';\n"
	"    searchBtn.textContent = 'Reset Search';\n"
	"    return pct;\n"
	"  }\n"
	"  function clearSearch() {\n"
	"    frames.forEach(function (f) { f.r.setAttribute('fill', f.fill); });\n"
	"    matched.textContent = ' '; searchBtn.textContent = 'Search'; term = null;\n"
	"  }\n"
	"  function ask() {\n"
	"    var re = prompt('Search (regular expression' + (ic ? ', ignoring case' : '') + '):',\n"
	"                    term || '');\n"
	"    if (re) search(re);\n"
	"  }\n"
	"  function toggleCase() {\n"
	"    ic = !ic; icBtn.style.opacity = ic ? 1 : 0.3; if (term !== null) search(term);\n"
	"  }\n"
	"  searchBtn.addEventListener('click', function () { if (term !== null) clearSearch(); else ask(); });\n"
	"  icBtn.addEventListener('click', toggleCase);\n"
	"  window.addEventListener('keydown', function (e) {\n"
	"    if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && e.key === 'f')) { e.preventDefault(); ask(); }\n"
	"    else if ((e.ctrlKey || e.metaKey) && e.key === 'i') { e.preventDefault(); toggleCase(); }\n"
	"    else if (e.key === 'Escape') { reset(); clearSearch(); }\n"
	"  });\n"
	"  /* For scripts and tests driving the graph: zoom by name, search, read the state. */\n"
	"  window.strobeFlame = {\n"
	"    zoom: function (name) { var f = frames.filter(function (g) { return g.name === name; })[0];\n"
	"      if (f) zoom(f); return !!f; },\n"
	"    reset: reset, search: search, clearSearch: clearSearch, toggleCase: toggleCase,\n"
	"    visible: function () { return frames.filter(function (f) { return f.g.style.display !== 'none'; })\n"
	"      .map(function (f) { return {name: f.name, x: +f.r.getAttribute('x'), width: +f.r.getAttribute('width'),\n"
	"        text: f.txt.textContent, fill: f.r.getAttribute('fill'), depth: f.d}; }); }\n"
	"  };\n"
	"})();\n"
	"]]></script>\n";

/* ---- the document ------------------------------------------------------------------------- */

static double effective_minwidth(const strobe_svg_opts *o)
{
	return o->minwidth > 0 ? o->minwidth : o->minwidth < 0 ? 0 : 0.1;
}

double strobe_svg_min_fraction(const strobe_svg_opts *o)
{
	int width = o->width > 0 ? o->width : 1200;
	double px = effective_minwidth(o) / (width - 2.0 * SVG_XPAD);
	if (o->minwidth_pct > 0 && o->minwidth_pct / 100 > px)
		px = o->minwidth_pct / 100;
	/* A little under the renderer's own cut, so rounding never drops a frame it would draw. */
	return 0.999 * px;
}

static void header(layout *L, const char *title)
{
	wbuf *w = &L->w;
	const strobe_svg_opts *o = L->o;
	int W = L->width, H = L->height, fs = L->fs;
	WLIT(w, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
		"\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
		"<svg version=\"1.1\" width=\"");
	wi64(w, W);
	WLIT(w, "\" height=\"");
	wi64(w, H);
	WLIT(w, "\" viewBox=\"0 0 ");
	wi64(w, W);
	wchar(w, ' ');
	wi64(w, H);
	WLIT(w, "\" xmlns=\"http://www.w3.org/2000/svg\" data-width=\"");
	wi64(w, W);
	WLIT(w, "\" data-xpad=\"");
	wi64(w, SVG_XPAD);
	WLIT(w, "\" data-fs=\"");
	wi64(w, fs);
	WLIT(w, "\" data-total=\"");
	wi64(w, L->total);
	WLIT(w, "\" data-diff=\"");
	wchar(w, L->t->diff ? '1' : '0');
	WLIT(w, "\" data-cn=\"");
	wxml(w, L->countname, strlen(L->countname), SIZE_MAX);
	WLIT(w, "\" data-nt=\"");
	const char *nt = o->nametype ? o->nametype : "Function:";
	wxml(w, nt, strlen(nt), SIZE_MAX);
	WLIT(w, "\">\n<style>text { font-family: Verdana, sans-serif; font-size: ");
	wi64(w, fs);
	WLIT(w, "px; fill: #000; }\n"
		"g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
		"g.f text { pointer-events: none; }\n"
		"#title { text-anchor: middle; font-size: ");
	wi64(w, fs + 5);
	WLIT(w, "px; }\n"
		"#subtitle { text-anchor: middle; fill: #555; }\n"
		"#unzoom, #search, #ic { cursor: pointer; }\n"
		"#search, #matched, #ic { text-anchor: end; }</style>\n");
	WLIT(w, "<rect x=\"0\" y=\"0\" width=\"");
	wi64(w, W);
	WLIT(w, "\" height=\"");
	wi64(w, H);
	if (L->t->diff)
		WLIT(w, "\" fill=\"rgb(248,248,248)\"/>\n");
	else
		WLIT(w, "\" fill=\"rgb(250,246,238)\"/>\n");
	WLIT(w, "<text id=\"title\" x=\"");
	wi64(w, W / 2);
	WLIT(w, "\" y=\"");
	wi64(w, fs * 2);
	WLIT(w, "\">");
	wxml(w, title, strlen(title), SIZE_MAX);
	WLIT(w, "</text>\n");
	if (o->subtitle) {
		WLIT(w, "<text id=\"subtitle\" x=\"");
		wi64(w, W / 2);
		WLIT(w, "\" y=\"");
		wi64(w, fs * 4);
		WLIT(w, "\">");
		wxml(w, o->subtitle, strlen(o->subtitle), SIZE_MAX);
		WLIT(w, "</text>\n");
	}
	int bottom = H - L->ypad2 / 2 + 2;
	WLIT(w, "<text id=\"unzoom\" x=\"");
	wi64(w, SVG_XPAD);
	WLIT(w, "\" y=\"");
	wi64(w, fs * 2);
	WLIT(w, "\" style=\"opacity:0.2\">Reset Zoom</text>\n<text id=\"search\" x=\"");
	wi64(w, W - SVG_XPAD - 3 * fs);
	WLIT(w, "\" y=\"");
	wi64(w, fs * 2);
	WLIT(w, "\">Search</text>\n<text id=\"ic\" x=\"");
	wi64(w, W - SVG_XPAD);
	WLIT(w, "\" y=\"");
	wi64(w, fs * 2);
	WLIT(w, "\" style=\"opacity:0.3\">ic</text>\n<text id=\"details\" x=\"");
	wi64(w, SVG_XPAD);
	WLIT(w, "\" y=\"");
	wi64(w, bottom);
	WLIT(w, "\"> </text>\n<text id=\"matched\" x=\"");
	wi64(w, W - SVG_XPAD);
	WLIT(w, "\" y=\"");
	wi64(w, bottom);
	WLIT(w, "\"> </text>\n");
}

int strobe_svg_write(FILE *out, const strobe_tree *t, const strobe_svg_opts *o)
{
	static const strobe_svg_opts defaults;
	if (!out || !t)
		return -EINVAL;
	if (!o)
		o = &defaults;
	layout L = {.t = t, .o = o};
	L.width = o->width > 0 ? o->width : 1200;
	L.fh = o->frame_height > 0 ? o->frame_height : 16;
	L.fs = o->font_size > 0 ? o->font_size : 12;
	L.pal = o->colors && *o->colors ? o->colors : "hot";
	L.countname = o->countname ? o->countname : "samples";
	L.ypad1 = L.fs * 3 + (o->subtitle ? L.fs * 2 : 0);
	L.ypad2 = L.fs * 2 + 10;
	size_t n = t->n;
	int r = -ENOMEM;
	int wr = wbuf_open(&L.w, out);
	L.order = malloc((n + 1) * sizeof(*L.order));
	L.depth = malloc((n + 1) * sizeof(*L.depth));
	L.wv = malloc((n + 1) * sizeof(*L.wv));
	L.xv = malloc((n + 1) * sizeof(*L.xv));
	if (wr < 0 || !L.order || !L.depth || !L.wv || !L.xv)
		goto out;

	/* Pass 1: preorder (children in sibling order), with depths. Every node is pushed once,
	 * so n slots suffice for the explicit stack; it borrows xv, which pass 3 fills. */
	size_t cnt = 0;
	if (n) {
		uint32_t *stk = (uint32_t *)L.xv;
		size_t sp = 0;
		stk[sp++] = 0;
		L.depth[0] = 0;
		while (sp) {
			uint32_t v = stk[--sp];
			L.order[cnt++] = v;
			/* Push children reversed so they pop in name order: count, then fill. */
			size_t k = 0;
			for (uint32_t c = t->nodes[v].first_child; c; c = t->nodes[c].next_sibling)
				k++;
			size_t i = sp + k;
			for (uint32_t c = t->nodes[v].first_child; c; c = t->nodes[c].next_sibling) {
				stk[--i] = c;
				L.depth[c] = L.depth[v] + 1;
			}
			sp += k;
		}
	}
	/* Pass 2: widths. Plain: the new total. Diff: max(base self, new self) plus the children,
	 * summed in reverse preorder (children before parents), so a base-only frame has room. */
	for (size_t i = 0; i < cnt; i++) {
		const strobe_tree_node *nd = &t->nodes[L.order[i]];
		int64_t v = t->diff ? (nd->self[0] > nd->self[1] ? nd->self[0] : nd->self[1])
				    : nd->total[0];
		L.wv[L.order[i]] = v > 0 ? v : 0;
	}
	if (t->diff)
		for (size_t i = cnt; i-- > 1;)
			L.wv[t->nodes[L.order[i]].parent] += L.wv[L.order[i]];
	L.total = cnt ? L.wv[0] : 0;
	L.rtotal = cnt ? t->nodes[0].total[0] : 0;
	L.scale = L.total > 0 ? (L.width - 2.0 * SVG_XPAD) / (double)L.total : 0;
	double minval = L.scale > 0 ? effective_minwidth(o) / L.scale : 0;
	if (o->minwidth_pct > 0 && o->minwidth_pct / 100 * (double)L.total > minval)
		minval = o->minwidth_pct / 100 * (double)L.total;

	/* Pass 3: which frames are drawn (wide enough, under a drawn parent), their x, the
	 * deepest drawn level, and the diff colour range. */
	L.maxdepth = 0;
	for (size_t i = 0; i < cnt; i++) {
		uint32_t v = L.order[i];
		const strobe_tree_node *nd = &t->nodes[v];
		if (v == 0) {
			L.xv[0] = 0;
		} else if (L.depth[nd->parent] < 0) {
			L.depth[v] = -1;
			continue;
		}
		/* x: the parent's left edge for a first child, else the previous sibling's right
		 * edge; siblings come in order, and each child's x is set before its subtree. */
		if (v) {
			uint32_t p = nd->parent;
			if (t->nodes[p].first_child == v)
				L.xv[v] = L.xv[p];
		}
		if (nd->next_sibling)
			L.xv[nd->next_sibling] = L.xv[v] + L.wv[v];
		if (L.wv[v] <= 0 || (double)L.wv[v] < minval) {
			L.depth[v] = -1;
			continue;
		}
		if (L.depth[v] > L.maxdepth)
			L.maxdepth = L.depth[v];
		if (t->diff && v) {
			double d = fabs((double)nd->total[0] - (double)nd->total[1]);
			if (d > L.maxdelta)
				L.maxdelta = d;
		}
	}
	L.height = L.ypad1 + L.ypad2 + (L.maxdepth + 1) * L.fh;
	const char *title = o->title ? o->title
			    : t->diff    ? "Differential Flame Graph"
			    : o->inverted ? "Icicle Graph"
					  : "Flame Graph";
	header(&L, title);
	WLIT(&L.w, "<g id=\"frames\">\n");
	for (size_t i = 0; i < cnt && L.total > 0; i++)
		if (L.depth[L.order[i]] >= 0)
			write_frame(&L, L.order[i]);
	WLIT(&L.w, "</g>\n");
	wput(&L.w, script, sizeof(script) - 1);
	WLIT(&L.w, "</svg>\n");
	wflush(&L.w);
	r = L.w.err ? L.w.err : ferror(out) ? -EIO : 0;
out:
	strobe_buf_free(&L.w.b);
	free(L.order);
	free(L.depth);
	free(L.wv);
	free(L.xv);
	return r;
}
