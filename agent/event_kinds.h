/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which of the sampler's events a record came from: the kernel's event id (PERF_SAMPLE_IDENTIFIER,
 * PERF_EVENT_IOC_ID) to the event's kind, looked up for every record read. A hash map: a
 * per-task sampler opens each event once per thread and CPU (and inherited child events report
 * the id of the event they were inherited from), so there can be thousands of ids, and a linear
 * scan of them per record cost more than the record. Private to agent/.
 */
#ifndef STROBE_AGENT_EVENT_KINDS_H
#define STROBE_AGENT_EVENT_KINDS_H

#include <stdint.h>

#include "strobe/profile.h" /* strobe_itab */

/* The kinds of event the sampler opens (0: none of ours). */
enum { EVK_CLOCK = 1, EVK_SWITCH, EVK_WAKEUP };

/* The first id of each slot (id modulo 64) is also in a direct-mapped table: the kernel numbers events from
 * one counter, so a sampler's ids are mostly consecutive and the few of a system-wide sampler
 * (three per CPU) are all found there with one compare, as cheaply as the scan it replaced. */
#define EVENT_KINDS_DIRECT 64

typedef struct event_kinds {
	struct {
		uint64_t id;
		uint8_t kind; /* 0: empty */
	} direct[EVENT_KINDS_DIRECT];
	strobe_itab ids; /* uint64 event id -> index into kind */
	uint8_t *kind;
	uint32_t ckind;
} event_kinds;

void event_kinds_init(event_kinds *m);
void event_kinds_free(event_kinds *m);
/* Maps id to kind (EVK_*); an id already mapped keeps its first kind. 0/-ENOMEM. */
int event_kinds_add(event_kinds *m, uint64_t id, int kind);
/* The kind of id, 0 when it is none of ours. */
int event_kinds_get(const event_kinds *m, uint64_t id);
/* How many ids are mapped. */
static inline uint32_t event_kinds_count(const event_kinds *m)
{
	return m->ids.n;
}

#endif
