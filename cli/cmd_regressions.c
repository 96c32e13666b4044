// SPDX-License-Identifier: Apache-2.0
/*
 * strobe regressions: asks a strobe server which functions got significantly more expensive
 * between two releases (--by version --base v1 --new v2) or two windows (GET
 * /api/v1/regressions), normalised by total or by the work each side did (--base-units,
 * --new-units), ranked by cost, with the owning team; prints the server's table (or its JSON).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
	       O_BUNITS, O_NUNITS, O_CONF, O_JSON, O_TENANT, O_TOKEN, O_TOKENFILE, O_CA };
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
		{"json", no_argument, 0, O_JSON}, {"tenant", required_argument, 0, O_TENANT},
		{"token", required_argument, 0, O_TOKEN},
		{"token-file", required_argument, 0, O_TOKENFILE}, {"ca", required_argument, 0, O_CA},
		{0, 0, 0, 0}};
	const char *cmd = "regressions", *server = NULL, *tenant = NULL, *token = NULL,
		   *token_file = NULL, *ca = NULL;
	/* Query parameters in the order of this table, NULL when not given. */
	const char *keys[] = {"by", "base", "new", "from", "to", "base_from", "base_to",
			      "new_from", "new_to", "base_units", "new_units", "confidence", "limit"};
	const char *vals[sizeof(keys) / sizeof(*keys)] = {0};
	bool json = false;
	int c;
	while ((c = getopt_long(argc, argv, "hs:n:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': server = optarg; break;
		case 'n': vals[12] = optarg; break;
		case O_JSON: json = true; break;
		case O_TENANT: tenant = optarg; break;
		case O_TOKEN: token = optarg; break;
		case O_TOKENFILE: token_file = optarg; break;
		case O_CA: ca = optarg; break;
		default:
			if (c >= O_BY && c <= O_CONF) {
				vals[c - O_BY] = optarg;
				break;
			}
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (!server) {
		cli_err(cmd, "--server URL is required");
		return 2;
	}
	strobe_err uerr = {{0}};
	if (strobe_url_check_secrets(server, "--server", CLI_TOKEN_HINT, &uerr) < 0) {
		cli_err(cmd, "%s", uerr.msg);
		return 2;
	}
	bool bad_token;
	if (!(token = cli_token(cmd, token, token_file, &bad_token)) && bad_token)
		return 2;
	if (cli_ca_check(cmd, ca) < 0)
		return 2;
	if (optind + 1 != argc) {
		cli_err(cmd, optind >= argc ? "give one SELECTOR" : "give one SELECTOR, not several");
		return 2;
	}
	/* The URL: the server checks every parameter and says which one is wrong. */
	size_t cap = strlen(server) + 64;
	char *esel = cli_url_escape(argv[optind]);
	cap += esel ? strlen(esel) : 0;
	char *ev[sizeof(keys) / sizeof(*keys)] = {0};
	bool oom = !esel;
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		if (vals[i]) {
			oom |= !(ev[i] = cli_url_escape(vals[i]));
			cap += strlen(keys[i]) + (ev[i] ? strlen(ev[i]) : 0) + 2;
		}
	char *url = oom ? NULL : malloc(cap);
	if (url) {
		size_t sl = strlen(server), len = (size_t)sprintf(
			url, "%s%sapi/v1/regressions?query=%s&format=%s", server,
			server[sl - 1] == '/' ? "" : "/", esel, json ? "json" : "text");
		for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
			if (ev[i])
				len += (size_t)sprintf(url + len, "&%s=%s", keys[i], ev[i]);
	}
	free(esel);
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		free(ev[i]);
	if (!url) {
		cli_err(cmd, "out of memory");
		return 2;
	}
	cli_http_req rq = {.url = url, .tenant = tenant, .token = token, .ca = ca};
	char *resp;
	size_t len;
	int r = cli_http(cmd, &rq, &resp, &len);
	free(url);
	if (r < 0)
		return 1;
	bool ok = fwrite(resp, 1, len, stdout) == len;
	if (json && ok)
		putchar('\n');
	free(resp);
	return fflush(stdout) == 0 && ok ? 0 : 2;
}
