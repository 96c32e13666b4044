// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The agent's in-kernel on-CPU aggregation (loaded by agent/oncpu.c). The perf path copies
 * 16 KiB of the user stack with every sample into a ring, and user space unwinds each copy;
 * here the program on the sampling event (cpu-clock, one per CPU) walks the stacks where they
 * are and only adds one to a count:
 *
 *   kernel stack: bpf_get_stack on the interrupted registers (empty when the CPU was in user
 *     mode), kept once in the generation's stack map (intern, ustack.bpf.h);
 *   user stack: from the thread's saved user registers, by the binaries' unwind tables where
 *     the agent loaded them and by frame pointers elsewhere (user_stack_key, ustack.bpf.h, the
 *     off-CPU and futex programs' walk);
 *   the count of (tgid, tid or 0, kernel stack, user stack) in counts[generation % 2].
 *
 * Generations: user space flips `generation`, waits for every program that may still use the
 * old one to finish (an RCU grace period: see oncpu.c), then reads the old counts map and its
 * stack map with no writer left, and clears them. So no count is lost to the drain, and a count
 * and its stacks are always in the same generation's maps.
 *
 * A new key that finds its map full is counted (STROBE_OC_COUNTS_FULL) and dropped; the counts
 * already in the map keep growing.
 */
#include <linux/types.h>

#include "oncpu.h"
#define USTACK_NCOUNTERS STROBE_OC_NCOUNTERS
#include "ustack.bpf.h"
#include "python.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (see also ustack.bpf.h). */
const volatile __u8 kernel_stacks = 1;
const volatile __u8 per_thread = 1; /* 0: tid 0 in the keys (fewer sums on many-thread hosts) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct strobe_oc_key);
	__type(value, __u64);
} counts0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct strobe_oc_key);
	__type(value, __u64);
} counts1 SEC(".maps");

/* The program's context (include/uapi/linux/bpf_perf_event.h; x86-64's pt_regs first). */
struct bpf_perf_event_data;

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tid = t->pid, tgid = t->tgid;
	if (tid == 0) {
		count(STROBE_OC_IDLE);
		return 0;
	}
	if (filter_tgids && !bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	__u32 gen = generation, zero = 0;
	struct strobe_oc_key k = {.tgid = tgid, .tid = per_thread ? tid : 0};
	if (kernel_stacks) {
		struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
		if (b) {
			/* the interrupted registers: nothing of perf's or this program's above */
			long len = bpf_get_stack(ctx, b->ips, sizeof(b->ips), 0);
			if (len > 0)
				k.kstack = intern(b, (__u32)len / 8, gen);
		}
	}
	if (t->mm && !(t->flags & PF_EXITING)) {
		__u64 sys = 0, leaf = 0;
		__u32 prov = 0;
		k.ustack = user_stack_key(t, gen, &sys, &leaf, 0, &prov);
		if (k.ustack) {
			count(STROBE_OC_USER);
			if (prov)
				count(STROBE_OC_USER_PROV);
		}
		k.pystack = py_stack_key(t, tgid, gen);
	}
	void *map = gen & 1 ? (void *)&counts1 : (void *)&counts0;
	__u64 *v = bpf_map_lookup_elem(map, &k);
	if (!v) {
		__u64 one = 1;
		long rc = bpf_map_update_elem(map, &k, &one, BPF_NOEXIST);
		if (rc == 0) {
			count(STROBE_OC_SAMPLES);
			return 0;
		}
		if (rc != -17 /* EEXIST: another CPU added it meanwhile */) {
			count(STROBE_OC_COUNTS_FULL);
			return 0;
		}
		if (!(v = bpf_map_lookup_elem(map, &k)))
			return 0;
	}
	/* atomic: with per_thread 0, or a key of a process's threads, two CPUs add to one sum */
	__sync_fetch_and_add(v, 1);
	count(STROBE_OC_SAMPLES);
	return 0;
}

/* With a pid filter, children of a target process are targets too; a new process inherits its
 * parent's mappings (see ustack_on_fork). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	ustack_on_fork(parent->tgid, child->tgid);
	py_on_fork(parent->tgid, child->tgid);
	return 0;
}

/* An exec replaces every mapping (see ustack_on_exec). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	ustack_on_exec(p->tgid, 0);
	py_on_exec(p->tgid);
	return 0;
}
