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
#include "strobe/diffsig.h"

static const char usage_text[] =
	"usage: strobe gate --max-growth PP [--min-share PP] [options] BASE NEW\n\n"
	"Exit 0 when no function's share of the total (flat or cumulative) grew by more than PP\n"
	"percentage points from BASE to NEW; exit 1 and list the offenders when one did; exit 2 on\n"
	"bad input.\n\n"
	"  --max-growth PP        allowed growth of a share, in percentage points (required)\n"
	"  --min-share PP         ignore functions whose share in NEW is below PP (default 0)\n"
	"  --confidence C         count only growth that is significant at confidence C (e.g.\n"
	"                         0.99; binomial count test, Benjamini-Hochberg over all\n"
	"                         functions): noise above PP passes\n"
	CLI_PROFILE_HELP;

enum { O_MAXG = OPT_CMD_BASE, O_MINS, O_CONF };

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
						 {"confidence", required_argument, 0, O_CONF},
						 CLI_PROFILE_LONGOPTS,
						 {0, 0, 0, 0}};
	const char *cmd = "gate";
	cli_profile_opts po = {0};
	double max_growth = NAN, min_share = 0, conf = 0;
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
		case O_CONF:
			if (cli_double(cmd, "--confidence", optarg, &conf) < 0)
				return 2;
			if (!(conf > 0 && conf < 1)) {
				cli_err(cmd, "--confidence: %s is not between 0 and 1 (e.g. 0.99)",
					optarg);
				return 2;
			}
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
	strobe_fncmp *raw = NULL;
	strobe_sig_row *sig = NULL;
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
	if (conf > 0) {
		/* The test needs the raw counts: the same comparison unnormalised (the same
		 * functions in the same order), its rows judged at the confidence. */
		int64_t rt[2];
		size_t rn = 0;
		if (strobe_fncompare(base, bt, cur, ct, po.gran, false, &raw, &rn, rt) < 0 ||
		    rn != n || !(sig = malloc((n ? n : 1) * 2 * sizeof(*sig))) ||
		    strobe_fncmp_significance(raw, rn, rt, strobe_sig_per_sample(cur, ct), conf,
					      sig, sig + rn) < 0) {
			strobe_fncmp_free(raw, rn);
			raw = NULL;
			cli_err(cmd, "out of memory");
			goto out;
		}
		strobe_fncmp_free(raw, rn);
		raw = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		offender o = {&fc[i], 100.0 * (double)fc[i].flat[1] / (double)tot[1],
			      100.0 * (double)fc[i].flat[0] / (double)tot[0],
			      100.0 * (double)fc[i].cum[1] / (double)tot[1],
			      100.0 * (double)fc[i].cum[0] / (double)tot[0], 0};
		double gf = o.new_flat - o.base_flat, gc = o.new_cum - o.base_cum;
		if (sig && !sig[i].significant) /* noise is not growth */
			gf = 0;
		if (sig && !sig[n + i].significant)
			gc = 0;
		o.worst = gf > gc ? gf : gc;
		if (o.worst > max_growth && o.new_cum >= min_share)
			off[noff++] = o;
	}
	if (!noff) {
		if (conf > 0)
			printf("gate: ok: no function's share grew significantly (%g%% confidence) by "
			       "more than %.2f points\n",
			       100 * conf, max_growth);
		else
			printf("gate: ok: no function's share grew by more than %.2f points\n",
			       max_growth);
		rc = 0;
		goto out;
	}
	qsort(off, noff, sizeof(*off), worst_first);
	printf("gate: FAIL: %zu function%s grew by more than %.2f points of the total%s\n", noff,
	       noff == 1 ? "" : "s", max_growth, conf > 0 ? ", significantly" : "");
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
	free(sig);
	strobe_profile_free(base);
	strobe_profile_free(cur);
	return rc;
}
