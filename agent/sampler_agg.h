/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's aggregate: stacks with their values, keyed by (pid, tid, lock, frames), where
 * frames are ids into the sampler's table of (mapping, address) pairs, leaf first: the raw
 * material, symbolized only when a profile is asked for. Private to agent/.
 *
 * Each process's entries are chained in the order they were added (the per-process index), so
 * that the agent, which builds one profile per process, visits that process's entries only:
 * walking every entry for every process made an export of a busy host's 500 processes
 * quadratic in its size.
 */
#ifndef STROBE_AGENT_SAMPLER_AGG_H
#define STROBE_AGENT_SAMPLER_AGG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "stack_cap.h"
#include "strobe/profile.h" /* strobe_itab */

/* Value slots of an entry (the profile's sample types are chosen from these). */
enum { V_SAMPLES, V_CPU_NS, V_OFF_NS, V_BLOCKED_NS, V_RUNQ_NS, V_SWITCHES, V_WAITS, V_DELAY_NS,
       NV };

typedef struct sampler_agg_key {
	int32_t pid, tid;
	uint32_t n;
	uint32_t lset;    /* a label set of the sampler's lsets (the C SDK's labels), 0: none */
	uint64_t lock;    /* the lock's address, for lock sums (else 0) */
	uint32_t frame[]; /* n frame ids, leaf first */
} sampler_agg_key;

#define AGG_END UINT32_MAX /* no (more) entry */

typedef struct sampler_agg {
	strobe_itab keys;     /* sampler_agg_key, variable size */
	int64_t *vals;        /* vals[id * NV + slot] */
	size_t cvals;
	/* The per-process index: pid -> slot; per slot, its first and last entry and whether any
	 * entry has lock waits; per entry, the next entry of its process. */
	strobe_itab pids;     /* int32 pid, fixed size */
	struct agg_proc {
		uint32_t first, last;
		bool waits;
	} *procs;
	uint32_t cprocs;
	uint32_t *next;
	size_t cnext;
} sampler_agg;

void agg_init(sampler_agg *a);
void agg_free(sampler_agg *a);
/* Empties the aggregate (a new period), keeping its allocations where it can. */
void agg_reset(sampler_agg *a);

/* Adds v to the entry (pid, tid, lock, lset, frames[0..n)), created when new. n is at most
 * STROBE_STACK_FRAMES (-E2BIG beyond). 0/-errno. */
int agg_add(sampler_agg *a, int32_t pid, int32_t tid, uint64_t lock, uint32_t lset,
	    const uint32_t *frames, uint32_t n, const int64_t v[NV]);

static inline uint32_t agg_count(const sampler_agg *a)
{
	return a->keys.n;
}
static inline const sampler_agg_key *agg_key(const sampler_agg *a, uint32_t id)
{
	return (const sampler_agg_key *)strobe_itab_get(&a->keys, id, NULL);
}
static inline const int64_t *agg_vals(const sampler_agg *a, uint32_t id)
{
	return a->vals + (size_t)id * NV;
}

/* The entries of process pid in the order they were added, or with pid 0 every entry:
 *   for (uint32_t id = agg_first(a, pid); id != AGG_END; id = agg_next(a, pid, id)) */
uint32_t agg_first(const sampler_agg *a, int32_t pid);
static inline uint32_t agg_next(const sampler_agg *a, int32_t pid, uint32_t id)
{
	if (pid)
		return a->next[id];
	return id + 1 < a->keys.n ? id + 1 : AGG_END;
}

/* The processes with entries (with locks: those with lock waits), at most cap, in the order of
 * their first entry. */
unsigned agg_pids(const sampler_agg *a, pid_t *out, unsigned cap, bool locks);

#endif
