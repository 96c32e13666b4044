/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-CPU sampling summed in the kernel (agent/oncpu.c loads agent/oncpu.bpf.c): an eBPF
 * program on the cpu-clock perf event of every CPU walks the interrupted thread's kernel stack
 * and its user stack (the binaries' unwind tables where loaded, frame pointers elsewhere: the
 * off-CPU program's walk) and counts samples per (process, thread, kernel stack, user stack).
 * strobe_oncpu_collect moves the counts into the sampler's aggregate, where they are
 * symbolized and labelled like the perf path's samples. No stack is copied to user space.
 * Threads of a process linked with the C SDK (sdk/strobe_labels.h) have their label block read
 * at each sample too; its labels (endpoint, span_id...) go on the samples.
 *
 * For `strobe agent --on-cpu-mode bpf` and `strobe record -e cpu` (the default where it loads).
 */
#ifndef STROBE_ONCPU_H
#define STROBE_ONCPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/offcpu.h" /* strobe_otables_stats */
#include "strobe/sampler.h"

typedef struct strobe_oncpu_opts {
	const pid_t *pids;      /* only these processes and their children; none = all */
	unsigned npids;
	bool kernel;            /* kernel stacks too */
	bool no_tid;            /* sum threads of a process together (tid 0 in the sums) */
	/* With pids: the sampling events follow the target processes' threads (and their
	 * children) and count their CPU time, rather than each CPU's wall clock (so a workload
	 * that runs and sleeps in a cycle near the period is not sampled at one phase of it); for
	 * recordings of named processes. enable_on_exec: they start at the target's exec (a
	 * forked command waiting for it). */
	bool per_task;
	bool enable_on_exec;
	unsigned freq;          /* samples per second per CPU (for sizing; attach sets the rate) */
	unsigned interval_ms;   /* how often collect runs (for sizing), 0 = 10 s */
	/* Sums per interval the counts map holds (a new stack beyond is counted and dropped;
	 * counts in the map are kept); stack maps hold as many stacks each, at most 16384.
	 * 0 = sized from freq x CPUs x interval (at least 1024). */
	unsigned max_entries;
	uint32_t table_rows;    /* capacity of the unwind rows' map (8 bytes a row); 0 = frame
				   pointers only */
	/* Another program's table maps (strobe_offcpu_table_maps) to walk by, and its loader to
	 * serve this one (NULL: a loader of its own when table_rows > 0). */
	const int *share_tables;
	unsigned preload_ms;    /* own loader, system-wide: tables of running processes first */
	const char *proc_root;  /* where /proc is (NULL: /proc) */
	/* Python frames (agent/python.c): off with no_python; note(ctx, msg) is told, once each,
	 * what could not be named (an unknown interpreter version). */
	bool no_python;
	bool no_labels;         /* do not read the C SDK's per-thread labels */
	/* announce the processes sampled for the first time (strobe_oncpu_fresh, whose fd
	 * strobe_oncpu_fresh_fd wakes a caller when there are some); off, the program does not
	 * track them */
	bool fresh;
	/* ask for a new image's unwind tables at its exec rather than at its first sample (which
	 * is then walked without them): a read of /proc/PID/maps and one more 2 ms later for
	 * every exec on the host, sampled or not, so for recordings (strobe record), not for the
	 * always-on agent, whose hosts may exec thousands of processes a second */
	bool ask_at_exec;
	/* a sample walked before its process's tables were in, or stopped by a row the
	 * kernel's walk cannot follow (a CFA expression, a signal frame), goes to user space with
	 * its registers and 16 KiB of its user stack, to be unwound there (as the perf path's
	 * samples are) rather than summed as far as it was walked: a process's first samples
	 * (between its exec and its tables), so for recordings, whose commands are often
	 * short-lived; with table_rows > 0 only */
	bool copy_unwalked;
	bool copy_all;          /* with copy_unwalked, every sample goes that way (for tests) */
	/* do not look up the rows of a frame by its file (bpf_find_vma) when its process's
	 * mappings are not loaded yet: frame pointers there, as before (for tests, to measure) */
	bool no_by_file;
	void (*note)(void *ctx, const char *msg);
	void *note_ctx;
} strobe_oncpu_opts;

typedef struct strobe_oncpu_stats {
	uint64_t samples;       /* samples summed in the kernel */
	uint64_t idle;          /* samples of the idle task, not summed */
	uint64_t counts_full;   /* samples dropped: the counts map was full */
	uint64_t stack_errors;  /* stacks not kept: the stack map was full */
	uint64_t user;          /* samples with a user stack */
	uint64_t user_prov;     /* ... walked before the process's tables were in (frame ptrs) */
	uint64_t copied;        /* ... of those or stopped by a row, copied for user space to
				   unwind (copy_unwalked) */
	uint64_t copy_full;     /* ... not: the ring was full (summed as walked) */
	uint64_t copies_unwound; /* copies read and unwound in user space */
	uint64_t table_frames;  /* user frames stepped by unwind tables */
	uint64_t fp_frames;     /* ... by frame pointers, with tables on (no table there) */
	uint64_t table_stops;   /* walks ended by a rule the program does not follow */
	uint64_t file_rows;     /* user frames whose row was found by their file, the process's
				   mappings not loaded yet or behind (bpf_find_vma) */
	uint64_t no_maps;       /* walks of processes whose mappings were not loaded yet */
	uint64_t entries;       /* sums read */
	uint64_t drains;        /* collects */
	uint64_t collected;     /* samples moved into a sampler (samples - collected: still in the
				   kernel's maps) */
	uint64_t py_samples;    /* samples with a Python stack */
	uint64_t py_no_thread;  /* samples of a Python process's thread with no thread state */
	uint64_t py_full;       /* Python stacks not kept: their map was full */
	uint64_t py_processes;  /* Python processes whose frames are read */
	uint64_t py_unknown;    /* ... not: unknown version, or offsets that did not fit */
	uint64_t py_named;      /* Python frames named */
	uint64_t py_unnamed;    /* ... whose code object could not be read (the process exited) */
	uint64_t tls_samples;   /* samples labelled by the C SDK's per-thread block */
	uint64_t tls_torn;      /* ... read in the middle of a label write (unlabelled) */
	uint64_t tls_fault;     /* ... whose block's page was not readable (unlabelled) */
	uint64_t tls_full;      /* label blocks not kept: their map was full (unlabelled) */
	uint64_t tls_processes; /* processes whose SDK labels are read (their offset found) */
	uint64_t fresh_lost;     /* new processes not announced at their first sample (opts.fresh):
				   the ring was full, or out of memory */
	uint32_t max_entries;   /* the counts map's size */
	uint32_t stack_entries; /* each stack map's size */
	uint32_t freq;          /* the rate attached now (0: detached) */
	strobe_otables_stats tables;
	char tables_off[256];   /* why the table walk asked for did not load ("": it did) */
} strobe_oncpu_stats;

typedef struct strobe_oncpu strobe_oncpu;

/* Loads the programs (not attached). NULL + errno, with the reason in err: no BTF, no
 * privilege, a kernel without the helpers (bpf_loop, bpf_get_current_task_btf). */
strobe_oncpu *strobe_oncpu_open(const strobe_oncpu_opts *o, strobe_err *err);
/* Opens a cpu-clock event at freq Hz on every online CPU (opts.per_task: on every thread of
 * the targets) and attaches the program to each (again at a new freq when attached already). */
int strobe_oncpu_attach(strobe_oncpu *b, unsigned freq, strobe_err *err);
void strobe_oncpu_detach(strobe_oncpu *b);
/* Adds a process (and its children to come) to the pid filter. */
int strobe_oncpu_add_pid(strobe_oncpu *b, pid_t pid);
/* Process pid has just exec'd (a command started by the caller): its interpreter (Python) is
 * looked for now, so that its first samples already have their frames read. */
void strobe_oncpu_exec(strobe_oncpu *b, pid_t pid);
/* Moves the counts since the last call into s (sampler_add_oncpu), each sample worth
 * one period of the rate attached. */
int strobe_oncpu_collect(strobe_oncpu *b, strobe_sampler *s);
/* The processes sampled for the first time (since their exec) since the last call, at most cap,
 * into out: for reading what only a live process shows (the agent's service name). Opened
 * with opts.fresh only (else none). Call again while it returns cap: more may be waiting. */
unsigned strobe_oncpu_fresh(strobe_oncpu *b, pid_t *out, unsigned cap);
/* An fd that polls readable (POLLIN) while new processes wait for strobe_oncpu_fresh, so that a
 * caller can sleep until there are some; -1 without opts.fresh. */
int strobe_oncpu_fresh_fd(const strobe_oncpu *b);
/* Looks in the processes strobe_oncpu_fresh gave for the C SDK's label offset (after what must
 * be read first while they run: their identity). */
void strobe_oncpu_fresh_labels(strobe_oncpu *b, const pid_t *pids, unsigned n);
void strobe_oncpu_get_stats(strobe_oncpu *b, strobe_oncpu_stats *st);
void strobe_oncpu_close(strobe_oncpu *b);

#endif
