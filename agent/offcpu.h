/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What agent/offcpu.bpf.c (in the kernel) and agent/offcpu.c (its loader, in the agent)
 * share: the layout of the maps' keys and values and the counters. Plain fixed-size types only,
 * as both the BPF target and the host compile it. Private to agent/.
 */
#ifndef STROBE_AGENT_OFFCPU_LAYOUT_H
#define STROBE_AGENT_OFFCPU_LAYOUT_H

#include "stack_cap.h"

#define STROBE_OB_MAX_DEPTH STROBE_STACK_DEPTH /* frames per stack walk */

/* A thread's last switch-out (in its task-local storage, kept until it exits; read by user
 * space through the task iterator off_threads). */
struct ob_start {
	__u64 out_ns;          /* switch-out (0 = on CPU now), CLOCK_MONOTONIC */
	__u64 kstack, ustack;  /* stacks (keys of the stack maps), 0 = none */
	__u32 tgid, gen;       /* gen: the generation its stacks belong to */
	__u32 blocked;         /* went to sleep (else preempted: waiting on the run queue) */
	__u32 flags;           /* STROBE_OB_START_* */
};
/* ustack was walked without the process's mappings (by frame pointers): to walk again */
#define STROBE_OB_START_PROV 1u

/* A stack (value of the stack maps, keyed by a 64-bit hash of its addresses): n addresses,
 * leaf first (what follows them is not cleared). */
struct ob_stack {
	__u64 n;
	__u64 ips[STROBE_OB_MAX_DEPTH];
};

/* The sums (map `counts`). */
struct ob_key {
	__u64 kstack, ustack;
	__u32 tgid, tid, gen, pad_;
};
struct ob_val {
	__u64 off_ns, blocked_ns, switches;
};

/*
 * The user-stack walk by unwind tables (see offcpu.bpf.c and unwind_rows.h). A row covers the
 * addresses from its pc to the next row's: how to find the caller from an address there.
 */
enum {
	STROBE_OB_ROW_FP = 0,  /* no table here: follow the frame pointer */
	STROBE_OB_ROW_SP = 1,  /* CFA = rsp + cfa_off; return address at CFA - 8 */
	STROBE_OB_ROW_BP = 2,  /* CFA = rbp + cfa_off; return address at CFA - 8 */
	STROBE_OB_ROW_END = 3, /* the outermost frame (return address undefined: _start, clone3) */
	STROBE_OB_ROW_BAD = 4, /* a rule the walk does not follow (an expression, a signal frame) */
	STROBE_OB_ROW_PLT = 5, /* a PLT stub's expression: CFA = rsp + cfa_off, 8 more where
				  (pc & 15) >= rbp_off8 (past the stub's push); the return address
				  at CFA - 8 */
	STROBE_OB_ROW_KIND = 7,
	STROBE_OB_ROW_RBP = 8, /* flag: the caller's rbp is saved at CFA + 8 * rbp_off8 (else
				  rbp is unchanged) */
};
struct ob_row {
	__u32 pc;       /* ELF address of the binary */
	__s16 cfa_off;
	__s8 rbp_off8;
	__u8 kind;
};

/* A process's executable mappings (map `umaps`, by tgid), sorted by start, written by user
 * space: bias = process address - ELF address; rows [row0, row0 + nrows) of map `urows` (none:
 * frame pointers there). loaded_ns: when they were read (bpf_ktime_get_ns), so the program asks
 * again, at most once a second, for an address in none of them (a library loaded since). */
#define STROBE_OB_MAX_MAPS 64
struct ob_map {
	__u64 start, end, bias;
	__u32 row0, nrows;
};
struct ob_maps {
	__u64 loaded_ns;
	__u32 n, pad_;
	struct ob_map m[STROBE_OB_MAX_MAPS];
};

/* A binary with rows, by its file (map `ubins`, written by user space with each binary it loads):
 * for a frame of a process whose mappings are not loaded yet (its first milliseconds after an
 * exec) or are behind (a library mapped since), found from the frame's own mapping in the
 * kernel (bpf_find_vma) rather than from umaps. dev is the kernel's encoding (major << 20 |
 * minor, as the inode's superblock holds it); size guards against a file rewritten in place.
 * bias = vm_start - vm_pgoff * 4096 + adj (adj: p_offset - p_vaddr of its executable segments,
 * registered only when they agree), or for a process's own executable start_code - text (text:
 * its executable segments' lowest p_vaddr); exec: an ET_EXEC file, whose bias must come out 0. */
struct ob_bin_key {
	__u64 dev, ino;
};
struct ob_bin {
	__u64 size, text;
	__s64 adj;
	__u32 row0, nrows;
	__u32 exec, pad_;
};

/* The mappings find_row_by_file learned of a process (map `ufiles`, by tgid, written by the
 * program alone): n of them, the next to replace at next; maps_ns: umaps' loaded_ns when they
 * were learned (0: none loaded), for forgetting them when those change. */
#define STROBE_OB_FILE_SLOTS 8
struct ob_file {
	__u64 start, end, bias;
	__u32 row0, nrows;
	__u64 chk; /* of the others (ob_file_chk): two CPUs writing one slot leave it torn */
};
static inline __u64 ob_file_chk(const struct ob_file *f)
{
	return (f->start * 0x9e3779b97f4a7c15ull) ^ (f->end * 0xc2b2ae3d27d4eb4full) ^
	       f->bias ^ (((__u64)f->row0 << 32) | f->nrows) ^ 0x5354524f4245ull;
}
struct ob_files {
	__u64 maps_ns;
	__u32 n, next;
	struct ob_file f[STROBE_OB_FILE_SLOTS];
};

/* A request for a process's mappings (ring buffer ureq). */
struct ob_req {
	__u64 ns; /* when (bpf_ktime_get_ns) */
	__u32 tgid, pad_;
};

enum {
	STROBE_OB_INTERVALS,    /* off-CPU intervals added */
	STROBE_OB_SHORT,        /* shorter than min_block_ns, not added */
	STROBE_OB_STARTS_FULL,  /* switch-outs not recorded: no task-local storage (no memory) */
	STROBE_OB_COUNTS_FULL,  /* intervals dropped: `counts` full (distinct stacks) */
	STROBE_OB_STACK_ERRORS, /* stacks not kept: the stack map was full */
	STROBE_OB_TARGETS_FULL, /* children not added to the pid filter */
	STROBE_OB_KCACHE_HITS,  /* kernel stacks reused rather than walked (see on_switch) */
	STROBE_OB_UCACHE_HITS,  /* user stacks reused rather than walked (see user_stack_key) */
	STROBE_OB_TABLE_FRAMES, /* user frames stepped by unwind tables */
	STROBE_OB_FP_FRAMES,    /* ... by the frame pointer (no table for the address) */
	STROBE_OB_TABLE_STOPS,  /* walks ended at a row the walk does not follow, or a bad CFA */
	STROBE_OB_NO_MAPS,      /* walks of a process whose mappings were not loaded yet */
	STROBE_OB_REWALKS,      /* ... walked again once they were, the thread still off CPU */
	STROBE_OB_USER_NS,      /* off-CPU ns summed with a user stack */
	STROBE_OB_PROV_NS,      /* ... of which with one walked without the mappings */
	STROBE_OB_VMA_ROWS,     /* user frames whose row was found by their file (ubins), the
				   process's mappings not loaded or behind */
	STROBE_OB_NCOUNTERS
};

#endif
