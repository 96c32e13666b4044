// SPDX-License-Identifier: Apache-2.0
/*
 * The debug-info store: ELF files by GNU build ID, per tenant, so that profiles pushed with bare
 * addresses (stripped binaries, agents in --symbolize=server mode) can be named on the server,
 * and so that the server can answer as a debuginfod server for gdb, perf and `strobe record
 * --debuginfod`.
 *
 *   POST /api/v1/debuginfo/{build_id}   an executable or its separate debug file (the body)
 *   GET  /api/v1/debuginfo/{build_id}   what is stored for it (404 when nothing): clients ask
 *                                       first, so that an upload of a stored file costs nothing
 *   GET  /buildid/{build_id}/debuginfo  debuginfod's protocol
 *   GET  /buildid/{build_id}/executable
 *
 * Layout: <data_dir>/debuginfo/<tenant>/<build_id>.debuginfo and .executable. One upload may be
 * both (an unstripped executable): the same file is linked under both names. An upload arrives
 * in an unlinked temporary file (server/http.c streams it there, never into memory), is checked
 * (ELF, its build ID the one in the URL, holding debug info, a symbol table or code), synced, and
 * only then linked under its name, so a stored name always holds a whole, checked file.
 *
 * The body is untrusted: it is read only through bounded header walks (lib/elf_image.c); libdw
 * opens it later, at symbolization time, under that code's own caps.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_impl.h"
#include "strobe/elf_image.h"
#include "strobe/symbolize.h"

#define BUILD_ID_MAX_HEX 128 /* 64 bytes: longer than any build-ID algorithm writes */
#define API_PREFIX "/api/v1/debuginfo/"

static const char *const ROLE_NAME[] = {"debuginfo", "executable"};
enum { ROLE_DEBUGINFO, ROLE_EXECUTABLE, NROLES };

/* The build ID of a URL segment: 2 to 128 hex digits, an even count; lower-cased into out. */
static bool build_id_ok(const char *s, size_t n, char out[BUILD_ID_MAX_HEX + 1])
{
	if (n < 2 || n > BUILD_ID_MAX_HEX || n % 2)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
		out[i] = c;
	}
	out[n] = 0;
	return true;
}

/* The {build_id} of the route, checked and lower-cased into bid; false after a 400. */
static bool url_build_id(srv_req *r, char bid[BUILD_ID_MAX_HEX + 1])
{
	if (build_id_ok(r->path_arg, r->path_arg_len, bid))
		return true;
	srv_error(r, 400, "the build ID in the URL must be 2 to %d hex digits, an even number of them",
		  BUILD_ID_MAX_HEX);
	return false;
}

static int store_dir(const strobe_server *srv, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/debuginfo", srv->cfg.data_dir);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int tenant_dir(const strobe_server *srv, const char *tenant, char *buf, size_t cap)
{
	int r = store_dir(srv, buf, cap);
	if (r < 0)
		return r;
	size_t l = strlen(buf);
	int n = snprintf(buf + l, cap - l, "/%s", tenant);
	if (n < 0 || (size_t)n >= cap - l)
		return -ENAMETOOLONG;
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

uint64_t srv_debuginfo_file_cap(const strobe_server *srv, const char *method, const char *url)
{
	if (strcmp(method, "POST") != 0 || strncmp(url, API_PREFIX, strlen(API_PREFIX)) != 0)
		return 0;
	return srv->cfg.max_debuginfo_bytes ? srv->cfg.max_debuginfo_bytes : 1;
}

int srv_debuginfo_tmpfile(const strobe_server *srv)
{
	char dir[4096];
	int r = store_dir(srv, dir, sizeof dir);
	if (r < 0)
		return r;
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int srv_debuginfo_path(const strobe_server *srv, const char *tenant, const char *bid,
		       const char *role, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/debuginfo/%s/%s.%s", srv->cfg.data_dir, tenant, bid, role);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The stored file of a role, or -errno (-ENOENT when there is none). */
static int open_role(srv_req *r, const char *bid, int role, struct stat *st)
{
	char path[4096];
	if (srv_debuginfo_path(r->srv, r->tenant, bid, ROLE_NAME[role], path, sizeof path) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* Which roles the image can play: its debug info or symbol table names addresses; its code is
 * what debuginfod clients ask an executable for. */
/* Which roles the image can play: its debug info or symbol table names addresses; its code is
 * what debuginfod clients ask an executable for. NULL, or why the upload is refused (in why). */
static const char *roles_of(const uint8_t *img, size_t len, const char *bid, bool want[NROLES],
			    char *why, size_t cap)
{
	if (len < 4 || memcmp(img, "\177ELF", 4) != 0)
		return "the body is not an ELF file (give the executable or its separate debug file)";
	unsigned flags = 0;
	if (strobe_elf_contents(img, len, &flags) < 0)
		return "the ELF file's section headers are damaged or out of bounds (or it is not "
		       "little-endian)";
	const uint8_t *id = NULL;
	size_t idn = strobe_elf_build_id_of(img, len, &id);
	if (!idn)
		return "the ELF file has no GNU build ID note (link with -Wl,--build-id)";
	if (idn > 64)
		return "the ELF file's build ID is longer than 64 bytes";
	char hex[2 * 64 + 1];
	strobe_build_id_hex(id, idn, hex);
	if (strcmp(hex, bid) != 0) {
		snprintf(why, cap, "build ID mismatch: the URL names %s, the file is %s", bid, hex);
		return why;
	}
	want[ROLE_DEBUGINFO] = flags & (STROBE_ELF_DEBUG_INFO | STROBE_ELF_SYMTAB);
	want[ROLE_EXECUTABLE] = flags & STROBE_ELF_CODE;
	if (!want[ROLE_DEBUGINFO] && !want[ROLE_EXECUTABLE])
		return "the ELF file holds neither debug info, a symbol table nor code: nothing to "
		       "name addresses with";
	return NULL;
}

int srv_debuginfo_upload(srv_req *r)
{
	char bid[BUILD_ID_MAX_HEX + 1];
	if (!url_build_id(r, bid))
		return 0;
	if (!r->body_in_file || !r->body_fd_len)
		return srv_error(r, 400, "empty body: send the ELF file as the request body");
	if (r->body_fd_len > SIZE_MAX)
		return srv_error(r, 413, "the file is too large for this machine");
	size_t len = (size_t)r->body_fd_len;
	void *img = mmap(NULL, len, PROT_READ, MAP_PRIVATE, r->body_fd, 0);
	if (img == MAP_FAILED)
		return srv_error(r, 500, "cannot read the upload back: %s", strerror(errno));
	bool want[NROLES] = {false, false};
	char why[320];
	const char *refused = roles_of(img, len, bid, want, why, sizeof why);
	munmap(img, len);
	if (refused)
		return srv_error(r, 400, "%s", refused);

	char dir[4096];
	int e = tenant_dir(r->srv, r->tenant, dir, sizeof dir);
	if (e < 0)
		return srv_error(r, 500, "debug-info store: %s", strerror(-e));
	/* Durable before it is acknowledged: the data, then the name, then the directory. */
	if (fsync(r->body_fd) < 0)
		return srv_error(r, errno == ENOSPC ? 507 : 500, "cannot store the upload: %s",
				 strerror(errno));
	char src[64], dst[4096 + 160];
	snprintf(src, sizeof src, "/proc/self/fd/%d", r->body_fd);
	const char *stored[NROLES], *already[NROLES];
	size_t ns = 0, na = 0;
	for (int role = 0; role < NROLES; role++) {
		if (!want[role])
			continue;
		snprintf(dst, sizeof dst, "%s/%s.%s", dir, bid, ROLE_NAME[role]);
		if (linkat(AT_FDCWD, src, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) == 0)
			stored[ns++] = ROLE_NAME[role];
		else if (errno == EEXIST)
			already[na++] = ROLE_NAME[role]; /* the first upload stays: same build ID */
		else
			return srv_error(r, errno == ENOSPC ? 507 : 500, "cannot store the upload: %s",
					 strerror(errno));
	}
	if (ns)
		srv_namers_forget(r->srv->namers, r->srv->cfg.data_dir, r->tenant, bid);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	json_t *j = json_pack("{s:s, s:I, s:[], s:[]}", "build_id", bid, "size", (json_int_t)len,
			      "stored", "already_stored");
	for (size_t i = 0; j && i < ns; i++)
		json_array_append_new(json_object_get(j, "stored"), json_string(stored[i]));
	for (size_t i = 0; j && i < na; i++)
		json_array_append_new(json_object_get(j, "already_stored"), json_string(already[i]));
	char *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	srv_reply(r, 200, "application/json", out, out ? strlen(out) : 0);
	return 0;
}

int srv_debuginfo_stat(srv_req *r)
{
	char bid[BUILD_ID_MAX_HEX + 1];
	if (!url_build_id(r, bid))
		return 0;
	long long size[NROLES] = {-1, -1};
	for (int role = 0; role < NROLES; role++) {
		struct stat st;
		int fd = open_role(r, bid, role, &st);
		if (fd >= 0) {
			size[role] = (long long)st.st_size;
			close(fd);
		}
	}
	if (size[0] < 0 && size[1] < 0)
		return srv_error(r, 404, "no debug info or executable stored for build ID %s", bid);
	char *out = NULL;
	int n = asprintf(&out, "{\"build_id\":\"%s\",\"debuginfo\":%s,\"executable\":%s,"
			       "\"debuginfo_size\":%lld,\"executable_size\":%lld}\n",
			 bid, size[0] >= 0 ? "true" : "false", size[1] >= 0 ? "true" : "false",
			 size[0] >= 0 ? size[0] : 0, size[1] >= 0 ? size[1] : 0);
	srv_reply(r, 200, "application/json", n < 0 ? NULL : out, n < 0 ? 0 : (size_t)n);
	return 0;
}

/* GET /buildid/ID/debuginfo or /buildid/ID/executable (the path without its query). */
int srv_debuginfod(srv_req *r)
{
	const char *p = r->url + strlen("/buildid/");
	const char *slash = strchr(p, '/');
	char bid[BUILD_ID_MAX_HEX + 1];
	if (!slash || !build_id_ok(p, (size_t)(slash - p), bid))
		return srv_error(r, 404, "no such debuginfod path (want /buildid/BUILD_ID/debuginfo "
					 "or /executable)");
	int role = !strcmp(slash + 1, "debuginfo") ? ROLE_DEBUGINFO
		 : !strcmp(slash + 1, "executable") ? ROLE_EXECUTABLE
						    : -1;
	if (role < 0)
		return srv_error(r, 404, "debuginfod %s: only debuginfo and executable are served "
					 "(no sources)",
				 slash + 1);
	struct stat st;
	int fd = open_role(r, bid, role, &st);
	if (fd == -ENOENT)
		return srv_error(r, 404, "no %s stored for build ID %s", ROLE_NAME[role], bid);
	if (fd < 0)
		return srv_error(r, 500, "debug-info store: %s", strerror(-fd));
	r->status = 200;
	r->ctype = "application/octet-stream";
	r->out_is_fd = true;
	r->out_fd = fd;
	r->out_fd_len = (uint64_t)st.st_size;
	return 0;
}
