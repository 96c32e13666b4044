/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide lock contention from futex waits, summed in the kernel (agent/locks.bpf.c, loaded
 * by agent/locks.c): the layout the program and its loader share (plain fixed-size types, as
 * both the BPF target and the host compile it). The loader's API is include/strobe/locks.h.
 * Private to agent/.
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

#include "offcpu.h"

/* The sums (map `counts`). ustack: key of the generation's stack map (0: none). */
struct lk_key {
	__u64 uaddr, ustack;
	__u32 tgid, tid, gen, pad_;
};
struct lk_val {
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

#endif
