// SPDX-License-Identifier: Apache-2.0
/*
 * One GET of a strobe server's API for the commands that print its answers (`strobe cost`,
 * `strobe leaks`, `strobe regressions`): the URL built from name/value pairs (percent-encoded),
 * the connection options every server command takes (tenant, token, CA), the answer parsed.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api_get.h"

int cli_api_fetch(const char *cmd, const cli_server_opts *so, const char *path,
		  const char *const *kv, char **resp, size_t *n)
{
	*resp = NULL;
	size_t cap = strlen(so->server) + strlen(path) + 8;
	for (size_t i = 0; kv[i]; i += 2)
		if (kv[i + 1])
			cap += strlen(kv[i]) + 3 * strlen(kv[i + 1]) + 2;
	char *url = malloc(cap);
	if (!url) {
		cli_err(cmd, "out of memory");
		return -1;
	}
	size_t sl = strlen(so->server), len = (size_t)sprintf(url, "%s%s%s?", so->server,
								so->server[sl - 1] == '/' ? "" : "/", path);
	for (size_t i = 0; kv[i]; i += 2) {
		if (!kv[i + 1])
			continue;
		char *e = cli_url_escape(kv[i + 1]);
		if (!e) {
			free(url);
			cli_err(cmd, "out of memory");
			return -1;
		}
		len += (size_t)sprintf(url + len, "%s%s=%s", url[len - 1] == '?' ? "" : "&", kv[i], e);
		free(e);
	}
	cli_http_req rq = {.url = url, .tenant = so->tenant, .token = so->token, .ca = so->ca};
	int r = cli_http(cmd, &rq, resp, n);
	free(url);
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
