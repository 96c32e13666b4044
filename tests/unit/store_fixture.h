/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the store's unit tests share: a store opened in the test's temporary directory (include
 * unit_tmpdir.h first, for `dir`), and a profile made from folded text with one sample type.
 */
#ifndef STROBE_UNIT_STORE_FIXTURE_H
#define STROBE_UNIT_STORE_FIXTURE_H

#include <string.h>

#include "strobe/codec.h"
#include "strobe/store.h"

/* A store in dir keeping retention_ns of data (0: the default); fails the test when it cannot. */
static inline strobe_store *fixture_store(int64_t retention_ns)
{
	strobe_store_opts o = {.dir = dir, .retention_ns = retention_ns};
	strobe_err err = {{0}};
	strobe_store *s = strobe_store_open(&o, &err);
	if (!s)
		fail_msg("open: %s", err.msg);
	return s;
}

/* Folded text as a profile of sample type type/unit; its period type is cpu/nanoseconds for
 * cpu, else space/bytes. */
static inline strobe_profile *fixture_profile(const char *text, const char *type, const char *unit)
{
	strobe_profile *p = NULL;
	strobe_err err = {{0}};
	if (strobe_folded_decode(text, strlen(text), "t", &p, &err) < 0)
		fail_msg("%s", err.msg);
	bool cpu = strcmp(type, "cpu") == 0;
	p->types[0].type = strobe_str_intern0(p, type);
	p->types[0].unit = strobe_str_intern0(p, unit);
	p->period_type.type = strobe_str_intern0(p, cpu ? "cpu" : "space");
	p->period_type.unit = strobe_str_intern0(p, cpu ? "nanoseconds" : "bytes");
	return p;
}

static inline strobe_profile *fixture_cpu(const char *text)
{
	return fixture_profile(text, "cpu", "nanoseconds");
}
#endif
