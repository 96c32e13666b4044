/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's end of the preload library's channel (include/strobe/heap_channel.h): it finds the
 * channel files of the host's processes that run with libstrobe-heap.so preloaded, in one
 * directory, and each interval turns what each process sampled since the last interval into a
 * heap profile (allocations since, in use now) and a mutex profile (contentions and delay
 * since), handed to the caller one at a time. The processes never wait for the agent: it only
 * reads their files (and writes the paused flag). A file whose process image is over (exited,
 * killed, or replaced by an exec) is read one last time and removed. Private to agent/.
 *
 * Ownership: the collector owns its snapshots; a profile handed to emit is the collector's and
 * is freed when emit returns.
 */
#ifndef STROBE_AGENT_PRELOAD_H
#define STROBE_AGENT_PRELOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"
#include "strobe/symbolize.h"

typedef struct preload preload;

typedef struct preload_stats {
	uint64_t files;     /* channel files read in the last collection */
	uint64_t profiles;  /* profiles handed over, in all */
	uint64_t removed;   /* files of finished process images removed */
	uint64_t refused;   /* files that did not read as a channel (skipped) */
	uint64_t dropped;   /* samples the processes' tables had no room for (their counters) */
} preload_stats;

/* dir: where the library writes its files (its STROBE_HEAP_DIR; NULL: /dev/shm). NULL + errno. */
preload *preload_new(const char *dir);
void preload_free(preload *pl);

/* name: "memory" (alloc_objects, alloc_space, inuse_objects, inuse_space) or "mutex"
 * (contentions, delay); p is borrowed for the call. */
/* service and exe: what the process's library read of STROBE_SERVICE / PYROSCOPE_APPLICATION_NAME
 * and /proc/self/exe at its start ("" when none; the file is untrusted: names to clean, not to
 * trust further). */
typedef void (*preload_emit)(void *ctx, pid_t pid, const char *name, const char *service,
				    const char *exe, strobe_profile *p);

/* Reads every channel file and emits each process's profiles for [now_unix_ns - interval_ns,
 * now_unix_ns); sym names the frames (NULL: addresses only). While paused nothing is emitted
 * and every file found is marked paused. Returns how many files were read, or -errno when the
 * directory cannot be read (a missing one is 0: nothing preloaded yet). */
int preload_collect(preload *pl, strobe_symbolizer *sym, int64_t now_unix_ns,
			   int64_t interval_ns, preload_emit emit, void *ctx);
/* Sets (or clears) the paused flag of every channel file now: paused, the processes take no
 * new samples (the agent's pause and kill switch reach into them). */
void preload_pause(preload *pl, bool paused);
void preload_get_stats(const preload *pl, preload_stats *st);

#endif
