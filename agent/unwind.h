/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The user-stack unwinder: turns the registers and the copy of the user stack that the kernel
 * attaches to a sample (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER) into the list of return
 * addresses, with the unwind tables (.eh_frame, or .debug_frame in the binary itself) of the
 * modules the process has mapped. Private to agent/.
 *
 * Driven by elfutils libdwfl, the way perf's unwind-libdw.c does it: one Dwfl per process,
 * modules reported from the tracker's executable mappings, dwfl_attach_state with callbacks that
 * read memory from the stack copy and hand over the sampled registers, dwfl_getthread_frames.
 * Unlike perf, the Dwfl of a process is kept between samples (attached once, the callbacks
 * read the current sample through the session), so a binary's tables are opened once per
 * process and the FDEs libdw decodes stay cached. Sessions are rebuilt when the process's
 * mappings change and evicted least-recently-used beyond a memory budget.
 *
 * For frames whose code has no unwind table (JIT code, a module that cannot be opened), libdwfl
 * on x86-64 falls back to the frame-pointer chain (its backend's unwind hook), so one walk is
 * already the per-frame hybrid of tables where they exist and frame pointers where not.
 */
#ifndef STROBE_AGENT_UNWIND_H
#define STROBE_AGENT_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

/* x86-64 registers requested with PERF_SAMPLE_REGS_USER, in the kernel's perf_regs order: AX BX
 * CX DX SI DI BP SP IP (bits 0-8) and R8-R15 (bits 16-23) - every general register. */
#define STROBE_UNWIND_REGS_MASK 0xff01ffull
#define STROBE_UNWIND_NREGS 17

typedef struct strobe_unwinder strobe_unwinder;

/* cache_bytes: budget for the per-process sessions (an estimate: the unwind sections of every
 * module reported plus a fixed cost per session and module); 0 = 64 MiB. NULL + errno. */
strobe_unwinder *strobe_unwinder_new(size_t cache_bytes);
void strobe_unwinder_free(strobe_unwinder *u);

enum {
	STROBE_UNWIND_COMPLETE = 0,  /* reached the outermost frame (its return address is
					undefined in the tables: _start, clone, clone3) */
	STROBE_UNWIND_STOPPED = 1,   /* no table or frame pointer could go further */
	STROBE_UNWIND_TRUNCATED = 2, /* needed stack memory beyond the copied slice */
	STROBE_UNWIND_FULL = 3,      /* max frames reached */
};

typedef struct strobe_unwind_sample {
	int32_t pid, tid;
	const uint64_t *regs;  /* STROBE_UNWIND_NREGS values in perf_regs order (the mask above) */
	const uint8_t *stack;  /* the copy of the stack from regs SP upwards */
	size_t stack_len;      /* bytes valid (the kernel's dyn_size) */
	bool stack_full;       /* the slice was filled: memory past it exists but was not copied */
} strobe_unwind_sample;

/*
 * Unwinds one sample of process p (its mappings from tracker t). Writes up to max program
 * counters, leaf first, into pcs, and for each whether it is an activation (the leaf, or the
 * frame interrupted by a signal) rather than a return address. Returns STROBE_UNWIND_* with *n
 * set (possibly 0), or -errno (no usable module, out of memory).
 */
int strobe_unwind(strobe_unwinder *u, const strobe_tracker *t, const strobe_proc *p,
		  const strobe_unwind_sample *sm, uint64_t *pcs, bool *activation, unsigned max,
		  unsigned *n);

/* Drops the session of a process (it exited). */
void strobe_unwind_forget(strobe_unwinder *u, int32_t pid);

typedef struct strobe_unwind_stats {
	uint64_t sessions_built, sessions_evicted;
	uint32_t sessions;      /* held now */
	size_t cache_bytes;     /* the estimate the budget applies to, now */
	size_t cache_bytes_peak; /* its highest value */
} strobe_unwind_stats;
void strobe_unwind_get_stats(const strobe_unwinder *u, strobe_unwind_stats *st);

#endif
