/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What agent/offcpu.bpf.c (in the kernel) and agent/offcpu_bpf.c (its loader, in the agent)
 * share: the layout of the maps' keys and values and the counters. Plain fixed-size types only,
 * as both the BPF target and the host compile it. Private to agent/.
 */
#ifndef STROBE_AGENT_OFFCPU_BPF_H
#define STROBE_AGENT_OFFCPU_BPF_H

#define STROBE_OB_MAX_DEPTH 127 /* frames per stack, as perf's sample_max_stack */

/* A thread's last switch-out (in its task-local storage, kept until it exits; read by user
 * space through the task iterator off_threads). */
struct strobe_ob_start {
	__u64 out_ns;          /* switch-out (0 = on CPU now), CLOCK_MONOTONIC */
	__u64 kstack, ustack;  /* stacks (keys of the stack maps), 0 = none */
	__u32 tgid, gen;       /* gen: the generation its stacks belong to */
	__u32 blocked;         /* went to sleep (else preempted: waiting on the run queue) */
	__u32 pad_;
};

/* A stack (value of the stack maps, keyed by a 64-bit hash of its addresses): n addresses,
 * leaf first (what follows them is not cleared). */
struct strobe_ob_stack {
	__u64 n;
	__u64 ips[STROBE_OB_MAX_DEPTH];
};

/* The sums (map `counts`). */
struct strobe_ob_key {
	__u64 kstack, ustack;
	__u32 tgid, tid, gen, pad_;
};
struct strobe_ob_val {
	__u64 off_ns, blocked_ns, switches;
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
	STROBE_OB_NCOUNTERS
};

#endif
