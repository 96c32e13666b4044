/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A writer of synthetic perf ring records for the unit tests that feed the sampler through its
 * offline interface (test_sampler, test_unwind): a byte buffer, the record header begun and
 * closed (padded to 8 bytes, as the kernel does), and the tracepoint layout strobe requests on
 * a 6.x kernel. Each test writes its own record kinds on top of these.
 */
#ifndef STROBE_UNIT_PERF_RECORDS_H
#define STROBE_UNIT_PERF_RECORDS_H

#include <stdint.h>
#include <string.h>

#include <linux/perf_event.h>

#include "strobe/sampler.h"

static const strobe_sampler_layout L = {
	.id = {11, 22, 33},
	.prev_state_offset = 32, .prev_state_size = 8, .next_pid_offset = 56, .wakeup_pid_offset = 24};

typedef struct buf {
	uint8_t b[1 << 16];
	size_t len, start;
} buf;

static inline void put(buf *w, const void *p, size_t n)
{
	memcpy(w->b + w->len, p, n);
	w->len += n;
}
static inline void u64(buf *w, uint64_t v) { put(w, &v, 8); }
static inline void u32x2(buf *w, uint32_t a, uint32_t b)
{
	uint32_t v[2] = {a, b};
	put(w, v, 8);
}
static inline void begin(buf *w, uint32_t type, uint16_t misc)
{
	w->start = w->len;
	struct perf_event_header h = {.type = type, .misc = misc, .size = 0};
	put(w, &h, sizeof(h));
}
static inline void end(buf *w)
{
	while (w->len % 8)
		w->b[w->len++] = 0;
	struct perf_event_header *h = (void *)(w->b + w->start);
	h->size = (uint16_t)(w->len - w->start);
}

#endif
