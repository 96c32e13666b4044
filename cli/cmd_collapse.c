// SPDX-License-Identifier: Apache-2.0
/*
 * strobe collapse: `perf script` text to folded stacks, byte for byte what FlameGraph's
 * stackcollapse-perf.pl prints for the same input and options.
 *
 * The input is streamed through strobe_collapser in 256 KiB reads, so `perf script | strobe
 * collapse` starts at once and a file of gigabytes needs no more memory than its distinct
 * stacks; gzip input (by its magic) is read whole and gunzipped first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "strobe/collapse.h"

static const char usage_text[] =
	"usage: strobe collapse [--pid] [--tid] [--kernel] [--jit] [--all] [--addrs]\n"
	"                       [--event-filter EVENT] [--srcline] [FILE]\n\n"
	"Folds `perf script` output (FILE, or stdin; gzip is undone) into one line per stack,\n"
	"\"comm;root;...;leaf COUNT\", exactly as stackcollapse-perf.pl does.\n\n"
	"  --pid                  include the PID with the process name\n"
	"  --tid                  include the PID and TID with the process name\n"
	"  --kernel               annotate kernel frames with _[k]\n"
	"  --jit                  annotate JIT frames (perf-PID.map) with _[j]\n"
	"  --all                  all annotations (--kernel --jit)\n"
	"  --addrs                show unknown frames with their address\n"
	"  --event-filter EVENT   keep samples of EVENT (default: the first event seen)\n"
	"  --srcline              input is `perf script -F+srcline`: add file:line to frames\n"
	"  --context              accepted for compatibility (perl uses it only with --inline)\n"
	"  --inline is not supported (it runs addr2line on every frame).\n";

/* Writes "stack count\n" without printf: with --addrs or --tid there can be millions. */
static int emit_line(const char *stack, size_t len, uint64_t count, void *ctx)
{
	FILE *f = ctx;
	char num[24];
	size_t i = sizeof(num);
	num[--i] = '\n';
	do
		num[--i] = (char)('0' + count % 10);
	while ((count /= 10) != 0);
	num[--i] = ' ';
	fwrite(stack, 1, len, f);
	fwrite(num + i, 1, sizeof(num) - i, f);
	return ferror(f) ? -EIO : 0;
}

/* Reads the input in pieces into the collapser: a big perf script file is never held whole
 * (reading 256 KiB at a time into one reused buffer is several times cheaper than mapping or
 * slurping it, whose every page is touched once and thrown away). gzip input, recognised by
 * its first two bytes, is read whole and gunzipped instead. Returns 0 or the negative errno
 * with err filled. */
static int collapse_file(const char *path, const char *shown, strobe_collapser *c,
			 size_t *total, strobe_err *err)
{
	bool is_stdin = strcmp(path, "-") == 0;
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strobe_errf(err, -errno, "%s: %s", shown, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!is_stdin)
			close(fd);
		return strobe_errf(err, -EISDIR, "%s: is a directory", shown);
	}
	enum { CHUNK = 256 << 10 };
	size_t cap = CHUNK, len = 0;
	char *buf = malloc(cap);
	int r = buf ? 0 : -ENOMEM;
	bool gz = false, sniffed = false;
	*total = 0;
	while (!r) {
		if (len == cap) { /* only gzip input is kept whole */
			if (cap >= STROBE_MAX_INPUT) {
				r = strobe_errf(err, -EFBIG, "%s: larger than the %zu MiB limit", shown,
						STROBE_MAX_INPUT >> 20);
				break;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = strobe_errf(err, -errno, "%s: read: %s", shown, strerror(errno));
			break;
		}
		len += (size_t)n;
		*total += (size_t)n;
		if (!sniffed && (len >= 2 || n == 0)) {
			sniffed = true;
			gz = len >= 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b;
		}
		if (n == 0 || (sniffed && !gz)) {
			if (!gz && len) /* feed what we have; the buffer is reused */
				r = strobe_collapser_feed(c, buf, len, err);
			len = 0;
		}
		if (n == 0)
			break;
	}
	if (!is_stdin)
		close(fd);
	if (!r && gz) {
		uint8_t *plain;
		size_t plen;
		/* The gzip stream is in buf[0, *total) (len was reset only for plain input). */
		r = strobe_gunzip((const uint8_t *)buf, *total, &plain, &plen, err);
		if (!r) {
			*total = plen;
			r = strobe_collapser_feed(c, (const char *)plain, plen, err);
			free(plain);
		}
	}
	free(buf);
	if (r == -ENOMEM && !err->msg[0])
		strobe_errf(err, r, "%s: out of memory", shown);
	return r;
}

enum {
	O_PID = OPT_CMD_BASE, O_TID, O_KERNEL, O_JIT, O_ALL, O_ADDRS, O_EVENT, O_INLINE, O_CONTEXT,
	O_SRCLINE
};

int cmd_collapse(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},     {"pid", no_argument, 0, O_PID},
		{"tid", no_argument, 0, O_TID},    {"kernel", no_argument, 0, O_KERNEL},
		{"jit", no_argument, 0, O_JIT},    {"all", no_argument, 0, O_ALL},
		{"addrs", no_argument, 0, O_ADDRS}, {"event-filter", required_argument, 0, O_EVENT},
		{"inline", no_argument, 0, O_INLINE}, {"context", no_argument, 0, O_CONTEXT},
		{"srcline", no_argument, 0, O_SRCLINE}, {0, 0, 0, 0}};
	const char *cmd = "collapse";
	strobe_collapse_opts o = {0};
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case O_PID: o.pid = true; break;
		case O_TID: o.tid = true; break;
		case O_KERNEL: o.kernel = true; break;
		case O_JIT: o.jit = true; break;
		case O_ALL: o.all = true; break;
		case O_ADDRS: o.addrs = true; break;
		case O_EVENT: o.event_filter = optarg; break;
		case O_INLINE: o.inline_ = true; break;
		case O_CONTEXT: o.context = true; break;
		case O_SRCLINE: o.srcline = true; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (argc - optind > 1) {
		cli_err(cmd, "takes one input file (got %d)", argc - optind);
		return 2;
	}
	const char *path = optind < argc ? argv[optind] : "-";
	const char *shown = strcmp(path, "-") ? path : "<stdin>";
	strobe_err err = {{0}};
	strobe_collapser *col = strobe_collapser_new(shown, &o);
	if (!col) {
		cli_err(cmd, "%s: out of memory", shown);
		return 2;
	}
	static char outbuf[1 << 20];
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	size_t total = 0;
	int r = collapse_file(path, shown, col, &total, &err);
	if (!r && total == 0) {
		/* perl prints nothing for it; a pipeline that lost its perf script deserves a word */
		strobe_errf(&err, -EINVAL, "%s: empty input (no perf script text)", shown);
		r = -EINVAL;
	}
	if (!r)
		r = strobe_collapser_finish(col, emit_line, stdout, &err);
	strobe_collapser_free(col);
	if (r < 0) {
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-r));
		return 2;
	}
	if (fflush(stdout) != 0) {
		cli_err(cmd, "writing output: %s", strerror(errno));
		return 2;
	}
	return 0;
}
