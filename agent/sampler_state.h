/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's state, private to sampler.c (collection) and sampler_profile.c (turning the
 * aggregate, sampler_agg.h, into a symbolized pprof). The profile builder reads most of it: the
 * aggregate, the frame table, the Python names, the label sets, the tracker's processes and
 * mappings, the period and the options that choose the sample types; accessors for each would be
 * this struct again, field by field. Everyone else in agent/ uses sampler_ext.h (adding what
 * the eBPF programs measured, the tracker) and the small headers of the stages.
 */
#ifndef STROBE_AGENT_SAMPLER_STATE_H
#define STROBE_AGENT_SAMPLER_STATE_H

#include "event_kinds.h"
#include "offcpu_state.h"
#include "perf.h"
#include "pid_count.h"
#include "proc.h"
#include "record_decode.h"
#include "record_order.h"
#include "sampler_events.h"
#include "sampler_agg.h"
#include "sampler_ext.h"
#include "stack_cap.h"
#include "stack_resolve.h" /* the frames, sampler_frame_key */
#include "unwind.h"
#include "strobe/clock.h" /* strobe_mono_ns, the sampler's clock */
#include "strobe/sampler.h"
#include "strobe/store.h" /* strobe_labelpair */

struct strobe_sampler {
	strobe_sampler_opts o;
	pid_t *pids;
	sampler_events ev;       /* the events and rings (sampler_events.h) */
	bool cpu_wide;           /* -a: switch-ins from the tracepoint's next_pid */
	bool offline;            /* fed by strobe_sampler_feed: never reads /proc */
	bool ext_offcpu;         /* off-CPU values come from elsewhere (the eBPF aggregation) */
	bool lock_only;          /* opened for STROBE_EV_LOCK alone: lock profiles only */
	bool no_cpu_types;       /* offcpu_external without STROBE_EV_CPU: off-CPU types only */

	/* Records read from the rings, held until every ring has been read past their time
	 * (record_order.h), and what a flush of them is at (process_held). */
	rec_order ord;
	uint32_t flushed;
	int64_t drained_ns;
	int64_t rec_ns; /* the time of the side-band record being processed (0: none, unknown) */
	rec_decoder dec;         /* the records' decoding: kinds and sample types */
	/* Unwinding on arrival (read_rings): the side-band records held, per process, and each
	 * ring's head for the two passes over it. */
	pid_count held_sb;
	uint64_t *heads;
	int64_t enabled_ns; /* when strobe_sampler_enable enabled the events (0: not yet) */
	unsigned nheads;

	tracker tr;
	strobe_itab frames;      /* sampler_frame_key, fixed size */
	strobe_itab pynames;     /* Python frames: "function\0file\0" then the line (int64) */
	sampler_agg agg;         /* the stacks and their values (sampler_agg.h) */
	offcpu_state off;        /* the threads' off-CPU intervals (offcpu_state.h), into agg */
	strobe_itab lsets;       /* label sets of agg keys: "key\0value\0..." (id 0: none);
				  * emptied with agg, as span IDs never repeat */
	int64_t period_ns;
	int64_t event_period_ns; /* the cpu-clock events' (cpu_external: 1 s), else period_ns */
	int64_t start_ns, start_real_ns; /* of the current aggregation period */
	strobe_sampler_stats st;

	stack_resolver rs;       /* stacks into frame ids, unwinding included (stack_resolve.h) */
};

/* Counts the off-CPU intervals still open up to the horizon (before a profile is built). */
void sampler_flush_open(strobe_sampler *s);
#endif
