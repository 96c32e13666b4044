// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the SVG flame graph: frame count, widths and positions proportional to values,
 * minwidth elision (pixels, percentage, none), XML escaping of names that are not valid XML
 * text, label truncation and annotations, inverted layout, titles, palettes, and differential
 * colours (grew red, shrank blue, base-only frames still drawn, negation swaps), and a document
 * many times the writer's buffer written whole.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/render.h"

static void add(strobe_tree *t, const char *stack, int col, int64_t v)
{
	const char *names[64];
	size_t lens[64], n = 0;
	const char *p = stack;
	while (*p && n < 64) {
		const char *s = strchr(p, ';');
		names[n] = p;
		lens[n++] = s ? (size_t)(s - p) : strlen(p);
		if (!s)
			break;
		p = s + 1;
	}
	assert_int_equal(strobe_tree_add_stack(t, names, lens, n, col, v), 0);
}

static char *render(strobe_tree *t, strobe_svg_opts o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_tree_sort(t), 0);
	assert_int_equal(strobe_svg_write(f, t, &o), 0);
	fclose(f);
	return buf;
}

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* The width attribute of the rect in the frame whose title starts with `name (`. */
static double frame_width(const char *svg, const char *name)
{
	char key[256];
	snprintf(key, sizeof(key), "<title>%s (", name);
	const char *g = strstr(svg, key);
	if (!g)
		return -1;
	const char *w = strstr(g, "width=\"");
	return w ? atof(w + 7) : -1;
}

static const char *frame_fill(const char *svg, const char *name, char *out, size_t cap)
{
	char key[256];
	snprintf(key, sizeof(key), "<title>%s (", name);
	const char *g = strstr(svg, key);
	const char *f = g ? strstr(g, "fill=\"") : NULL;
	if (!f)
		return NULL;
	f += 6;
	size_t n = (size_t)(strchr(f, '"') - f);
	snprintf(out, cap, "%.*s", (int)n, f);
	return out;
}

static void test_frames_and_widths(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;a", 0, 60);
	add(t, "main;b", 0, 30);
	add(t, "main", 0, 10);
	char *svg = render(t, (strobe_svg_opts){.width = 1020});
	assert_int_equal(count(svg, "<g class=\"f\""), 4); /* all, main, a, b */
	double wa = frame_width(svg, "a"), wb = frame_width(svg, "b"), wm = frame_width(svg, "main");
	assert_true(wm > 999 && wm < 1001); /* 1020 - 2 * 10 padding */
	assert_true(wa > 599 && wa < 601);
	assert_true(wb > 299 && wb < 301);
	assert_non_null(strstr(svg, "<title>a (60 samples, 60.00%)</title>"));
	assert_non_null(strstr(svg, ">Flame Graph<"));
	assert_non_null(strstr(svg, "</svg>"));
	free(svg);
	strobe_tree_free(t);
}

static void test_minwidth_elides_but_keeps_value(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;big", 0, 100000);
	add(t, "main;tiny;deeper", 0, 1);
	char *svg = render(t, (strobe_svg_opts){0});
	assert_null(strstr(svg, "<title>tiny ("));
	assert_null(strstr(svg, "<title>deeper ("));
	assert_non_null(strstr(svg, "<title>main (100,001 samples, 100.00%)"));
	free(svg);
	svg = render(t, (strobe_svg_opts){.minwidth = 0.001});
	assert_non_null(strstr(svg, "<title>deeper ("));
	free(svg);
	strobe_tree_free(t);
}

static void test_escaping_and_titles(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "<a&b>\"q\";bad\x01\xff", 0, 5);
	char *svg = render(t, (strobe_svg_opts){.title = "T<1>", .subtitle = "s&t",
						.countname = "bytes", .nametype = "Fn&"});
	assert_non_null(strstr(svg, "<title>&lt;a&amp;b&gt;&quot;q&quot; (5 bytes, 100.00%)"));
	/* A control byte and an invalid byte each become U+FFFD, never raw. */
	assert_non_null(strstr(svg, "<title>bad\xef\xbf\xbd\xef\xbf\xbd (5 bytes"));
	assert_non_null(strstr(svg, ">T&lt;1&gt;<"));
	assert_non_null(strstr(svg, ">s&amp;t<"));
	assert_non_null(strstr(svg, "data-cn=\"bytes\" data-nt=\"Fn&amp;\""));
	assert_null(strstr(svg, "\x01"));
	assert_null(strstr(svg, "\xff"));
	free(svg);
	strobe_tree_free(t);
}

/* Every byte sequence that is not a valid XML character in UTF-8 is replaced; valid multi-byte
 * characters pass through. */
static void test_invalid_utf8_replaced(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"caf\xc3\xa9", "caf\xc3\xa9"},                /* é: valid, kept */
		{"k\xe2\x82\xac", "k\xe2\x82\xac"},            /* €: valid */
		{"e\xf0\x9f\x94\xa5", "e\xf0\x9f\x94\xa5"},    /* U+1F525: valid */
		{"o\xc0\x80", "o\xef\xbf\xbd\xef\xbf\xbd"},    /* overlong NUL */
		{"s\xed\xa0\x80", "s\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
		{"n\xef\xbf\xbf", "n\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* U+FFFF */
		{"b\xf4\x90\x80\x80", "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > 10FFFF */
		{"t\xe2\x82", "t\xef\xbf\xbd\xef\xbf\xbd"},    /* truncated */
		{"tab\there", "tab here"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		strobe_tree *t = strobe_tree_new();
		add(t, cases[i].in, 0, 1);
		char *svg = render(t, (strobe_svg_opts){0});
		char want[128];
		snprintf(want, sizeof(want), "<title>%s (1 samples", cases[i].out);
		if (!strstr(svg, want))
			fail_msg("case %zu: '%s' not in the SVG", i, want);
		free(svg);
		strobe_tree_free(t);
	}
}

static void test_label_truncation_and_annotations(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "a_very_long_function_name_that_cannot_fit;x", 0, 10);
	add(t, "do_syscall_64_[k]", 0, 990);
	char *svg = render(t, (strobe_svg_opts){.width = 1020});
	/* 10 of 1000 samples: 10 px wide; at 12 px * 0.59 per char, (10 - 6) / 7.08 < 3: no text. */
	const char *g = strstr(svg, "<title>a_very_long_function_name_that_cannot_fit (");
	assert_non_null(g);
	assert_non_null(strstr(g, "<text"));
	assert_non_null(strstr(g, "\"></text>"));
	/* The annotation is shown neither in the tooltip nor in the label. */
	assert_non_null(strstr(svg, "<title>do_syscall_64 (990 samples, 99.00%)"));
	assert_non_null(strstr(svg, ">do_syscall_64</text>"));
	free(svg);
	/* Wide enough for part of the name: cut with "..". */
	svg = render(t, (strobe_svg_opts){.width = 1020 * 8});
	g = strstr(svg, "<title>a_very_long_function_name_that_cannot_fit (");
	assert_non_null(g);
	g = strstr(g, "<text");
	assert_non_null(g);
	const char *e = strstr(g, "..</text>");
	assert_non_null(e);
	assert_true(e < strstr(g, "</g>"));
	free(svg);
	strobe_tree_free(t);
}

static void test_minwidth_percent_and_none(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;big", 0, 97);
	add(t, "main;small", 0, 3);
	add(t, "main;zero", 0, 0);
	char *svg = render(t, (strobe_svg_opts){.minwidth_pct = 5});
	assert_null(strstr(svg, "<title>small ("));
	assert_non_null(strstr(svg, "<title>big ("));
	assert_int_equal(count(svg, "<g class=\"f\""), 3);
	free(svg);
	svg = render(t, (strobe_svg_opts){.minwidth = 1, .width = 30});
	assert_null(strstr(svg, "<title>small (")); /* 3% of 10 px */
	free(svg);
	strobe_tree_free(t);
	/* minwidth < 0: every frame with a value, however narrow; one of zero never. */
	t = strobe_tree_new();
	add(t, "main;big", 0, 9999);
	add(t, "main;tiny", 0, 1);
	add(t, "main;zero", 0, 0);
	svg = render(t, (strobe_svg_opts){.width = 120}); /* tiny: 0.01 px */
	assert_null(strstr(svg, "<title>tiny ("));
	free(svg);
	svg = render(t, (strobe_svg_opts){.width = 120, .minwidth = -1});
	assert_non_null(strstr(svg, "<title>tiny ("));
	assert_null(strstr(svg, "<title>zero ("));
	free(svg);
	strobe_tree_free(t);
}

/* An SVG of 1.3 MB goes out through the writer's 256 KiB buffer five times over: every
 * frame once, the document once, in order (what a flush that lost or repeated a piece would
 * break; the other tests' documents fit the buffer whole). */
static void test_large_output_written_whole(void **state)
{
	(void)state;
	enum { N = 6000 };
	strobe_tree *t = strobe_tree_new();
	char stack[64];
	for (int i = 0; i < N; i++) {
		snprintf(stack, sizeof(stack), "main;f%05d", i);
		add(t, stack, 0, 1);
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(strobe_tree_sort(t), 0);
	assert_int_equal(strobe_svg_write(f, t, &(strobe_svg_opts){.minwidth = -1}), 0);
	fclose(f);
	assert_true(len > 4 * (256 << 10));
	assert_int_equal(strlen(buf), len);
	assert_int_equal(count(buf, "<svg "), 1);
	assert_int_equal(count(buf, "</svg>"), 1);
	assert_int_equal(count(buf, "<g class=\"f\""), N + 2); /* all, main, f00000...f05999 */
	const char *prev = buf;
	for (int i = 0; i < N; i += 997) { /* in name order, none missing */
		char key[64];
		snprintf(key, sizeof(key), "<title>f%05d (1 samples,", i);
		const char *at = strstr(buf, key);
		assert_non_null(at);
		assert_true(at > prev);
		prev = at;
	}
	assert_int_equal(strcmp(buf + len - 7, "</svg>\n"), 0);
	free(buf);
	strobe_tree_free(t);
}

static double attr_after(const char *from, const char *attr)
{
	char key[32];
	snprintf(key, sizeof(key), " %s=\"", attr);
	const char *p = strstr(from, key);
	return p ? atof(p + strlen(key)) : -1;
}

static void test_children_in_name_order_and_nested(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;zeta;leaf", 0, 25);
	add(t, "main;alpha", 0, 75);
	char *svg = render(t, (strobe_svg_opts){.width = 1020});
	const char *a = strstr(svg, "<title>alpha ("), *z = strstr(svg, "<title>zeta ("),
		   *l = strstr(svg, "<title>leaf (");
	assert_non_null(a);
	assert_non_null(z);
	assert_non_null(l);
	double ax = attr_after(a, "x"), zx = attr_after(z, "x"), lx = attr_after(l, "x");
	assert_true(ax > 9.9 && ax < 10.1);   /* first child at the parent's left edge */
	assert_true(zx > 759.9 && zx < 760.1); /* after alpha's 750 px */
	assert_true(lx > 759.9 && lx < 760.1); /* under its parent */
	assert_true(attr_after(l, "width") > 249.9 && attr_after(l, "width") < 250.1);
	/* Values for the script, in samples. */
	assert_non_null(strstr(svg, "data-x=\"75\" data-w=\"25\" data-d=\"2\"><title>zeta"));
	free(svg);
	strobe_tree_free(t);
}

static void test_palettes(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "java/lang/Thread.run;sys_read_[k]", 0, 10);
	add(t, "foo::bar", 0, 10);
	char c[64];
	int r, g, b;
	char *svg = render(t, (strobe_svg_opts){.colors = "java"});
	assert_int_equal(sscanf(frame_fill(svg, "java/lang/Thread.run", c, sizeof(c)),
				"rgb(%d,%d,%d)", &r, &g, &b), 3);
	assert_true(g >= 200 && r < 120 && b < 120); /* green: Java */
	assert_int_equal(sscanf(frame_fill(svg, "sys_read", c, sizeof(c)), "rgb(%d,%d,%d)", &r,
				&g, &b), 3);
	assert_true(r >= 190 && b == 0); /* orange: kernel */
	assert_int_equal(sscanf(frame_fill(svg, "foo::bar", c, sizeof(c)), "rgb(%d,%d,%d)", &r,
				&g, &b), 3);
	assert_true(r == g && b < 80); /* yellow: C++ */
	free(svg);
	svg = render(t, (strobe_svg_opts){.colors = "mem"});
	assert_int_equal(sscanf(frame_fill(svg, "foo::bar", c, sizeof(c)), "rgb(%d,%d,%d)", &r,
				&g, &b), 3);
	assert_true(r == 0 && g >= 190);
	free(svg);
	/* A name has one colour wherever it is, in any graph. */
	char c2[64];
	svg = render(t, (strobe_svg_opts){0});
	frame_fill(svg, "foo::bar", c, sizeof(c));
	free(svg);
	strobe_tree *t2 = strobe_tree_new();
	add(t2, "x;y;z", 0, 3);
	add(t2, "foo::bar", 0, 1);
	svg = render(t2, (strobe_svg_opts){0});
	assert_string_equal(frame_fill(svg, "foo::bar", c2, sizeof(c2)), c);
	free(svg);
	strobe_tree_free(t2);
	strobe_tree_free(t);
}

static void test_inverted_puts_root_on_top(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "main;leaf", 0, 1);
	char *svg = render(t, (strobe_svg_opts){.inverted = true});
	const char *all = strstr(strstr(svg, "<title>all"), "y=\"");
	const char *leaf = strstr(strstr(svg, "<title>leaf"), "y=\"");
	assert_true(atof(all + 3) < atof(leaf + 3));
	assert_non_null(strstr(svg, ">Icicle Graph<"));
	free(svg);
	svg = render(t, (strobe_svg_opts){0});
	all = strstr(strstr(svg, "<title>all"), "y=\"");
	leaf = strstr(strstr(svg, "<title>leaf"), "y=\"");
	assert_true(atof(all + 3) > atof(leaf + 3));
	/* Three levels of 16 px plus the margins; a subtitle adds two lines of text. */
	double h = attr_after(svg, "height");
	assert_true(h > 3 * 16);
	free(svg);
	svg = render(t, (strobe_svg_opts){.subtitle = "sub"});
	assert_true(attr_after(svg, "height") == h + 24);
	assert_non_null(strstr(svg, "<text id=\"subtitle\""));
	free(svg);
	strobe_tree_free(t);
}

static void test_diff_colours_and_base_only(void **state)
{
	(void)state;
	strobe_tree *t = strobe_tree_new();
	add(t, "m;grew", 0, 80);
	add(t, "m;grew", 1, 20);
	add(t, "m;shrank", 0, 20);
	add(t, "m;shrank", 1, 40);
	add(t, "m;gone", 1, 40);
	t->diff = true;
	char *svg = render(t, (strobe_svg_opts){0});
	char c[64];
	int r, g, b;
	assert_non_null(frame_fill(svg, "grew", c, sizeof(c)));
	assert_int_equal(sscanf(c, "rgb(%d,%d,%d)", &r, &g, &b), 3);
	assert_true(r > 200 && g < r && b < r); /* red */
	assert_non_null(frame_fill(svg, "shrank", c, sizeof(c)));
	assert_int_equal(sscanf(c, "rgb(%d,%d,%d)", &r, &g, &b), 3);
	assert_true(b > 200 && r < b); /* blue */
	/* Only in the base: still drawn, with its width, blue, and the numbers in the tooltip. */
	/* Widths: each frame as wide as the larger of base and new: m = 80 + 40 + 40 = 160. */
	assert_true(fabs(frame_width(svg, "gone") - 1180.0 * 40 / 160) < 0.2);
	assert_true(fabs(frame_width(svg, "grew") - 1180.0 * 80 / 160) < 0.2);
	assert_true(fabs(frame_width(svg, "m") - 1180.0) < 0.2);
	assert_non_null(strstr(svg, "<title>gone (total: base 40, new 0, delta -40 samples"));
	assert_non_null(frame_fill(svg, "gone", c, sizeof(c)));
	assert_int_equal(sscanf(c, "rgb(%d,%d,%d)", &r, &g, &b), 3);
	assert_true(b > 200 && r < 150); /* two thirds of the largest change */
	assert_non_null(strstr(svg, ">Differential Flame Graph<"));
	assert_non_null(strstr(svg, "<title>grew (total: base 20, new 80, delta +60 samples (+300.00%); "
				    "self: base 20, new 80, delta +60)"));
	free(svg);
	/* Negated: the grown frame is blue. */
	svg = render(t, (strobe_svg_opts){.diff_negate = true});
	assert_int_equal(sscanf(frame_fill(svg, "grew", c, sizeof(c)), "rgb(%d,%d,%d)", &r, &g, &b),
			 3);
	assert_true(b > 200 && r < b);
	free(svg);
	strobe_tree_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_and_widths),
		cmocka_unit_test(test_minwidth_elides_but_keeps_value),
		cmocka_unit_test(test_escaping_and_titles),
		cmocka_unit_test(test_invalid_utf8_replaced),
		cmocka_unit_test(test_label_truncation_and_annotations),
		cmocka_unit_test(test_minwidth_percent_and_none),
		cmocka_unit_test(test_children_in_name_order_and_nested),
		cmocka_unit_test(test_palettes),
		cmocka_unit_test(test_inverted_puts_root_on_top),
		cmocka_unit_test(test_diff_colours_and_base_only),
		cmocka_unit_test(test_large_output_written_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
