/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * Reading the C SDK's per-thread label block (sdk/strobe_labels.h) from an eBPF program on a
 * sampling event, for any program that wants its samples labelled (the on-CPU sampler, the
 * proof program agent/tls_labels.bpf.c). Include it, then call tls_labels_read() with
 * the current task, the process's TLS offset (user space reads it once per process from the
 * SDK's published symbol and puts it in a map: agent/tls_labels.c) and a buffer of
 * sizeof(struct tls_block) (528 bytes: larger than the eBPF stack allows, so a per-CPU
 * map value).
 *
 * The block is found as the thread pointer plus the offset: on x86-64 the thread pointer is
 * fsbase, read from task->thread.fsbase. The kernel writes that field at clone (CLONE_SETTLS)
 * and at arch_prctl(ARCH_SET_FS), and on a context switch; libc sets it once per thread, so
 * even while the thread runs the field holds its value. Other architectures: not read here
 * (NOBASE), the sample stays unlabelled.
 *
 * The copy is good when the block's magic and version match and its sequence counter is even:
 * the sample runs on the thread's own CPU, interrupting it, so no write can progress during the
 * copy; an odd counter means the sample interrupted a write (the copy is dropped, TORN).
 * bpf_probe_read_user faults (never sleeps) on a page not present: FAULT, counted.
 *
 * The kernel types are declared with a ___strobe_tls suffix (CO-RE ignores it), so this header
 * can be included beside others that declare their own struct task_struct.
 */
#ifndef STROBE_AGENT_TLS_LABELS_BPF_H
#define STROBE_AGENT_TLS_LABELS_BPF_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "tls_labels.h"

struct thread_struct___strobe_tls {
	unsigned long fsbase;
} __attribute__((preserve_access_index));
struct task_struct___strobe_tls {
	struct thread_struct___strobe_tls thread;
} __attribute__((preserve_access_index));

/* STROBE_TLS_OK with the block in *out, or why not (enum tls_status). */
static __always_inline __u32 tls_labels_read(void *task, __s64 tls_offset,
						    struct tls_block *out)
{
	struct task_struct___strobe_tls *t = task;
	unsigned long base = 0;
	if (!bpf_core_field_exists(t->thread.fsbase))
		return STROBE_TLS_NOBASE;
	base = BPF_CORE_READ(t, thread.fsbase);
	if (!base)
		return STROBE_TLS_NOBASE;
	if (bpf_probe_read_user(out, sizeof(*out), (const void *)(base + tls_offset)) != 0)
		return STROBE_TLS_FAULT;
	if (out->magic != STROBE_TLS_MAGIC || out->version != STROBE_TLS_VERSION ||
	    out->size != sizeof(*out))
		return STROBE_TLS_NOMAGIC;
	if (out->seq & 1)
		return STROBE_TLS_TORN;
	return STROBE_TLS_OK;
}

#endif
