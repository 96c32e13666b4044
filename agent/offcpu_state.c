// SPDX-License-Identifier: Apache-2.0
/*
 * The off-CPU thread state machine (see offcpu_state.h): switch-outs open an interval per
 * thread, wake-ups mark where its blocked part ends, switch-ins close it into the aggregate.
 */
#include <stdlib.h>
#include <string.h>

#include "offcpu_state.h"

/* Closes (or, with partial, counts so far) a thread's off-CPU interval up to `t`. */
static void close_interval(offcpu_state *m, proc_thread *th, int64_t t, bool partial)
{
	int64_t total = t - th->out_ns;
	if (total < 0)
		total = 0;
	if (partial && total < m->min_block_ns)
		return; /* not long enough yet to count; stays open */
	int64_t bl = 0;
	if (th->blocked)
		bl = th->wake_ns > th->out_ns && th->wake_ns <= t ? th->wake_ns - th->out_ns : total;
	if (partial) {
		/* Counted up to t; the rest continues from t (run-queue if woken already). */
		if (th->wake_ns && th->wake_ns <= t)
			th->blocked = false;
		th->wake_ns = 0;
		th->out_ns = t;
	} else {
		th->out = false;
	}
	if (!partial && total < m->min_block_ns) {
		m->st->short_blocks++;
		return;
	}
	int64_t v[NV] = {0};
	v[V_OFF_NS] = total;
	v[V_BLOCKED_NS] = bl;
	v[V_RUNQ_NS] = total - bl;
	v[V_SWITCHES] = partial ? 0 : 1;
	if (!partial)
		m->st->switches++;
	agg_add(m->agg, th->pid, th->tid, 0, 0, th->stack, th->nstack, v);
}

void offcpu_switch_out(offcpu_state *m, proc_thread *th, const uint32_t *stack, uint32_t n,
		       int64_t t, bool blocked)
{
	if (th->out) { /* a switch-in we never saw (lost): do not count the gap */
		th->out = false;
		m->st->unmatched++;
	}
	uint32_t *st = realloc(th->stack, (n ? n : 1) * sizeof(uint32_t));
	if (!st)
		return; /* the interval is not followed; nothing counted wrong */
	memcpy(st, stack, n * sizeof(uint32_t));
	th->stack = st;
	th->nstack = n;
	th->out = true;
	th->back = false;
	th->out_ns = t;
	th->wake_ns = 0;
	th->blocked = blocked;
}

/* System-wide, one switch is usually reported twice, the sched_switch sample first: the second
 * finds the thread back on its CPU already (back) and is no orphan. */
void offcpu_switch_in(offcpu_state *m, int32_t tid, int64_t t)
{
	proc_thread *th = tracker_thread(m->tr, tid, 0, false);
	if (th && th->out) {
		close_interval(m, th, t, false);
		th->back = true;
	} else if (th && th->stack && !th->back) {
		m->st->orphan_in++;
	}
}

void offcpu_wakeup(offcpu_state *m, int32_t tid, int64_t t)
{
	proc_thread *th = tracker_thread(m->tr, tid, 0, false);
	if (th && th->out && th->blocked && !th->wake_ns)
		th->wake_ns = t;
}

void offcpu_flush_open(offcpu_state *m, int64_t horizon)
{
	for (uint32_t i = 0; i < m->tr->tids.n; i++) {
		proc_thread *th = &m->tr->threads[i];
		if (th->out && th->tid)
			close_interval(m, th, horizon, true);
	}
}
