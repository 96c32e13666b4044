// SPDX-License-Identifier: Apache-2.0
/*
 * Files that hold secrets (the server's config with tenant and admin tokens, the agent's config
 * with its token): refused when their mode lets the group or others read them, as ssh refuses a
 * private key that others can read. A token that every local user can read is every local user's
 * token, and a warning would be read once and then scroll by; the message says how to fix it.
 */
#include <errno.h>
#include <string.h>
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
