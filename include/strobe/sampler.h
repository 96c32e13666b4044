/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler: call stacks of running threads from the kernel's perf_event interface, on-CPU
 * (cpu-clock samples), off-CPU (sched_switch + context-switch records + wake-ups) or both
 * ("wall"), aggregated in memory and turned into a symbolized pprof profile on demand.
 *
 * `strobe record` and `strobe agent` share it. The sampler owns one ring buffer per CPU; the
 * caller drives it with strobe_sampler_poll() from one thread (it blocks at most timeout_ms) and
 * asks for strobe_sampler_profile() whenever it wants the data so far (the agent every interval,
 * with reset, the recorder once at the end).
 *
 * Events are processed in timestamp order across CPUs (records are held back until every ring
 * has been read past their time), so a sample is always attributed to the mappings its process
 * had at that instant, even across exec, and processes that have exited are still named.
 *
 * Errors. Functions return 0/-errno and fill a strobe_err with a one-line message naming the
 * cause (for EACCES/EPERM: perf_event_paranoid and CAP_PERFMON).
 */
#ifndef STROBE_SAMPLER_H
#define STROBE_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"
#include "strobe/symbolize.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	STROBE_EV_CPU = 1u << 0,    /* on-CPU samples */
	STROBE_EV_OFFCPU = 1u << 1, /* off-CPU intervals */
	/* Lock contention summed elsewhere (the eBPF futex-wait program, sampler_add_lock)
	 * and added to the aggregate. Alone, the sampler opens its perf events at 1 Hz only for
	 * their side-band records (mappings, names, exits), and profiles are lock profiles. */
	STROBE_EV_LOCK = 1u << 2,
};

typedef struct strobe_sampler_opts {
	unsigned events;        /* STROBE_EV_* (both = wall-clock) */
	unsigned freq;          /* on-CPU samples per second per thread/CPU, default 99 */
	bool cycles;            /* on-CPU from the hardware cycle counter (frequency mode)
				   instead of the cpu-clock timer; values are then cycles */
	/* Targets: all, or pids (each with all its threads, and children created later), or
	 * one pid that is about to exec (enable_on_exec: counting starts at its exec). */
	bool all;
	const pid_t *pids;
	unsigned npids;
	bool enable_on_exec;
	bool kernel;            /* kernel frames too (default on in the CLI) */
	bool keep_idle;         /* keep samples of the idle task (pid 0); dropped by default */
	int64_t min_block_ns;   /* off-CPU intervals shorter than this are not recorded */
	unsigned ring_pages;    /* data pages per CPU ring (power of two); 0 = a default */
	unsigned max_stack;     /* frames per stack, at most 127; 0 = 127 */
	/* How user stacks are walked (STROBE_CG_*; zero = frame pointers, as before). dwarf and
	 * auto copy stack_size bytes of the user stack and the registers with every sample (on-CPU
	 * and switch-out) and unwind them with the binaries' unwind tables (x86-64 only). */
	unsigned call_graph;
	unsigned stack_size;        /* bytes, a multiple of 8, at most 65000; 0 = 16384 with on-CPU
				       samples, 8192 with switch-outs */
	size_t unwind_cache_bytes;  /* budget of the unwinder's table cache; 0 = 64 MiB */
	/* Called with a process's pid when its first sample (or off-CPU interval) is recorded,
	 * from the thread that polls: while the process most likely still runs, so that a caller
	 * can read what only a live process shows (its environment: the agent's service name)
	 * rather than at the interval's end, when a short-lived one is gone. NULL: none. */
	void (*on_process)(void *ctx, pid_t pid);
	void *on_process_ctx;
	/* On-CPU samples are summed elsewhere (the eBPF program of strobe/oncpu.h) and added with
	 * sampler_add_oncpu: the cpu-clock events are opened at 1 Hz (frame pointers, unless
	 * off-CPU samples want more) only for their side-band records, and their samples dropped;
	 * profiles still say freq's period. */
	bool cpu_external;
	/* Off-CPU intervals are summed elsewhere (the eBPF program of strobe/offcpu.h) and added
	 * with sampler_add_offcpu: no sched_switch events are opened. Without STROBE_EV_CPU
	 * the cpu-clock events are opened as with cpu_external, and profiles carry the off-CPU
	 * types only. */
	bool offcpu_external;
	/* Where /proc is (NULL: /proc): the targets' threads, the processes' mappings and names,
	 * their memory for the unwinder (the agent's proc_root, as its other readers use). */
	const char *proc_root;
} strobe_sampler_opts;

enum {
	STROBE_CG_FP = 0, /* the kernel's frame-pointer chain */
	STROBE_CG_DWARF,  /* unwind tables only (libdwfl; it follows frame pointers itself for
			     code without tables) */
	STROBE_CG_AUTO,   /* both: the table walk, completed by the frame-pointer chain where the
			     table walk stopped short (see docs/record.md) */
};
/* "fp", "dwarf" or "auto" as STROBE_CG_*, or -EINVAL: the one spelling of --call-graph for
 * the recorder, the agent and their config files. */
int strobe_call_graph_parse(const char *name);


typedef struct strobe_sampler_stats {
	uint64_t samples;       /* on-CPU samples taken */
	uint64_t switches;      /* off-CPU intervals recorded */
	uint64_t short_blocks;  /* off-CPU intervals below min_block, not recorded */
	uint64_t lost;          /* records the kernel dropped (ring full): PERF_RECORD_LOST */
	uint64_t throttled;     /* times the kernel throttled sampling */
	uint64_t idle;          /* samples of the idle task, dropped */
	uint64_t unknown_pid;   /* samples of processes whose maps could not be read */
	uint64_t unmatched;     /* switch-outs with no switch-in between them (a lost record) */
	uint64_t orphan_in;     /* switch-ins of a thread not known to be off CPU */
	uint64_t late;          /* records that arrived after later ones had been processed */
	uint32_t processes, threads, cpus, fds;
	uint32_t mappings, frames; /* distinct mappings and frames interned since the open */
	/* Unwinding (call_graph dwarf or auto): stacks unwound, how they ended, what it cost. */
	uint64_t unwound;           /* user stacks walked with unwind tables */
	uint64_t unwind_complete;   /* ... that reached the outermost frame */
	uint64_t unwind_truncated;  /* ... that needed more of the stack than was copied */
	uint64_t unwind_failed;     /* no usable module (the kernel's chain was kept) */
	uint64_t unwind_fp_spliced; /* auto: completed with frame-pointer frames */
	uint64_t unwind_fp_kept;    /* auto: the frame-pointer chain was longer and kept */
	uint64_t unwind_ns_p50, unwind_ns_p99; /* time per unwind (approximate, 1/8 octave) */
	uint64_t unwind_cache_bytes;           /* the unwinder's cache estimate, at its peak */
	/* Its cache of parsed unwind tables, one entry per binary (build ID): frames whose binary
	 * was found parsed, binaries parsed, binaries dropped for the budget. */
	uint64_t unwind_cache_hits, unwind_cache_misses, unwind_cache_evictions;
	/* Stacks deeper than the copy read on from the process (/proc/PID/mem), and those refused
	 * because the end of the copy had changed there meanwhile. */
	uint64_t unwind_extended, unwind_ext_changed;
	uint64_t unwind_debug_frame; /* frames stepped by .debug_frame (no .eh_frame FDE) */
	uint64_t unwind_rule_hits;   /* frames stepped by cached rules, without libdw */
	/* Samples unwound as they were read, and those held whole for their turn because their
	 * process or its leaf's mapping was not known yet. */
	uint64_t unwind_at_arrival, unwind_held;
} strobe_sampler_stats;

typedef struct strobe_sampler strobe_sampler;

/* Opens every event (disabled unless enable_on_exec, which the kernel enables at exec). NULL +
 * errno, with the reason in err. */
strobe_sampler *strobe_sampler_open(const strobe_sampler_opts *o, strobe_err *err);
void strobe_sampler_close(strobe_sampler *s);
int strobe_sampler_enable(strobe_sampler *s, strobe_err *err);
int strobe_sampler_disable(strobe_sampler *s);
/* Waits up to timeout_ms for data, then reads every ring. Returns 0 or -errno. */
int strobe_sampler_poll(strobe_sampler *s, int timeout_ms, strobe_err *err);
/* Processes everything still held (call after disable, before the last profile). */
int strobe_sampler_drain(strobe_sampler *s, strobe_err *err);
void strobe_sampler_get_stats(const strobe_sampler *s, strobe_sampler_stats *st);
/* After the last drain (disabled, nothing more to read): frees what only collection needs (the
 * held-record buffers, every process's address ranges), keeping what profiles are built from, so
 * symbolizing at the end does not stack on top of it. No more polling afterwards. */
void strobe_sampler_trim(strobe_sampler *s);
/* Between intervals, while collecting: returns what the interval touched and no longer needs
 * to the system (the unwinder's pages of mapped binaries, free heap), keeping every table. */
void strobe_sampler_release_memory(strobe_sampler *s);

typedef struct strobe_sampler_profile_opts {
	strobe_symbolizer *sym;  /* NULL: raw addresses with mappings and build IDs only */
	bool per_thread;         /* tid and thread labels (else pid and process only) */
	bool reset;              /* start a new aggregation period afterwards */
	/* Extra labels added to every sample, "key=value" each. */
	const char *const *labels;
	unsigned nlabels;
	/* A root frame named after each sample's process (as stackcollapse-perf.pl does), so a
	 * flame graph of many processes keeps them apart. For text and pictures: pprof readers
	 * expect real frames only. */
	bool process_frames;
	/* Name frames object by object and release each object's tables when done (peak memory
	 * of one object's debug information; tables are reloaded next time). */
	bool release_objects;
	/* Only samples of this pid (0 = all); for the agent's per-process profiles. */
	pid_t only_pid;
	/* The lock-contention profile (contentions/count, delay/nanoseconds, a lock_addr label)
	 * rather than the CPU/off-CPU one; implied for a sampler opened with STROBE_EV_LOCK
	 * alone. */
	bool locks;
	/* User frames in files stay addresses with their mapping's build ID (read from the file's
	 * note when the kernel gave none); sym names kernel and JIT frames only. */
	bool user_raw;
	/* With user_raw: told of every file mapping whose build ID was read, with the path it was
	 * read through (the agent's symbol uploads). May be NULL. */
	void (*raw_object)(void *ctx, const char *build_id_hex, const char *path);
	void *raw_ctx;
	/* Told, once per process and profile, that frames in its anonymous executable memory (a
	 * JIT's code) had no name in its perf map; returns > 0 when the map was just written, so
	 * that those frames are looked up again (strobe record asks JVMs for their maps here, the
	 * agent queues the request: strobe/jvm_perfmap.h). May be NULL. */
	int (*jit_unnamed)(void *ctx, pid_t pid);
	void *jit_ctx;
} strobe_sampler_profile_opts;

/*
 * The profile of everything aggregated since open (or the last reset). Off-CPU intervals still
 * open (a thread off CPU right now) are counted up to the current time. NULL + errno on error.
 */
strobe_profile *strobe_sampler_profile(strobe_sampler *s, const strobe_sampler_profile_opts *o,
				       strobe_err *err);

/* The pids with samples in the current aggregation period, for per-process export. Returns the
 * count written (at most cap). */
unsigned strobe_sampler_pids(const strobe_sampler *s, pid_t *out, unsigned cap);

/* ---- offline use (tests, fuzzing, replay) ------------------------------------------------------ */

/* What the kernel's records look like: the sample ids of the three events and the raw
 * tracepoint field offsets (from tracefs on a live system). */
typedef struct strobe_sampler_layout {
	uint64_t id[3]; /* PERF_SAMPLE_IDENTIFIER of cpu-clock, sched_switch, sched_wakeup */
	int prev_state_offset, prev_state_size, next_pid_offset, wakeup_pid_offset;
} strobe_sampler_layout;

/* A sampler with no events: records are given to it with strobe_sampler_feed, and /proc is
 * never read. Sample formats are those strobe_sampler_open requests (IDENTIFIER, IP, TID, TIME,
 * CPU, PERIOD, CALLCHAIN, RAW for sched_switch; IDENTIFIER, TID, TIME, CPU, RAW for
 * sched_wakeup; sample_id_all trailers of TID, TIME, CPU, IDENTIFIER). With call_graph dwarf or
 * auto, cpu-clock and sched_switch samples also carry REGS_USER (abi, then the registers of
 * STROBE_SAMPLER_REGS_MASK, in bit order) and STACK_USER (size, bytes, dyn_size). */
#define STROBE_SAMPLER_REGS_MASK 0xff01ffull /* x86-64: AX..IP (bits 0-8), R8..R15 (16-23) */
/* NULL + errno (ENOMEM). */
strobe_sampler *strobe_sampler_open_offline(const strobe_sampler_opts *o,
					    const strobe_sampler_layout *l);
/* Feeds concatenated perf records (each 8-byte aligned, at most 64 KiB) and processes, in time
 * order, those older than `until` with any held from earlier feeds; the rest are held (as after
 * a ring read). until = INT64_MAX processes everything and makes the newest record "now".
 * -EINVAL on a malformed buffer (records before the bad one are kept). */
int strobe_sampler_feed(strobe_sampler *s, const void *buf, size_t len, int64_t until);

#ifdef __cplusplus
}
#endif
#endif
