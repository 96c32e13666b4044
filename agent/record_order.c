// SPDX-License-Identifier: Apache-2.0
/*
 * Holding records until their turn and handing them on in time order (record_order.h). The
 * records are copied into one arena as they arrive, with a pending entry (time, arrival number,
 * offset) each; a flush sorts the entries, hands on the old enough ones and moves the few left
 * (the last milliseconds) to the front of the arena.
 */
#include <stdlib.h>
#include <string.h>

#include "record_order.h"

uint8_t *order_hold(rec_order *o, int64_t time, size_t len)
{
	if (o->alen + len > o->acap) {
		size_t nc = o->acap ? o->acap * 2 : 1 << 20;
		while (nc < o->alen + len)
			nc *= 2;
		uint8_t *na = realloc(o->arena, nc);
		if (!na)
			return NULL;
		o->arena = na;
		o->acap = nc;
	}
	if (o->npend == o->cpend) {
		size_t nc = o->cpend ? o->cpend * 2 : 4096;
		rec_pending *np = realloc(o->pend, nc * sizeof(*np));
		if (!np)
			return NULL;
		o->pend = np;
		o->cpend = nc;
	}
	uint8_t *d = o->arena + o->alen;
	o->pend[o->npend++] = (rec_pending){time, o->seq++, o->alen, (uint32_t)len};
	o->alen += len;
	return d;
}

static int by_time(const void *a, const void *b)
{
	const rec_pending *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_offset(const void *a, const void *b)
{
	const rec_pending *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

void order_flush_until(rec_order *o, int64_t cutoff,
		       void (*fn)(void *ctx, const struct perf_event_header *h), void *ctx)
{
	if (!o->npend) {
		if (cutoff > o->horizon_ns)
			o->horizon_ns = cutoff;
		return;
	}
	qsort(o->pend, o->npend, sizeof(*o->pend), by_time);
	/* fn may hold more records: o->pend and o->arena may move, and what it adds goes, unsorted,
	 * after the sorted part, so only that part is walked. */
	size_t i = 0, sorted = o->npend;
	for (; i < sorted && o->pend[i].time < cutoff; i++) {
		if (o->pend[i].time < o->horizon_ns)
			o->late++; /* arrived after its turn: handed on out of order */
		fn(ctx, (const struct perf_event_header *)(o->arena + o->pend[i].off));
	}
	if (cutoff > o->horizon_ns)
		o->horizon_ns = cutoff;
	if (i == 0)
		return;
	/* Compact what is left in arena order, so that every move goes to a lower address than
	 * any record still to be moved. */
	qsort(o->pend + i, o->npend - i, sizeof(*o->pend), by_offset);
	size_t w = 0, alen = 0;
	for (size_t r = i; r < o->npend; r++) {
		rec_pending pd = o->pend[r];
		memmove(o->arena + alen, o->arena + pd.off, pd.len);
		pd.off = alen;
		alen += pd.len;
		o->pend[w++] = pd;
	}
	o->npend = w;
	o->alen = alen;
}

void order_free(rec_order *o)
{
	free(o->arena);
	free(o->pend);
	o->arena = NULL;
	o->pend = NULL;
	o->alen = o->acap = o->npend = o->cpend = 0;
}
