/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decoding the kernel's perf records as the sampler opens its events (sample_id_all, the
 * sample types of event_kinds.h's kinds): each record type has its decoder in a table, which
 * checks the record against its size and hands the fields to the caller's handler of that type.
 * A record that is too short, of an unknown event or of a type without a handler is dropped:
 * the input is the kernel's, or in the offline feed and its fuzzer anyone's. Private to agent/.
 *
 * The sampler's own record type REC_UNWOUND (a sample whose user stack was walked when it was
 * read, held for its turn with the program counters in place of the stack copy) is decoded here
 * too, and checked all the same.
 */
#ifndef STROBE_AGENT_RECORD_DECODE_H
#define STROBE_AGENT_RECORD_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "event_kinds.h"
#include "perf.h"
#include "stack_cap.h"
#include "unwind.h" /* STROBE_UNWIND_NREGS */

/* A private record type for the sampler's arena (the kernel's are below PERF_RECORD_MAX, and
 * the sampler drops unknown ones as it reads them, so none comes from outside). Its body: the
 * sample record without its stack copy (stack size 0), then int32 nu (the unwinder's answer)
 * and uint32 n, n program counters (8 bytes each) and n activation bytes, padded to 8. */
#define REC_UNWOUND 0x7f01

/* A PERF_RECORD_SAMPLE's fields; pointers are into the record. */
typedef struct rec_sample {
	uint64_t id, ip, time, period, nr;
	uint32_t pid, tid, cpu, raw_size;
	const uint64_t *ips;
	const uint8_t *raw;
	uint64_t abi; /* REGS_USER: 0 = no user registers (a kernel thread) */
	uint64_t regs[STROBE_UNWIND_NREGS];
	uint64_t stack_size, stack_dyn; /* STACK_USER: bytes copied, bytes valid */
	const uint8_t *stack;
} rec_sample;

/* The unwound user stack a REC_UNWOUND record carries to its turn. */
typedef struct rec_unwound {
	int32_t nu;         /* -1: keep the kernel's frame-pointer chain */
	const uint8_t *pcs; /* nu program counters, unaligned */
	const uint8_t *act; /* nu activation flags */
} rec_unwound;

/* An executable mapping (PERF_RECORD_MMAP2 with PROT_EXEC; others are not handed on). */
typedef struct rec_mmap2 {
	int32_t pid;
	uint64_t start, len, pgoff;
	uint64_t dev, ino;         /* 0 when the record carries a build ID instead */
	const uint8_t *build_id;   /* NULL, or build_id_len bytes */
	uint8_t build_id_len;      /* at most STROBE_BUILD_ID_MAX */
	const char *path;          /* NUL-terminated within the record */
} rec_mmap2;

/* The handlers, one per record type; NULL: records of that type are dropped. */
typedef struct rec_handlers {
	/* kind: EVK_*; pre: the walked user stack of a REC_UNWOUND (else NULL) */
	void (*sample)(void *ctx, int kind, const rec_sample *sm, const rec_unwound *pre);
	void (*mmap2)(void *ctx, const rec_mmap2 *m);
	void (*comm)(void *ctx, int32_t pid, int32_t tid, const char *comm, bool exec);
	void (*fork)(void *ctx, int32_t pid, int32_t ppid, int32_t tid);
	void (*exit)(void *ctx, int32_t pid, int32_t tid);
	/* a thread switched in (PERF_RECORD_SWITCH{,_CPU_WIDE} without the out flag) */
	void (*switch_in)(void *ctx, int32_t tid, int64_t time);
} rec_handlers;

/* What decoding needs of the events: their kinds and each kind's sample_type. */
typedef struct rec_decoder {
	const event_kinds *kinds;
	const uint64_t *sample_type; /* [EVK_WAKEUP + 1], per kind */
} rec_decoder;

/* Decodes one record (h->size bytes, 8-byte aligned) and calls its handler. */
void rec_decode(const rec_decoder *d, const struct perf_event_header *h, const rec_handlers *hs,
		void *ctx);
/* The event kind of a sample record (0: none of ours, or not a sample). */
int rec_sample_kind(const rec_decoder *d, const struct perf_event_header *h);
/* Walks a PERF_RECORD_SAMPLE's fields of sample_type `type`; false when it does not fit. */
bool rec_parse_sample(const struct perf_event_header *h, uint64_t type, rec_sample *sm);
/* A record's time: a sample's, or the sample_id_all trailer's (0 when it has none). */
int64_t rec_time(const rec_decoder *d, const struct perf_event_header *h);
/* raw_size bytes of a tracepoint's raw data at off, little-endian (0 when out of range). */
uint64_t rec_raw_u(const rec_sample *sm, int off, int size);

/* Kernel timestamps are u64 nanoseconds; kept as int64 so differences are plain arithmetic,
 * clamped so that a corrupt record cannot make them overflow. */
static inline int64_t rec_ts(uint64_t t)
{
	return t > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)t;
}

#endif
