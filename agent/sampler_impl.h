/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler's state, shared by sampler.c (collection) and sampler_profile.c (turning the
 * aggregate, sampler_agg.h, into a symbolized pprof). Private to agent/.
 */
#ifndef STROBE_AGENT_SAMPLER_IMPL_H
#define STROBE_AGENT_SAMPLER_IMPL_H

#include <poll.h>

#include "event_kinds.h"
#include "offcpu_state.h"
#include "perf.h"
#include "pid_count.h"
#include "proc.h"
#include "record_decode.h"
#include "record_order.h"
#include "sampler_agg.h"
#include "stack_cap.h"
#include "unwind.h"
#include "strobe/clock.h" /* strobe_mono_ns, the sampler's clock */
#include "strobe/sampler.h"
#include "strobe/store.h" /* strobe_labelpair */

/* A frame: an address in a mapping; `call` marks a return address (symbolized at addr - 1,
 * which is inside the call instruction, so the caller's line and inline chain are right). */
typedef struct strobe_frame_key {
	uint64_t addr;
	uint32_t map, call;
} strobe_frame_key;

/* The map of a Python frame (agent/python.c): its addr is an id in strobe_sampler.pynames. */
#define STROBE_MAP_PY 0xfffffff0u

/* Buckets of the unwind-time histogram: 8 per octave, up to 2^32 ns. */
enum { UW_BUCKETS = 256 };

struct strobe_sampler {
	strobe_sampler_opts o;
	pid_t *pids;
	strobe_ring *rings;
	struct pollfd *pfd;
	unsigned nrings;
	int *fds;
	unsigned nfds, cfds;
	event_kinds kinds;       /* event id -> EVK_* (event_kinds.h) */
	uint64_t sample_type[4]; /* per EVK_* */
	int f_prev_state, f_prev_state_size, f_next_pid, f_wake_pid;
	bool cpu_wide;           /* -a: switch-ins from the tracepoint's next_pid */
	bool kernel_excluded;    /* fell back to user-only (no privilege for kernel frames) */
	bool no_wakeups;         /* could not open sched_wakeup: no blocked/run-queue split */
	bool offline;            /* fed by strobe_sampler_feed: never reads /proc */
	bool ext_offcpu;         /* off-CPU values come from elsewhere (the eBPF aggregation) */
	bool lock_only;          /* opened for STROBE_EV_LOCK alone: lock profiles only */
	bool no_cpu_types;       /* offcpu_external without STROBE_EV_CPU: off-CPU types only */

	/* Records read from the rings, held until every ring has been read past their time
	 * (record_order.h), and what a flush of them is at (process_held). */
	rec_order ord;
	uint32_t flushed;
	int64_t drained_ns;
	rec_decoder dec;         /* the records' decoding: kinds and sample types */
	/* Unwinding on arrival (read_rings): the side-band records held, per process, and each
	 * ring's head for the two passes over it. */
	strobe_pid_count held_sb;
	uint64_t *heads;
	int64_t enabled_ns; /* when strobe_sampler_enable enabled the events (0: not yet) */
	unsigned nheads;

	strobe_tracker tr;
	strobe_itab frames;      /* strobe_frame_key, fixed size */
	strobe_itab pynames;     /* Python frames: "function\0file\0" then the line (int64) */
	sampler_agg agg;         /* the stacks and their values (sampler_agg.h) */
	offcpu_state off;        /* the threads' off-CPU intervals (offcpu_state.h), into agg */
	strobe_itab lsets;       /* label sets of agg keys: "key\0value\0..." (id 0: none);
				  * emptied with agg, as span IDs never repeat */
	uint32_t *scratch;       /* frame ids of the stack being resolved */
	int64_t period_ns;
	int64_t event_period_ns; /* the cpu-clock events' (cpu_external: 1 s), else period_ns */
	int64_t start_ns, start_real_ns; /* of the current aggregation period */
	strobe_sampler_stats st;

	/* Unwinding with tables (call_graph dwarf/auto). */
	strobe_unwinder *uw;
	unsigned stack_clock;    /* bytes of stack copied with on-CPU samples (o.stack_size: switches) */
	uint64_t *upcs;          /* the unwound program counters of the current sample */
	bool *uact;
	uint64_t uw_hist[UW_BUCKETS]; /* unwind times: bucket = 8 * log2(ns), 1/8 octave each */
	strobe_unwind_stats uw_st; /* the unwinder's counters, kept when trim frees it */
};

/* Counts the off-CPU intervals still open up to the horizon (before a profile is built). */
void strobe_sampler_flush_open(strobe_sampler *s);
/* The perf_event_attr of one event (kind EVK_*; sideband: it also carries the side records). */
void strobe_sampler_event_attr(const strobe_sampler *s, struct perf_event_attr *a, int kind,
			       bool sideband, bool per_task, int tp_id);
/* Adds off-CPU time measured elsewhere (the agent's in-kernel aggregation, offcpu.c) to the
 * aggregate: the stack is kernel addresses then user addresses, each leaf first; the thread and
 * process are named and their mappings read as for a sample. From then on profiles carry the
 * off-CPU sample types even though the sampler opened no off-CPU events. */
int strobe_sampler_add_offcpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			      uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t off_ns,
			      int64_t blocked_ns, int64_t switches);
/* Adds on-CPU samples counted elsewhere (the eBPF sampling program, oncpu.c): `samples` samples
 * worth cpu_ns of CPU time in all, under kernel then user addresses, each leaf first, as
 * strobe_sampler_add_offcpu. tid 0: summed per process. */
int strobe_sampler_add_oncpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			     uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t samples,
			     int64_t cpu_ns);
/* As strobe_sampler_add_oncpu, where upy[i] != 0 makes user frame i a Python frame (the id
 * strobe_sampler_py_name gave; uips[i] is then not used). */
int strobe_sampler_add_oncpu_py(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
				uint32_t nk, const uint64_t *uips, const uint32_t *upy, uint32_t nu,
				int64_t samples, int64_t cpu_ns);
/* As strobe_sampler_add_oncpu_py, the samples carrying label set lset (from
 * strobe_sampler_labelset; 0: none) as sample labels of the profile. */
int strobe_sampler_add_oncpu_lset(strobe_sampler *s, int32_t pid, int32_t tid,
				  const uint64_t *kips, uint32_t nk, const uint64_t *uips,
				  const uint32_t *upy, uint32_t nu, uint32_t lset, int64_t samples,
				  int64_t cpu_ns);
/* The id of n label pairs (the C SDK's, read in the kernel) for strobe_sampler_add_oncpu_lset,
 * valid until the next strobe_sampler_reset_agg; 0 when n is 0 or out of memory (the samples
 * then go unlabelled, never lost). Keys the profile sets itself (pid, tid, process, thread,
 * lock_addr) are left out. */
uint32_t strobe_sampler_labelset(strobe_sampler *s, const strobe_labelpair *l, unsigned n);
/* The id (> 0) of a Python frame's name, file and line, kept as long as the sampler (at most
 * 1 << 20 of them; beyond, one id for "[python: too many distinct frames]"). */
uint32_t strobe_sampler_py_name(strobe_sampler *s, const char *function, const char *file,
				int64_t line);
/* Adds lock waits measured elsewhere (the agent's futex-wait program, locks.c): waits and their
 * total delay at lock address `lock`, under the waiter's user stack (leaf first). They appear
 * in lock profiles only (strobe_sampler_profile_opts.locks). */
int strobe_sampler_add_lock(strobe_sampler *s, int32_t pid, int32_t tid, uint64_t lock,
			    const uint64_t *uips, uint32_t nu, int64_t waits, int64_t delay_ns);
/* The processes with lock sums in the aggregate (at most cap), in the order of their first entry
 * of any kind (as strobe_sampler_pids). */
unsigned strobe_sampler_lock_pids(const strobe_sampler *s, pid_t *out, unsigned cap);
/* Starts a new aggregation period (frame and mapping tables are kept). */
void strobe_sampler_reset_agg(strobe_sampler *s);
/* After a reset_agg: forgets the processes and threads that exited (tracker_forget), so
 * that a long-running sampler's tables follow the host's live processes. Returns how many
 * processes were forgotten (0 when out of memory: they are tried again next time). */
unsigned strobe_sampler_forget_exited(strobe_sampler *s);

#endif
