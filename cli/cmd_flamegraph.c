// SPDX-License-Identifier: Apache-2.0
/*
 * strobe flamegraph: any profile (pprof, folded, perf script; several are merged) to an
 * interactive SVG flame graph on stdout or -o FILE, with flamegraph.pl's options and pprof's
 * transforms.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/render.h"

static const char usage_text[] =
	"usage: strobe flamegraph [options] [FILE...]\n\n"
	"Draws an interactive SVG flame graph of the merged inputs (pprof, folded stacks or\n"
	"perf script text; none or '-' = stdin). Hover for details, click to zoom, search by regex.\n\n"
	"  -o, --output FILE      write here instead of stdout\n"
	"  --title TEXT           title (default \"Flame Graph\")\n"
	"  --subtitle TEXT        second line under the title\n"
	"  --width PX             image width (default 1200)\n"
	"  --height PX            frame height (default 16)\n"
	"  --fontsize PT          font size (default 12)\n"
	"  --colors PALETTE       hot (default), mem, io, wakeup, chain, java, js, perl, red,\n"
	"                         green, blue, aqua, yellow, purple, orange\n"
	"  --hash                 colour by name hash (stable across graphs)\n"
	"  --inverted             icicle graph (root at the top)\n"
	"  --reverse              reverse stacks (leaf at the root)\n"
	"  --minwidth PX|PCT%     omit frames narrower than PX pixels (default 0.1) or than PCT\n"
	"                         percent of the total; 0 draws every frame\n"
	"  --countname NAME       what a count is (default: the sample type's unit)\n"
	"  --nametype TEXT        label of a frame in the details line (default \"Function:\")\n"
	CLI_PROFILE_HELP;

enum { O_TITLE = OPT_CMD_BASE, O_SUB, O_WIDTH, O_HEIGHT, O_FONT, O_COLORS, O_HASH, O_INV, O_REV,
       O_MINW, O_COUNT, O_NAMETYPE };

/* One folded (or perf script) input and nothing that needs the profile model: build the tree
 * straight from the text, keeping only frames wide enough to draw. Same picture, a fraction of
 * the time and memory on big inputs. Returns 0 with *out NULL when the case does not apply,
 * 0 with a tree, or -1 after printing an error. */
static int fast_path(const char *cmd, int nfiles, char **files, const cli_profile_opts *po,
		     unsigned flags, strobe_svg_opts *so, strobe_tree **out)
{
	const strobe_filter *f = &po->filter;
	*out = NULL;
	if (nfiles > 1 || f->focus || f->ignore || f->hide || f->show || f->tagfocus ||
	    f->tagignore || f->prune > 0 || po->gran != STROBE_GRAN_FUNCTIONS || flags ||
	    po->sample_index)
		return 0;
	const char *path = nfiles ? files[0] : "-", *name = strcmp(path, "-") ? path : "<stdin>";
	strobe_input in;
	strobe_err err = {{0}};
	if (strobe_input_open(path, &in, &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		return -1;
	}
	strobe_format fmt = strobe_detect(in.data, in.len);
	char *text = NULL;
	size_t tlen = 0;
	const char *src = (const char *)in.data;
	size_t slen = in.len;
	int r = 0;
	if (fmt == STROBE_FMT_PERF_SCRIPT) {
		r = strobe_perf_script_fold(src, slen, name, &text, &tlen, &err);
		src = text;
		slen = tlen;
	} else if (fmt != STROBE_FMT_FOLDED) {
		strobe_input_close(&in);
		return 0;
	}
	strobe_tree *t = r == 0 ? strobe_tree_new() : NULL;
	if (r == 0 && !t)
		r = -ENOMEM;
	if (r == 0)
		r = strobe_tree_from_folded(t, src, slen, name, strobe_svg_min_fraction(so), &err);
	free(text);
	strobe_input_close(&in);
	if (r == -ENOTSUP) { /* the two-count form: the profile path handles it */
		strobe_tree_free(t);
		return 0;
	}
	if (r < 0) {
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-r));
		strobe_tree_free(t);
		return -1;
	}
	if (!so->countname)
		so->countname = "samples";
	*out = t;
	return 0;
}

int cmd_flamegraph(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"output", required_argument, 0, 'o'},
		{"title", required_argument, 0, O_TITLE}, {"subtitle", required_argument, 0, O_SUB},
		{"width", required_argument, 0, O_WIDTH}, {"height", required_argument, 0, O_HEIGHT},
		{"fontsize", required_argument, 0, O_FONT}, {"colors", required_argument, 0, O_COLORS},
		{"hash", no_argument, 0, O_HASH}, {"inverted", no_argument, 0, O_INV},
		{"reverse", no_argument, 0, O_REV}, {"minwidth", required_argument, 0, O_MINW},
		{"countname", required_argument, 0, O_COUNT},
		{"nametype", required_argument, 0, O_NAMETYPE}, CLI_PROFILE_LONGOPTS, {0, 0, 0, 0}};
	const char *cmd = "flamegraph", *output = NULL;
	cli_profile_opts po = {0};
	strobe_svg_opts so = {0};
	unsigned flags = 0;
	long v;
	int c;
	while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
		int h = cli_profile_opt(cmd, c, optarg, &po);
		if (h < 0)
			return 2;
		if (h)
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'o': output = optarg; break;
		case O_TITLE: so.title = optarg; break;
		case O_SUB: so.subtitle = optarg; break;
		case O_WIDTH:
			if (cli_int(cmd, "--width", optarg, 100, 100000, &v) < 0)
				return 2;
			so.width = (int)v;
			break;
		case O_HEIGHT:
			if (cli_int(cmd, "--height", optarg, 4, 200, &v) < 0)
				return 2;
			so.frame_height = (int)v;
			break;
		case O_FONT:
			if (cli_int(cmd, "--fontsize", optarg, 4, 100, &v) < 0)
				return 2;
			so.font_size = (int)v;
			break;
		case O_COLORS: so.colors = optarg; break;
		case O_HASH: so.hash = true; break;
		case O_INV: so.inverted = true; break;
		case O_REV: flags |= STROBE_TREE_REVERSE; break;
		case O_MINW: {
			/* "0.5" pixels, or "0.1%" of the total as flamegraph.pl takes it; 0 = draw
			 * every frame that has a value. */
			char num[64];
			size_t len = strlen(optarg);
			bool pct = len && optarg[len - 1] == '%';
			snprintf(num, sizeof(num), "%.*s", (int)(pct ? len - 1 : len), optarg);
			double mw;
			if (cli_double(cmd, "--minwidth", num, &mw) < 0)
				return 2;
			if (mw < 0) {
				cli_err(cmd, "--minwidth: '%s' must not be negative", optarg);
				return 2;
			}
			if (pct)
				so.minwidth_pct = mw;
			else
				so.minwidth = mw > 0 ? mw : -1;
			break;
		}
		case O_COUNT: so.countname = optarg; break;
		case O_NAMETYPE: so.nametype = optarg; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	strobe_profile *p = NULL;
	strobe_tree *t = NULL;
	int r = fast_path(cmd, argc - optind, argv + optind, &po, flags, &so, &t);
	if (r < 0)
		return 2;
	if (!t) {
		int type;
		if (cli_load(cmd, argv + optind, argc - optind, &po, &p, &type) < 0)
			return 2;
		if (!so.countname) {
			const char *unit = strobe_str(p, p->types[type].unit);
			so.countname = strcmp(unit, "count") == 0 ? "samples" : unit;
		}
		t = strobe_tree_new();
		r = t ? strobe_tree_add(t, p, type, po.gran, 0, 1.0, flags) : -1;
		if (r == 0)
			r = strobe_tree_sort(t);
	}
	if (r < 0) {
		cli_err(cmd, "out of memory");
		strobe_tree_free(t);
		strobe_profile_free(p);
		return 2;
	}
	cli_out out;
	if (cli_out_open(cmd, output, &out) < 0) {
		strobe_tree_free(t);
		strobe_profile_free(p);
		return 2;
	}
	r = strobe_svg_write(out.f, t, &so);
	if (r < 0)
		cli_err(cmd, "writing SVG: %s", strerror(-r));
	r = cli_out_close(cmd, &out, r == 0) < 0 || r < 0;
	strobe_tree_free(t);
	strobe_profile_free(p);
	return r ? 2 : 0;
}
