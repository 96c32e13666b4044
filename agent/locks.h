/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide lock contention from futex waits, summed in the kernel (agent/locks.bpf.c, loaded
 * by agent/locks.c): the layout the program and its loader share (plain fixed-size types, as
 * both the BPF target and the host compile it) and, for the rest of the agent, the loader's
 * API. Private to agent/.
 *
 * A wait is a futex system call that waits (FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_LOCK_PI,
 * FUTEX_LOCK_PI2, FUTEX_WAIT_REQUEUE_PI, futex_waitv, futex_wait) and slept: one that returned
 * EAGAIN (the word had changed, so the kernel did not sleep) or another error before sleeping
 * is counted apart, not summed. Its time is from the call's entry to its return, the waiter's
 * wake-up latency included, as a thread timing its pthread_mutex_lock sees it. It is summed
 * under (process, thread, futex address, the waiter's user stack).
 */
#ifndef STROBE_AGENT_LOCKS_H
#define STROBE_AGENT_LOCKS_H

#include <linux/types.h>

#include "offcpu_bpf.h"

/* The sums (map `counts`). ustack: key of the generation's stack map (0: none). */
struct strobe_lk_key {
	__u64 uaddr, ustack;
	__u32 tgid, tid, gen, pad_;
};
struct strobe_lk_val {
	__u64 waits, delay_ns;
};

/* Counters of the program's own, after the stack walk's (STROBE_OB_*) in the same map. */
enum {
	STROBE_LK_WAITS = STROBE_OB_NCOUNTERS, /* waits summed */
	STROBE_LK_NOT_SLEPT,  /* waits that returned without sleeping (EAGAIN, EFAULT...) */
	STROBE_LK_SHORT,      /* shorter than min_wait_ns */
	STROBE_LK_STARTS_FULL, /* waits not timed: no task-local storage */
	STROBE_LK_COUNTS_FULL, /* waits dropped: `counts` full */
	STROBE_LK_NCOUNTERS
};

#ifndef __bpf__
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler_impl.h"

typedef struct strobe_locks_opts {
	const pid_t *pids;      /* only these processes and their children; none = all */
	unsigned npids;
	int64_t min_wait_ns;    /* shorter waits are counted, not summed */
	unsigned max_entries;   /* distinct sums per interval (0 = 16384); stack maps hold half
				   as many stacks each */
	uint32_t table_rows;    /* capacity of the unwind rows' map; 0 = frame pointers only */
} strobe_locks_opts;

typedef struct strobe_locks_stats {
	uint64_t waits;          /* waits summed in the kernel */
	uint64_t not_slept;      /* wait calls that returned without sleeping */
	uint64_t short_waits;    /* below min_wait_ns */
	uint64_t starts_full;    /* waits lost: no per-thread storage */
	uint64_t counts_full;    /* waits lost: too many distinct sums in one interval */
	uint64_t stack_errors;   /* stack walks that failed (stack map full) */
	uint64_t stacks_missing; /* sums whose stack was gone when read */
	uint64_t entries;        /* sums read */
	uint64_t table_frames, fp_frames, no_maps;
	char tables_off[256];    /* why the table walk did not load ("": it did, or not asked) */
} strobe_locks_stats;

typedef struct strobe_locks strobe_locks;

/* Loads the program (not attached yet). NULL + errno, with the reason in err. */
strobe_locks *strobe_locks_open(const strobe_locks_opts *o, strobe_err *err);
/* Adds a process to the pid filter (with opts.npids > 0), its tables loaded at once. */
int strobe_locks_add_pid(strobe_locks *l, pid_t pid);
int strobe_locks_attach(strobe_locks *l, strobe_err *err);
void strobe_locks_detach(strobe_locks *l);
/* Moves the sums collected since the last call into s (strobe_sampler_add_lock). */
int strobe_locks_collect(strobe_locks *l, strobe_sampler *s);
void strobe_locks_get_stats(strobe_locks *l, strobe_locks_stats *st);
void strobe_locks_close(strobe_locks *l);
#endif

#endif
