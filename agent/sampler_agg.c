// SPDX-License-Identifier: Apache-2.0
/*
 * The sampler's aggregate with its per-process index (sampler_agg.h). An entry's values are
 * summed with saturation: only corrupt input can overflow them, and a saturated sum is still
 * the largest in its profile rather than a negative one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_agg.h"

void agg_init(sampler_agg *a)
{
	memset(a, 0, sizeof(*a));
	a->pids.fixed = sizeof(int32_t);
}

void agg_free(sampler_agg *a)
{
	strobe_itab_free(&a->keys);
	strobe_itab_free(&a->pids);
	free(a->vals);
	free(a->procs);
	free(a->next);
	memset(a, 0, sizeof(*a));
}

void agg_reset(sampler_agg *a)
{
	strobe_itab_free(&a->keys);
	strobe_itab_free(&a->pids);
	a->pids.fixed = sizeof(int32_t);
	if (a->vals)
		memset(a->vals, 0, a->cvals * NV * sizeof(*a->vals));
}

/* Room for entry id's values (zeroed) and its link. */
static int grow_entries(sampler_agg *a, uint32_t id)
{
	if (id >= a->cvals) {
		size_t nc = a->cvals ? a->cvals * 2 : 1024;
		while (nc <= id)
			nc *= 2;
		int64_t *nv = realloc(a->vals, nc * NV * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		memset(nv + a->cvals * NV, 0, (nc - a->cvals) * NV * sizeof(*nv));
		a->vals = nv;
		a->cvals = nc;
	}
	if (id >= a->cnext) {
		size_t nc = a->cnext ? a->cnext * 2 : 1024;
		while (nc <= id)
			nc *= 2;
		uint32_t *nn = realloc(a->next, nc * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		a->next = nn;
		a->cnext = nc;
	}
	return 0;
}

/* Links new entry id at the end of its process's chain. */
static int link_entry(sampler_agg *a, int32_t pid, uint32_t id)
{
	uint32_t slot;
	bool added;
	int rc = strobe_itab_intern(&a->pids, &pid, sizeof(pid), &slot, &added);
	if (rc < 0)
		return rc;
	if (slot >= a->cprocs) {
		uint32_t nc = a->cprocs ? a->cprocs * 2 : 64;
		while (nc <= slot)
			nc *= 2;
		struct agg_proc *np = realloc(a->procs, nc * sizeof(*np));
		if (!np)
			return -ENOMEM;
		a->procs = np;
		a->cprocs = nc;
	}
	a->next[id] = AGG_END;
	if (added)
		a->procs[slot] = (struct agg_proc){.first = id, .last = id};
	else
		a->next[a->procs[slot].last] = id, a->procs[slot].last = id;
	return 0;
}

int agg_add(sampler_agg *a, int32_t pid, int32_t tid, uint64_t lock, uint32_t lset,
	    const uint32_t *frames, uint32_t n, const int64_t v[NV])
{
	uint8_t buf[sizeof(sampler_agg_key) + STROBE_STACK_FRAMES * sizeof(uint32_t)];
	if (n > STROBE_STACK_FRAMES)
		return -E2BIG;
	size_t len = sizeof(sampler_agg_key) + n * sizeof(uint32_t);
	sampler_agg_key *k = (sampler_agg_key *)buf;
	k->pid = pid;
	k->tid = tid;
	k->n = n;
	k->lset = lset;
	k->lock = lock;
	memcpy(k->frame, frames, n * sizeof(uint32_t));
	uint32_t id;
	bool added;
	int rc = strobe_itab_intern(&a->keys, k, len, &id, &added);
	if (rc < 0)
		return rc;
	if ((rc = grow_entries(a, id)) < 0)
		return rc;
	/* An entry whose link fails stays in the table, out of every chain: its process's
	 * profile lacks it, as it would lack an entry that could not be added at all. */
	if (added && (rc = link_entry(a, pid, id)) < 0)
		return rc;
	int64_t *x = a->vals + (size_t)id * NV;
	for (int i = 0; i < NV; i++)
		if (__builtin_add_overflow(x[i], v[i], &x[i]))
			x[i] = INT64_MAX;
	if (x[V_WAITS]) {
		uint32_t slot = strobe_itab_find(&a->pids, &pid, sizeof(pid));
		if (slot != UINT32_MAX)
			a->procs[slot].waits = true;
	}
	return 0;
}

uint32_t agg_first(const sampler_agg *a, int32_t pid)
{
	if (!pid)
		return a->keys.n ? 0 : AGG_END;
	uint32_t slot = strobe_itab_find(&a->pids, &pid, sizeof(pid));
	return slot == UINT32_MAX ? AGG_END : a->procs[slot].first;
}

unsigned agg_pids(const sampler_agg *a, pid_t *out, unsigned cap, bool locks)
{
	unsigned n = 0;
	for (uint32_t slot = 0; slot < a->pids.n && n < cap; slot++) {
		if (locks && !a->procs[slot].waits)
			continue;
		int32_t pid;
		memcpy(&pid, strobe_itab_get(&a->pids, slot, NULL), sizeof(pid));
		out[n++] = pid;
	}
	return n;
}
