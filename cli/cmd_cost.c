// SPDX-License-Identifier: Apache-2.0
/*
 * strobe cost: what CPU time cost, in core-hours, dollars (and energy, where the server is told
 * the watts), per year. From a server (GET /api/v1/cost): per value of a label (--group-by team)
 * or per function (--by-function). From profile files: per function, at --price, scaled to a
 * year from the profiles' own duration (or --window). docs/cost-and-leaks.md has the formulas.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"
#include "strobe/server.h" /* strobe_duration_parse */
#include "strobe/transform.h"

#define PRICE_DEFAULT 0.0425 /* as the server's default (server/cost.h) */
#define YEAR_S (365.25 * 86400)

static const char usage_text[] =
	"usage: strobe cost --server URL [options] SELECTOR\n"
	"       strobe cost [--price P] [--window DUR] FILE...\n\n"
	"SELECTOR is a CPU type with label matchers, e.g.\n"
	"  'process_cpu:cpu:nanoseconds:cpu:nanoseconds{env=\"prod\"}'\n\n"
	"  --from T, --to T       the window (default the last hour); per year = x (1 year / window)\n"
	"  --group-by LABEL       one row per value of LABEL (team, service_name)\n"
	"  --by-function          one row per function: self and total dollars a year\n"
	"  --order self|total     with --by-function, the ranking (default self)\n"
	"  -n, --limit N          at most N functions (default 50)\n"
	"  -f, --format F         table (default) or json (the server's answer)\n"
	"  --price P              files: dollars per core-hour (default 0.0425)\n"
	"  --window DUR           files: the time the profiles cover (default: their duration)\n"
	CLI_SERVER_HELP;

static void money(char *b, size_t n, double d)
{
	snprintf(b, n, d >= 100 ? "$%.0f" : d >= 1 ? "$%.2f" : "$%.4f", d);
}

static int print_server(const json_t *j, bool by_fn, const char *gb)
{
	double w = cli_jnum(j, "window_seconds");
	printf("window %.0f s, $%g per core-hour, per year = x %.1f\n", w,
	       cli_jnum(j, "price_per_core_hour"), cli_jnum(j, "year_factor"));
	bool energy = json_object_get(j, "energy") != NULL;
	char a[32], b[32];
	if (by_fn) {
		printf("%14s %14s %12s  %s\n", "SELF $/YEAR", "TOTAL $/YEAR", "SELF CORES", "FUNCTION");
		size_t i;
		json_t *f;
		json_array_foreach(json_object_get(j, "functions"), i, f) {
			json_t *s = json_object_get(f, "self"), *t = json_object_get(f, "total");
			money(a, sizeof(a), cli_jnum(s, "dollars_per_year"));
			money(b, sizeof(b), cli_jnum(t, "dollars_per_year"));
			printf("%14s %14s %12.3f  %s\n", a, b, cli_jnum(s, "cores"),
			       json_string_value(json_object_get(f, "name")));
		}
	} else {
		printf("%-24s %12s %10s %8s %14s%s\n", gb ? gb : "GROUP", "CORE-HOURS", "$", "CORES",
		       "$/YEAR", energy ? "     KWH/YEAR  KG CO2/YEAR" : "");
		size_t i;
		json_t *g;
		json_array_foreach(json_object_get(j, "groups"), i, g) {
			json_t *c = json_object_get(g, "cost");
			const char *v = gb ? json_string_value(json_object_get(json_object_get(g, "group"), gb)) : "(all)";
			money(a, sizeof(a), cli_jnum(c, "dollars"));
			money(b, sizeof(b), cli_jnum(c, "dollars_per_year"));
			printf("%-24s %12.6g %10s %8.3f %14s", v && *v ? v : "(none)", cli_jnum(c, "core_hours"),
			       a, cli_jnum(c, "cores"), b);
			if (energy)
				printf(" %12.1f %12.1f", cli_jnum(c, "kwh_per_year"), cli_jnum(c, "co2_kg_per_year"));
			putchar('\n');
		}
	}
	json_t *t = json_object_get(j, "total");
	money(a, sizeof(a), cli_jnum(t, "dollars_per_year"));
	printf("total: %.3f core-seconds, %.6g core-hours, %.3f cores, %s a year\n",
	       cli_jnum(t, "core_seconds"), cli_jnum(t, "core_hours"),
	       cli_jnum(t, "cores"), a);
	return 0;
}

/* Files: per function, at the price given, over the profiles' own time. */
static int from_files(const char *cmd, char **files, int n, double price, int64_t window_ns,
		      long limit)
{
	strobe_profile *p;
	if (cli_load_merged(cmd, files, n, NULL, &p) < 0)
		return 1;
	int ti = -1;
	double unit = 0;
	for (uint32_t i = 0; i < p->ntypes && ti < 0; i++) {
		const char *t = strobe_str(p, p->types[i].type), *u = strobe_str(p, p->types[i].unit);
		if (strstr(t, "cpu") && strcmp(u, "nanoseconds") == 0)
			ti = (int)i, unit = 1e-9;
	}
	for (uint32_t i = 0; i < p->ntypes && ti < 0; i++)
		if (strcmp(strobe_str(p, p->types[i].type), "samples") == 0 && p->period > 0 &&
		    strcmp(strobe_str(p, p->period_type.unit), "nanoseconds") == 0)
			ti = (int)i, unit = 1e-9 * (double)p->period;
	double w = window_ns ? (double)window_ns / 1e9 : (double)p->duration_nanos / 1e9;
	int rc = 0;
	strobe_fnstat *st = NULL;
	size_t ns = 0;
	if (ti < 0) {
		cli_err(cmd, "no CPU time in these profiles (a cpu/nanoseconds sample type, or samples "
			     "with a period in nanoseconds)");
		rc = 1;
	} else if (!(w > 0)) {
		cli_err(cmd, "the profiles carry no duration: give --window");
		rc = 2;
	} else if (strobe_fnstats(p, ti, STROBE_GRAN_FUNCTIONS, &st, &ns) < 0) {
		cli_err(cmd, "out of memory");
		rc = 1;
	}
	if (rc == 0) {
		/* rank by self: the fnstats' flat */
		for (size_t i = 1; i < ns; i++)
			for (size_t k = i; k > 0 && st[k].flat > st[k - 1].flat; k--) {
				strobe_fnstat x = st[k];
				st[k] = st[k - 1];
				st[k - 1] = x;
			}
		double year = YEAR_S / w, all = (double)strobe_total(p, ti) * unit;
		char a[32], b[32];
		printf("window %.0f s, $%g per core-hour, per year = x %.1f\n", w, price, year);
		printf("%14s %14s %12s  %s\n", "SELF $/YEAR", "TOTAL $/YEAR", "SELF CORES", "FUNCTION");
		for (size_t i = 0; i < ns && (long)i < limit; i++) {
			money(a, sizeof(a), (double)st[i].flat * unit / 3600 * price * year);
			money(b, sizeof(b), (double)st[i].cum * unit / 3600 * price * year);
			printf("%14s %14s %12.3f  %s\n", a, b, (double)st[i].flat * unit / w, st[i].name);
		}
		money(a, sizeof(a), all / 3600 * price * year);
		printf("total: %.3f core-seconds, %.6g core-hours, %.3f cores, %s a year\n", all,
		       all / 3600, all / w, a);
	}
	free(st);
	strobe_profile_free(p);
	return rc;
}

int cmd_cost(int argc, char **argv)
{
	enum { O_FROM = OPT_CMD_BASE, O_TO, O_GB, O_BYFN, O_ORDER, O_PRICE, O_WINDOW };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"server", required_argument, 0, 's'},
		{"from", required_argument, 0, O_FROM}, {"to", required_argument, 0, O_TO},
		{"group-by", required_argument, 0, O_GB}, {"by-function", no_argument, 0, O_BYFN},
		{"order", required_argument, 0, O_ORDER}, {"limit", required_argument, 0, 'n'},
		{"format", required_argument, 0, 'f'}, {"price", required_argument, 0, O_PRICE},
		{"window", required_argument, 0, O_WINDOW}, CLI_SERVER_LONGOPTS,
		{0, 0, 0, 0}};
	const char *cmd = "cost", *from = NULL, *to = NULL, *gb = NULL, *order = NULL, *fmt = "table";
	const char *lim = NULL;
	cli_server_opts so = {0};
	bool byfn = false;
	double price = PRICE_DEFAULT;
	int64_t window = 0;
	long limit = 50;
	int c;
	while ((c = getopt_long(argc, argv, "hs:n:f:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &so))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': so.server = optarg; break;
		case O_FROM: from = optarg; break;
		case O_TO: to = optarg; break;
		case O_GB: gb = optarg; break;
		case O_BYFN: byfn = true; break;
		case O_ORDER: order = optarg; break;
		case 'n':
			if (cli_int(cmd, "--limit", optarg, 1, 100000, &limit) < 0)
				return 2;
			lim = optarg;
			break;
		case 'f': fmt = optarg; break;
		case O_PRICE:
			if (cli_double(cmd, "--price", optarg, &price) < 0)
				return 2;
			if (!(price >= 0 && price <= 1000)) {
				cli_err(cmd, "--price: give dollars per core-hour, 0 to 1000");
				return 2;
			}
			break;
		case O_WINDOW: {
			strobe_err e = {{0}};
			if (strobe_duration_parse(optarg, &window, &e) < 0 || window <= 0) {
				cli_err(cmd, "--window: %s", e.msg[0] ? e.msg : "must be positive");
				return 2;
			}
			break;
		}
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (strcmp(fmt, "table") && strcmp(fmt, "json")) {
		cli_err(cmd, "--format: '%s' is not table or json", fmt);
		return 2;
	}
	if (!so.server) {
		if (optind >= argc) {
			cli_err(cmd, "give --server URL and a SELECTOR, or profile FILEs");
			return 2;
		}
		return from_files(cmd, argv + optind, argc - optind, price, window, limit);
	}
	if (optind + 1 != argc) {
		cli_err(cmd, optind >= argc ? "give one SELECTOR" : "give one SELECTOR, not several");
		return 2;
	}
	if (cli_server_check(cmd, &so) < 0)
		return 2;
	const char *kv[] = {"query", argv[optind], "from", from, "to", to, "group_by", gb,
			    "by", byfn ? "function" : NULL, "order", order, "limit", lim, NULL};
	json_t *j;
	if (cli_api_get(cmd, &so, "api/v1/cost", kv, &j) < 0)
		return 1;
	if (strcmp(fmt, "json") == 0) {
		char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
		if (s)
			puts(s);
		free(s);
	} else {
		print_server(j, byfn, gb);
	}
	json_decref(j);
	return 0;
}
