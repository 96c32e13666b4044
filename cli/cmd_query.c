// SPDX-License-Identifier: Apache-2.0
/*
 * strobe query: asks a strobe server for the merged profile of a selector over a time window
 * (GET /api/v1/query), or with --diff for the normalised difference of two (GET /api/v1/diff),
 * and writes what it answers: pprof, folded, JSON, SVG or a top table. --tagfocus KEY=RE adds
 * KEY=~"RE" to the selector(s): on a sample label (pid, comm...) it keeps those samples, as
 * pprof's -tagfocus does, on a series label those series.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"
#include "strobe/buf.h"

static const char usage_text[] =
	"usage: strobe query --server URL [options] SELECTOR\n"
	"       strobe query --server URL --diff BASE_SELECTOR [options] SELECTOR\n\n"
	"SELECTOR is a profile type and label matchers, as Prometheus writes them:\n"
	"  'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\",env=~\"prod.*\"}'\n\n"
	"  -s, --server URL       the server, e.g. http://127.0.0.1:4100\n"
	"  --from T, --to T       the window (unix time, RFC 3339, now, now-1h); default the\n"
	"                         last hour\n"
	"  -f, --format F         pprof, folded, json, svg or top (default: from -o's extension,\n"
	"                         else top); -t, --to-format: the same, the older spelling\n"
	"  -o, --output FILE      write there (atomically) instead of stdout, and say so\n"
	"  --diff BASE            compare BASE (the baseline selector) with SELECTOR\n"
	"  --base-from T, --base-to T  the baseline's window (default: the same window)\n"
	"  --max-nodes N          trim frames below the N-th heaviest\n"
	"  --tagfocus KEY=RE      only the samples whose label KEY (pid, comm, exe, ...)\n"
	"                         matches RE, fully anchored: KEY=~\"RE\" added to the\n"
	"                         selector(s); repeatable\n"
	"  --span ID[,ID...]      only the samples of these spans (their span_id label), found\n"
	"                         through the server's span index\n"
	"  --trace ID[,ID...]     only the samples of these traces (trace_id)\n"
	"  --profile-id N         exactly one stored profile (an exemplar's id, /api/v1/range)\n"
	"  --tenant ID            X-Scope-OrgID\n"
	"  --token TOKEN          Authorization: Bearer TOKEN (visible in ps; prefer:)\n"
	"  --token-file FILE      the token from FILE (mode 600), its first line\n"
	"  --ca FILE              https: verify the server's certificate with these PEM CA\n"
	"                         certificates (default: the system's); always verified\n";

/* The URL's most: what the command line can hold (a few MiB), percent-encoded. */
#define QUERY_URL_MAX (16u << 20)

/* Appends K=V to the URL's query, V percent-encoded; nothing when V is NULL or an earlier add
 * failed (*r: 0, or the first failure's -E2BIG or -ENOMEM). */
static void add(strobe_buf *q, int *r, const char *k, const char *v)
{
	if (!v || *r < 0)
		return;
	if ((*r = strobe_buf_addf(q, "%s%s=", q->p[q->len - 1] != '?' ? "&" : "", k)) == 0)
		*r = strobe_buf_add_urlenc(q, v, strlen(v));
}

#define TAGFOCUS_MAX 16

/* The selector with KEY=~"RE" added for each --tagfocus (malloc'd; NULL: out of memory). The
 * server parses the result, so a malformed KEY or RE is reported by it, with its offset. */
static char *focused(const char *sel, const char *const *focus, size_t n)
{
	size_t len = strlen(sel), cap = len + 3;
	for (size_t i = 0; i < n; i++)
		cap += 2 * strlen(focus[i]) + 6;
	char *o = malloc(cap);
	if (!o)
		return NULL;
	size_t end = len; /* where the matchers go: before a final '}', else a new {} */
	while (end && (sel[end - 1] == ' ' || sel[end - 1] == '\t'))
		end--;
	bool braces = end && sel[end - 1] == '}';
	size_t k = braces ? end - 1 : len;
	memcpy(o, sel, k);
	bool empty = braces;
	for (size_t j = k; braces && j-- > 0 && empty;) {
		if (sel[j] == '{')
			break;
		empty = sel[j] == ' ' || sel[j] == '\t';
	}
	if (!braces && n)
		o[k++] = '{';
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(focus[i], '=');
		if (i || (braces && !empty))
			o[k++] = ',';
		memcpy(o + k, focus[i], (size_t)(eq - focus[i]));
		k += (size_t)(eq - focus[i]);
		o[k++] = '=';
		o[k++] = '~';
		o[k++] = '"';
		for (const char *v = eq + 1; *v; v++) {
			if (*v == '"' || *v == '\\')
				o[k++] = '\\';
			o[k++] = *v;
		}
		o[k++] = '"';
	}
	if (braces || n)
		o[k++] = '}';
	o[k] = 0;
	return o;
}

int cmd_query(int argc, char **argv)
{
	enum { O_FROM = OPT_CMD_BASE, O_TO, O_DIFF, O_BFROM, O_BTO, O_MAXN, O_TAGFOCUS, O_SPAN, O_TRACE, O_PROFILE };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},	       {"server", required_argument, 0, 's'},
		{"from", required_argument, 0, O_FROM}, {"to", required_argument, 0, O_TO},
		{"format", required_argument, 0, 'f'}, {"to-format", required_argument, 0, 't'},
		{"output", required_argument, 0, 'o'},
		{"diff", required_argument, 0, O_DIFF}, {"base-from", required_argument, 0, O_BFROM},
		{"base-to", required_argument, 0, O_BTO},
		{"max-nodes", required_argument, 0, O_MAXN},
		{"tagfocus", required_argument, 0, O_TAGFOCUS},
		{"span", required_argument, 0, O_SPAN}, {"trace", required_argument, 0, O_TRACE},
		{"profile-id", required_argument, 0, O_PROFILE},
		CLI_SERVER_LONGOPTS,
		{0, 0, 0, 0}};
	cli_server_opts so = {0};
	const char *cmd = "query", *from = NULL, *to = NULL, *fmt = NULL;
	const char *out = NULL, *base = NULL, *bfrom = NULL, *bto = NULL, *maxn = NULL;
	const char *span = NULL, *trace = NULL, *profile = NULL; /* the server checks them */
	const char *focus[TAGFOCUS_MAX];
	size_t nfocus = 0;
	int c;
	while ((c = getopt_long(argc, argv, "hs:f:t:o:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &so))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': so.server = optarg; break;
		case O_FROM: from = optarg; break;
		case O_TO: to = optarg; break;
		case 'f':
		case 't': fmt = optarg; break;
		case 'o': out = optarg; break;
		case O_DIFF: base = optarg; break;
		case O_BFROM: bfrom = optarg; break;
		case O_BTO: bto = optarg; break;
		case O_MAXN: maxn = optarg; break;
		case O_SPAN: span = optarg; break;
		case O_TRACE: trace = optarg; break;
		case O_PROFILE: profile = optarg; break;
		case O_TAGFOCUS:
			if (!strchr(optarg, '=') || optarg[0] == '=' || nfocus == TAGFOCUS_MAX) {
				cli_err(cmd, "--tagfocus: give KEY=RE (at most %d)", TAGFOCUS_MAX);
				return 2;
			}
			focus[nfocus++] = optarg;
			break;
		default: fputs(usage_text, stderr); return 2;
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
	if (!fmt && out) {
		strobe_format f = cli_format_for_path(out);
		fmt = f == STROBE_FMT_PPROF ? "pprof" : f == STROBE_FMT_FOLDED ? "folded"
		      : f == STROBE_FMT_SVG ? "svg" : f == STROBE_FMT_JSON ? "json" : NULL;
	}
	if (!fmt)
		fmt = "top";
	static const char *const formats[] = {"pprof", "folded", "json", "svg", "top"};
	bool known = false;
	for (size_t i = 0; i < 5; i++)
		known |= strcmp(fmt, formats[i]) == 0;
	if (!known || (base && (!strcmp(fmt, "pprof") || !strcmp(fmt, "folded")))) {
		cli_err(cmd, "--format: '%s' is not a format %s", fmt,
			base ? "of a diff (svg, json, top)" : "(pprof, folded, json, svg, top)");
		return 2;
	}
	char *nsel = focused(argv[optind], focus, nfocus), *bsel = base ? focused(base, focus, nfocus) : NULL;
	if (!nsel || (base && !bsel)) {
		free(nsel);
		free(bsel);
		cli_err(cmd, "out of memory");
		return 2;
	}
	base = bsel;
	strobe_buf q;
	strobe_buf_init(&q, QUERY_URL_MAX);
	const char *server = so.server;
	size_t sl = strlen(server);
	int r = strobe_buf_addf(&q, "%s%sapi/v1/%s?", server, server[sl - 1] == '/' ? "" : "/",
				base ? "diff" : "query");
	if (base) {
		add(&q, &r, "base", base);
		add(&q, &r, "new", nsel);
		add(&q, &r, "new_from", from);
		add(&q, &r, "new_to", to);
		add(&q, &r, "base_from", bfrom ? bfrom : from);
		add(&q, &r, "base_to", bto ? bto : to);
	} else {
		add(&q, &r, "query", nsel);
		add(&q, &r, "from", from);
		add(&q, &r, "to", to);
		add(&q, &r, "max_nodes", maxn);
		add(&q, &r, "span_id", span);
		add(&q, &r, "trace_id", trace);
		add(&q, &r, "profile_id", profile);
	}
	add(&q, &r, "format", fmt);
	free(nsel);
	free(bsel);
	if (r < 0) {
		strobe_buf_free(&q);
		if (r == -E2BIG)
			cli_err(cmd, "the query's URL would be longer than %u MiB", QUERY_URL_MAX >> 20);
		else
			cli_err(cmd, "out of memory");
		return 2;
	}
	cli_http_req rq = {.url = q.p, .tenant = so.tenant, .token = so.token, .ca = so.ca};
	char *resp;
	size_t len;
	r = cli_http(cmd, &rq, &resp, &len);
	strobe_buf_free(&q);
	if (r < 0)
		return 1;
	cli_out o;
	if (cli_out_open(cmd, out, &o) < 0) {
		free(resp);
		return 2;
	}
	bool ok = fwrite(resp, 1, len, o.f) == len;
	free(resp);
	if (cli_out_close(cmd, &o, ok) < 0 || !ok)
		return 2;
	if (out && strcmp(out, "-") != 0) /* as record does: what went where */
		fprintf(stderr, "strobe query: wrote %s (%s, %zu bytes)\n", out, fmt, len);
	return 0;
}
