/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libbpf's messages and the BTF check, shared by the agent's eBPF loaders (bpf_msg.c). Private
 * to agent/.
 */
#ifndef STROBE_AGENT_BPF_MSG_H
#define STROBE_AGENT_BPF_MSG_H

#include "strobe/profile.h" /* strobe_err */

/* The calling thread's last libbpf message ("" when none since it was cleared); writable, so
 * that a loader can clear it before a step whose failure it wants to explain. */
char *agent_bpf_msg(void);
/* Before loading a program: libbpf's messages are captured (and cleared), and the kernel must
 * have BTF: 0, or -ENOENT with a message naming `what` (e.g. "the eBPF off-CPU programs"). */
int agent_bpf_start(const char *what, strobe_err *err);

#endif
