// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the SVG flame graph: frame count and widths proportional to values, minwidth
 * elision, XML escaping, inverted layout, titles, and differential colours (grew red, shrank
 * blue, base-only frames still drawn).
 */
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
						.countname = "bytes"});
	assert_non_null(strstr(svg, "<title>&lt;a&amp;b&gt;&quot;q&quot; (5 bytes, 100.00%)"));
	assert_non_null(strstr(svg, "<title>bad\xef\xbf\xbd (5 bytes"));
	assert_non_null(strstr(svg, ">T&lt;1&gt;<"));
	assert_non_null(strstr(svg, ">s&amp;t<"));
	assert_null(strstr(svg, "\x01"));
	free(svg);
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
	assert_true(frame_width(svg, "gone") > 100);
	assert_non_null(strstr(svg, "<title>gone (total: base 40, new 0, delta -40 samples"));
	assert_non_null(frame_fill(svg, "gone", c, sizeof(c)));
	assert_int_equal(sscanf(c, "rgb(%d,%d,%d)", &r, &g, &b), 3);
	assert_true(b > 200 && r < 150); /* two thirds of the largest change */
	assert_non_null(strstr(svg, ">Differential Flame Graph<"));
	free(svg);
	strobe_tree_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames_and_widths),
		cmocka_unit_test(test_minwidth_elides_but_keeps_value),
		cmocka_unit_test(test_escaping_and_titles),
		cmocka_unit_test(test_inverted_puts_root_on_top),
		cmocka_unit_test(test_diff_colours_and_base_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
