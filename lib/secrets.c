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
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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

int strobe_url_check_secrets(const char *url, const char *what, strobe_err *err)
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
			   "%s: the URL carries credentials (%s): give them as the token instead "
			   "(--token, or \"token\" in the agent's config), which is sent as "
			   "Authorization: Bearer; a URL ends up in logs",
			   what, userinfo ? "user:password@" : "a token= parameter");
}
