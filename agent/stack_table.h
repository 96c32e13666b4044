/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The stacks of one drain of an eBPF program's stack map, by id, in user space. The on-CPU
 * drain (oncpu.c) used to read the two stacks of every sum with a bpf() call each, and then clear
 * the map with more calls; taking the whole map out in batches into this table and answering
 * the sums from it costs a few calls per drain, whatever the number of sums. The addresses of
 * all stacks share one array (a stack is as deep as it is, not 127 frames), indexed by an open
 * addressing table of ids. Private to agent/.
 */
#ifndef STROBE_AGENT_STACK_TABLE_H
#define STROBE_AGENT_STACK_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct stack_table {
	uint64_t *ids;   /* slot -> id (0: empty; the programs never use id 0) */
	uint32_t *at;    /* slot -> first address in ips */
	uint32_t *len;   /* slot -> its frames */
	uint32_t cap, n; /* slots (a power of two, or 0), stacks held */
	uint64_t *ips;   /* every stack's addresses, one after the other */
	size_t nips, cips;
} stack_table;

/* Keeps stack id (n addresses at ips). An id already held keeps its first stack (the maps hold
 * one stack per id). 0, -EINVAL (id 0, or more than UINT32_MAX stacks or addresses) or -ENOMEM. */
int stack_table_add(stack_table *t, uint64_t id, const uint64_t *ips, uint32_t n);
/* The addresses of stack id and their count in *n, or NULL (*n = 0) when it is not held. Valid
 * until the next add or reset. */
const uint64_t *stack_table_get(const stack_table *t, uint64_t id, uint32_t *n);
/* Forgets every stack. Keeps its memory for the next drain unless that grew past a few hundred
 * KiB (a burst of deep stacks): then it is given back, so one burst does not stay resident. */
void stack_table_reset(stack_table *t);
void stack_table_free(stack_table *t);

#endif
