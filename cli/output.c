// SPDX-License-Identifier: Apache-2.0
/*
 * Writing a profile in any output format, shared by convert, merge and (later) record and query.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "strobe/render.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

strobe_format cli_format_for_path(const char *path)
{
	if (!path)
		return STROBE_FMT_UNKNOWN;
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

static int write_tree_based(FILE *f, strobe_profile *p, strobe_format fmt, int type,
			    strobe_granularity g)
{
	strobe_tree *t = strobe_tree_new();
	if (!t)
		return -ENOMEM;
	int r = strobe_tree_add(t, p, type, g, 0, 1.0, 0);
	if (r == 0)
		r = strobe_tree_sort(t);
	if (r == 0 && fmt == STROBE_FMT_JSON)
		r = strobe_json_tree_write(f, t, strobe_str(p, p->types[type].type),
					   strobe_str(p, p->types[type].unit));
	else if (r == 0) {
		const char *unit = strobe_str(p, p->types[type].unit);
		strobe_svg_opts so = {.countname = strcmp(unit, "count") == 0 ? "samples" : unit};
		r = strobe_svg_write(f, t, &so);
	}
	strobe_tree_free(t);
	return r;
}

int cli_write_as(const char *cmd, strobe_profile *p, strobe_format fmt, int type,
		 strobe_granularity g, const char *path)
{
	cli_out out;
	if (cli_out_open(cmd, path, &out) < 0)
		return -1;
	int r;
	switch (fmt) {
	case STROBE_FMT_PPROF: {
		uint8_t *buf;
		size_t len;
		r = strobe_pprof_encode(p, &buf, &len);
		if (r == 0) {
			if (fwrite(buf, 1, len, out.f) != len)
				r = -EIO;
			free(buf);
		}
		break;
	}
	case STROBE_FMT_FOLDED: r = strobe_folded_write(out.f, p, type, g); break;
	case STROBE_FMT_SPEEDSCOPE: r = strobe_speedscope_write(out.f, p, type, g, path); break;
	case STROBE_FMT_JSON:
	case STROBE_FMT_SVG: r = write_tree_based(out.f, p, fmt, type, g); break;
	default: r = -EINVAL; break;
	}
	if (r < 0)
		cli_err(cmd, "writing %s: %s", strobe_format_name(fmt), strerror(-r));
	return cli_out_close(cmd, &out, r == 0) < 0 || r < 0 ? -1 : 0;
}
