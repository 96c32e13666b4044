// SPDX-License-Identifier: Apache-2.0
/*
 * strobe gate: a CI check. Compares each function's share of the total (flat and cumulative,
 * after normalisation) between BASE and NEW; exits 1 with a table of offenders when any share
 * grew by more than --max-growth percentage points, 0 when none did, 2 on bad input.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: strobe gate --max-growth PP [--min-share PP] [options] BASE NEW\n\n"
	"Exit 0 when no function's share of the total (flat or cumulative) grew by more than PP\n"
	"percentage points from BASE to NEW; exit 1 and list the offenders when one did; exit 2 on\n"
	"bad input.\n\n"
	"  --max-growth PP        allowed growth of a share, in percentage points (required)\n"
	"  --min-share PP         ignore functions whose share in NEW is below PP (default 0)\n"
	CLI_PROFILE_HELP;

enum { O_MAXG = OPT_CMD_BASE, O_MINS };

typedef struct offender {
	const strobe_fncmp *f;
	double base_flat, new_flat, base_cum, new_cum, worst;
} offender;

static int worst_first(const void *a, const void *b)
{
	const offender *x = a, *y = b;
	if (x->worst != y->worst)
		return x->worst > y->worst ? -1 : 1;
	return strcmp(x->f->name, y->f->name);
}

int cmd_gate(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
						 {"max-growth", required_argument, 0, O_MAXG},
						 {"min-share", required_argument, 0, O_MINS},
						 CLI_PROFILE_LONGOPTS,
						 {0, 0, 0, 0}};
	const char *cmd = "gate";
	cli_profile_opts po = {0};
	double max_growth = NAN, min_share = 0;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		int h = cli_profile_opt(cmd, c, optarg, &po);
		if (h < 0)
			return 2;
		if (h)
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case O_MAXG:
			if (cli_double(cmd, "--max-growth", optarg, &max_growth) < 0)
				return 2;
			break;
		case O_MINS:
			if (cli_double(cmd, "--min-share", optarg, &min_share) < 0)
				return 2;
			break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (isnan(max_growth) || max_growth < 0) {
		cli_err(cmd, "--max-growth PP (percentage points, >= 0) is required");
		return 2;
	}
	if (argc - optind != 2) {
		cli_err(cmd, "need exactly two profiles, BASE and NEW (got %d)", argc - optind);
		return 2;
	}
	strobe_profile *base = NULL, *cur = NULL;
	int bt, ct, rc = 2;
	strobe_fncmp *fc = NULL;
	offender *off = NULL;
	size_t n = 0, noff = 0;
	int64_t tot[2];
	if (cli_load(cmd, argv + optind, 1, &po, &base, &bt) < 0 ||
	    cli_load(cmd, argv + optind + 1, 1, &po, &cur, &ct) < 0)
		goto out;
	if (strobe_fncompare(base, bt, cur, ct, po.gran, true, &fc, &n, tot) < 0 ||
	    !(off = calloc(n ? n : 1, sizeof(*off)))) {
		cli_err(cmd, "out of memory");
		goto out;
	}
	if (!tot[0] || !tot[1]) {
		cli_err(cmd, "%s: total is zero; nothing to compare", argv[optind + (tot[0] == 0)]);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		offender o = {&fc[i], 100.0 * (double)fc[i].flat[1] / (double)tot[1],
			      100.0 * (double)fc[i].flat[0] / (double)tot[0],
			      100.0 * (double)fc[i].cum[1] / (double)tot[1],
			      100.0 * (double)fc[i].cum[0] / (double)tot[0], 0};
		double gf = o.new_flat - o.base_flat, gc = o.new_cum - o.base_cum;
		o.worst = gf > gc ? gf : gc;
		if (o.worst > max_growth && o.new_cum >= min_share)
			off[noff++] = o;
	}
	if (!noff) {
		printf("gate: ok: no function's share grew by more than %.2f points\n", max_growth);
		rc = 0;
		goto out;
	}
	qsort(off, noff, sizeof(*off), worst_first);
	printf("gate: FAIL: %zu function%s grew by more than %.2f points of the total\n", noff,
	       noff == 1 ? "" : "s", max_growth);
	printf("%9s %9s %9s %9s %9s  %s\n", "base flat", "new flat", "base cum", "new cum", "delta",
	       "function");
	for (size_t i = 0; i < noff; i++)
		printf("%8.2f%% %8.2f%% %8.2f%% %8.2f%% %+8.2f  %s\n", off[i].base_flat,
		       off[i].new_flat, off[i].base_cum, off[i].new_cum, off[i].worst, off[i].f->name);
	rc = 1;
out:
	fflush(stdout);
	strobe_fncmp_free(fc, n);
	free(off);
	strobe_profile_free(base);
	strobe_profile_free(cur);
	return rc;
}
