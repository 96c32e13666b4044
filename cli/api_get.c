// SPDX-License-Identifier: Apache-2.0
/*
 * One GET of a strobe server's API for the commands that print its answers (`strobe cost`,
 * `strobe leaks`, `strobe regressions`): the URL built from name/value pairs (percent-encoded),
 * the connection options every server command takes (tenant, token, CA), the answer parsed.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"
#include "strobe/buf.h"

/* The URL's most: what the command line can hold (a few MiB), percent-encoded. */
#define URL_MAX (16u << 20)

int cli_api_fetch(const char *cmd, const cli_server_opts *so, const char *path,
		  const char *const *kv, char **resp, size_t *n)
{
	*resp = NULL;
	strobe_buf u;
	strobe_buf_init(&u, URL_MAX);
	size_t sl = strlen(so->server);
	int r = strobe_buf_addf(&u, "%s%s%s?", so->server, so->server[sl - 1] == '/' ? "" : "/",
				path);
	for (size_t i = 0; kv[i] && r == 0; i += 2) {
		if (!kv[i + 1])
			continue;
		if ((r = strobe_buf_addf(&u, "%s%s=", u.p[u.len - 1] == '?' ? "" : "&", kv[i])) == 0)
			r = strobe_buf_add_urlenc(&u, kv[i + 1], strlen(kv[i + 1]));
	}
	if (r < 0) {
		strobe_buf_free(&u);
		if (r == -E2BIG)
			cli_err(cmd, "the request's URL would be longer than %u MiB", URL_MAX >> 20);
		else
			cli_err(cmd, "out of memory");
		return -1;
	}
	cli_http_req rq = {.url = u.p, .tenant = so->tenant, .token = so->token, .ca = so->ca};
	r = cli_http(cmd, &rq, resp, n);
	strobe_buf_free(&u);
	return r < 0 ? -1 : 0;
}

int cli_api_get(const char *cmd, const cli_server_opts *so, const char *path,
		const char *const *kv, json_t **out)
{
	*out = NULL;
	char *resp;
	size_t n;
	if (cli_api_fetch(cmd, so, path, kv, &resp, &n) < 0)
		return -1;
	json_error_t je;
	*out = json_loadb(resp, n, 0, &je);
	free(resp);
	if (!*out) {
		cli_err(cmd, "the server's answer is not JSON: %s", je.text);
		return -1;
	}
	return 0;
}

int cli_server_check(const char *cmd, cli_server_opts *so)
{
	strobe_err uerr = {{0}};
	if (strobe_url_check_secrets(so->server, "--server", CLI_TOKEN_HINT, &uerr) < 0) {
		cli_err(cmd, "%s", uerr.msg);
		return -1;
	}
	bool bad;
	if (!(so->token = cli_token(cmd, so->token, so->token_file, &bad)) && bad)
		return -1;
	return cli_ca_check(cmd, so->ca) < 0 ? -1 : 0;
}

double cli_jnum(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}
