/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's events and rings: which perf events it opens for its targets (cpu-clock or
 * cycles for on-CPU samples, sched_switch for switch-outs, sched_wakeup for wake-ups), with what
 * attributes, on which CPU's ring. Private to agent/.
 */
#ifndef STROBE_AGENT_SAMPLER_EVENTS_H
#define STROBE_AGENT_SAMPLER_EVENTS_H

#include <stdbool.h>

#include "event_kinds.h" /* EVK_* */
#include "perf.h"
#include "strobe/sampler.h"

/* The perf_event_attr of one event (kind EVK_*; sideband: it also carries the side records). */
void strobe_sampler_event_attr(const strobe_sampler *s, struct perf_event_attr *a, int kind,
			       bool sideband, bool per_task, int tp_id);

#endif
