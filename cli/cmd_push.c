// SPDX-License-Identifier: Apache-2.0
/*
 * strobe push: sends profile files to a strobe server's push API. pprof files go as they are
 * (gzipped or not); folded stacks and `perf script` text are converted to pprof first, so the
 * server stores every input the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "api_get.h"
#include "cli.h"
#include "strobe/buf.h"

static const char usage_text[] =
	"usage: strobe push --server URL [options] FILE...\n\n"
	"Sends profiles (pprof, folded or perf script; '-' is stdin) to a strobe server's\n"
	"POST /api/v1/push. Every file is one push; the server's answer is printed.\n\n"
	"  -s, --server URL       the server, e.g. http://127.0.0.1:4100\n"
	"  --service NAME         service_name of the series (or --label service_name=NAME)\n"
	"  -l, --label KEY=VALUE  a series label (repeatable)\n"
	"  --name NAME            profile name (process_cpu, memory, ...); default: guessed\n"
	"  --type NAME:UNIT       what the values of folded or perf script input are, e.g.\n"
	"                         cpu:nanoseconds (folded lines carry no unit: samples:count)\n"
	"  --time T               when it was taken (unix time, RFC 3339, now-1h); default: the\n"
	"                         profile's own time, else now\n"
	"  --tenant ID            X-Scope-OrgID\n"
	"  --token TOKEN          Authorization: Bearer TOKEN (visible in ps; prefer:)\n"
	"  --token-file FILE      the token from FILE (mode 600), its first line\n"
	"  --ca FILE              https: verify the server's certificate with these PEM CA\n"
	"                         certificates (default: the system's); always verified\n";

/* Command-line text only, but capped all the same. */
#define MAX_ARG_TEXT (16u << 20)

static bool cat(strobe_buf *s, const char *add)
{
	return strobe_buf_adds(s, add) == 0;
}

/* v percent-encoded, for the URL's query. */
static bool cat_url(strobe_buf *s, const char *v)
{
	return strobe_buf_add_urlenc(s, v, strlen(v)) == 0;
}

/* A label value in the selector syntax the server parses: quotes and backslashes escaped. */
static bool cat_quoted(strobe_buf *s, const char *v)
{
	if (!cat(s, "\""))
		return false;
	for (; *v; v++) {
		char c[3] = {*v, 0, 0};
		if (*v == '"' || *v == '\\')
			c[0] = '\\', c[1] = *v;
		if (!cat(s, c))
			return false;
	}
	return cat(s, "\"");
}

int cmd_push(int argc, char **argv)
{
	enum { O_SERVICE = OPT_CMD_BASE, O_NAME, O_TIME,
	       O_TYPE };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},	    {"server", required_argument, 0, 's'},
		{"label", required_argument, 0, 'l'}, {"service", required_argument, 0, O_SERVICE},
		{"name", required_argument, 0, O_NAME}, {"time", required_argument, 0, O_TIME},
		CLI_SERVER_LONGOPTS,
		{"type", required_argument, 0, O_TYPE},
		{0, 0, 0, 0}};
	const char *cmd = "push", *server = NULL, *service = NULL, *name = NULL, *when = NULL;
	const char *tenant = NULL, *token = NULL, *token_file = NULL, *ca = NULL, *vtype = NULL;
	strobe_buf labels;
	strobe_buf_init(&labels, MAX_ARG_TEXT);
	cli_server_opts conn = {0};
	int c, rc = 2;
	bool first = true;
	while ((c = getopt_long(argc, argv, "hs:l:", longopts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &conn))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); rc = 0; goto out;
		case 's': server = optarg; break;
		case 'l': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				cli_err(cmd, "--label: '%s' is not KEY=VALUE", optarg);
				goto out;
			}
			if (strncmp(optarg, "service_name=", 13) == 0) {
				service = eq + 1;
				break;
			}
			char key[256];
			snprintf(key, sizeof(key), "%.*s=", (int)(eq - optarg), optarg);
			if (!cat(&labels, first ? "{" : ",") || !cat(&labels, key) ||
			    !cat_quoted(&labels, eq + 1))
				goto oom;
			first = false;
			break;
		}
		case O_SERVICE: service = optarg; break;
		case O_NAME: name = optarg; break;
		case O_TIME: when = optarg; break;
		case O_TYPE: vtype = optarg; break;
		default: fputs(usage_text, stderr); goto out;
		}
	}
	tenant = conn.tenant;
	token = conn.token;
	token_file = conn.token_file;
	ca = conn.ca;
	if (!server) {
		cli_err(cmd, "--server URL is required");
		goto out;
	}
	strobe_err uerr = {{0}};
	if (strobe_url_check_secrets(server, "--server", CLI_TOKEN_HINT, &uerr) < 0) {
		cli_err(cmd, "%s", uerr.msg);
		goto out;
	}
	bool bad_token;
	if (!(token = cli_token(cmd, token, token_file, &bad_token)) && bad_token)
		goto out;
	if (cli_ca_check(cmd, ca) < 0)
		goto out;
	if (!service) {
		cli_err(cmd, "--service NAME (or --label service_name=NAME) is required");
		goto out;
	}
	if (optind >= argc) {
		cli_err(cmd, "no profile files (use '-' for stdin)");
		goto out;
	}
	if (!first && !cat(&labels, "}"))
		goto oom;
	strobe_buf ub;
	strobe_buf_init(&ub, MAX_ARG_TEXT);
	bool ok = cat(&ub, server) && cat(&ub, server[strlen(server) - 1] == '/' ? "" : "/") &&
		  cat(&ub, "api/v1/push?service_name=") && cat_url(&ub, service) &&
		  (!labels.p || (cat(&ub, "&labels=") && cat_url(&ub, labels.p))) &&
		  (!name || (cat(&ub, "&name=") && cat_url(&ub, name))) &&
		  (!when || (cat(&ub, "&time=") && cat_url(&ub, when)));
	char *url = ok ? strobe_buf_take(&ub, NULL) : NULL;
	if (!url) {
		strobe_buf_free(&ub);
		goto oom;
	}
	rc = 0;
	for (int i = optind; i < argc; i++) {
		/* Everything goes as pprof: the decoder already knows every input format. */
		strobe_profile *p;
		if (cli_read_profile(cmd, argv[i], STROBE_FMT_UNKNOWN, vtype, &p) < 0) {
			rc = 2;
			continue;
		}
		uint8_t *pb = NULL;
		size_t pblen = 0;
		int er = strobe_pprof_encode(p, &pb, &pblen);
		strobe_profile_free(p);
		if (er < 0) {
			cli_err(cmd, "%s: cannot encode as pprof", argv[i]);
			rc = 2;
			continue;
		}
		cli_http_req rq = {.url = url, .body = pb, .len = pblen, .tenant = tenant,
				   .token = token, .ca = ca};
		char *resp;
		size_t rlen;
		if (cli_http(cmd, &rq, &resp, &rlen) < 0) {
			rc = 1;
		} else {
			printf("%s: %s\n", argv[i], resp);
			free(resp);
		}
		free(pb);
	}
	free(url);
	goto out;
oom:
	cli_err(cmd, "out of memory");
	rc = 2;
out:
	strobe_buf_free(&labels);
	return rc;
}
