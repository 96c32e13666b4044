/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libbpf's messages, the BTF check and per-CPU counters, shared by the agent's eBPF loaders
 * (bpf_msg.c). Private
 * to agent/.
 */
#ifndef STROBE_AGENT_BPF_MSG_H
#define STROBE_AGENT_BPF_MSG_H

#include <stdint.h>

#include "strobe/profile.h" /* strobe_err */

/* The calling thread's last libbpf message ("" when none since it was cleared); writable, so
 * that a loader can clear it before a step whose failure it wants to explain. */
char *agent_bpf_msg(void);
/* Before loading a program: libbpf's messages are captured (and cleared), and the kernel must
 * have BTF: 0, or -ENOENT with a message naming `what` (e.g. "the eBPF off-CPU programs"). */
int agent_bpf_start(const char *what, strobe_err *err);
/* Counters kept per CPU by a program (a BPF_MAP_TYPE_PERCPU_ARRAY of u64 at map_fd, keys 0..n-1),
 * summed over ncpus into out[0..n); a key that cannot be read counts 0. */
void agent_bpf_percpu_sum(int map_fd, int ncpus, uint64_t *out, uint32_t n);

#endif
