// SPDX-License-Identifier: Apache-2.0
/*
 * Where tokens may live and where they may not. Files that hold them (the server's config with
 * tenant and admin tokens, the agent's config with its token) are refused when their mode lets
 * the group or others read them, as ssh refuses a private key that others can read: a token
 * every local user can read is every local user's token, and a warning would be read once and
 * then scroll by. URLs are refused when they carry credentials (user:password@host, ?token=):
 * a URL is printed in logs, error messages and the agent's /status, and proxies log it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/profile.h"

int strobe_secret_file_check(int fd, const char *path, strobe_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return strobe_errf(err, -errno, "%s: %s", path, strerror(errno));
	if (!(st.st_mode & 077))
		return 0;
	return strobe_errf(err, -EACCES,
			   "%s holds tokens but is readable by %s (mode %04o): run chmod 600 %s", path,
			   st.st_mode & 07 ? "others" : "its group", (unsigned)(st.st_mode & 07777),
			   path);
}

int strobe_url_check_secrets(const char *url, const char *what, const char *instead,
			     strobe_err *err)
{
	const char *a = strstr(url, "://");
	a = a ? a + 3 : url;
	size_t alen = strcspn(a, "/?#");
	bool userinfo = memchr(a, '@', alen) != NULL;
	bool param = false;
	const char *q = strchr(url, '?');
	for (const char *p = q; p && !param; p = strchr(p + 1, '&')) {
		const char *k = p + 1;
		param = strncasecmp(k, "token=", 6) == 0 || strncasecmp(k, "access_token=", 13) == 0;
	}
	if (!userinfo && !param)
		return 0;
	/* The URL itself is not quoted: it holds the secret. */
	return strobe_errf(err, -EINVAL,
			   "%s: the URL carries credentials (%s), and URLs end up in logs and "
			   "status pages; %s",
			   what, userinfo ? "user:password@" : "a token= parameter", instead);
}

int strobe_token_check(const char *tok, const char *what, strobe_err *err)
{
	/* It goes into an HTTP header: a CR or LF would start a header of its own. */
	size_t n = strlen(tok);
	if (!n)
		return strobe_errf(err, -EINVAL, "%s: the token is empty", what);
	if (n > STROBE_TOKEN_MAX)
		return strobe_errf(err, -EINVAL, "%s: the token is longer than %u bytes", what,
				   STROBE_TOKEN_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)tok[i] <= ' ' || tok[i] == 0x7f)
			return strobe_errf(err, -EINVAL,
					   "%s: the token has a space or control character at "
					   "byte %zu (one line of printable characters expected)",
					   what, i);
	return 0;
}

int strobe_token_file_read(const char *path, char **out, strobe_err *err)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strobe_errf(err, -errno, "%s: %s", path, strerror(errno));
	int rc = strobe_secret_file_check(fd, path, err);
	char buf[STROBE_TOKEN_MAX + 3];
	ssize_t n = 0;
	if (rc == 0) {
		size_t got = 0;
		while (got < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - got)) > 0)
			got += (size_t)n;
		if (n < 0)
			rc = strobe_errf(err, -errno, "%s: %s", path, strerror(errno));
		n = (ssize_t)got;
	}
	close(fd);
	if (rc < 0)
		return rc;
	/* One line: its newline (and a CR before it) is not part of the token. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if ((size_t)n > STROBE_TOKEN_MAX)
		return strobe_errf(err, -EINVAL, "%s: the token is longer than %u bytes", path,
				   STROBE_TOKEN_MAX);
	buf[n] = 0;
	if ((size_t)n != strlen(buf))
		return strobe_errf(err, -EINVAL, "%s: the token has a NUL byte", path);
	if ((rc = strobe_token_check(buf, path, err)) < 0)
		return rc;
	if (!(*out = strdup(buf)))
		return -ENOMEM;
	return 0;
}
