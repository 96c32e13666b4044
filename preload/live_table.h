/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The live table of libstrobe-heap.so: the sampled allocations not yet freed, in the channel's
 * shared memory (include/strobe/heap_channel.h), keyed by address. Header-only and free of libc
 * calls so that the unit tests (tests/unit/test_heap_channel.c) exercise the very code the
 * library runs.
 *
 * Open addressing with linear probing and backward-shift deletion: no tombstones, so the lookup
 * of an address that is not there (a free whose filter slot was a false positive) stops at the
 * first empty slot, however long the program has run. The table is kept at most 3/4 full; an
 * insert beyond that fails and the caller counts a dropped sample. Callers serialize writers
 * (the library's spin lock); entries are published ptr-last with release order for readers in
 * other processes, who may see an entry twice or miss one while it moves (they re-check ptr).
 * slots must be a power of two.
 */
#ifndef STROBE_PRELOAD_LIVE_TABLE_H
#define STROBE_PRELOAD_LIVE_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "strobe/heap_channel.h"

static inline uint32_t strobe_live_hash(uintptr_t p)
{
	/* malloc's blocks are 16-byte aligned: the low bits carry nothing */
	return (uint32_t)(((uint64_t)(p >> 4) * 0x9E3779B97F4A7C15ULL) >> 32);
}

static inline bool strobe_live_insert(strobe_heap_live *t, uint32_t slots, uint32_t *count,
				      uintptr_t p, uint64_t size, uint32_t stack, uint64_t now)
{
	if (p <= STROBE_HEAP_LIVE_TOMB || *count >= slots / 4 * 3)
		return false;
	uint32_t mask = slots - 1;
	for (uint32_t i = strobe_live_hash(p) & mask;; i = (i + 1) & mask) {
		strobe_heap_live *e = &t[i];
		if (e->ptr == STROBE_HEAP_LIVE_EMPTY) {
			e->size = size;
			e->stack = stack;
			e->time_ns = now;
			__atomic_store_n(&e->ptr, (uint64_t)p, __ATOMIC_RELEASE);
			(*count)++;
			return true;
		}
	}
}

/* Removes p, copying its entry to *out; false when p is not there. */
static inline bool strobe_live_remove(strobe_heap_live *t, uint32_t slots, uint32_t *count,
				      uintptr_t p, strobe_heap_live *out)
{
	uint32_t mask = slots - 1;
	uint32_t i = strobe_live_hash(p) & mask;
	for (uint32_t n = 0;; i = (i + 1) & mask, n++) {
		if (t[i].ptr == STROBE_HEAP_LIVE_EMPTY || n == slots)
			return false;
		if (t[i].ptr == (uint64_t)p)
			break;
	}
	*out = t[i];
	/* Backward shift: move each later entry of the run into the hole unless its home slot
	 * lies cyclically in (hole, j], where it would then no longer be found. */
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & mask; t[j].ptr != STROBE_HEAP_LIVE_EMPTY; j = (j + 1) & mask) {
		uint32_t home = strobe_live_hash((uintptr_t)t[j].ptr) & mask;
		bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (stays)
			continue;
		t[hole].size = t[j].size;
		t[hole].stack = t[j].stack;
		t[hole].time_ns = t[j].time_ns;
		__atomic_store_n(&t[hole].ptr, t[j].ptr, __ATOMIC_RELEASE);
		hole = j;
	}
	__atomic_store_n(&t[hole].ptr, (uint64_t)STROBE_HEAP_LIVE_EMPTY, __ATOMIC_RELEASE);
	(*count)--;
	return true;
}

/* Moves every entry of t (slots) into nt (nslots >= slots, all empty): the library grows its
 * table this way, under its lock. *count becomes the number moved. */
static inline void strobe_live_rehash(const strobe_heap_live *t, uint32_t slots,
				      strobe_heap_live *nt, uint32_t nslots, uint32_t *count)
{
	*count = 0;
	for (uint32_t i = 0; i < slots; i++)
		if (t[i].ptr > STROBE_HEAP_LIVE_TOMB)
			strobe_live_insert(nt, nslots, count, (uintptr_t)t[i].ptr, t[i].size, t[i].stack,
					   t[i].time_ns);
}

/* Whether p is in the table (tests; the library only ever removes). */
static inline bool strobe_live_find(const strobe_heap_live *t, uint32_t slots, uintptr_t p)
{
	uint32_t mask = slots - 1;
	for (uint32_t i = strobe_live_hash(p) & mask, n = 0; n < slots; i = (i + 1) & mask, n++) {
		if (t[i].ptr == STROBE_HEAP_LIVE_EMPTY)
			return false;
		if (t[i].ptr == (uint64_t)p)
			return true;
	}
	return false;
}

#endif
