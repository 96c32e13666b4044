/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What proc_info.c shares with the rest of the agent beyond strobe_proc_info_read (public, in
 * strobe/agent.h): the one rule for turning text a process controls (its environment, comm,
 * executable path, or what its preloaded library wrote) into a label value. Private to agent/.
 */
#ifndef STROBE_AGENT_PROC_INFO_H
#define STROBE_AGENT_PROC_INFO_H

#include <stddef.h>

/* dst <- the first len bytes of src, printable (a NUL among them too):
 * control characters, quotes and backslashes become '_', so the value needs no escaping in a
 * label or a log line; cut to fit cap (>= 1) with its NUL. */
void proc_info_clean(char *dst, size_t cap, const char *src, size_t len);

#endif
