/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide lock contention without touching the profiled processes: an eBPF program on the
 * syscalls:sys_enter_futex/sys_exit_futex tracepoints sums, in the kernel, the time threads
 * spend in futex waits that slept, under (process, thread, futex address, the waiter's user
 * stack), walked with the binaries' unwind tables as the off-CPU program's stacks are. Used by
 * the agent's --locks and by `strobe record -e lock`; the sums go into a sampler's aggregate
 * (sampler_add_lock) and come out as Go-style mutex profiles (contentions/count,
 * delay/nanoseconds, a lock_addr label). Needs root (or CAP_BPF with CAP_PERFMON) and BTF.
 *
 * Ownership: strobe_locks_open returns a handle the caller closes with strobe_locks_close.
 */
#ifndef STROBE_LOCKS_H
#define STROBE_LOCKS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/sampler.h"

typedef struct strobe_locks_opts {
	const pid_t *pids;      /* only these processes and their children; none = all */
	unsigned npids;
	int64_t min_wait_ns;    /* shorter waits are counted, not summed */
	unsigned max_entries;   /* distinct sums per interval (0 = 16384); stack maps hold half
				   as many stacks each */
	uint32_t table_rows;    /* capacity of the unwind rows' map; 0 = frame pointers only */
	const char *proc_root;  /* where /proc is (NULL: /proc), for the tables' loader */
	/* The agent's: the fds of another program's table walk maps (urows, umaps, uwant, ureq,
	 * uexec: strobe_offcpu_table_maps), shared rather than made, so that one loader and one
	 * copy of the rows serve both (table_rows is then ignored); NULL = its own. They must
	 * outlive the loader that fills them, or new processes are walked by frame pointers. */
	const int *share_tables;
	/* Host-wide (npids 0) with its own tables: load the tables of the processes running now
	 * for up to this many ms before returning, so their first waits are walked with them
	 * (else each is loaded at its first wait, by one thread, which a host starting hundreds
	 * of processes keeps busy); 0 = none. */
	unsigned preload_ms;
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
	/* the table loader: processes loaded, and from a request to its mappings in the kernel */
	uint64_t procs_loaded, table_waits;
	int64_t table_wait_ns_sum, table_wait_ns_max;
} strobe_locks_stats;

typedef struct strobe_locks strobe_locks;

/* Loads the program (not attached yet). NULL + errno, with the reason in err. */
strobe_locks *strobe_locks_open(const strobe_locks_opts *o, strobe_err *err);
/* Adds a process to the pid filter (with opts.npids > 0), its tables loaded at once. */
int strobe_locks_add_pid(strobe_locks *l, pid_t pid);
int strobe_locks_attach(strobe_locks *l, strobe_err *err);
void strobe_locks_detach(strobe_locks *l);
/* Moves the sums collected since the last call into s (sampler_add_lock). */
int strobe_locks_collect(strobe_locks *l, strobe_sampler *s);
void strobe_locks_get_stats(strobe_locks *l, strobe_locks_stats *st);
void strobe_locks_close(strobe_locks *l);

#endif
