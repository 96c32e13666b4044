// SPDX-License-Identifier: Apache-2.0
/*
 * strobe diff: what changed between two profiles. A differential flame graph (red grew, blue
 * shrank), a ranking of functions by change, or two-count folded stacks (difffolded.pl's form).
 * BASE is scaled to NEW's total first unless --no-normalize, so more traffic is not a regression.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/diffsig.h"
#include "strobe/render.h"

static const char usage_text[] =
	"usage: strobe diff [-f svg|top|folded|json] [-o OUT] [--no-normalize] [options] BASE NEW\n\n"
	"Compares two profiles. Frames that grew are red, shrank blue; frames only in BASE still\n"
	"appear. BASE is scaled to NEW's total first (normalised) unless --no-normalize.\n\n"
	"  -f, --format FORMAT    svg (default), top (functions ranked by change), folded (two\n"
	"                         counts per stack: base new), json (tree with base and new);\n"
	"                         -t, --to: the same, the older spelling\n"
	"  -o, --output OUT       output file (default stdout)\n"
	"  -n, --nodes N          top: at most N rows\n"
	"  --no-normalize         compare raw values\n"
	"  --confidence C         judge each change at confidence C (default 0.99): top shows p and\n"
	"                         q (Benjamini-Hochberg) and marks noise; svg draws noise pale\n"
	"  --title TEXT           svg title\n" CLI_PROFILE_HELP;

enum { O_NONORM = OPT_CMD_BASE, O_TITLE, O_CONF };

static int write_two_count(FILE *f, const strobe_tree *t)
{
	/* path[d] = node at depth d of the current DFS position. */
	uint32_t *path = malloc((STROBE_MAX_DEPTH * 2 + 2) * sizeof(*path));
	if (!path)
		return -ENOMEM;
	size_t depth = 0;
	uint32_t n = t->nodes[0].first_child;
	while (n) {
		path[depth++] = n;
		const strobe_tree_node *nd = &t->nodes[n];
		if (nd->self[0] || nd->self[1]) {
			for (size_t j = 0; j < depth; j++)
				fprintf(f, "%s%s", j ? ";" : "", strobe_tree_name(t, path[j]));
			fprintf(f, " %" PRId64 " %" PRId64 "\n", nd->self[1], nd->self[0]);
		}
		if (nd->first_child && depth < STROBE_MAX_DEPTH * 2) {
			n = nd->first_child;
			continue;
		}
		/* Next sibling, climbing up while there is none. */
		while (depth && !t->nodes[path[depth - 1]].next_sibling)
			depth--;
		if (!depth)
			break;
		n = t->nodes[path[--depth]].next_sibling;
	}
	free(path);
	return ferror(f) ? -EIO : 0;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"format", required_argument, 0, 'f'},
		{"to", required_argument, 0, 't'},
		{"output", required_argument, 0, 'o'}, {"nodes", required_argument, 0, 'n'},
		{"no-normalize", no_argument, 0, O_NONORM}, {"title", required_argument, 0, O_TITLE},
		{"confidence", required_argument, 0, O_CONF},
		CLI_PROFILE_LONGOPTS, {0, 0, 0, 0}};
	const char *cmd = "diff", *output = NULL, *to = "svg", *title = NULL;
	cli_profile_opts po = {0};
	bool norm = true;
	double conf = 0.99;
	long limit = 0;
	int c;
	while ((c = getopt_long(argc, argv, "hf:t:o:n:", longopts, NULL)) != -1) {
		int h = cli_profile_opt(cmd, c, optarg, &po);
		if (h < 0)
			return 2;
		if (h)
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'f':
		case 't': to = optarg; break;
		case 'o': output = optarg; break;
		case 'n':
			if (cli_int(cmd, "-n", optarg, 0, 1L << 30, &limit) < 0)
				return 2;
			break;
		case O_NONORM: norm = false; break;
		case O_TITLE: title = optarg; break;
		case O_CONF:
			if (cli_double(cmd, "--confidence", optarg, &conf) < 0)
				return 2;
			if (!(conf > 0 && conf < 1)) {
				cli_err(cmd, "--confidence: %s is not between 0 and 1 (e.g. 0.99)", optarg);
				return 2;
			}
			break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (strcmp(to, "svg") && strcmp(to, "top") && strcmp(to, "folded") && strcmp(to, "json")) {
		cli_err(cmd, "--format: '%s' is not svg, top, folded or json", to);
		return 2;
	}
	if (argc - optind != 2) {
		cli_err(cmd, "need exactly two profiles, BASE and NEW (got %d)", argc - optind);
		return 2;
	}
	strobe_profile *base = NULL, *cur = NULL;
	int bt, ct, rc = 2;
	if (cli_load(cmd, argv + optind, 1, &po, &base, &bt) < 0 ||
	    cli_load(cmd, argv + optind + 1, 1, &po, &cur, &ct) < 0)
		goto out;
	cli_out out;
	if (cli_out_open(cmd, output, &out) < 0)
		goto out;
	int r;
	if (strcmp(to, "top") == 0) {
		r = strobe_diff_top_write(out.f, base, bt, cur, ct, po.gran, norm, (size_t)limit, conf);
	} else {
		int64_t btot = strobe_total(base, bt), ctot = strobe_total(cur, ct);
		double scale = norm && btot ? (double)ctot / (double)btot : 1.0;
		strobe_tree *t = strobe_tree_new();
		r = t ? 0 : -ENOMEM;
		if (!r)
			r = strobe_tree_add(t, cur, ct, po.gran, 0, 1.0, 0);
		if (!r)
			r = strobe_tree_add(t, base, bt, po.gran, 1, scale, 0);
		if (!r)
			r = strobe_tree_sort(t);
		if (!r) {
			t->diff = true;
			r = strobe_tree_significance(t, scale,
						     strobe_sig_per_sample(cur, ct), conf);
		}
		if (!r) {
			if (strcmp(to, "svg") == 0) {
				const char *unit = strobe_str(cur, cur->types[ct].unit);
				strobe_svg_opts so = {
					.title = title,
					.countname = strcmp(unit, "count") == 0 ? "samples" : unit};
				r = strobe_svg_write(out.f, t, &so);
			} else if (strcmp(to, "json") == 0) {
				r = strobe_json_tree_write(out.f, t,
							   strobe_str(cur, cur->types[ct].type),
							   strobe_str(cur, cur->types[ct].unit));
			} else {
				r = 0;
				/* Two counts per stack (base new), self values, in depth-first order
				 * of the sorted tree: difffolded.pl's output, which flamegraph.pl
				 * and strobe read back. */
				r = write_two_count(out.f, t);
			}
		}
		strobe_tree_free(t);
	}
	if (r < 0)
		cli_err(cmd, "writing output: %s", strerror(-r));
	rc = cli_out_close(cmd, &out, r == 0) < 0 || r < 0 ? 2 : 0;
out:
	strobe_profile_free(base);
	strobe_profile_free(cur);
	return rc;
}
