// SPDX-License-Identifier: Apache-2.0
/*
 * Span and trace selection on the read endpoints: /api/v1/query?span_id=ID[,ID...] and
 * trace_id=, and Connect's SelectMergeSpanProfile. Each becomes a matcher on the samples' label
 * (span_id=~"(a|b)"), which the store answers from its span index (store/spans.c) instead of a
 * scan, and still applies to every point it reads, so the answer is exactly the scan's.
 *
 * Exemplars (/api/v1/range?exemplars=N) are written here too: per step that has any, its
 * heaviest profiles {id, time_ms, value, span_id, trace_id}, whose id opens that exact profile
 * through /api/v1/query?profile_id=.
 *
 * IDs are checked here, before they reach a regex: 1 to 64 characters of [0-9A-Za-z_:-] each,
 * at most SRV_SPAN_IDS_MAX of them, each failure a 400 naming the parameter and the ID.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

#define ID_MAX 64

const char *srv_span_id_check(const char *id, size_t len)
{
	if (!len || len > ID_MAX)
		return "is not 1 to 64 characters long";
	for (size_t i = 0; i < len; i++) {
		char c = id[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '_' || c == '-' || c == ':'))
			return "has a character other than 0-9, a-z, A-Z, _, - and :";
	}
	return NULL;
}

int srv_span_matcher(const char *name, const char *const *ids, size_t n, strobe_selector *sel,
		     strobe_err *err)
{
	size_t cap = strlen(name) + 16 + n * (ID_MAX + 1);
	char *text = malloc(cap);
	if (!text)
		return -ENOMEM;
	size_t o = (size_t)snprintf(text, cap, "{%s=~\"(", name);
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(text + o, cap - o, "%s%s", i ? "|" : "", ids[i]);
	snprintf(text + o, cap - o, ")\"}");
	strobe_selector one;
	int r = strobe_selector_parse(text, strlen(text), &one, err);
	free(text);
	if (r < 0)
		return r;
	strobe_matcher *m = realloc(sel->m, (sel->n + one.n) * sizeof(*m));
	if (!m) {
		strobe_selector_free(&one);
		return -ENOMEM;
	}
	sel->m = m;
	memcpy(sel->m + sel->n, one.m, one.n * sizeof(*m)); /* moved: `one` keeps nothing */
	sel->n += one.n;
	free(one.m);
	free(one.type);
	return 0;
}

/* One parameter (span_id or trace_id) of r into sel; 0 (also when absent), -1 after a 400. */
static int one_arg(srv_req *r, const char *name, strobe_selector *sel)
{
	const char *v = srv_arg(r, name);
	if (!v)
		return 0;
	const char *ids[SRV_SPAN_IDS_MAX];
	char *copy = strdup(v), *save = NULL;
	size_t n = 0;
	if (!copy)
		return srv_error(r, 500, "out of memory"), -1;
	for (char *id = strtok_r(copy, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
		const char *bad = srv_span_id_check(id, strlen(id));
		if (bad)
			srv_error(r, 400, "%s: '%.70s' %s", name, id, bad);
		else if (n == SRV_SPAN_IDS_MAX)
			srv_error(r, 400, "%s: more than %u IDs", name, SRV_SPAN_IDS_MAX);
		if (bad || n == SRV_SPAN_IDS_MAX) {
			free(copy);
			return -1;
		}
		ids[n++] = id;
	}
	if (!n) {
		free(copy);
		return srv_error(r, 400, "%s: give one or more IDs, separated by commas", name), -1;
	}
	strobe_err err = {{0}};
	int rc = srv_span_matcher(name, ids, n, sel, &err);
	free(copy);
	if (rc < 0)
		return srv_fail(r, rc, &err), -1;
	return 0;
}

int srv_span_args(srv_req *r, strobe_selector *sel)
{
	return one_arg(r, "span_id", sel) < 0 || one_arg(r, "trace_id", sel) < 0 ? -1 : 0;
}

struct json_t *srv_exemplars_json(const strobe_exemplars *e, int64_t from, int64_t step)
{
	json_t *steps = json_array();
	for (size_t i = 0; steps && i < e->nsteps; i++) {
		json_t *v = json_array();
		for (size_t k = 0; v && k < e->per_step; k++) {
			const strobe_exemplar *x = &e->v[i * e->per_step + k];
			if (!x->id)
				break;
			json_t *o = json_pack("{s:I, s:I, s:I}", "id", (json_int_t)x->id, "time_ms",
					      (json_int_t)(x->time_ns / 1000000), "value",
					      (json_int_t)x->value);
			if (o && x->span_id[0])
				json_object_set_new(o, "span_id", json_string(x->span_id));
			if (o && x->trace_id[0])
				json_object_set_new(o, "trace_id", json_string(x->trace_id));
			json_array_append_new(v, o);
		}
		if (v && json_array_size(v))
			json_array_append_new(steps, json_pack("{s:I, s:o}", "time_ms",
							       (json_int_t)((from + (int64_t)i * step) /
									    1000000),
							       "profiles", v));
		else
			json_decref(v);
	}
	return steps;
}
