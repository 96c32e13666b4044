// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's per-process identities by pid (see proc_cache.h): an array, and strobe_itab as
 * its index (the id of a pid is its entry's slot, as both grow together).
 */
#include <stdlib.h>
#include <string.h>

#include "proc_cache.h"

void proc_cache_free(proc_cache *c)
{
	free(c->v);
	strobe_itab_free(&c->ids);
	memset(c, 0, sizeof(*c));
}

proc_entry *proc_cache_find(proc_cache *c, pid_t pid)
{
	if (c->ids.n == 0)
		return NULL;
	int32_t k = (int32_t)pid;
	uint32_t i = strobe_itab_find(&c->ids, &k, sizeof(k));
	return i < c->n ? &c->v[i] : NULL;
}

proc_entry *proc_cache_add(proc_cache *c, pid_t pid)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 64;
		proc_entry *nv = realloc(c->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		c->v = nv;
		c->cap = nc;
	}
	int32_t k = (int32_t)pid;
	uint32_t id;
	bool added;
	c->ids.fixed = sizeof(k);
	if (strobe_itab_intern(&c->ids, &k, sizeof(k), &id, &added) < 0 || !added || id != c->n)
		return NULL; /* (not added: the caller found no entry, so that cannot be) */
	proc_entry *e = &c->v[c->n++];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	return e;
}

void proc_cache_prune(proc_cache *c, int64_t oldest)
{
	size_t o = 0;
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].seen_interval >= oldest)
			c->v[o++] = c->v[i];
	if (o == c->n)
		return;
	c->n = o;
	/* Slots moved: the index again, from scratch. Out of memory, the entries it could not
	 * index are dropped (read again when next met) rather than left unfindable. */
	strobe_itab_free(&c->ids);
	c->ids.fixed = sizeof(int32_t);
	for (size_t i = 0; i < c->n; i++) {
		int32_t k = (int32_t)c->v[i].pid;
		uint32_t id;
		if (strobe_itab_intern(&c->ids, &k, sizeof(k), &id, NULL) < 0 || id != i) {
			c->n = i;
			break;
		}
	}
}
