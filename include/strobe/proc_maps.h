/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /proc/PID/maps, read through a configurable proc root (a container's or a test's /proc, as
 * the agent's --proc-root gives it): one parser for the process tracker, the symbolizer's vDSO
 * lookup and whoever else needs a process's mappings.
 *
 * Ownership: an entry and its path are the reader's, valid only during the callback; copy what
 * must outlive it.
 */
#ifndef STROBE_PROC_MAPS_H
#define STROBE_PROC_MAPS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

typedef struct strobe_maps_entry {
	uint64_t start, end, offset, inode;
	unsigned dev_major, dev_minor;
	char perms[5];    /* "r-xp" */
	const char *path; /* "/usr/lib/libc.so.6", "[vdso]", "" for anonymous memory */
} strobe_maps_entry;

/* Parses one line, "start-end perms offset maj:min inode   path" (the newline, if any, is
 * cut off in place). -EINVAL for a line that is not one. */
int strobe_maps_parse_line(char *line, strobe_maps_entry *e);

/* Opens PROC_ROOT/PID/maps (pid < 0: PROC_ROOT/self/maps; proc_root NULL: "/proc"); NULL with
 * errno set when it cannot be (ENOENT: the process is gone). */
FILE *strobe_proc_maps_open(const char *proc_root, int pid);
/* Calls fn with each mapping of an opened maps file, in the file's order, then closes it; lines
 * that do not parse are skipped. A negative return of fn stops the walk and is returned. */
int strobe_proc_maps_walk(FILE *f, int (*fn)(void *ctx, const strobe_maps_entry *e), void *ctx);
/* Both: 0, fn's negative return, or -errno when the file cannot be opened. */
int strobe_proc_maps_read(const char *proc_root, int pid,
			  int (*fn)(void *ctx, const strobe_maps_entry *e), void *ctx);

static inline bool strobe_maps_exec(const strobe_maps_entry *e)
{
	return e->perms[2] == 'x';
}

#endif
