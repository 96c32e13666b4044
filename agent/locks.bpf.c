// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The agent's in-kernel sums of futex waits (loaded by agent/locks.c), for host-wide lock
 * contention without anything in the profiled processes: a thread that waits for a contended
 * pthread mutex, rwlock, condition variable or semaphore, or a Rust, Go-runtime or C++
 * std::mutex, ends up in a futex wait system call, and the futex's user address names the lock.
 *
 *   sys_enter_futex (a wait op): the time and the futex address, in the thread's task-local
 *     storage (no hash of its tid, freed with the thread);
 *   sys_exit_futex: if the call slept (see locks.h), the wait's length is added, with a count,
 *     to `counts` under (tgid, tid, futex address, generation, user stack).
 *
 * The user stack is walked at the exit, not the entry: the thread is back from its wait with
 * the same user registers and stack it entered with, and a stack walked then is kept in the
 * generation the sum is added in, so user space reads both together and no stack of a thread
 * still waiting has to be saved across a rotation of the stack maps (off-CPU's off_threads).
 * The walk is the off-CPU program's (ustack.bpf.h): unwind tables where loaded, frame pointers
 * elsewhere, its first steps remembered per thread so a thread that waits again and again at
 * one place is not walked in full each time.
 *
 * futex_waitv and futex_wait (the futex2 calls) are waits too, timed the same way; their
 * programs are attached where the kernel has them (locks.c).
 */
#include <linux/types.h>

#include "locks.h"
#define USTACK_NCOUNTERS STROBE_LK_NCOUNTERS
#include "ustack.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (see also ustack.bpf.h). */
const volatile __u64 min_wait_ns = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct lk_key);
	__type(value, struct lk_val);
} counts SEC(".maps");

/* A thread's wait in progress (enter_ns 0: none), whether its process's mappings were seen in
 * the kernel (see begin), and its last user-stack walk. */
struct lcache {
	__u64 enter_ns, uaddr;
	__u32 maps_seen, pad_;
	struct ucache u;
};
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lcache);
} lcache SEC(".maps");

/* The syscalls tracepoints' records (events/syscalls/sys_{enter,exit}_futex/format): after the
 * 8-byte common header, the syscall number, then each argument in 8 bytes. */
struct futex_enter_ctx {
	__u64 common_;
	__s32 nr;
	__u32 pad_;
	__u64 uaddr, op, val, utime, uaddr2, val3;
};
struct sys_exit_ctx {
	__u64 common_;
	__s32 nr;
	__u32 pad_;
	__s64 ret;
};

/* include/uapi/linux/futex.h */
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256
/* errno values: a wait that did not sleep (the futex word had changed, a bad address or op) */
#define E_AGAIN 11
#define E_FAULT 14
#define E_INVAL 22
#define E_NOSYS 38
#define E_PERM 1
#define E_SRCH 3
#define E_DEADLK 35

static __always_inline int begin(__u64 uaddr)
{
	if (filter_tgids) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (!bpf_map_lookup_elem(&targets, &tgid))
			return 0;
	}
	struct task_struct *t = bpf_get_current_task_btf();
	struct lcache *c = bpf_task_storage_get(&lcache, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c) { /* out of memory, or the storage busy on this CPU (a nested program) */
		count(STROBE_LK_STARTS_FULL);
		return 0;
	}
	/* The stack is walked at the wait's end; a process met for the first time (or just
	 * exec'd) has its mappings asked for now, so that user space loads them while the thread
	 * waits and the walk has the tables (else frame pointers, wrong through glibc). Once seen,
	 * the thread does not look again until an exec. */
	if (tables && !c->maps_seen) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (bpf_map_lookup_elem(&umaps, &tgid))
			c->maps_seen = 1;
		else
			ask_maps(tgid);
	}
	c->uaddr = uaddr;
	c->enter_ns = bpf_ktime_get_ns(); /* last: the wait's whole entry is outside it */
	return 0;
}

static __always_inline int end(long ret)
{
	__u64 now = bpf_ktime_get_ns();
	struct task_struct *t = bpf_get_current_task_btf();
	struct lcache *c = bpf_task_storage_get(&lcache, t, 0, 0);
	if (!c || !c->enter_ns)
		return 0;
	__u64 start = c->enter_ns;
	c->enter_ns = 0;
	/* Errors found before sleeping. An interrupted or timed-out wait slept, and counts. */
	if (ret == -E_AGAIN || ret == -E_FAULT || ret == -E_INVAL || ret == -E_NOSYS ||
	    ret == -E_PERM || ret == -E_SRCH || ret == -E_DEADLK) {
		count(STROBE_LK_NOT_SLEPT);
		return 0;
	}
	__u64 wait = now > start ? now - start : 0;
	if (wait < min_wait_ns) {
		count(STROBE_LK_SHORT);
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid(), sys = 0, leaf = 0;
	__u32 gen = generation, prov = 0;
	struct lk_key k = {
		.uaddr = c->uaddr,
		.tgid = id >> 32,
		.tid = (__u32)id,
		.gen = gen,
	};
	k.ustack = user_stack_key(t, gen, &sys, &leaf, &c->u, &prov);
	struct lk_val *v = bpf_map_lookup_elem(&counts, &k);
	if (!v) {
		struct lk_val z = {0};
		long rc = bpf_map_update_elem(&counts, &k, &z, BPF_NOEXIST);
		if (rc < 0 && rc != -17 /* EEXIST: another CPU added it meanwhile */) {
			count(STROBE_LK_COUNTS_FULL);
			return 0;
		}
		if (!(v = bpf_map_lookup_elem(&counts, &k)))
			return 0; /* drained by user space in between: this one is lost */
	}
	/* Plain adds: the key holds the thread's id, and a thread runs on one CPU at a time. */
	v->waits++;
	v->delay_ns += wait;
	count(STROBE_LK_WAITS);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct futex_enter_ctx *ctx)
{
	__u32 cmd = (__u32)ctx->op & ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
	if (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET && cmd != FUTEX_LOCK_PI &&
	    cmd != FUTEX_LOCK_PI2 && cmd != FUTEX_WAIT_REQUEUE_PI)
		return 0;
	return begin(ctx->uaddr);
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct sys_exit_ctx *ctx)
{
	return end(ctx->ret);
}

/* futex_waitv(waiters, n, flags, timeout, clockid): the lock is the first waiter's futex
 * (struct futex_waitv: val, uaddr, flags). */
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int futex_waitv_enter(struct futex_enter_ctx *ctx)
{
	__u64 uaddr = 0;
	if (bpf_probe_read_user(&uaddr, sizeof(uaddr), (void *)(ctx->uaddr + 8)) < 0)
		uaddr = 0;
	return begin(uaddr);
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int futex_waitv_exit(struct sys_exit_ctx *ctx)
{
	return end(ctx->ret);
}

/* futex_wait(uaddr, val, mask, flags, timeout, clockid) */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int futex_wait_enter(struct futex_enter_ctx *ctx)
{
	return begin(ctx->uaddr);
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int futex_wait_exit(struct sys_exit_ctx *ctx)
{
	return end(ctx->ret);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	ustack_on_fork(parent->tgid, child->tgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	struct lcache *c = tables ? bpf_task_storage_get(&lcache, p, 0, 0) : 0;
	if (c)
		c->maps_seen = 0;
	ustack_on_exec(p->tgid, c ? &c->u : 0);
	return 0;
}
