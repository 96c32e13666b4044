// SPDX-License-Identifier: Apache-2.0
/*
 * strobe pgo: a CPU profile as a compiler's or binary optimiser's input (docs/pgo.md): Go's
 * default.pgo, LLVM AutoFDO text, or BOLT's no-LBR fdata. Reads profile files (merged) or asks a
 * strobe server (GET /api/v1/pgo) for a selector's merged profile over a window, as `strobe
 * query` does; either way the same writers (lib/pgo_go.c, lib/autofdo.c, lib/bolt_fdata.c) and
 * the same refusals (empty, not CPU, unsymbolized, no start lines).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"
#include "cli.h"
#include "strobe/bolt_syms.h"
#include "strobe/pgo.h"

static const char usage_text[] =
	"usage: strobe pgo FORMAT [options] FILE...\n"
	"       strobe pgo FORMAT --server URL [--from T] [--to T] SELECTOR\n\n"
	"Writes a CPU profile as a PGO input. FORMAT:\n"
	"  go        default.pgo for `go build -pgo=FILE` (Go 1.21+): a pprof trimmed to the hot\n"
	"            call edges, with one sample type and Function.start_line\n"
	"  autofdo   LLVM sample-profile text for `clang -fprofile-sample-use=FILE`\n"
	"  bolt      no-LBR fdata for `llvm-bolt BIN -o BIN.bolt -data=FILE` (needs --binary\n"
	"            with files; the server uses the executable uploaded by build ID).\n"
	"            Without LBR, BOLT lays blocks out from sampled addresses: apply it to\n"
	"            the AutoFDO build, not to plain -O2, where it measured slower (docs/pgo.md)\n\n"
	"  -o, --output FILE      write there (atomically) instead of stdout\n"
	"  --binary FILE          bolt: the executable the profile was recorded from (its\n"
	"                         symbol table names the sampled addresses as BOLT does)\n"
	"  --keep-frames N        go: frames kept at the leaf end of each stack (default 5)\n"
	"  --keep-share F         go: keep the heaviest stacks holding this share of the\n"
	"                         time (default 0.99; 1 keeps all)\n"
	"  -s, --server URL       ask this strobe server instead of reading files\n"
	"  --from T, --to T       the server's window (default the last hour)\n"
	"  --tenant ID, --token TOKEN, --token-file FILE, --ca FILE   as strobe query\n";

enum { O_BINARY = OPT_CMD_BASE, O_KEEPF, O_KEEPS, O_FROM, O_TO };

static int from_server(const char *cmd, const char *server, const char *fmt, const char *sel,
		       const char *from, const char *to, const char *tenant, const char *token,
		       const char *ca, char **resp, size_t *len)
{
	strobe_buf u;
	strobe_buf_init(&u, 1 << 20);
	size_t sl = strlen(server);
	int r = strobe_buf_addf(&u, "%s%sapi/v1/pgo?format=%s", server,
				sl && server[sl - 1] == '/' ? "" : "/", fmt);
	const char *k[] = {"query", "from", "to"}, *v[] = {sel, from, to};
	for (int i = 0; i < 3 && r == 0; i++) {
		if (!v[i])
			continue;
		if ((r = strobe_buf_addf(&u, "&%s=", k[i])) == 0)
			r = strobe_buf_add_urlenc(&u, v[i], strlen(v[i]));
	}
	if (r < 0) {
		strobe_buf_free(&u);
		cli_err(cmd, "out of memory");
		return -1;
	}
	cli_http_req rq = {.url = u.p, .tenant = tenant, .token = token, .ca = ca, .timeout_s = 300};
	r = cli_http(cmd, &rq, resp, len);
	strobe_buf_free(&u);
	return r;
}

int cmd_pgo(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},	   {"output", required_argument, 0, 'o'},
		{"server", required_argument, 0, 's'}, {"binary", required_argument, 0, O_BINARY},
		{"keep-frames", required_argument, 0, O_KEEPF},
		{"keep-share", required_argument, 0, O_KEEPS},
		{"from", required_argument, 0, O_FROM}, {"to", required_argument, 0, O_TO},
		CLI_SERVER_LONGOPTS,
		{0, 0, 0, 0}};
	const char *cmd = "pgo", *out = NULL, *server = NULL, *binary = NULL, *from = NULL;
	const char *to = NULL, *tenant = NULL, *token = NULL, *token_file = NULL, *ca = NULL;
	strobe_pgo_go_opts go = {0};
	long kf;
	cli_server_opts conn = {0};
	int c;
	while ((c = getopt_long(argc, argv, "ho:s:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &conn))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'o': out = optarg; break;
		case 's': server = optarg; break;
		case O_BINARY: binary = optarg; break;
		case O_KEEPF:
			if (cli_int(cmd, "--keep-frames", optarg, 1, 64, &kf) < 0)
				return 2;
			go.keep_frames = (unsigned)kf;
			break;
		case O_KEEPS:
			if (cli_double(cmd, "--keep-share", optarg, &go.keep_share) < 0)
				return 2;
			if (!(go.keep_share > 0 && go.keep_share <= 1)) {
				cli_err(cmd, "--keep-share: give a share above 0 and at most 1, not %s",
					optarg);
				return 2;
			}
			break;
		case O_FROM: from = optarg; break;
		case O_TO: to = optarg; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	tenant = conn.tenant;
	token = conn.token;
	token_file = conn.token_file;
	ca = conn.ca;
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	const char *fname = argv[optind++];
	strobe_pgo_format f = strobe_pgo_format_parse(fname);
	if (f == STROBE_PGO_NONE) {
		cli_err(cmd, "'%s' is not a PGO format (go, autofdo or bolt)", fname);
		return 2;
	}
	char *data = NULL;
	size_t len = 0;
	strobe_pgo_stats st = {0};
	if (server) {
		strobe_err uerr = {{0}};
		bool bad;
		if (strobe_url_check_secrets(server, "--server", CLI_TOKEN_HINT, &uerr) < 0) {
			cli_err(cmd, "%s", uerr.msg);
			return 2;
		}
		if ((!(token = cli_token(cmd, token, token_file, &bad)) && bad) ||
		    cli_ca_check(cmd, ca) < 0)
			return 2;
		if (optind + 1 != argc) {
			cli_err(cmd, "with --server, give one SELECTOR");
			return 2;
		}
		if (binary)
			cli_err(cmd, "--binary is for files: the server names addresses with the "
				     "executable uploaded for the build ID (strobe debuginfo)");
		if (binary || from_server(cmd, server, fname, argv[optind], from, to, tenant, token,
					  ca, &data, &len) < 0)
			return binary ? 2 : 1;
	} else {
		if (optind >= argc) {
			cli_err(cmd, "give profile FILEs (or --server URL and a SELECTOR)");
			return 2;
		}
		if (f == STROBE_PGO_BOLT && !binary) {
			cli_err(cmd, "bolt needs --binary FILE: the executable the profile was "
				     "recorded from, whose symbol table BOLT names functions by");
			return 2;
		}
		strobe_profile *p;
		if (cli_load_merged(cmd, argv + optind, argc - optind, NULL, &p) < 0)
			return 2;
		strobe_err err = {{0}};
		strobe_buf b;
		strobe_buf_init(&b, (size_t)1 << 32);
		strobe_bolt_syms *syms = NULL;
		int t = strobe_pgo_type(p, &err), r = t;
		if (r >= 0 && f == STROBE_PGO_BOLT && !(syms = strobe_bolt_syms_open(binary, &err)))
			r = -errno;
		if (r >= 0)
			r = f == STROBE_PGO_GO	     ? strobe_pgo_go_write(p, t, &go, &b, &st, &err)
			    : f == STROBE_PGO_AUTOFDO ? strobe_autofdo_write(p, t, &b, &st, &err)
						      : strobe_bolt_fdata_write(p, t,
										strobe_bolt_syms_resolve,
										syms, &b, &st, &err);
		strobe_bolt_syms_free(syms);
		strobe_profile_free(p);
		if (r < 0) {
			strobe_buf_free(&b);
			cli_err(cmd, "%s", err.msg);
			return 2;
		}
		data = strobe_buf_take(&b, &len);
	}
	cli_out o;
	if (cli_out_open(cmd, out, &o) < 0) {
		free(data);
		return 2;
	}
	bool ok = fwrite(data, 1, len, o.f) == len;
	free(data);
	if (cli_out_close(cmd, &o, ok) < 0 || !ok)
		return 2;
	if (out && strcmp(out, "-") != 0) {
		if (server)
			fprintf(stderr, "strobe pgo: wrote %s (%s, %zu bytes)\n", out, fname, len);
		else
			fprintf(stderr,
				"strobe pgo: wrote %s (%s, %zu bytes, %llu %s; %.1f%% of %lld samples "
				"used)\n",
				out, fname, len, (unsigned long long)st.records,
				f == STROBE_PGO_GO ? "stacks" : f == STROBE_PGO_AUTOFDO ? "functions"
										       : "addresses",
				st.total ? 100.0 * (double)st.used / (double)st.total : 0.0,
				(long long)st.total);
		if (!server && f == STROBE_PGO_AUTOFDO)
			fprintf(stderr,
				"strobe pgo: %.1f%% of the samples were on line 0 (compiler-made code, "
				"left out); %.1f%% on lines with a discriminator\n",
				st.total ? 100.0 * (double)st.line0 / (double)st.total : 0.0,
				st.total ? 100.0 * (double)st.discriminated / (double)st.total : 0.0);
	}
	return 0;
}
