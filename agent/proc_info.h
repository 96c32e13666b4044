/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What proc_info.c shares with the rest of the agent beyond strobe_proc_info_read (public, in
 * strobe/agent.h): the one rule for turning text a process controls (its environment, comm,
 * executable path, or what its preloaded library wrote) into a label value, and the cgroup
 * read alone. Private to agent/.
 */
#ifndef STROBE_AGENT_PROC_INFO_H
#define STROBE_AGENT_PROC_INFO_H

#include <stddef.h>
#include <sys/types.h>

/* dst <- the first len bytes of src, printable (a NUL among them too):
 * control characters, quotes and backslashes become '_', so the value needs no escaping in a
 * label or a log line; cut to fit cap (>= 1) with its NUL. */
void proc_info_clean(char *dst, size_t cap, const char *src, size_t len);

/* The cgroup path of process pid under root (NULL: /proc) as strobe_proc_info_read keeps it
 * (cleaned, cut to cap): the one file the agent reads again to see whether a process it knows
 * moved (the others change with an exec, or its comm, which the sampler sees). 0/-errno ("" in out). */
int proc_info_cgroup(const char *root, pid_t pid, char *out, size_t cap);

#endif
