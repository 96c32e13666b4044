/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel's perf_event interface, the part the sampler needs: opening events, the mmap'ed
 * ring buffer each CPU's events write into, and tracepoint ids and field offsets from tracefs.
 * Private to agent/.
 */
#ifndef STROBE_AGENT_PERF_H
#define STROBE_AGENT_PERF_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"

int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group, unsigned long flags);

/* A one-line explanation of an open() failure: privilege, missing feature, no such process. */
int perf_open_err(strobe_err *err, int code, const char *what, pid_t pid);

/* One mmap'ed ring: a control page and 2^n data pages. */
typedef struct perf_ring {
	int fd;
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	size_t size;   /* data bytes, a power of two */
	uint8_t *tmp;  /* a record that wraps around the end is copied here (max 64 KiB) */
} perf_ring;

int perf_ring_map(perf_ring *r, int fd, unsigned pages);
void perf_ring_unmap(perf_ring *r);
/* The ring's head now: what the kernel has written up to. */
uint64_t perf_ring_head(const perf_ring *r);
/* Calls fn for every complete record from the tail up to head (a value perf_ring_head gave);
 * read_to then moves the tail past them, peek leaves it (the same records are read again). fn's
 * record stays valid only during the call. Stops (returning fn's value) when fn returns
 * non-zero. */
int perf_ring_peek(perf_ring *r, uint64_t head,
		     int (*fn)(const struct perf_event_header *h, void *ctx), void *ctx);
int perf_ring_read_to(perf_ring *r, uint64_t head,
			int (*fn)(const struct perf_event_header *h, void *ctx), void *ctx);

/* Calls fn(ctx, tid) once for each thread of process pid (PROC_ROOT/PID/task), listing them again
 * until a round finds none new: a thread created before its creator's inheriting event was open
 * is not inherited. only_pid: pid alone (a forked child waiting to exec has one thread). fn
 * returns 0, or -ESRCH when the thread exited meanwhile (skipped), or another -errno (which
 * stops the walk and is returned). 0 when some thread was done; -ESRCH when none was (no such
 * process, or it exited). */
int perf_each_thread(const char *proc_root, pid_t pid, bool only_pid,
		     int (*fn)(void *ctx, pid_t tid), void *ctx);

/* Number of possible CPUs and whether cpu i is online (events can only be opened there). */
int perf_cpu_count(void);
bool perf_cpu_online(int cpu);

/* The id of tracepoint sys:name (for attr.config), finding (or, as root, mounting) tracefs. */
int perf_tracepoint_id(const char *sys, const char *name, strobe_err *err);
/* Byte offset and size of a field in the tracepoint's raw record. */
int perf_tracepoint_field(const char *sys, const char *name, const char *field, int *offset,
			    int *size, strobe_err *err);

#endif
