// SPDX-License-Identifier: Apache-2.0
/*
 * What the three PGO writers share: the format names and the checks that decide whether a merged
 * profile can guide a compiler at all (a CPU column, samples in it, named frames), so that every
 * surface (CLI, HTTP API) refuses the same inputs with the same words.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strobe/pgo.h"

strobe_pgo_format strobe_pgo_format_parse(const char *name)
{
	if (!name)
		return STROBE_PGO_NONE;
	if (strcmp(name, "go") == 0)
		return STROBE_PGO_GO;
	if (strcmp(name, "autofdo") == 0)
		return STROBE_PGO_AUTOFDO;
	if (strcmp(name, "bolt") == 0)
		return STROBE_PGO_BOLT;
	return STROBE_PGO_NONE;
}

static int find_type(const strobe_profile *p, const char *type, const char *unit)
{
	for (uint32_t i = 0; i < p->ntypes; i++)
		if (strcmp(strobe_str(p, p->types[i].type), type) == 0 &&
		    strcmp(strobe_str(p, p->types[i].unit), unit) == 0)
			return (int)i;
	return -1;
}

/* An off-CPU or wall profile also counts in samples/count: it is CPU time only when the period
 * type says the samples were taken on the CPU (or says nothing, as folded input does). */
static bool on_cpu(const strobe_profile *p)
{
	const char *pt = strobe_str(p, p->period_type.type);
	return !*pt || strcmp(pt, "cpu") == 0 || strcmp(pt, "cycles") == 0 ||
	       strcmp(pt, "samples") == 0;
}

int strobe_pgo_type(const strobe_profile *p, strobe_err *err)
{
	int t = find_type(p, "samples", "count");
	if (t < 0)
		t = find_type(p, "cpu", "nanoseconds");
	if (t < 0 || !on_cpu(p)) {
		char names[256] = "";
		size_t n = 0;
		for (uint32_t i = 0; i < p->ntypes && n < sizeof(names) - 1; i++) {
			int w = snprintf(names + n, sizeof(names) - n, "%s%s/%s", i ? ", " : "",
					 strobe_str(p, p->types[i].type),
					 strobe_str(p, p->types[i].unit));
			if (w < 0)
				break;
			n += (size_t)w;
			if (n >= sizeof(names))
				n = sizeof(names) - 1;
		}
		return strobe_errf(err, -EINVAL,
				   "PGO needs a CPU profile (samples/count or cpu/nanoseconds taken "
				   "on the CPU); this one has %s%s%s", p->ntypes ? names : "no sample types",
				   t >= 0 ? " with period type " : "",
				   t >= 0 ? strobe_str(p, p->period_type.type) : "");
	}
	int64_t total = 0, named = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[t];
		if (v <= 0)
			continue;
		total += v;
		const strobe_stack_node *n = strobe_stack_get(p, strobe_sample(p, s)->stack);
		if (!n->location)
			continue;
		const strobe_location *l = strobe_location_get(p, n->location);
		if (l->nline && l->line[0].function &&
		    *strobe_str(p, strobe_function_get(p, l->line[0].function)->name))
			named += v;
	}
	if (total == 0)
		return strobe_errf(err, -ENODATA,
				   "the profile holds no samples (an empty window or selector): a PGO "
				   "file from it would tell the compiler nothing; widen the window");
	if (named == 0)
		return strobe_errf(err, -ENOENT,
				   "none of the sampled frames is symbolized (bare addresses): upload the "
				   "binaries' debug files (strobe debuginfo) or record with symbols, then "
				   "export again");
	return t;
}
