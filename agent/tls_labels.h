/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The C SDK's per-thread label block (sdk/strobe_labels.h, docs/sdk.md) as the kernel side and
 * the agent see it: the layout again in kernel types (the eBPF programs cannot include libc's
 * headers; agent/tls_labels.c checks at build time that both agree), what a read of it can end
 * in, and the keys and values of the test program agent/tls_labels.bpf.c. Shared by the eBPF
 * programs (agent/tls_labels.bpf.h) and user space (agent/tls_labels.c).
 */
#ifndef STROBE_AGENT_TLS_LABELS_H
#define STROBE_AGENT_TLS_LABELS_H

#include <linux/types.h>

#define STROBE_TLS_MAGIC 0x4c425453u /* STROBE_LABELS_MAGIC */
#define STROBE_TLS_VERSION 1u
#define STROBE_TLS_SLOTS 8u
#define STROBE_TLS_KEY_MAX 16u
#define STROBE_TLS_VALUE_MAX 48u

struct tls_label_slot {
	char key[STROBE_TLS_KEY_MAX];
	char value[STROBE_TLS_VALUE_MAX];
};
struct tls_block {
	__u32 magic;
	__u16 version, size;
	__u32 seq, nslots;
	struct tls_label_slot slot[STROBE_TLS_SLOTS];
};

/* How reading a thread's block at a sample ended. */
enum tls_status {
	STROBE_TLS_OK = 0,
	STROBE_TLS_NOPROC,  /* the process published no block (not using the SDK, or not yet seen) */
	STROBE_TLS_NOBASE,  /* the task has no thread pointer (a kernel thread) */
	STROBE_TLS_FAULT,   /* the block's page could not be read (not yet touched, swapped out) */
	STROBE_TLS_NOMAGIC, /* no labels set yet on this thread, or another layout version */
	STROBE_TLS_TORN,    /* the sample interrupted a write (odd sequence counter): dropped */
	STROBE_TLS_NSTATUS
};

/* agent/tls_labels.bpf.c, the proof program: samples counted per (process, status, the first
 * slots of its block). A map key must fit the eBPF stack (512 bytes): four slots of eight. */
#define STROBE_TLS_KEY_SLOTS 4u
struct tls_count_key {
	__u32 tgid;
	__u32 status;
	struct tls_label_slot slot[STROBE_TLS_KEY_SLOTS];
};
/* Per process, written by user space once it has found the process's published offset. */
struct tls_proc {
	__s64 tls_offset;
};

#endif
