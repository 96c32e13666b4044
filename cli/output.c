// SPDX-License-Identifier: Apache-2.0
/*
 * Writing a profile in any output format, shared by convert, merge and (later) record and query.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/writer.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

strobe_format cli_format_for_path(const char *path)
{
	if (!path)
		return STROBE_FMT_UNKNOWN;
	if (ends_with(path, ".otlp"))
		return STROBE_FMT_OTLP;
	if (ends_with(path, ".pb.gz") || ends_with(path, ".pprof") || ends_with(path, ".pb"))
		return STROBE_FMT_PPROF;
	if (ends_with(path, ".folded") || ends_with(path, ".txt"))
		return STROBE_FMT_FOLDED;
	if (ends_with(path, ".svg"))
		return STROBE_FMT_SVG;
	if (ends_with(path, ".speedscope.json"))
		return STROBE_FMT_SPEEDSCOPE;
	if (ends_with(path, ".json"))
		return STROBE_FMT_JSON;
	return STROBE_FMT_UNKNOWN;
}

int cli_write_as(const char *cmd, strobe_profile *p, strobe_format fmt, int type,
		 strobe_granularity g, const char *path)
{
	cli_out out;
	if (cli_out_open(cmd, path, &out) < 0)
		return -1;
	/* The CLI writes file formats only; flat and top are the HTTP API's. */
	int r = fmt == STROBE_FMT_FLAT || fmt == STROBE_FMT_TOP
			? -EINVAL
			: strobe_write_profile(out.f, p, fmt, type, g,
					       &(strobe_write_opts){.name = path});
	if (r < 0)
		cli_err(cmd, "writing %s: %s", strobe_format_name(fmt), strerror(-r));
	return cli_out_close(cmd, &out, r == 0) < 0 || r < 0 ? -1 : 0;
}
