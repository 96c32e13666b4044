/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process tracker: what every process and thread the sampler has seen looks like, built
 * from /proc (for processes that existed before recording) and kept current from the kernel's
 * own side-band records (MMAP2, COMM, FORK, EXIT), so that exec'd and exited processes are still
 * attributed and symbolized. Only executable mappings are kept. Private to agent/.
 *
 * Mappings are interned: one proc_map per distinct (file, range, offset, inode, build ID), so
 * the children of a fork share their parent's entries and frame ids stay small.
 */
#ifndef STROBE_AGENT_PROC_H
#define STROBE_AGENT_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"
#include "strobe/symbolize.h"

#define STROBE_MAP_NONE 0u   /* an address in no known mapping */
#define STROBE_MAP_KERNEL 1u /* every kernel address */

typedef struct proc_map {
	uint64_t start, end, pgoff;
	uint64_t dev, ino;
	uint32_t path;      /* string id in the tracker's string table */
	int32_t pid;        /* for anonymous (JIT) mappings only, else 0 */
	uint8_t build_id[STROBE_BUILD_ID_MAX];
	uint8_t build_id_len;
	uint8_t anon;       /* anonymous executable memory: JIT code, named by perf-PID.map */
	uint8_t pad_[2];
} proc_map;

typedef struct proc_vma {
	uint64_t start, end;
	uint32_t map;
} proc_vma;

typedef struct proc {
	int32_t pid;
	char comm[16];
	bool exited, maps_read;
	bool sampled;           /* a sample of this image was recorded (the sampler's on_process
				   hook has been called); an exec clears it */
	uint8_t exit_age;       /* forget passes seen since its exit (tracker_forget) */
	int64_t rescan_ns;      /* when /proc/PID/maps was last read, for rate-limiting */
	bool maps_changed;      /* a record mapped code or exec'd since /proc/PID/maps was last read:
				   the mappings known may be behind /proc (stack_resolve.h) */
	int64_t maps_ns;        /* when the mappings known were read from /proc (0: never): a record
				   stamped before that is in them already (tracker_news) */
	int64_t sideband_ns;    /* when a record that changes its code (an mmap, an exec) was last
				   read from the rings, to be held for its turn: past rescan_ns, the
				   mappings known are behind /proc (stack_resolve.h) */
	proc_vma *vma;        /* sorted by start, non-overlapping */
	uint32_t nvma, cvma;
	/* The image it ran before its exec, when it was forked in view and exec'd once since
	 * (image PROC_IMAGE_EXECD): what a stack summed in the kernel between its fork and its exec
	 * is named by (tracker_find_pre), since a sum carries no time to say which image it was
	 * in. Kept for two forget passes after the exec (pre_age). */
	proc_vma *pre_vma;
	uint32_t pre_nvma;
	uint8_t image;        /* PROC_IMAGE_* */
	uint8_t pre_age;
} proc;

enum {
	PROC_IMAGE_UNKNOWN = 0, /* met in /proc, or its history is not known */
	PROC_IMAGE_FORKED,      /* forked in view, no exec since: the parent's image */
	PROC_IMAGE_EXECD,       /* ... and exec'd once since: pre_vma is the forked image */
	PROC_IMAGE_LATER,       /* exec'd again: the forked image is gone */
};

typedef struct proc_thread {
	int32_t tid, pid;
	char comm[16];
	/* Off-CPU state: the interval open since the thread last left the CPU. */
	int64_t out_ns, wake_ns;
	bool out, blocked;
	bool back; /* switched in since the last switch-out (a second report of it is no orphan) */
	bool exited;
	uint8_t exit_age;
	uint32_t *stack, nstack; /* frame ids at switch-out, leaf first */
} proc_thread;

typedef struct tracker {
	strobe_itab strings;
	strobe_itab maps;      /* proc_map, fixed size; ids 0 and 1 reserved */
	strobe_itab pids;      /* int32 pid -> index into procs */
	proc *procs;
	uint32_t cprocs;
	strobe_itab tids;      /* int32 tid -> index into threads */
	proc_thread *threads;
	uint32_t cthreads;
	const char *proc_root; /* "/proc"; NULL: never read (records only) */
} tracker;

int tracker_init(tracker *t);
void tracker_free(tracker *t);

/* The process / thread, created when absent (create) or NULL. Pointers are valid until the
 * next call that creates one. */
proc *tracker_proc(tracker *t, int32_t pid, bool create);
proc_thread *tracker_thread(tracker *t, int32_t tid, int32_t pid, bool create);

/* Reads /proc/PID/maps (replacing what is known) and the process's name. 0/-errno. */
int tracker_read_proc(tracker *t, int32_t pid, int64_t now_ns);

/* Side-band records. */
int tracker_mmap(tracker *t, int32_t pid, uint64_t start, uint64_t len,
			uint64_t pgoff, uint64_t dev, uint64_t ino, const uint8_t *build_id,
			uint8_t build_id_len, const char *path);
/* how: TRACKER_NAME (a thread's new name), TRACKER_EXEC (a new image: its mappings follow as
 * MMAP2 records) or TRACKER_EXEC_READ (a new image whose mappings were read from /proc since:
 * kept). */
enum { TRACKER_NAME = 0, TRACKER_EXEC = 1, TRACKER_EXEC_READ = 2 };
void tracker_comm(tracker *t, int32_t pid, int32_t tid, const char *comm, unsigned how);
/* ns: the record's time (CLOCK_MONOTONIC; 0: unknown): a child whose mappings were read from
 * /proc after it keeps them rather than take its parent's. */
int tracker_fork(tracker *t, int32_t pid, int32_t ppid, int32_t tid, int64_t ns);
/* Whether a side-band record of pid stamped ns (CLOCK_MONOTONIC; 0: unknown) may change the
 * mappings known for it: not when they were read from /proc after it, when what it did is in
 * what was read. Records are applied in time order but after a delay (sampler.c's ORDER_NS),
 * and a stack summed in the kernel can have had its process's /proc/PID/maps read meanwhile
 * (stack_resolve.h): replaying an exec's record then emptied mappings newer than it, and the
 * libraries mapped after it went unnamed until their own records' turn. */
bool tracker_news(const tracker *t, int32_t pid, int64_t ns);
/* Whether pid's mapping at start is known already as this one (the same range, offset and
 * path): a record of it that is not news still brings what /proc does not say, its build ID. */
bool tracker_has_mapping(const tracker *t, int32_t pid, uint64_t start, uint64_t len,
			 uint64_t pgoff, const char *path);
void tracker_exit(tracker *t, int32_t pid, int32_t tid);
/* Forgets the processes and threads whose exit was seen before the previous call (one pass of
 * grace: a sample read from another CPU's buffer after the exit record still finds them), so
 * that a host's churn of short-lived processes does not grow the tables. Ids and pointers of
 * processes and threads change: call it only when nothing holds them (between intervals).
 * Returns how many processes were forgotten, or -ENOMEM (nothing changed). */
int tracker_forget(tracker *t);

/* The mapping id of addr in process pid (STROBE_MAP_NONE when none). */
uint32_t tracker_find(const proc *p, uint64_t addr);
/* The mapping holding addr in the image p ran between its fork and its exec (image
 * PROC_IMAGE_EXECD; otherwise as tracker_find, what it runs now). */
uint32_t tracker_find_pre(const proc *p, uint64_t addr);

static inline const proc_map *tracker_map(const tracker *t, uint32_t id)
{
	return (const proc_map *)strobe_itab_get(&t->maps, id, NULL);
}
static inline const char *tracker_str(const tracker *t, uint32_t id)
{
	return (const char *)strobe_itab_get(&t->strings, id, NULL);
}

#endif
