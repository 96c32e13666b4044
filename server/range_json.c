// SPDX-License-Identifier: Apache-2.0
/*
 * The body of /api/v1/range, written straight into a buffer: {"type", "from_ms", "to_ms",
 * "step_ms", "series": [{"group": {LABEL: VALUE}, "points": [[MS, VALUE], ...]}, ...],
 * "exemplars"}. It used to be built as jansson values and dumped: three allocations and a
 * printf for each of a range's values, which for the whole host's 24 h (500 groups of 240
 * steps, 3.4 MB of JSON) took longer than the query itself. The numbers are written here; the
 * strings (type, group) and the exemplars still go through jansson, so their escaping is
 * jansson's, and the body is byte for byte what the dump gave (the e2e suites and bench/fleet.sh
 * compare it with an older build's).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "range_json.h"

/* v in decimal, as printf's %lld, at out (room for 20 bytes); its length. */
static size_t put_int(char *out, int64_t v)
{
	char d[24], *p = d + sizeof(d);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	size_t n = (size_t)(d + sizeof(d) - p);
	memcpy(out, p, n);
	return n;
}

/* One point, [MS,VALUE], after a comma unless it is the first: written in place. */
static int add_point(strobe_buf *b, bool first, int64_t ms, int64_t v)
{
	int r = strobe_buf_reserve(b, 2 + 20 + 1 + 20 + 1);
	if (r < 0)
		return r;
	char *p = b->p + b->len, *o = p;
	if (!first)
		*p++ = ',';
	*p++ = '[';
	p += put_int(p, ms);
	*p++ = ',';
	p += put_int(p, v);
	*p++ = ']';
	strobe_buf_commit(b, (size_t)(p - o));
	return 0;
}

/* j dumped compact (jansson's own escaping), then released; -EINVAL when j is NULL (a string
 * that is not UTF-8: what made the whole dump fail before). */
static int add_json(strobe_buf *b, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	json_decref(j);
	if (!s)
		return -EINVAL;
	int r = strobe_buf_adds(b, s);
	free(s);
	return r;
}

int srv_range_json(strobe_buf *b, const char *type, int64_t from, int64_t to, int64_t step,
		   const char *gb, const strobe_range_result *res, json_t *ex)
{
	int r = strobe_buf_adds(b, "{\"type\":");
	if (r == 0)
		r = add_json(b, json_string(type));
	if (r == 0)
		r = strobe_buf_addf(b, ",\"from_ms\":%lld,\"to_ms\":%lld,\"step_ms\":%lld,\"series\":[",
				    (long long)(from / 1000000), (long long)(to / 1000000),
				    (long long)(step / 1000000));
	for (size_t i = 0; r == 0 && i < res->n; i++) {
		/* The group as before: an object, empty when not grouped, and without its key
		 * when the value cannot be encoded. */
		json_t *grp = json_object();
		if (gb && grp)
			json_object_set_new(grp, gb, json_string(res->g[i].value));
		r = strobe_buf_adds(b, i ? ",{\"group\":" : "{\"group\":");
		if (r == 0)
			r = grp ? add_json(b, grp) : strobe_buf_adds(b, "null");
		else
			json_decref(grp);
		if (r == 0)
			r = strobe_buf_adds(b, ",\"points\":[");
		for (size_t k = 0; r == 0 && k < res->nsteps; k++)
			r = add_point(b, k == 0, (from + (int64_t)k * step) / 1000000,
				      res->g[i].values[k]);
		if (r == 0)
			r = strobe_buf_adds(b, "]}");
	}
	if (r == 0)
		r = strobe_buf_add(b, "]", 1);
	if (r == 0 && ex) {
		r = strobe_buf_adds(b, ",\"exemplars\":");
		if (r == 0)
			r = add_json(b, json_incref(ex));
	}
	if (r == 0)
		r = strobe_buf_add(b, "}", 1);
	return r;
}
