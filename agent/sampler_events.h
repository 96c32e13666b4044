/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's events and rings (perf's evlist): which perf events it opens for its targets,
 * with what attributes, and the per-CPU ring each writes into.
 *
 *   cpu-clock (or cycles)  on-CPU samples with the call chain; the first event of each target on
 *                          a CPU also carries the side-band records (mmap2, comm, fork/exit and,
 *                          with off-CPU, context switches).
 *   sched:sched_switch     one sample per switch-out, with the call chain, prev_state and
 *                          next_pid.
 *   sched:sched_wakeup     cpu-wide, no call chain: when a blocked thread became runnable.
 *
 * Per-task targets open each event per (thread, CPU) with inherit, rescanning a process's
 * threads until none appeared meanwhile; system-wide targets per CPU. Every event of a CPU writes
 * into that CPU's ring (PERF_EVENT_IOC_SET_OUTPUT), and each event's id is mapped to its kind
 * (event_kinds.h) for the decoder. Private to agent/; the sampler owns one (sampler_state.h).
 */
#ifndef STROBE_AGENT_SAMPLER_EVENTS_H
#define STROBE_AGENT_SAMPLER_EVENTS_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "event_kinds.h" /* EVK_* */
#include "perf.h"
#include "strobe/sampler.h"

typedef struct sampler_events {
	/* Set by the sampler before opening. */
	const strobe_sampler_opts *o; /* the sampler's options, normalized (not owned) */
	uint64_t clock_period_ns;     /* the cpu-clock events' sample period */
	unsigned stack_clock;         /* bytes of stack copied with on-CPU samples */
	uint64_t sample_type[4];      /* per EVK_* (sampler_events_init) */
	/* What opening found. */
	event_kinds kinds;            /* event id -> EVK_* */
	int f_prev_state, f_prev_state_size, f_next_pid, f_wake_pid; /* tracepoint fields */
	bool kernel_excluded;         /* fell back to user-only (no privilege for kernel frames) */
	bool no_wakeups;              /* no sched_wakeup: no blocked/run-queue split */
	int *fds;
	unsigned nfds, cfds;
	perf_ring *rings;           /* one per online CPU, in the order of pfd */
	struct pollfd *pfd;           /* the rings', then room for SAMPLER_EXTRA_FDS more */
	unsigned nrings;
} sampler_events;

/* Whether samples carry registers and a stack copy to unwind. */
static inline bool sampler_copies_stack(const strobe_sampler_opts *o)
{
	return o->call_graph == STROBE_CG_DWARF || o->call_graph == STROBE_CG_AUTO;
}

/* Before anything else: the sample types of each kind for options o (kept, not copied). */
void sampler_events_init(sampler_events *ev, const strobe_sampler_opts *o);
/* Opens the events of o->events for the targets (o->all, else o->pids), disabled (or enabled
 * at exec), and maps the rings. 0/-errno with err set; what was opened is left for
 * sampler_events_close. */
int sampler_events_open(sampler_events *ev, strobe_err *err);
void sampler_events_close(sampler_events *ev);
/* PERF_EVENT_IOC_ENABLE or _DISABLE on every event (a thread gone meanwhile is no error). */
int sampler_events_ioctl(sampler_events *ev, unsigned long req);
/* Waits up to timeout_ms for a ring to reach its watermark, or for one of the nextra (at most
 * SAMPLER_EXTRA_FDS) fds of extra to be ready (their revents set). 0/-errno (EINTR is no
 * error). */
#define SAMPLER_EXTRA_FDS 4
int sampler_events_poll(sampler_events *ev, int timeout_ms, struct pollfd *extra, unsigned nextra);

/* The perf_event_attr of one event (kind EVK_*; sideband: it also carries the side records). */
void sampler_events_attr(const sampler_events *ev, struct perf_event_attr *a, int kind,
			 bool sideband, bool per_task, int tp_id);
/* The same, for a sampler (its tests ask what it would open). */
void sampler_event_attr(const strobe_sampler *s, struct perf_event_attr *a, int kind,
			       bool sideband, bool per_task, int tp_id);

#endif
