/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stack resolution and unwinding, the sampler's stage between record decoding and aggregation
 * (perf's callchain): a stack as the kernel or an eBPF program reports it becomes a list of
 * frame ids, leaf first, each an address in one of its process's mappings (sampler_frame_key,
 * interned in the sampler's frame table) looked up in the process tracker (proc.h).
 *
 *   - A sample's call chain: the kernel part as the kernel walked it (kept when kernel frames
 *     are asked for); the user part walked by the unwinder (unwind.h: the sample's registers
 *     and stack copy, with the binaries' unwind tables) when the sample carries a copy, else,
 *     or where that walk stopped short (auto), the kernel's frame-pointer chain.
 *   - A stack summed elsewhere (the eBPF programs' kernel and user program counters, with
 *     Python frames among the user ones).
 *
 * Every frame but the leaf is a return address (`call`: named at addr - 1, inside the call).
 *
 * An address of a live process in none of the mappings known for it has the process's
 * /proc/PID/maps read again, once per stack, and is looked up once more:
 *   - the user leaf, which ran, at most once a second per process: code mapped before
 *     recording began, or made executable by mprotect, which no record reports;
 *   - any frame of a process with a record that changes its code (an mmap, an exec) read from
 *     the rings since /proc was last read: once per such record. A stack summed in the kernel
 *     is resolved when it is read, ahead of the records still waiting for their turn (a
 *     command that has just exec'd has its libc in /proc before its MMAP2 record is
 *     processed), and its reader reads the rings first (sampler_read_sideband), so every
 *     mapping the stack can be in is either known or announced by such a record;
 *   - any frame when the tracker's view of the process may be behind /proc otherwise (a record
 *     changed its mappings since /proc was last read, or one of its records that does is
 *     held), at most every STACK_STALE_NS per process.
 * A caller that misses otherwise is mostly a frame-pointer walk gone astray in code built
 * without frame pointers: re-reading /proc for each of those was most of the recorder's CPU.
 *
 * Private to agent/; the sampler owns one (sampler_state.h) and says what it points at.
 */
#ifndef STROBE_AGENT_STACK_RESOLVE_H
#define STROBE_AGENT_STACK_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pid_count.h"
#include "proc.h"
#include "record_decode.h"
#include "stack_cap.h"
#include "unwind.h"
#include "strobe/sampler.h" /* strobe_sampler_stats, STROBE_CG_* */

/* A frame: an address in a mapping; `call` marks a return address (symbolized at addr - 1,
 * which is inside the call instruction, so the caller's line and inline chain are right). */
typedef struct sampler_frame_key {
	uint64_t addr;
	uint32_t map, call;
} sampler_frame_key;

/* The map of a Python frame (agent/python.c): its addr is an id in strobe_sampler.pynames. */
#define STROBE_MAP_PY 0xfffffff0u

/* Buckets of the unwind-time histogram: 8 per octave, up to 2^32 ns. */
enum { UW_BUCKETS = 256 };

#define STACK_LEAF_RESCAN_NS 1000000000 /* an unmapped leaf: /proc again at most this often */
#define STACK_STALE_NS 100000000        /* any unmapped frame of a process whose mappings may
					   be behind /proc: at most this often */

typedef struct stack_resolver {
	/* Set by the owner; none owned. */
	tracker *tr;         /* the processes and their mappings */
	strobe_itab *frames;        /* sampler_frame_key -> frame id (fixed size) */
	strobe_sampler_stats *st;   /* unknown_pid and the unwind_* counters */
	const pid_count *held; /* side-band records held per process (NULL: none) */
	bool kernel;                /* keep kernel frames */
	unsigned call_graph;        /* STROBE_CG_* */

	/* Owned. */
	uint32_t *ids;              /* frame ids of the stack last resolved (STROBE_STACK_FRAMES) */
	unwinder *uw;        /* NULL: no unwinding with tables, or trimmed */
	uint64_t *upcs;             /* the unwound program counters of the current sample */
	bool *uact;                 /* ... and whether each is an activation */
	uint64_t uw_hist[UW_BUCKETS]; /* unwind times: bucket = 8 * log2(ns), 1/8 octave each */
	unwind_stats uw_st;  /* the unwinder's counters, kept when trim frees it */
	uint64_t rereads;           /* /proc/PID/maps read again for an address in no mapping */
} stack_resolver;

/* Sets r up (zeroing it first: fill in the fields above after) with an unwinder when unwind,
 * its table cache bounded by cache_bytes (0: its default). 0/-ENOMEM. */
int stack_resolver_init(stack_resolver *r, bool unwind, size_t cache_bytes);
/* Gives r its unwinder (and scratch) if it has none yet: for a resolver set up without one
 * that meets its first stack copy. 0/-ENOMEM (r then still without one). */
int stack_resolver_add_unwinder(stack_resolver *r, size_t cache_bytes);
void stack_resolver_free(stack_resolver *r);

/* The process pid, created when absent, with its mappings read from /proc when first met
 * (counted in st->unknown_pid when that fails). NULL on ENOMEM. */
proc *stack_proc(stack_resolver *r, int32_t pid);

/* Resolves a sample of pid into frame ids, leaf first, in r->ids; returns how many. pre: its
 * user stack unwound when it was read (NULL: unwind now, when r unwinds). max_stack: frames
 * per unwound user walk (at most STROBE_STACK_DEPTH). */
uint32_t stack_resolve_sample(stack_resolver *r, int32_t pid, const rec_sample *sm,
			      const rec_unwound *pre, uint32_t max_stack);

/* Resolves a stack summed elsewhere into r->ids; returns how many. kips: nk kernel program
 * counters (kept when r->kernel), then nu user ones; upy (may be NULL): where non-zero, a Python
 * frame (an id in the sampler's pynames) in place of uips[i]. Each list ends at its first zero
 * (uips[i] and upy[i] both zero). pre_exec: summed while the process ran the image it was
 * forked with, which an exec has replaced since (its frames are named by that image: proc.h's
 * pre_vma). */
uint32_t stack_resolve_summed(stack_resolver *r, int32_t pid, const uint64_t *kips, uint32_t nk,
			      const uint64_t *uips, const uint32_t *upy, uint32_t nu,
			      bool pre_exec);

/* The user part of a sample's stack with unwind tables, into r->upcs / r->uact: how many
 * program counters to use there, or -1 to keep the kernel's frame-pointer chain (fp[0..nfp)).
 * *p: pid's process (looked up when NULL). */
int stack_unwind_user(stack_resolver *r, int32_t pid, proc **p, const rec_sample *sm,
		      const uint64_t *fp, uint32_t nfp, uint32_t max);

/* The user part of the kernel's call chain, leaf first, into fp; returns how many. */
uint32_t stack_user_chain(const rec_sample *sm, uint64_t fp[STROBE_STACK_FRAMES]);

/* The unwind time below which a share q (0..1) of the unwinds took (approximate). */
uint64_t stack_unwind_pct(const stack_resolver *r, double q);
/* The unwinder's counters, also after stack_resolver_trim. */
void stack_unwind_stats(const stack_resolver *r, unwind_stats *us);
/* Frees the unwinder (its counters kept): after the last sample. */
void stack_resolver_trim(stack_resolver *r);

#endif
