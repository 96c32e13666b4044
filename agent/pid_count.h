/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A count per process id: how many of the side-band records that change its code (MMAP2, an
 * exec's COMM, the FORK that made it) the sampler holds, read but not yet processed. A sample of a process with none held can be
 * unwound the moment it is read (its mappings cannot change before its turn); the others wait
 * for their turn. Open addressing over pids; entries are never removed one by one: the whole
 * table is emptied when the last count drops to zero, which happens at nearly every round.
 * Private to agent/.
 */
#ifndef STROBE_AGENT_PID_COUNT_H
#define STROBE_AGENT_PID_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#define STROBE_PID_COUNT_MAX (1u << 16) /* slots at most; past that every pid counts as held */

typedef struct pid_count {
	uint32_t *key;   /* pid + 1; 0 = empty */
	uint32_t *n;
	uint32_t cap;    /* a power of two, or 0 */
	uint32_t used;   /* slots with a key */
	uint64_t total;  /* sum of the counts */
	bool full;       /* could not grow: get() answers "held" for every pid until emptied */
} pid_count;

/* Adds one to pid's count. 0, or -ENOMEM (then the table is marked full, still usable). */
int pid_count_add(pid_count *c, int32_t pid);
/* Takes one from pid's count (nothing when it is zero); empties the table at a total of zero. */
void pid_count_sub(pid_count *c, int32_t pid);
/* pid's count; UINT32_MAX for every pid while the table is full. */
uint32_t pid_count_get(const pid_count *c, int32_t pid);
void pid_count_clear(pid_count *c);
void pid_count_free(pid_count *c);

#endif
