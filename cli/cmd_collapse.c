// SPDX-License-Identifier: Apache-2.0
/*
 * strobe collapse: `perf script` text to folded stacks, byte for byte what FlameGraph's
 * stackcollapse-perf.pl prints for the same input and options.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/collapse.h"

static const char usage_text[] =
	"usage: strobe collapse [--pid] [--tid] [--kernel] [--jit] [--all] [--addrs]\n"
	"                       [--event-filter EVENT] [FILE]\n\n"
	"Folds `perf script` output (FILE, or stdin; gzip is undone) into one line per stack,\n"
	"\"comm;root;...;leaf COUNT\", exactly as stackcollapse-perf.pl does.\n\n"
	"  --pid                  include the PID with the process name\n"
	"  --tid                  include the PID and TID with the process name\n"
	"  --kernel               annotate kernel frames with _[k]\n"
	"  --jit                  annotate JIT frames (perf-PID.map) with _[j]\n"
	"  --all                  all annotations (--kernel --jit)\n"
	"  --addrs                show unknown frames with their address\n"
	"  --event-filter EVENT   keep samples of EVENT (default: the first event seen)\n";

static int emit_line(const char *stack, size_t len, uint64_t count, void *ctx)
{
	(void)ctx;
	fwrite(stack, 1, len, stdout);
	printf(" %llu\n", (unsigned long long)count);
	return ferror(stdout) ? -EIO : 0;
}

enum { O_PID = OPT_CMD_BASE, O_TID, O_KERNEL, O_JIT, O_ALL, O_ADDRS, O_EVENT, O_INLINE, O_CONTEXT };

int cmd_collapse(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},     {"pid", no_argument, 0, O_PID},
		{"tid", no_argument, 0, O_TID},    {"kernel", no_argument, 0, O_KERNEL},
		{"jit", no_argument, 0, O_JIT},    {"all", no_argument, 0, O_ALL},
		{"addrs", no_argument, 0, O_ADDRS}, {"event-filter", required_argument, 0, O_EVENT},
		{"inline", no_argument, 0, O_INLINE}, {"context", no_argument, 0, O_CONTEXT},
		{0, 0, 0, 0}};
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
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (argc - optind > 1) {
		cli_err(cmd, "takes one input file (got %d)", argc - optind);
		return 2;
	}
	const char *path = optind < argc ? argv[optind] : "-";
	uint8_t *buf;
	size_t len;
	strobe_err err = {{0}};
	if (strobe_slurp(path, &buf, &len, &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		return 2;
	}
	if (len == 0) {
		cli_err(cmd, "%s: empty input (no perf script text)", strcmp(path, "-") ? path : "<stdin>");
		free(buf);
		return 2;
	}
	static char outbuf[1 << 16];
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
	int r = strobe_collapse((const char *)buf, len, strcmp(path, "-") ? path : "<stdin>", &o,
				emit_line, NULL, &err);
	free(buf);
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
