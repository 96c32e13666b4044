/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strobe's native C SDK: per-thread labels (endpoint, span_id, a few more) that a profiler reads
 * at each sample without any language runtime. A program links build/libstrobe-sdk.a (or .so),
 * calls strobe_labels_set("endpoint", "/checkout") and strobe_labels_set("span_id", "...") when
 * a request starts on a thread and strobe_labels_clear() when it ends; the agent (or `strobe
 * record`) reads the thread's block from an eBPF program on its sampling event and attaches the
 * labels to that sample, so the store can select a request's or a span's own samples.
 *
 * The block is a thread-local variable with a fixed, versioned layout (docs/sdk.md), written
 * only by its own thread and read by the kernel at sample time, which can interrupt a write: a
 * sequence counter (odd while a write is in progress, bumped before and after) lets the reader
 * drop a torn copy. Keys and values are cut to fixed slots, never overflowed; a key beyond the
 * slots is refused (-ENOSPC). Everything here is async-signal-safe and allocates nothing.
 *
 * Returns: 0 or -errno (-EINVAL: bad key, -ENOSPC: every slot taken). A cut value is stored
 * cut and returns 1, so a caller can tell without the profiler losing the sample.
 */
#ifndef STROBE_LABELS_H
#define STROBE_LABELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_LABELS_MAGIC 0x4c425453u /* "STBL" little-endian */
#define STROBE_LABELS_VERSION 1u
#define STROBE_LABELS_SLOTS 8u
#define STROBE_LABELS_KEY_MAX 16u   /* bytes of a key with its NUL: 15 characters */
#define STROBE_LABELS_VALUE_MAX 48u /* bytes of a value with its NUL: 47 (a trace ID is 32) */

/* The layout the kernel reads (version 1): 16 bytes of header, then the slots. A slot with an
 * empty key is free; used slots are packed at the front (0 .. nslots-1). */
struct strobe_label_slot {
	char key[STROBE_LABELS_KEY_MAX];
	char value[STROBE_LABELS_VALUE_MAX];
};
struct strobe_labels_block {
	uint32_t magic;   /* STROBE_LABELS_MAGIC once the thread has set a label */
	uint16_t version; /* STROBE_LABELS_VERSION */
	uint16_t size;    /* sizeof(struct strobe_labels_block) */
	uint32_t seq;     /* odd: a write is in progress; a copy is good when seq was even and
			   * unchanged across it */
	uint32_t nslots;  /* slots in use */
	struct strobe_label_slot slot[STROBE_LABELS_SLOTS];
};

/* What the SDK publishes once per process for the profiler, at a symbol it finds by name
 * (strobe_labels_process): the calling thread's block is at thread pointer (x86-64: fsbase,
 * aarch64: tpidr_el0) + tls_offset, the same offset for every thread of the process (the block
 * is in static, initial-exec TLS). */
struct strobe_labels_process {
	uint32_t magic;   /* STROBE_LABELS_MAGIC */
	uint16_t version; /* STROBE_LABELS_VERSION */
	uint16_t size;    /* sizeof(struct strobe_labels_block) */
	int64_t tls_offset;
};
extern struct strobe_labels_process strobe_labels_process;
#define STROBE_LABELS_PROCESS_SYMBOL "strobe_labels_process"

/* Sets (or replaces) label key on the calling thread; the value is cut to VALUE_MAX-1 bytes
 * (at a UTF-8 character boundary). 0, 1 when cut, -EINVAL (NULL or empty key, a key longer
 * than KEY_MAX-1, NULL value), -ENOSPC (all slots used by other keys). */
int strobe_labels_set(const char *key, const char *value);
/* The span ID as 16 lower-case hex digits, OpenTelemetry's form. */
int strobe_labels_set_span_id(uint64_t span_id);
/* Removes one label (0, or -ENOENT when it was not set). */
int strobe_labels_del(const char *key);
/* Removes every label of the calling thread (end of a request). */
void strobe_labels_clear(void);
/* The calling thread's block (for tests and for in-process readers). */
const struct strobe_labels_block *strobe_labels_current(void);

#ifdef __cplusplus
}
#endif
#endif
