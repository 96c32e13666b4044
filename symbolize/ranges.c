// SPDX-License-Identifier: Apache-2.0
/*
 * Address -> range search over a table sorted by start address: the one piece of per-address
 * work shared by ELF symbols, kallsyms and perf maps, and so a binary search.
 *
 * Tables may hold overlapping ranges (a symbol nested in another in hand-written assembly, a
 * JIT that reused memory and appended a new perf-map line), so after finding the last range
 * that starts at or before the address, a few ranges before it are checked too; the number is
 * bounded so that a hostile table cannot turn a lookup into a scan.
 */
#include "internal.h"

#define LOOK_BACK 16

const sym_range *sym_ranges_find(const sym_range *v, size_t n, uint64_t addr, size_t *below)
{
	size_t lo = 0, hi = n; /* first index with start > addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (below)
		*below = lo ? lo - 1 : SIZE_MAX;
	const sym_range *best = NULL;
	for (size_t i = lo, k = 0; i > 0 && k < LOOK_BACK; i--, k++) {
		const sym_range *r = &v[i - 1];
		if (addr < r->end && (!best || r->seq > best->seq))
			best = r;
	}
	return best;
}
