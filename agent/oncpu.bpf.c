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
#include "tls_labels.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (see also ustack.bpf.h). */
const volatile __u8 kernel_stacks = 1;
const volatile __u8 per_thread = 1; /* 0: tid 0 in the keys (fewer sums on many-thread hosts) */
const volatile __u8 announce_new = 0; /* 1: new processes go to the ring `fresh` (opts.fresh) */
const volatile __u8 ask_at_exec = 0;  /* 1: a new image's tables asked for at its exec */
const volatile __u8 copy_unwalked = 0; /* 1: a sample the tables did not walk goes to `copies` */
const volatile __u8 copy_all = 0;      /* 1: so does every other one (tests of the copies) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct oc_key);
	__type(value, __u64);
} counts0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct oc_key);
	__type(value, __u64);
} counts1 SEC(".maps");

/* Processes met for the first time (since their exec), for user space to read their identity
 * (environment, cgroup) while they run rather than at the interval's end, when a short-lived one
 * is gone: `seen` remembers them, and each new one is written to the ring `fresh`, whose fd
 * wakes user space (oncpu.c): the agent sleeps until something is new, where it woke ten times
 * a second to walk a hash map of them with bpf() calls, mostly to find it empty. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024); /* 4096 tgids of 16 bytes with the ring's header */
} fresh SEC(".maps");

/* Processes forked since the program was loaded that have not exec'd since: their samples run
 * the image they were forked with (the parent's), and a sum carries no time to tell user
 * space which image its addresses are in, once an exec has replaced it by the drain (a shell's
 * children: their fork-to-exec work, copy-on-write faults included, is a visible share of a
 * busy host's). LRU: one that exits without an exec is forgotten at its exit, or pushed out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
} forked SEC(".maps");

/* Samples walked without their process's tables, or stopped at a row the walk cannot follow,
 * with their stacks (struct oc_copy): sized by
 * the loader (a page when copy_unwalked is off), read at every collect; no wake-ups. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} copies SEC(".maps");

/* The C SDK's per-thread labels (sdk/strobe_labels.h). User space puts each process that
 * publishes a TLS offset in tlsprocs (oncpu.c); a sample of one of its threads copies the
 * thread's block (tls_labels.bpf.h) and keys its count by a hash of the used slots, the block
 * itself kept once per generation in tlsets, as stacks are, for the drain to turn into the
 * sample's labels. Others cost one hash lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct tls_proc);
} tlsprocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tls_block); /* 528 bytes: too large for the stack */
} tlsbuf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct tls_block);
} tlsets0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct tls_block);
} tlsets1 SEC(".maps");

/* The key of the current thread's label block in the generation's tlsets (0: no labels). */
static __always_inline __u64 tls_labels_key(struct task_struct *t, __u32 tgid, __u32 gen)
{
	struct tls_proc *p = bpf_map_lookup_elem(&tlsprocs, &tgid);
	__u32 zero = 0;
	if (!p)
		return 0;
	struct tls_block *b = bpf_map_lookup_elem(&tlsbuf, &zero);
	if (!b)
		return 0;
	__u32 st = tls_labels_read(t, p->tls_offset, b);
	if (st == STROBE_TLS_TORN)
		count(STROBE_OC_TLS_TORN);
	else if (st == STROBE_TLS_FAULT)
		count(STROBE_OC_TLS_FAULT);
	__u32 n = b->nslots;
	if (st != STROBE_TLS_OK || n == 0 || n > STROBE_TLS_SLOTS)
		return 0; /* (no labels set now, or a block user space would refuse) */
	/* FNV-1a over the used slots, 8 words each (the SDK zeroes what a value leaves) */
	const __u64 *w = (const __u64 *)b->slot;
	__u64 h = 0xcbf29ce484222325ull ^ n;
	for (__u32 i = 0; i < STROBE_TLS_SLOTS * 8; i++) {
		if (i >= n * 8)
			break;
		h ^= w[i];
		h *= 0x100000001b3ull;
	}
	h |= 1; /* never 0, which means "no labels" */
	void *map = gen & 1 ? (void *)&tlsets1 : (void *)&tlsets0;
	if (!bpf_map_lookup_elem(map, &h)) {
		long rc = bpf_map_update_elem(map, &h, b, BPF_NOEXIST);
		if (rc < 0 && rc != -17 /* EEXIST: another CPU added it meanwhile */) {
			count(STROBE_OC_TLS_FULL);
			return 0;
		}
	}
	count(STROBE_OC_TLS);
	return h;
}

/* The program's context (include/uapi/linux/bpf_perf_event.h; x86-64's pt_regs first). */
struct bpf_perf_event_data;

/* The user stack of the current task t, from its saved user registers, walked by ustep to the
 * end (ustack.bpf.h): user_stack_key without its per-thread shortcut, which a sample, taken
 * wherever the thread happens to be, would rarely hit, and with one bpf_loop call rather than
 * two, each of which the verifier checks its callback for (half the load time). prov: walked
 * without the process's mappings (walked_blind); unruled: stopped at a row the walk cannot follow (a CFA
 * expression other than a PLT stub's, a signal frame), which an unwinder in user space can. */
static __always_inline __u64 user_stack(struct task_struct *t, __u32 gen, __u32 *prov,
					__u32 *unruled)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
	__u32 zero = 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks, &zero);
	struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!r || !w || !b)
		return 0;
	*w = (struct uwalk){.ip = r->ip, .sp = r->sp, .bp = r->bp, .tgid = t->tgid};
	if (!w->ip)
		return 0;
	bpf_loop(STROBE_OB_MAX_DEPTH, ustep, NULL, 0);
	*prov = walked_blind(w);
	*unruled = w->unruled;
	return intern(b, w->n, gen);
}

/* Every general register of the saved user state (CO-RE drops the suffix). */
struct pt_regs___strobe_all {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, ip, sp;
} __attribute__((preserve_access_index));

struct mm_struct___strobe_stack {
	unsigned long start_stack; /* where the main thread's stack began (argv, env above) */
} __attribute__((preserve_access_index));

/* Reserves a copy of the current sample (copy_unwalked: walked without tables, or stopped short
 * by a row): registers, kernel stack, the program's user walk (in scratch, n frames) and the
 * user stack from sp up. NULL when the ring is full (counted: the sample is summed as walked). */
static __always_inline struct oc_copy *copy_sample(void *ctx, struct task_struct *t, __u32 gen)
{
	__u32 zero = 0;
	struct pt_regs___strobe_all *r = (struct pt_regs___strobe_all *)bpf_task_pt_regs(t);
	struct uwalk *w = bpf_map_lookup_elem(&uwalks, &zero);
	struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!r || !w || !b)
		return NULL;
	struct oc_copy *c = bpf_ringbuf_reserve(&copies, sizeof(*c), 0);
	if (!c) {
		count(STROBE_OC_COPY_FULL);
		return NULL;
	}
	c->tgid = t->tgid;
	c->tid = t->pid;
	c->gen = gen;
	c->labels = 0;
	c->pre_exec = c->pad_ = 0;
	c->regs[0] = r->ax;
	c->regs[1] = r->bx;
	c->regs[2] = r->cx;
	c->regs[3] = r->dx;
	c->regs[4] = r->si;
	c->regs[5] = r->di;
	c->regs[6] = r->bp;
	c->regs[7] = r->sp;
	c->regs[8] = r->ip;
	c->regs[9] = r->r8;
	c->regs[10] = r->r9;
	c->regs[11] = r->r10;
	c->regs[12] = r->r11;
	c->regs[13] = r->r12;
	c->regs[14] = r->r13;
	c->regs[15] = r->r14;
	c->regs[16] = r->r15;
	long len = kernel_stacks ? bpf_get_stack(ctx, c->kips, sizeof(c->kips), 0) : 0;
	c->nk = len > 0 ? (__u32)len / 8 : 0;
	__u32 n = w->n < STROBE_OB_MAX_DEPTH ? w->n : STROBE_OB_MAX_DEPTH;
	/* (copy_all: none, so that a stack is complete only if the copy was unwound) */
	c->nu = !copy_all && bpf_probe_read_kernel(c->uips, sizeof(c->uips), b->ips) == 0 ? n : 0;
	/* As much of the stack as is there: the main thread's up to where it started (all of it
	 * mapped), another thread's by trying shorter reads (a read past the end fails whole). */
	__u64 sp = r->sp, size = STROBE_OC_COPY_STACK;
	__u64 top = BPF_CORE_READ((struct mm_struct___strobe_stack *)t->mm, start_stack);
	if (t->pid == t->tgid && top > sp && top - sp < size)
		size = top - sp;
	c->stack_len = 0;
	for (int i = 0; i < 3; i++) {
		size &= STROBE_OC_COPY_STACK * 2 - 1;
		if (size > STROBE_OC_COPY_STACK)
			size = STROBE_OC_COPY_STACK;
		if (bpf_probe_read_user(c->stack, size, (void *)sp) == 0) {
			c->stack_len = (__u32)size;
			break;
		}
		size /= 4;
	}
	return c;
}

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
	if (announce_new && !bpf_map_lookup_elem(&seen, &tgid)) {
		__u8 one = 1;
		bpf_map_update_elem(&seen, &tgid, &one, BPF_ANY);
		/* ring full (user space behind): new again at its next sample, and counted */
		if (bpf_ringbuf_output(&fresh, &tgid, sizeof(tgid), 0) < 0) {
			bpf_map_delete_elem(&seen, &tgid);
			count(STROBE_OC_FRESH_LOST);
		}
	}
	__u32 gen = generation, zero = 0;
	struct oc_key k = {.tgid = tgid, .tid = per_thread ? tid : 0,
			   .pre_exec = bpf_map_lookup_elem(&forked, &tgid) != NULL};
	if (kernel_stacks) {
		struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
		if (b) {
			/* the interrupted registers: nothing of perf's or this program's above */
			long len = bpf_get_stack(ctx, b->ips, sizeof(b->ips), 0);
			if (len > 0)
				k.kstack = intern(b, (__u32)len / 8, gen);
		}
	}
	if (t->mm && !(t->flags & PF_EXITING)) {
		__u32 prov = 0, unruled = 0;
		k.ustack = user_stack(t, gen, &prov, &unruled);
		struct oc_copy *c = NULL;
		if (k.ustack) {
			count(STROBE_OC_USER);
			if (prov)
				count(STROBE_OC_USER_PROV);
			if ((prov || unruled || copy_all) && copy_unwalked)
				c = copy_sample(ctx, t, gen);
		}
		k.pystack = py_stack_key(t, tgid, gen);
		k.labels = tls_labels_key(t, tgid, gen);
		if (c && k.pystack) { /* (Python frames are merged into sums only) */
			bpf_ringbuf_discard(c, 0);
		} else if (c) {
			c->labels = k.labels;
			c->pre_exec = k.pre_exec;
			bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
			count(STROBE_OC_COPIED);
			return 0;
		}
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
	/* the same image: the same TLS offset (a thread of the same process has its tgid) */
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;
	if (ptgid != ctgid)
		bpf_map_update_elem(&forked, &ctgid, &one, BPF_ANY);
	struct tls_proc *tp;
	if (ptgid != ctgid && (tp = bpf_map_lookup_elem(&tlsprocs, &ptgid)))
		bpf_map_update_elem(&tlsprocs, &ctgid, tp, BPF_ANY);
	return 0;
}

/* An exec replaces every mapping (see ustack_on_exec). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	bpf_map_delete_elem(&seen, &tgid); /* a new identity: fresh again at its next sample */
	bpf_map_delete_elem(&forked, &tgid); /* its own image now */
	ustack_on_exec(p->tgid, 0);
	/* With ask_at_exec (strobe record), the new image's mappings asked for now rather than
	 * at its first sample, which would be walked without them (one sample of every
	 * short-lived process, 2 % of a busy host's: scripts/stack_completeness.sh). Read this early, they hold the program and the
	 * dynamic linker only, and the loader reads them again shortly (offcpu_tables.c). */
	if (ask_at_exec && tables && (!filter_tgids || bpf_map_lookup_elem(&targets, &tgid)))
		ask_maps(tgid);
	py_on_exec(p->tgid);
	bpf_map_delete_elem(&tlsprocs, &tgid); /* another image: user space looks again */
	return 0;
}

/* A process that exits leaves `forked`, and `seen`, so that a new one given its pid is new
 * (fresh) too: user space reads a process's identity again only when it is told of a new image. When its last
 * thread exits (the group's count of live threads is down to 0 by the time this tracepoint
 * runs: a leader that exits before its other threads would make the process new again at their
 * last samples). Attached with announce_new only. The kernel types with a suffix CO-RE drops. */
struct signal_struct___strobe_exit {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));
struct task_struct___strobe_exit {
	struct signal_struct___strobe_exit *signal;
} __attribute__((preserve_access_index));

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	if (BPF_CORE_READ((struct task_struct___strobe_exit *)p, signal, live.counter) == 0) {
		if (announce_new)
			bpf_map_delete_elem(&seen, &tgid);
		bpf_map_delete_elem(&forked, &tgid);
	}
	return 0;
}
