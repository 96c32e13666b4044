/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GETs of a strobe server's JSON API for the table-printing commands (cli/api_get.c).
 */
#ifndef STROBE_CLI_API_GET_H
#define STROBE_CLI_API_GET_H

#include <jansson.h>

#include "cli.h"

typedef struct cli_server_opts {
	const char *server, *tenant, *token, *token_file, *ca;
} cli_server_opts;

/* The connection options every server-talking command takes (-s/--server is each command's own,
 * as some give -s another meaning). Ids between the profile options' and the commands' own. */
enum { OPT_TENANT = 1050, OPT_TOKEN, OPT_TOKENFILE, OPT_CA };
#define CLI_SERVER_LONGOPTS                                                                       \
	{"tenant", required_argument, 0, OPT_TENANT}, {"token", required_argument, 0, OPT_TOKEN}, \
	{"token-file", required_argument, 0, OPT_TOKENFILE}, {"ca", required_argument, 0, OPT_CA}

/* Takes one of CLI_SERVER_LONGOPTS into so: 1 if it was one, 0 if not. */
static inline int cli_server_opt(int opt, const char *arg, cli_server_opts *so)
{
	switch (opt) {
	case OPT_TENANT: so->tenant = arg; return 1;
	case OPT_TOKEN: so->token = arg; return 1;
	case OPT_TOKENFILE: so->token_file = arg; return 1;
	case OPT_CA: so->ca = arg; return 1;
	default: return 0;
	}
}

#define CLI_SERVER_HELP                                                                           \
	"  -s, --server URL       the server, e.g. http://127.0.0.1:4100\n"                       \
	"  --tenant ID            X-Scope-OrgID\n"                                                \
	"  --token TOKEN          Authorization: Bearer TOKEN (visible in ps; prefer:)\n"         \
	"  --token-file FILE      the token from FILE (mode 600), its first line\n"               \
	"  --ca FILE              https: verify the server's certificate with these PEM CAs\n"

/* --server's URL has no secrets, the token options agree, --ca is readable: 0, else -1 (said). */
int cli_server_check(const char *cmd, cli_server_opts *so);
/* GET SERVER/PATH?k=v&... (kv as below): the answer's bytes in *resp (free it), or -1 after
 * printing the server's error. */
int cli_api_fetch(const char *cmd, const cli_server_opts *so, const char *path,
		  const char *const *kv, char **resp, size_t *n);
/* GET SERVER/PATH?k=v&... (kv: name, value pairs, NULL-terminated; a NULL value is left out):
 * the JSON answer in *out (json_decref it), or -1 after printing the server's error. */
int cli_api_get(const char *cmd, const cli_server_opts *so, const char *path,
		const char *const *kv, json_t **out);
/* A number member of o (0 when absent). */
double cli_jnum(const json_t *o, const char *k);
#endif
