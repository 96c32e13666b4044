// SPDX-License-Identifier: Apache-2.0
/*
 * Profile type names, "<name>:<type>:<unit>:<period_type>:<period_unit>" as Parca and Pyroscope
 * name them (include/strobe/profile_type.h): which profile a pprof is (cpu, memory, mutex, block,
 * goroutine, wall), guessed from its sample types and, for Go's mutex and block profiles that
 * share their sample types, from their leaf frames. Model logic, one rule for every way a
 * profile comes in (push, Pyroscope /ingest, scraping, the store).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strobe/profile_type.h"

static bool type_part_ok(const char *s)
{
	if (!*s || strlen(s) > 60)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || strchr(":{}\",=!~'`", *p))
			return false;
	return true;
}

/* Go records mutex contention when the holder unlocks, so a mutex profile's leaves are Unlock
 * frames; a block profile's are where goroutines waited (Lock, chan ops, select, Wait). */
static bool leaves_unlock(const strobe_profile *p)
{
	for (uint32_t i = 1; i <= strobe_nsamples(p); i++) {
		const strobe_stack_node *sn = strobe_stack_get(p, strobe_sample(p, i)->stack);
		if (!sn->location)
			continue;
		const strobe_location *l = strobe_location_get(p, sn->location);
		if (!l->nline || !l->line[0].function)
			continue;
		const char *f = strobe_str(p, strobe_function_get(p, l->line[0].function)->name);
		if (strstr(f, "Unlock") || strstr(f, "unlock"))
			return true;
	}
	return false;
}

/* Names a pusher may give for a profile, Go /debug/pprof endpoint names among them. */
static const char *const name_aliases[][2] = {
	{"cpu", "process_cpu"}, {"profile", "process_cpu"}, {"heap", "memory"},
	{"allocs", "memory"},   {"goroutines", "goroutine"},
};

const char *strobe_profile_name(const strobe_profile *p, const char *hint,
				const char *const *display)
{
	if (hint && *hint) {
		for (size_t i = 0; i < sizeof(name_aliases) / sizeof(*name_aliases); i++)
			if (strcmp(name_aliases[i][0], hint) == 0)
				return name_aliases[i][1];
		return hint;
	}
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (strcmp(strobe_str(p, p->types[t].type), "wall") == 0)
			return "wall";
	if (strcmp(strobe_str(p, p->period_type.type), "cpu") == 0)
		return "process_cpu";
	for (uint32_t t = 0; t < p->ntypes; t++) {
		const char *st = strobe_str(p, p->types[t].type);
		bool given = display && display[t] && display[t][0];
		if (given)
			st = display[t];
		if (strstr(st, "cpu"))
			return "process_cpu";
		if (strstr(st, "alloc_") || strstr(st, "inuse_") || !strcmp(st, "space") ||
		    !strcmp(st, "objects"))
			return "memory";
		if (strstr(st, "mutex_"))
			return "mutex";
		if (strstr(st, "block_"))
			return "block";
		/* Go's mutex and block profiles have the same sample types: the leaves tell. */
		if (!given && (!strcmp(st, "contentions") || !strcmp(st, "delay")))
			return leaves_unlock(p) ? "mutex" : "block";
		if (strstr(st, "goroutine"))
			return "goroutine";
	}
	const char *pt = strobe_str(p, p->period_type.type);
	if (*pt)
		return pt;
	return p->ntypes && *strobe_str(p, p->types[0].type) ? strobe_str(p, p->types[0].type)
							     : "unknown";
}

int strobe_profile_type_names(const strobe_profile *p, const char *name, uint32_t i, char *out,
			      strobe_err *err)
{
	const char *st = strobe_str(p, p->types[i].type), *su = strobe_str(p, p->types[i].unit);
	const char *pt = strobe_str(p, p->period_type.type), *pu = strobe_str(p, p->period_type.unit);
	if (!*pt) {
		pt = st;
		pu = su;
	}
	if (!*pu)
		pu = "count";
	if (!*su)
		su = "count";
	name = strobe_profile_name(p, name, NULL);
	const char *parts[5] = {name, st, su, pt, pu};
	for (int k = 0; k < 5; k++)
		if (!type_part_ok(parts[k]))
			return strobe_errf(err, -EINVAL,
					   "profile type part '%.60s' is empty, too long or has a "
					   "character not allowed in a type name",
					   parts[k]);
	snprintf(out, STROBE_TYPE_MAX, "%s:%s:%s:%s:%s", name, st, su, pt, pu);
	return 0;
}

bool strobe_type_is_gauge(const char *t)
{
	const char *st = strchr(t, ':');
	if (!st)
		return false;
	st++;
	/* A heap profile without inuse_/alloc_ prefixes is a snapshot of what is in use:
	 * @datadog/pprof's heap profiles (objects/count, space/bytes) are; summed over time, two
	 * snapshots of 74 MB would read as 148 MB. */
	bool memory = (size_t)(st - t) == 7 && strncmp(t, "memory:", 7) == 0;
	return strncmp(st, "inuse_", 6) == 0 || strncmp(st, "goroutine:", 10) == 0 ||
	       strncmp(st, "goroutines:", 11) == 0 ||
	       (memory && (strncmp(st, "space:", 6) == 0 || strncmp(st, "objects:", 8) == 0));
}

int strobe_profile_set_value_type(strobe_profile *p, const char *spec, strobe_err *err)
{
	char name[64], unit[64];
	const char *colon = strchr(spec, ':');
	size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
	const char *u = colon ? colon + 1 : "count";
	if (nl >= sizeof(name) || strlen(u) >= sizeof(unit))
		return strobe_errf(err, -EINVAL, "--type: '%.80s' is too long (NAME:UNIT, each at "
						 "most 60 bytes)", spec);
	memcpy(name, spec, nl);
	name[nl] = 0;
	strcpy(unit, u);
	if (!type_part_ok(name) || !type_part_ok(unit))
		return strobe_errf(err, -EINVAL,
				   "--type: '%.80s' is not NAME:UNIT (e.g. cpu:nanoseconds; no spaces, "
				   "colons, braces, quotes or =!~ in either part)",
				   spec);
	if (p->ntypes != 1)
		return strobe_errf(err, -EINVAL,
				   "--type: the input has %u value columns; it names one (folded "
				   "input with one count per line)",
				   p->ntypes);
	uint32_t t = strobe_str_intern0(p, name), un = strobe_str_intern0(p, unit);
	if (t == UINT32_MAX || un == UINT32_MAX)
		return strobe_errf(err, -ENOMEM, "out of memory");
	p->types[0] = (strobe_value_type){t, un};
	p->period_type = p->types[0];
	return 0;
}
