// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The agent's in-kernel off-CPU aggregation (loaded by agent/offcpu.c). Instead of one perf
 * sample with a call chain and a stack copy per context switch, which user space then has to
 * read and unwind (most of the cost of off-CPU profiling at tens of thousands of switches a
 * second), the kernel keeps the sums:
 *
 *   switch-out of a task (sched_switch, prev): its kernel and user stacks (frame-pointer
 *     walks, kept once each in a stack map keyed by their hash) and the time, in the task's
 *     own local storage (`tcache`: found through a slot in the task_struct, with no hash of
 *     its tid to compute and no bucket lock, and freed by the kernel with the task; the record
 *     is rewritten in place, out_ns = 0 meaning "on CPU");
 *   switch-in (sched_switch, next): the interval is added, with a count, to `counts` under
 *     (tgid, tid, generation, kernel stack, user stack); the part of it spent runnable, waiting
 *     on the run queue, is the scheduler's own (sched_info.last_queued, see on_switch), so no
 *     program runs at wake-ups.
 *
 * User space drains `counts` once per export interval. Stacks of generation g live in stack
 * map g % 2: user space flips the generation after each drain and clears the map it is about to
 * reuse, so stack maps never fill up with stacks of long ago (see offcpu.c). To save the
 * stacks of threads still off CPU before their map is cleared, user space reads the switch-out
 * records of all threads through a task iterator (off_threads), as task-local storage cannot be
 * walked from user space.
 *
 * User stacks are walked here, with no copy for user space to unwind: by the binaries' unwind
 * tables where the agent has loaded them (rows made from .eh_frame, one array for all binaries,
 * and each process's executable mappings: see offcpu_tables.c and ustep below), by frame
 * pointers elsewhere. The program asks for a process's tables through a ring buffer when it
 * meets one without; a stack walked before they were in is walked again once they are, if the
 * thread is still blocked (rewalk).
 *
 * The kernel's types are declared here with only the fields used, relocated by CO-RE against
 * the running kernel's BTF, so the build needs no vmlinux.h of the build machine's kernel.
 * Full maps and failed stack walks are counted, never silent.
 */
#include "ustack.bpf.h"

#define SCHED_NORMAL 0 /* the fair class's policies (include/uapi/linux/sched.h) */
#define SCHED_BATCH 3
#define SCHED_IDLE 5

/* The task iterator's context (kernel/bpf/task_iter.c). */
struct seq_file;
struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));
struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));


char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (see also ustack.bpf.h). */
const volatile __u64 min_block_ns = 0;
const volatile __u8 kernel_stacks = 1;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ob_key);
	__type(value, struct ob_val);
} counts SEC(".maps");

/* A thread's state, kept in the task itself (task-local storage: found through a slot in the
 * task rather than a hash of its tid, and freed with it); see on_switch and user_stack_key.
 *   st: its last switch-out (out_ns 0: on CPU now);
 *   kernel: the kernel stack it last blocked in, and what it blocked from: the user address it
 *     entered the kernel from, its system call (orig_ax; -1 outside one) and whether it slept;
 *   user: its user registers (ip, sp) at its last user-stack walk, where the walk's first two
 *     steps led, the two frame records above, and the stack's key (see user_stack_key);
 *   rows: the rows its walk's first two steps used, by address (see struct rowmemo). */

struct tcache {
	struct ob_start st;
	__u64 ukey, sys, kkey;
	__u32 gen, blocked;
	struct ucache u; /* user: see user_stack_key; rows: see struct rowmemo */
};
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcache);
} tcache SEC(".maps");

/* The innermost kernel frames are this program and the tracepoint's BPF runner
 * (bpf_prog_..._on_switch, bpf_trace_run4), skipped; what else runs the tracepoint
 * (__traceiter_sched_switch when more than one program is attached) is cut in user space, which
 * starts the stack at __schedule as the perf path's sched_switch samples do. */
#define KERNEL_SKIP 2

/* The current task's kernel stack; 0 when there is none or the map is full. */
static __always_inline __u64 kernel_stack_key(void *ctx, __u32 gen)
{
	__u32 zero = 0;
	struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!b)
		return 0;
	long len = bpf_get_stack(ctx, b->ips, sizeof(b->ips), KERNEL_SKIP);
	return len > 0 ? intern(b, (__u32)len / 8, gen) : 0;
}

/* The same for the re-walk (rewalk), which may sleep while it reads a stack: sched_switch then
 * runs on its CPU, and must not find its per-CPU state changed under it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uwalk);
} uwalks_it SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ob_stack);
} scratch_it SEC(".maps");

/* ... and for rewalk, of another task's stack (ctx: a pointer to it). */
struct task_ref {
	struct task_struct *task;
};
static long ustep_task(__u64 idx, void *ctx)
{
	struct task_ref *x = ctx;
	__u32 zero = 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks_it, &zero);
	struct ob_stack *b = bpf_map_lookup_elem(&scratch_it, &zero);
	if (!w || !b || !x->task || ustep1(w, b, x->task))
		return 1;
	return 0;
}


SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	/* The arguments are BTF pointers the verifier trusts: their fields are read directly,
	 * where BPF_CORE_READ would call bpf_probe_read_kernel for each. */
	__u32 tid = prev->pid, tgid = prev->tgid;

	/* Switch-out of prev: this program runs in its context, so the stacks are its own. */
	/* An exiting thread is skipped: its last switch-out (TASK_DEAD) is never followed by a
	 * switch-in, so walking its stacks would be wasted. */
	if (tid != 0 && !(prev->flags & PF_EXITING) &&
	    (!filter_tgids || bpf_map_lookup_elem(&targets, &tgid))) {
		__u32 gen = generation;
		__u64 sys = 0, leaf = 0;
		__u32 prov = 0;
		struct tcache *t = bpf_task_storage_get(&tcache, prev, 0,
							BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) { /* out of memory, or the storage busy on this CPU (a nested program) */
			count(STROBE_OB_STARTS_FULL);
			goto switch_in;
		}
		/* (kernel threads have no user stack, and so no kernel-stack cache below either) */
		struct tcache *c = t;
		struct ob_start st = {
			.out_ns = now,
			.tgid = tgid,
			.gen = gen,
			.ustack = prev->mm ? user_stack_key(prev, gen, &sys, &leaf, &c->u, &prov) : 0,
			.blocked = !preempt,
		};
		if (prov)
			st.flags = STROBE_OB_START_PROV;
		/* Walking the kernel stack is most of this program's cost (the kernel's unwinder,
		 * about 1.5 us here), and a thread that blocks again from the same user stack in the
		 * same system call the same way blocks in the same kernel path nearly always (a
		 * pipe read, a futex wait). So it is walked once per interval (generation) for each
		 * such (thread, user address it entered the kernel from, system call, sleep or
		 * preemption) and reused for the switch-outs that match; kernel threads, with no
		 * user state to tell their waits apart, are walked every time. */
		if (kernel_stacks) {
			if (!st.ustack)
				c = 0;
			if (c && c->gen == gen && c->ukey == leaf && c->sys == sys &&
			    c->blocked == st.blocked && c->kkey) {
				st.kstack = c->kkey;
				count(STROBE_OB_KCACHE_HITS);
			} else {
				st.kstack = kernel_stack_key(ctx, gen);
				if (c) {
					c->ukey = leaf;
					c->sys = sys;
					c->kkey = st.kstack;
					c->gen = gen;
					c->blocked = st.blocked;
				}
			}
		}
		t->st = st;
	}

switch_in:;
	/* Switch-in of next. */
	__u32 ntid = next->pid;
	if (ntid == 0)
		return 0;
	struct tcache *nt = bpf_task_storage_get(&tcache, next, 0, 0);
	if (!nt || !nt->st.out_ns)
		return 0;
	struct ob_start *st = &nt->st;
	__u64 total = now > st->out_ns ? now - st->out_ns : 0;
	if (total < min_block_ns) {
		count(STROBE_OB_SHORT);
		st->out_ns = 0;
		return 0;
	}
	/*
	 * Of a sleep, the part after the wake-up, runnable but waiting for a CPU, is not blocked
	 * time. The scheduler keeps when the task was queued (sched_info.last_queued, set at the
	 * wake-up's enqueue from the run queue's clock; CONFIG_SCHED_INFO) and, right after this
	 * tracepoint, adds (rq clock - last_queued) to the task's run_delay: the same difference is
	 * taken here, on the clock it was taken with. This replaces a program on sched_wakeup that
	 * stamped the time of every wake-up on the host (a fifth of the programs' cost per switch).
	 * The run queue is reached through the fair class's run queue of the task, which is this
	 * CPU's for a fair task being switched in. Where that cannot be known (a real-time task,
	 * a kernel without group scheduling) or last_queued is 0 (not queued the usual way), the
	 * whole interval counts as blocked.
	 */
	__u64 blocked = 0;
	if (st->blocked) {
		__u64 queued = next->sched_info.last_queued, wait = 0, clock = 0;
		unsigned int pol = next->policy;
		if (queued && bpf_core_field_exists(struct cfs_rq, rq) &&
		    (pol == SCHED_NORMAL || pol == SCHED_BATCH || pol == SCHED_IDLE)) {
			/* direct loads: the verifier makes them fault-safe (no helper calls) */
			struct cfs_rq *cq = next->se.cfs_rq;
			struct rq *rq = cq ? cq->rq : 0;
			if (rq)
				clock = rq->clock;
		}
		if (clock > queued)
			wait = clock - queued;
		blocked = wait < total ? total - wait : 0;
	}
	struct ob_key k = {
		.tgid = st->tgid,
		.tid = ntid,
		.gen = st->gen,
		.kstack = st->kstack,
		.ustack = st->ustack,
	};
	st->out_ns = 0; /* on CPU now */
	struct ob_val *v = bpf_map_lookup_elem(&counts, &k);
	if (!v) {
		struct ob_val z = {0};
		long rc = bpf_map_update_elem(&counts, &k, &z, BPF_NOEXIST);
		if (rc < 0 && rc != -17 /* EEXIST: another CPU added it meanwhile */) {
			count(STROBE_OB_COUNTS_FULL);
			return 0;
		}
		if (!(v = bpf_map_lookup_elem(&counts, &k)))
			return 0; /* drained by user space in between: this one is lost */
	}
	/* Plain adds, not atomic ones (a locked add each): the key holds the thread's id, and a
	 * thread is switched in on one CPU at a time, so no other program writes this sum. */
	v->off_ns += total;
	v->blocked_ns += blocked;
	v->switches++;
	count(STROBE_OB_INTERVALS);
	if (k.ustack) {
		count_n(STROBE_OB_USER_NS, total);
		if (st->flags & STROBE_OB_START_PROV)
			count_n(STROBE_OB_PROV_NS, total);
	}
	return 0;
}

/* For user space, once per interval: the switch-out record of every thread now off CPU (see
 * the top of this file). */
SEC("iter/task")
int off_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	struct tcache *t = bpf_task_storage_get(&tcache, task, 0, 0);
	if (!t || !t->st.out_ns)
		return 0;
	struct ob_start st = t->st;
	bpf_seq_write(ctx->meta->seq, &st, sizeof(st));
	return 0;
}

/*
 * For user space's table loader, right after it loaded a process's mappings (offcpu_tables.c,
 * run for that process's threads only): each thread off CPU now whose user stack was walked
 * without them (a process blocks within microseconds of its exec, long before its tables can be
 * loaded, and that first block is often its longest: waiting for the other end of a pipe) has
 * it walked again, now by the tables, and its switch-out record takes the new stack, which the
 * switch-in then sums. The thread is still blocked where it was, so its stack is unchanged; the
 * record is rewritten only if it is still the same switch-out. Sleepable, to read another
 * task's stack (bpf_copy_from_user_task: it may fault pages in), with per-CPU state of its own.
 */
SEC("iter.s/task")
int rewalk(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task || !tables)
		return 0;
	struct tcache *t = bpf_task_storage_get(&tcache, task, 0, 0);
	__u32 gen = generation, zero = 0;
	/* (an older generation's stacks are being saved or gone: left as they are) */
	if (!t || !t->st.out_ns || !(t->st.flags & STROBE_OB_START_PROV) || t->st.gen != gen)
		return 0;
	__u64 out = t->st.out_ns;
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
	struct uwalk *w = bpf_map_lookup_elem(&uwalks_it, &zero);
	struct ob_stack *b = bpf_map_lookup_elem(&scratch_it, &zero);
	if (!r || !w || !b)
		return 0;
	*w = (struct uwalk){.ip = r->ip, .sp = r->sp, .bp = r->bp, .tgid = task->tgid};
	if (!w->ip)
		return 0;
	struct task_ref x = {.task = task};
	bpf_loop(STROBE_OB_MAX_DEPTH, ustep_task, &x, 0);
	if (!w->known || w->stale)
		return 0;
	__u64 key = intern(b, w->n, gen);
	if (key && t->st.out_ns == out) {
		t->st.ustack = key;
		t->st.flags &= ~STROBE_OB_START_PROV;
		count(STROBE_OB_REWALKS);
	}
	return 0;
}

/* With a pid filter, children of a target process are targets too; a new process inherits its
 * parent's mappings (see ustack_on_fork). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	ustack_on_fork(parent->tgid, child->tgid);
	return 0;
}

/* An exec replaces every mapping (see ustack_on_exec). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	struct tcache *c = tables ? bpf_task_storage_get(&tcache, p, 0, 0) : 0;
	ustack_on_exec(p->tgid, c ? &c->u : 0);
	return 0;
}
