// SPDX-License-Identifier: Apache-2.0
/*
 * strobe debuginfo upload: sends executables and separate debug files to a strobe server's
 * debug-info store (POST /api/v1/debuginfo/{build_id}), a CI step after a build, so that
 * profiles of the stripped binaries that ship are named on the server. Each file's build ID is
 * read here and the server is asked first (GET), so a file it already holds is not sent again.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "api_get.h"
#include "cli.h"
#include "strobe/elf_image.h"
#include "strobe/symbolize.h"

static const char usage_text[] =
	"usage: strobe debuginfo upload --server URL [options] FILE...\n\n"
	"Uploads ELF executables or their separate debug files (objcopy --only-keep-debug) to a\n"
	"strobe server's debug-info store, keyed by each file's GNU build ID. A file whose build\n"
	"ID the server already holds in that role is skipped. The server then names addresses\n"
	"of profiles of those binaries and serves them to debuginfod clients.\n\n"
	"  -s, --server URL       the server, e.g. http://127.0.0.1:4100\n"
	"  -f, --force            send even when the server already holds the build ID\n"
	"  --tenant ID            X-Scope-OrgID\n"
	"  --token TOKEN          Authorization: Bearer TOKEN (visible in ps; prefer:)\n"
	"  --token-file FILE      the token from FILE (mode 600), its first line\n"
	"  --ca FILE              https: verify the server's certificate with these PEM CAs\n"
	"  -h, --help             this text\n\n"
	"Exit status: 0 when every file is stored (or already was), 1 otherwise.\n";

typedef struct up_ctx {
	const char *server, *tenant, *token, *ca;
	bool force;
} up_ctx;

/* GET what the server holds for the build ID: true when it has every role this file would fill
 * (a file with debug info or a symbol table fills "debuginfo", one with code "executable"). */
static bool already_there(const up_ctx *u, const char *url, unsigned flags)
{
	long status = 0;
	char *body = NULL;
	size_t len = 0;
	cli_http_req rq = {.url = url, .tenant = u->tenant, .token = u->token, .ca = u->ca,
			   .status = &status, .timeout_s = 30};
	if (cli_http("debuginfo", &rq, &body, &len) < 0 || status != 200) {
		free(body);
		return false;
	}
	json_t *j = body ? json_loadb(body, len, 0, NULL) : NULL;
	bool need_dbg = flags & (STROBE_ELF_DEBUG_INFO | STROBE_ELF_SYMTAB), need_exe = flags & STROBE_ELF_CODE;
	bool have = j && (!need_dbg || json_is_true(json_object_get(j, "debuginfo"))) &&
		    (!need_exe || json_is_true(json_object_get(j, "executable")));
	json_decref(j);
	free(body);
	return have;
}

static int upload_one(const up_ctx *u, const char *path)
{
	const char *cmd = "debuginfo";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		cli_err(cmd, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* Mapped, not read: a debug file can be hundreds of MB. */
	size_t size = (size_t)st.st_size;
	void *img = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	close(fd);
	if (img == MAP_FAILED) {
		cli_err(cmd, "%s: cannot map it: %s", path, size ? strerror(errno) : "empty file");
		return -1;
	}
	unsigned flags = 0;
	const uint8_t *id = NULL;
	int elf = strobe_elf_contents(img, size, &flags);
	size_t idn = elf < 0 ? 0 : strobe_elf_build_id_of(img, size, &id);
	int r = -1;
	if (elf < 0) {
		cli_err(cmd, "%s: not an ELF file (or its section headers are damaged)", path);
	} else if (!idn || idn > 64) {
		cli_err(cmd, "%s: no GNU build ID note (link with -Wl,--build-id)", path);
	} else {
		char hex[2 * 64 + 1], url[4096];
		strobe_build_id_hex(id, idn, hex);
		snprintf(url, sizeof url, "%s%sapi/v1/debuginfo/%s", u->server,
			 u->server[strlen(u->server) - 1] == '/' ? "" : "/", hex);
		if (!u->force && already_there(u, url, flags)) {
			printf("%s: build ID %s: already on the server, skipped\n", path, hex);
			r = 0;
		} else {
			char *body = NULL;
			size_t len = 0;
			cli_http_req rq = {.url = url, .body = img, .len = size, .tenant = u->tenant,
					   .token = u->token, .ca = u->ca, .timeout_s = 3600};
			r = cli_http(cmd, &rq, &body, &len);
			if (r == 0)
				printf("%s: build ID %s: %.*s", path, hex, (int)len, body ? body : "\n");
			free(body);
		}
	}
	munmap(img, size);
	return r;
}

int cmd_debuginfo(int argc, char **argv)
{
	static const struct option opts[] = {
		{"help", no_argument, 0, 'h'},	    {"server", required_argument, 0, 's'},
		{"force", no_argument, 0, 'f'},	    CLI_SERVER_LONGOPTS, {0, 0, 0, 0}};
	const char *cmd = "debuginfo", *token_file = NULL;
	up_ctx u = {0};
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "upload") != 0) {
		cli_err(cmd, "unknown subcommand '%s' (there is: upload)", argv[1]);
		return 2;
	}
	argc--;
	argv++;
	cli_server_opts conn = {0};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hs:f", opts, NULL)) != -1) {
		if (cli_server_opt(c, optarg, &conn))
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 's': u.server = optarg; break;
		case 'f': u.force = true; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	u.tenant = conn.tenant;
	u.token = conn.token;
	token_file = conn.token_file;
	u.ca = conn.ca;
	if (!u.server || !*u.server) {
		cli_err(cmd, "--server URL is required");
		return 2;
	}
	strobe_err uerr = {{0}};
	if (strobe_url_check_secrets(u.server, "--server", CLI_TOKEN_HINT, &uerr) < 0) {
		cli_err(cmd, "%s", uerr.msg);
		return 2;
	}
	bool bad_token;
	if (!(u.token = cli_token(cmd, u.token, token_file, &bad_token)) && bad_token)
		return 2;
	if (cli_ca_check(cmd, u.ca) < 0)
		return 2;
	if (optind >= argc) {
		cli_err(cmd, "no files to upload");
		return 2;
	}
	int failed = 0;
	for (int i = optind; i < argc; i++)
		failed |= upload_one(&u, argv[i]) < 0;
	return failed ? 1 : 0;
}
