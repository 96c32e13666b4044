/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time ordering of the records read from the per-CPU rings (perf's ordered-events): each record
 * is held, copied into one arena, until the caller knows that nothing older can still arrive;
 * then the held records older than that moment are handed on in time order, records of the
 * same time in the order they were held. Private to agent/.
 *
 * The sampler's rule for that moment (every ring read up to heads taken at once, minus a margin)
 * is the sampler's: this holds and hands on, and counts what came too late.
 */
#ifndef STROBE_AGENT_RECORD_ORDER_H
#define STROBE_AGENT_RECORD_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "perf.h"

typedef struct rec_pending {
	int64_t time;
	uint64_t seq;
	size_t off;
	uint32_t len;
} rec_pending;

typedef struct rec_order {
	uint8_t *arena;      /* the held records, each at its pending entry's offset */
	size_t alen, acap;
	rec_pending *pend;
	size_t npend, cpend;
	uint64_t seq;
	int64_t horizon_ns;  /* every record older than this has been handed on */
	uint64_t late;       /* records held after their time had been handed on */
} rec_order;

/* Room for a record of len bytes, held until `time`'s turn (NULL: out of memory). The caller
 * copies the record there before anything else is held. */
uint8_t *order_hold(rec_order *o, int64_t time, size_t len);

/* Hands each held record older than cutoff to fn, in time order, then keeps the rest (compacted,
 * in the order they were held). fn may hold more records meanwhile, newer than cutoff: they
 * wait for a later call. The horizon moves up to cutoff. */
void order_flush_until(rec_order *o, int64_t cutoff,
		       void (*fn)(void *ctx, const struct perf_event_header *h), void *ctx);

/* Bytes held. */
static inline size_t order_bytes(const rec_order *o)
{
	return o->alen;
}

/* Frees what is held (nothing must be: after a flush to the end) and its memory. */
void order_free(rec_order *o);

#endif
