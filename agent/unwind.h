/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The user-stack unwinder: turns the registers and the copy of the user stack that the kernel
 * attaches to a sample (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER) into the list of return
 * addresses, with the unwind tables (.eh_frame through .eh_frame_hdr; .debug_frame, of the
 * binary or of its debug file, for code .eh_frame does not cover) of the modules the process
 * has mapped. Private to agent/.
 *
 * The tables of a binary are parsed once per unwinder, whichever processes map it: a cache of
 * elfutils libdw Dwarf_CFI handles keyed by the binary's build ID (dev/inode/mtime/size where it
 * has none), least-recently-used beyond a byte budget. libdw interprets the CFI (the rules at an
 * address: dwarf_cfi_addrframe, dwarf_frame_cfa, dwarf_frame_register); the walk itself - the
 * x86-64 register set carried from frame to frame, the few DWARF expression operators CFI uses,
 * reading the stack copy (and, past its end, the live process's stack, when what the copy ends
 * with is still in place there), the stop conditions - is ours (unwind.c), so nothing is kept
 * per process but the tracker's mappings. Where a frame's code has no table (JIT code, a binary
 * without .eh_frame such as Go's) the walk follows the frame pointer for that frame.
 */
#ifndef STROBE_AGENT_UNWIND_H
#define STROBE_AGENT_UNWIND_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

/* x86-64 registers requested with PERF_SAMPLE_REGS_USER, in the kernel's perf_regs order: AX BX
 * CX DX SI DI BP SP IP (bits 0-8) and R8-R15 (bits 16-23) - every general register. */
#define STROBE_UNWIND_REGS_MASK 0xff01ffull
#define STROBE_UNWIND_NREGS 17

typedef struct unwinder unwinder;

/* cache_bytes: budget of the table cache (an estimate of what each binary's parsed tables hold,
 * see unwind.c); 0 = 64 MiB. NULL + errno. */
unwinder *unwinder_new(size_t cache_bytes);
void unwinder_free(unwinder *u);
/* Hands the pages of the mapped binaries back to the page cache, keeping everything parsed: the
 * next unwind faults in what it reads again. The agent calls it once an interval, so its
 * resident size stays what one interval's unwinds touch (see unwind.c). */
void unwinder_drop_pages(unwinder *u);
/* Where debug files are looked up by build ID (DIR/.build-id/xx/yyyy.debug) for the
 * .debug_frame of code .eh_frame does not cover; NULL: /usr/lib/debug. */
void unwinder_set_debug_dir(unwinder *u, const char *dir);
/* The per-address rule cache (unwind.c): on by default; off, every frame is stepped through
 * libdw (the tests compare the two). */
void unwinder_set_rule_cache(unwinder *u, bool on);

enum {
	STROBE_UNWIND_COMPLETE = 0,  /* reached the outermost frame (its return address is
					undefined in the tables: _start, clone, clone3) */
	STROBE_UNWIND_STOPPED = 1,   /* no table or frame pointer could go further */
	STROBE_UNWIND_TRUNCATED = 2, /* needed stack memory beyond the copied slice */
	STROBE_UNWIND_FULL = 3,      /* max frames reached */
};

typedef struct unwind_sample {
	int32_t pid, tid;
	const uint64_t *regs;  /* STROBE_UNWIND_NREGS values in perf_regs order (the mask above) */
	const uint8_t *stack;  /* the copy of the stack from regs SP upwards */
	size_t stack_len;      /* bytes valid (the kernel's dyn_size) */
	bool stack_full;       /* the slice was filled: memory past it exists but was not copied */
} unwind_sample;

/*
 * Unwinds one sample of process p (its mappings from tracker t). Writes up to max program
 * counters, leaf first, into pcs, and for each whether it is an activation (the leaf, or the
 * frame interrupted by a signal) rather than a return address. Returns STROBE_UNWIND_* with *n
 * set (possibly 0), or -errno (-ENOENT: the leaf is in no known mapping).
 */
int unwind(unwinder *u, const tracker *t, const proc *p,
		  const unwind_sample *sm, uint64_t *pcs, bool *activation, unsigned max,
		  unsigned *n);

/* Process address - ELF address of a binary whose executable segment is mapped at start from
 * file offset pgoff (the segment's file offset X is at start + X - pgoff, its ELF address is
 * X - p_offset + p_vaddr), from its program headers; false when no executable PT_LOAD holds
 * pgoff, or a non-PIE executable (e_type ET_EXEC) is not where it was linked. */
bool unwind_bias(const Elf64_Phdr *ph, unsigned nph, unsigned e_type, uint64_t start,
			uint64_t pgoff, uint64_t *bias);

typedef struct unwind_stats {
	uint64_t hits;      /* a frame's binary found parsed in the cache */
	uint64_t misses;    /* ... parsed for it (opened, tables located) */
	uint64_t evictions; /* binaries dropped to keep the estimate under the budget */
	uint64_t extended;     /* unwinds that read the stack beyond the copy from the process */
	uint64_t ext_changed;  /* ... refused: the end of the copy had changed in the process */
	uint64_t debug_frame_frames; /* frames stepped by .debug_frame (.eh_frame had no FDE) */
	uint64_t rule_hits;          /* frames stepped by rules from the per-address cache */
	uint32_t debug_frame_bins;   /* binaries whose .debug_frame was opened */
	uint32_t binaries;  /* held now */
	size_t cache_bytes;      /* the estimate the budget applies to, now */
	size_t cache_bytes_peak; /* its highest value */
} unwind_stats;
void unwind_get_stats(const unwinder *u, unwind_stats *st);

#endif
