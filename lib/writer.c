// SPDX-License-Identifier: Apache-2.0
/*
 * The output-format dispatcher (include/strobe/writer.h): which writer a format means, and
 * for the formats drawn from a call tree (json, flat, svg), building that tree first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/otlp.h"
#include "strobe/render.h"
#include "strobe/transform.h"
#include "strobe/writer.h"

int strobe_write_tree(FILE *f, const strobe_tree *t, strobe_format fmt, const char *type,
		      const char *unit, const strobe_write_opts *opts)
{
	switch (fmt) {
	case STROBE_FMT_JSON: return strobe_json_tree_write(f, t, type, unit);
	case STROBE_FMT_FLAT: return strobe_json_flat_write(f, t, type, unit);
	case STROBE_FMT_SVG: {
		strobe_svg_opts so = {.countname = strcmp(unit, "count") == 0 ? "samples" : unit,
				      .title = opts ? opts->title : NULL,
				      .subtitle = opts ? opts->subtitle : NULL};
		return strobe_svg_write(f, t, &so);
	}
	default: return -EINVAL;
	}
}

static int write_pprof(FILE *f, const strobe_profile *p)
{
	uint8_t *buf;
	size_t len;
	int r = strobe_pprof_encode(p, &buf, &len);
	if (r == 0) {
		if (fwrite(buf, 1, len, f) != len)
			r = -EIO;
		free(buf);
	}
	return r;
}

/* An OTLP request of one resource with no attributes (plain protobuf, as exporters send it). */
static int write_otlp(FILE *f, const strobe_profile *p)
{
	uint8_t *buf;
	size_t len;
	int r = strobe_otlp_encode(p, NULL, 0, &buf, &len);
	if (r == 0) {
		if (fwrite(buf, 1, len, f) != len)
			r = -EIO;
		free(buf);
	}
	return r;
}

int strobe_write_profile(FILE *f, strobe_profile *p, strobe_format fmt, int type,
			 strobe_granularity g, const strobe_write_opts *opts)
{
	strobe_write_opts o = opts ? *opts : (strobe_write_opts){0};
	switch (fmt) {
	case STROBE_FMT_PPROF: return write_pprof(f, p);
	case STROBE_FMT_OTLP: return write_otlp(f, p);
	case STROBE_FMT_FOLDED: return strobe_folded_write(f, p, type, g);
	case STROBE_FMT_SPEEDSCOPE: return strobe_speedscope_write(f, p, type, g, o.name);
	case STROBE_FMT_TOP: return strobe_top_write(f, p, type, g, o.top_rows, false);
	case STROBE_FMT_JSON:
	case STROBE_FMT_FLAT:
	case STROBE_FMT_SVG: {
		if (type < 0 || (uint32_t)type >= p->ntypes)
			return -EINVAL;
		strobe_tree *t = strobe_tree_new();
		if (!t)
			return -ENOMEM;
		int r = strobe_tree_add(t, p, type, g, 0, 1.0, 0);
		if (r == 0)
			r = strobe_tree_sort(t);
		if (r == 0)
			r = strobe_write_tree(f, t, fmt, strobe_str(p, p->types[type].type),
					      strobe_str(p, p->types[type].unit), &o);
		strobe_tree_free(t);
		return r;
	}
	default: return -EINVAL;
	}
}

const char *strobe_format_mime(strobe_format fmt)
{
	switch (fmt) {
	case STROBE_FMT_PPROF: return "application/octet-stream";
	case STROBE_FMT_OTLP: return "application/x-protobuf";
	case STROBE_FMT_JSON:
	case STROBE_FMT_FLAT:
	case STROBE_FMT_SPEEDSCOPE: return "application/json";
	case STROBE_FMT_SVG: return "image/svg+xml";
	default: return "text/plain; charset=utf-8";
	}
}
