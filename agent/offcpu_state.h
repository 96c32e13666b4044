/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's off-CPU thread state machine: per thread, the interval open since it left the
 * CPU (its stack then, whether it went to sleep or was preempted), closed when it comes back
 * and added to the aggregate as off-CPU time, split at its wake-up into blocked time (asleep)
 * and run-queue time (runnable, waiting for a CPU). The state lives in the tracker's
 * proc_thread (out, out_ns, wake_ns, blocked, back, stack); this module is what moves it.
 * Private to agent/.
 *
 * Fed from sched_switch samples (switch-outs; system-wide also switch-ins, from next_pid),
 * switch-in records and sched_wakeup samples, in time order (record_order.h). Nothing here
 * reads /proc or the rings, so a unit test drives it with events whose answer is known.
 */
#ifndef STROBE_AGENT_OFFCPU_STATE_H
#define STROBE_AGENT_OFFCPU_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "proc.h"
#include "sampler_agg.h"
#include "strobe/sampler.h" /* strobe_sampler_stats */

typedef struct offcpu_state {
	tracker *tr;       /* the threads (not owned) */
	sampler_agg *agg;         /* where closed intervals go (not owned) */
	strobe_sampler_stats *st; /* switches, short_blocks, orphan_in, unmatched (not owned) */
	int64_t min_block_ns;     /* shorter intervals are counted in short_blocks only */
} offcpu_state;

/* Whether sched_switch's prev_state says the thread went to sleep: 0 is still runnable (a
 * yield), TASK_REPORT_MAX (0x100 and up) preempted, the low bits a sleeping state. */
static inline bool offcpu_prev_state_blocked(uint64_t prev_state)
{
	return (prev_state & 0xff) != 0;
}

/* Thread th left the CPU at t with stack[0..n) (frame ids, leaf first), asleep when blocked.
 * An interval still open (its switch-in lost) is dropped and counted as unmatched. */
void offcpu_switch_out(offcpu_state *m, proc_thread *th, const uint32_t *stack, uint32_t n,
		       int64_t t, bool blocked);
/* Thread tid came back on a CPU at t: its interval is closed and added. A second report of the
 * same switch-in (system-wide, sched_switch's next_pid and the switch record) is ignored; a
 * switch-in of a thread seen switching out before but never since is counted as an orphan. */
void offcpu_switch_in(offcpu_state *m, int32_t tid, int64_t t);
/* Thread tid was woken at t: the rest of its interval is run-queue time. */
void offcpu_wakeup(offcpu_state *m, int32_t tid, int64_t t);
/* Counts the intervals still open (at least min_block_ns long) up to horizon, and continues
 * them from there: called before a profile is built, so that a thread asleep for the whole
 * period shows. */
void offcpu_flush_open(offcpu_state *m, int64_t horizon);

#endif
