// SPDX-License-Identifier: Apache-2.0
/*
 * A line reader for the symbolizer's text inputs (/proc/kallsyms, /tmp/perf-PID.map). Both are
 * written by someone else (the kernel, any JIT in any process) and read by an agent that may run
 * as root, so the reader holds one fixed buffer whatever the input: a line longer than
 * SYM_MAX_LINE is skipped whole rather than grown into, and a file is read up to
 * SYM_MAX_TEXT_FILE bytes. getline() would allocate as much as the longest line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define BUF_SIZE (64u << 10)

int sym_read_lines(const char *path, int (*fn)(void *arg, const char *line, size_t len),
		   void *arg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char *buf = malloc(BUF_SIZE);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t have = 0, total = 0;
	bool skipping = false; /* inside a line that overflowed the buffer */
	int ret = 0;
	for (;;) {
		ssize_t got = read(fd, buf + have, BUF_SIZE - have);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		bool eof = got == 0 || total >= SYM_MAX_TEXT_FILE;
		total += (size_t)got;
		have += (size_t)got;
		size_t pos = 0;
		for (;;) {
			char *nl = memchr(buf + pos, '\n', have - pos);
			size_t end = nl ? (size_t)(nl - buf) : have;
			if (!nl && !eof)
				break;
			if (!nl && end == pos)
				break; /* nothing after the last newline */
			if (!skipping && end - pos <= SYM_MAX_LINE) {
				ret = fn(arg, buf + pos, end - pos);
				if (ret)
					goto out;
			}
			skipping = false;
			pos = nl ? end + 1 : have;
		}
		if (eof)
			break;
		memmove(buf, buf + pos, have - pos);
		have -= pos;
		if (have > SYM_MAX_LINE) { /* too long to ever be used: drop what we hold of it */
			skipping = true;
			have = 0;
		}
	}
out:
	free(buf);
	close(fd);
	return ret;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool sym_parse_hex(const char **p, const char *e, uint64_t *out)
{
	const char *q = *p;
	if (e - q > 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X') && hexval(q[2]) >= 0)
		q += 2;
	uint64_t v = 0;
	int nd = 0;
	for (int h; q < e && (h = hexval(*q)) >= 0; q++) {
		if (++nd > 16)
			return false;
		v = v << 4 | (uint64_t)h;
	}
	if (!nd)
		return false;
	*p = q;
	*out = v;
	return true;
}
