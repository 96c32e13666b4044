// SPDX-License-Identifier: Apache-2.0
/*
 * strobe leaks: the stacks whose in-use memory grows (GET /api/v1/leaks), ranked by growth per
 * hour with its confidence interval; the server leaves out stacks whose growth is not
 * significant (Theil–Sen slope, Mann–Kendall test, Benjamini–Hochberg across stacks).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"

static const char usage_text[] =
	"usage: strobe leaks --server URL [options] SELECTOR\n\n"
	"SELECTOR is an in-use type with label matchers, e.g.\n"
	"  'memory:inuse_space:bytes:space:bytes{service_name=\"api\"}'\n\n"
	"  --from T, --to T       the window (default the last hour)\n"
	"  --step DUR             one point per step (default: the window / 60)\n"
	"  --confidence C         0.5 to 0.9999 (default 0.99)\n"
	"  -n, --limit N          at most N stacks (default 20)\n"
	"  -f, --format F         table (default) or json (the server's answer, with the points)\n"
	CLI_SERVER_HELP;

static void bytes(char *b, size_t n, double v, const char *unit)
{
	if (strcmp(unit, "bytes") == 0 && fabs(v) >= 1048576)
		snprintf(b, n, "%.2f MiB", v / 1048576);
	else if (strcmp(unit, "bytes") == 0 && fabs(v) >= 1024)
		snprintf(b, n, "%.1f KiB", v / 1024);
	else
		snprintf(b, n, "%.0f", v);
}

int cmd_leaks(int argc, char **argv)
{
	enum { O_FROM = OPT_CMD_BASE, O_TO, O_STEP, O_CONF };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"server", required_argument, 0, 's'},
		{"from", required_argument, 0, O_FROM}, {"to", required_argument, 0, O_TO},
		{"step", required_argument, 0, O_STEP}, {"confidence", required_argument, 0, O_CONF},
		{"limit", required_argument, 0, 'n'}, {"format", required_argument, 0, 'f'},
		CLI_SERVER_LONGOPTS,
		{0, 0, 0, 0}};
	const char *cmd = "leaks", *from = NULL, *to = NULL, *step = NULL, *conf = NULL,
		   *lim = NULL, *fmt = "table";
	cli_server_opts so = {0};
	int c;
	while ((c = getopt_long(argc, argv, "hs:n:f:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &so))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': so.server = optarg; break;
		case O_FROM: from = optarg; break;
		case O_TO: to = optarg; break;
		case O_STEP: step = optarg; break;
		case O_CONF: conf = optarg; break;
		case 'n': lim = optarg; break;
		case 'f': fmt = optarg; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (strcmp(fmt, "table") && strcmp(fmt, "json")) {
		cli_err(cmd, "--format: '%s' is not table or json", fmt);
		return 2;
	}
	if (!so.server) {
		cli_err(cmd, "--server URL is required");
		return 2;
	}
	if (optind + 1 != argc) {
		cli_err(cmd, optind >= argc ? "give one SELECTOR" : "give one SELECTOR, not several");
		return 2;
	}
	if (cli_server_check(cmd, &so) < 0)
		return 2;
	/* The server checks the values and names the bad one; this only passes them on. */
	const char *kv[] = {"query", argv[optind], "from", from, "to", to, "step", step,
			    "confidence", conf, "limit", lim, NULL};
	json_t *j;
	if (cli_api_get(cmd, &so, "api/v1/leaks", kv, &j) < 0)
		return 1;
	if (strcmp(fmt, "json") == 0) {
		char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
		if (s)
			puts(s);
		free(s);
		json_decref(j);
		return 0;
	}
	const char *unit = json_string_value(json_object_get(j, "unit"));
	unit = unit ? unit : "";
	json_t *ls = json_object_get(j, "leaks");
	printf("%zu leaking of %.0f stacks tested, %.0f steps with data, confidence %g\n",
	       json_array_size(ls), cli_jnum(j, "stacks_tested"), cli_jnum(j, "steps_with_data"),
	       cli_jnum(j, "confidence"));
	if (json_array_size(ls))
		printf("%14s  %-27s %14s  %s\n", "GROWTH/HOUR", "INTERVAL", "NOW", "STACK (leaf last)");
	size_t i;
	json_t *l;
	json_array_foreach(ls, i, l) {
		char g[32], lo[32], hi[32], last[32];
		bytes(g, sizeof(g), cli_jnum(l, "growth_per_hour"), unit);
		bytes(lo, sizeof(lo), cli_jnum(l, "lo_per_hour"), unit);
		json_t *h = json_object_get(l, "hi_per_hour");
		if (json_is_number(h))
			bytes(hi, sizeof(hi), json_number_value(h), unit);
		else
			snprintf(hi, sizeof(hi), "inf");
		json_t *pts = json_object_get(l, "points");
		bytes(last, sizeof(last),
		      json_number_value(json_array_get(json_array_get(pts, json_array_size(pts) - 1), 1)), unit);
		char iv[80];
		snprintf(iv, sizeof(iv), "[%s, %s]", lo, hi);
		printf("%14s  %-27s %14s  ", g, iv, last);
		size_t k;
		json_t *f;
		json_array_foreach(json_object_get(l, "stack"), k, f)
			printf("%s%s", k ? ";" : "", json_string_value(f));
		putchar('\n');
	}
	json_decref(j);
	return 0;
}
