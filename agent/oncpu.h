/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-CPU samples summed in the kernel (agent/oncpu.bpf.c, loaded by agent/oncpu.c): the layout
 * the program and its loader share (plain fixed-size types, as both the BPF target and the host
 * compile it). The loader's API is include/strobe/oncpu.h. Private to agent/.
 *
 * A sample is the cpu-clock perf event's overflow on a CPU (one per period of CPU time, per
 * CPU); the program walks the interrupted thread's kernel stack (bpf_get_stack) and user stack
 * (ustack.bpf.h: unwind tables, frame pointers elsewhere) and adds one to the count of
 * (process, thread or 0, kernel stack, user stack) in the generation's counts map.
 */
#ifndef STROBE_AGENT_ONCPU_H
#define STROBE_AGENT_ONCPU_H

#include <linux/types.h>

#include "offcpu.h"

/* The sums (maps counts0/counts1, by generation). Stacks: keys of the generation's stack
 * map (0: none). */
struct oc_key {
	__u64 kstack, ustack;
	__u32 tgid, tid;
	__u64 pystack; /* key of the generation's pystacks map (python.bpf.h), 0: none */
	__u64 labels;  /* key of the generation's tlsets map: the thread's C SDK label block
			* (tls_labels.bpf.h), 0: none */
	__u32 pre_exec; /* 1: the process had not exec'd since its fork (map `forked`): its
			 * image was its parent's, which an exec may have replaced by the drain */
	__u32 pad_;
};

/* A sample walked before its process's unwind tables were in, or stopped at a row the kernel's
 * walk does not follow (a CFA expression, a signal frame), with copy_unwalked (strobe record): its
 * registers and a copy of its user stack, unwound in user space by the sampler's
 * unwinder as the perf path does, rather than summed with the frame-pointer walk it got (ring
 * `copies`). kips/uips: the kernel's stack, and the program's own user walk, which the unwinder
 * continues from where its walk stops short (STROBE_CG_AUTO). */
#define STROBE_OC_COPY_STACK 16384
#define STROBE_OC_COPY_NREGS 17 /* perf_regs order: AX BX CX DX SI DI BP SP IP, R8-R15 */
struct oc_copy {
	__u32 tgid, tid, gen, nk, nu, stack_len;
	__u32 pre_exec, pad_; /* as oc_key's */
	__u64 labels; /* as oc_key's, in the tlsets of generation gen */
	__u64 regs[STROBE_OC_COPY_NREGS];
	__u64 kips[STROBE_OB_MAX_DEPTH];
	__u64 uips[STROBE_OB_MAX_DEPTH];
	__u8 stack[STROBE_OC_COPY_STACK];
};

/* Counters of the program's own, after the stack walk's (STROBE_OB_*) in the same map. */
enum {
	STROBE_OC_SAMPLES = STROBE_OB_NCOUNTERS, /* samples summed */
	STROBE_OC_IDLE,        /* samples of the idle task (pid 0), not summed */
	STROBE_OC_COUNTS_FULL, /* samples dropped: the counts map was full (a new key) */
	STROBE_OC_USER,        /* samples with a user stack */
	STROBE_OC_USER_PROV,   /* ... walked without the process's mappings (frame pointers) */
	STROBE_OC_PY,          /* samples with a Python stack (python.bpf.h) */
	STROBE_OC_PY_NO_THREAD,/* samples of a Python process's thread with no thread state */
	STROBE_OC_PY_FULL,     /* Python stacks not kept: the pystacks map was full */
	STROBE_OC_TLS,         /* samples with a C SDK label block (tls_labels.bpf.h) */
	STROBE_OC_TLS_TORN,    /* ... read in the middle of a label write: unlabelled */
	STROBE_OC_TLS_FAULT,   /* ... whose page could not be read: unlabelled */
	STROBE_OC_TLS_FULL,    /* label blocks not kept: the tlsets map was full */
	STROBE_OC_FRESH_LOST,  /* new processes not announced: the fresh ring was full (again at
				  their next sample) */
	STROBE_OC_COPIED,      /* samples walked without tables, or stopped by a row, sent with
				  their stack (copies) */
	STROBE_OC_COPY_FULL,   /* ... not: the ring was full (summed as walked instead) */
	STROBE_OC_NCOUNTERS
};

#endif
