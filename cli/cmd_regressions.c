// SPDX-License-Identifier: Apache-2.0
/*
 * strobe regressions: asks a strobe server which functions got significantly more expensive
 * between two releases (--by version --base v1 --new v2) or two windows (GET
 * /api/v1/regressions), normalised by total or by the work each side did (--base-units,
 * --new-units), ranked by cost, with the owning team; prints the server's table (or its JSON).
 */
#include <stdlib.h>
#include <string.h>

#include "api_get.h"

static const char usage_text[] =
	"usage: strobe regressions --server URL [--by LABEL --base V1 --new V2] [options] SELECTOR\n\n"
	"Lists the functions of SELECTOR whose cost grew significantly from BASE to NEW, largest\n"
	"cost first, with the team that owns them (the server's \"owners\" config).\n\n"
	"  -s, --server URL       the server, e.g. http://127.0.0.1:4100\n"
	"  --by LABEL --base V1 --new V2  compare LABEL=V1 with LABEL=V2 (e.g. version)\n"
	"  --from T, --to T       the window of both (default the last hour)\n"
	"  --base-from T, --base-to T, --new-from T, --new-to T  each side's own window\n"
	"  --base-units N, --new-units N  the work each side did (requests...): compare cost\n"
	"                         per unit instead of share of the total\n"
	"  --confidence C         default 0.99\n"
	"  -n, --limit N          at most N regressions (default 100)\n"
	"  --json                 the server's JSON instead of the table\n"
	"  --tenant ID, --token TOKEN, --token-file FILE, --ca FILE  as strobe query\n";

int cmd_regressions(int argc, char **argv)
{
	enum { O_BY = OPT_CMD_BASE, O_BASE, O_NEW, O_FROM, O_TO, O_BFROM, O_BTO, O_NFROM, O_NTO,
	       O_BUNITS, O_NUNITS, O_CONF, O_JSON };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"server", required_argument, 0, 's'},
		{"by", required_argument, 0, O_BY}, {"base", required_argument, 0, O_BASE},
		{"new", required_argument, 0, O_NEW}, {"from", required_argument, 0, O_FROM},
		{"to", required_argument, 0, O_TO}, {"base-from", required_argument, 0, O_BFROM},
		{"base-to", required_argument, 0, O_BTO}, {"new-from", required_argument, 0, O_NFROM},
		{"new-to", required_argument, 0, O_NTO},
		{"base-units", required_argument, 0, O_BUNITS},
		{"new-units", required_argument, 0, O_NUNITS},
		{"confidence", required_argument, 0, O_CONF}, {"limit", required_argument, 0, 'n'},
		{"json", no_argument, 0, O_JSON}, CLI_SERVER_LONGOPTS,
		{0, 0, 0, 0}};
	const char *cmd = "regressions";
	cli_server_opts so = {0};
	/* Query parameters in the order of this table, NULL when not given. */
	const char *keys[] = {"by", "base", "new", "from", "to", "base_from", "base_to",
			      "new_from", "new_to", "base_units", "new_units", "confidence", "limit"};
	const char *vals[sizeof(keys) / sizeof(*keys)] = {0};
	bool json = false;
	int c;
	while ((c = getopt_long(argc, argv, "hs:n:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &so))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': so.server = optarg; break;
		case 'n': vals[12] = optarg; break;
		case O_JSON: json = true; break;
		default:
			if (c >= O_BY && c <= O_CONF) {
				vals[c - O_BY] = optarg;
				break;
			}
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (!so.server) {
		cli_err(cmd, "--server URL is required");
		return 2;
	}
	if (cli_server_check(cmd, &so) < 0)
		return 2;
	if (optind + 1 != argc) {
		cli_err(cmd, optind >= argc ? "give one SELECTOR" : "give one SELECTOR, not several");
		return 2;
	}
	/* The server checks every parameter and says which one is wrong. */
	enum { NK = sizeof(keys) / sizeof(*keys) };
	const char *kv[2 * NK + 5] = {"query", argv[optind], "format", json ? "json" : "text"};
	for (size_t i = 0; i < NK; i++) {
		kv[4 + 2 * i] = keys[i];
		kv[5 + 2 * i] = vals[i];
	}
	char *resp;
	size_t len;
	if (cli_api_fetch(cmd, &so, "api/v1/regressions", kv, &resp, &len) < 0)
		return 1;
	bool ok = fwrite(resp, 1, len, stdout) == len;
	if (json && ok)
		putchar('\n');
	free(resp);
	return fflush(stdout) == 0 && ok ? 0 : 2;
}
