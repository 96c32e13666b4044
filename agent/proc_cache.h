/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the agent knows of each process it exports (its identity: service, command line,
 * container, from strobe_proc_info_read), by pid. Looked up once per exported process per
 * interval and at every process's first sample: a hash index (strobe_itab, pid -> slot) in
 * front of the array, where a linear scan made a busy host's export quadratic in its processes.
 * Private to agent/.
 */
#ifndef STROBE_AGENT_PROC_CACHE_H
#define STROBE_AGENT_PROC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/agent.h"   /* strobe_proc_info */
#include "strobe/profile.h" /* strobe_itab */

typedef struct proc_entry {
	pid_t pid;
	int64_t read_ns, seen_interval;
	bool gone;
	strobe_proc_info info;
} proc_entry;

typedef struct proc_cache {
	proc_entry *v;
	size_t n, cap;
	strobe_itab ids; /* int32 pid -> index into v; rebuilt when entries are pruned */
} proc_cache;

void proc_cache_free(proc_cache *c);
/* The entry of pid, or NULL. Valid until the next add or prune. */
proc_entry *proc_cache_find(proc_cache *c, pid_t pid);
/* A new, zeroed entry for pid (which has none), or NULL when out of memory. */
proc_entry *proc_cache_add(proc_cache *c, pid_t pid);
/* Forgets the entries last seen before interval `oldest`, keeping the others in their order. */
void proc_cache_prune(proc_cache *c, int64_t oldest);

#endif
