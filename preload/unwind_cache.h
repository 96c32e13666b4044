/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cache of unwind steps by return address, for libstrobe-heap.so's sampled allocations (x86-64
 * only). libgcc's _Unwind_Backtrace interprets the unwind tables (.eh_frame) again for every frame
 * of every walk, 1-2 us a sample; this walk reads each return address's rule once, from the same
 * FDE libgcc would use (_Unwind_Find_FDE), reduces it to "CFA = rsp or rbp + k, return address
 * at CFA - 8, caller's rbp unchanged or at CFA + j", and then walks with the cache alone while
 * every return address hits. Whatever does not fit that shape (a CFA expression, a register
 * rule, a signal frame, no FDE at all: JIT code) is remembered as "ask libgcc", and the caller
 * then walks that stack with _Unwind_Backtrace, so the stacks are libgcc's in every case
 * (tests/unit/test_unwind_cache.c compares the two).
 *
 * The cache is one mmap'd array of fixed size (no malloc: the library must never allocate
 * through itself), direct-mapped by a hash of the return address: a newly learned address
 * replaces whatever its slot held (the eviction rule). Readers and writers are lock-free (a
 * sequence word per entry: a torn read is a miss). Entries carry the generation they were
 * learned in; strobe_uw_invalidate (called after every dlclose) starts a new one, so an address
 * that a later library reuses is never read with the unloaded library's rule.
 */
#ifndef STROBE_PRELOAD_UNWIND_CACHE_H
#define STROBE_PRELOAD_UNWIND_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STROBE_UW_HIDDEN __attribute__((visibility("hidden")))

enum { STROBE_UW_STEP = 1, STROBE_UW_END = 2, STROBE_UW_ASK = 3 };
enum { STROBE_UW_CFA_SP = 7, STROBE_UW_CFA_BP = 6 };          /* DWARF register numbers */
enum { STROBE_UW_BP_SAME = 0, STROBE_UW_BP_AT_CFA = 1 };

typedef struct strobe_uw_entry {
	uint32_t seq;      /* even: stable; odd: being written (atomic) */
	uint32_t gen;      /* the generation it was learned in */
	uint64_t pc;       /* the return address (0: empty) */
	int32_t cfa_off;   /* CFA = (cfa_reg's value) + cfa_off */
	int32_t bp_off;    /* STROBE_UW_BP_AT_CFA: the caller's rbp is at CFA + bp_off */
	uint8_t kind;      /* STROBE_UW_STEP, _END (outermost frame), _ASK (libgcc must walk) */
	uint8_t cfa_reg;
	uint8_t bp_how;
	uint8_t pad[5];
} strobe_uw_entry;

typedef struct strobe_uw_cache {
	uint32_t nslots;   /* a power of two */
	uint32_t gen;      /* atomic */
	uint32_t unloading; /* atomic: dlcloses in progress (walks then ask libgcc) */
	uint32_t pad;
	uint64_t learned;  /* atomic: rules read from FDEs (for tests and benchmarks) */
	size_t map_size;
	strobe_uw_entry slots[];
} strobe_uw_cache;

typedef struct strobe_uw_req {
	uint64_t *pc;       /* out: return addresses, innermost first */
	uint32_t max;
	bool truncated;     /* out: more than max frames (after the skipped ones) */
	uintptr_t skip_lo, skip_hi; /* leading frames in [skip_lo, skip_hi) are not kept */
} strobe_uw_req;

/* An mmap'd cache of nslots (rounded up to a power of two) entries; NULL when mmap fails. */
strobe_uw_cache *strobe_uw_cache_new(uint32_t nslots) STROBE_UW_HIDDEN;
void strobe_uw_cache_free(strobe_uw_cache *c) STROBE_UW_HIDDEN;
/* Forgets every entry (a new generation); strobe_uw_unload_begin/end bracket a dlclose. */
void strobe_uw_invalidate(strobe_uw_cache *c) STROBE_UW_HIDDEN;
void strobe_uw_unload_begin(strobe_uw_cache *c) STROBE_UW_HIDDEN;
void strobe_uw_unload_end(strobe_uw_cache *c) STROBE_UW_HIDDEN;

/* Walks the caller's stack: the frames as _Unwind_Backtrace called from the same place would
 * report them (the first being the caller's own return address). Returns the number of frames
 * kept in q->pc, or -1 when some frame needs libgcc (the caller then walks with it). Never
 * allocates, takes no lock. Written in assembly: it hands the caller's registers to
 * strobe_uw_walk_from. */
int strobe_uw_backtrace(strobe_uw_cache *c, strobe_uw_req *q) STROBE_UW_HIDDEN;
int strobe_uw_walk_from(strobe_uw_cache *c, strobe_uw_req *q, uintptr_t ra, uintptr_t sp,
			uintptr_t bp) STROBE_UW_HIDDEN;

/* The slot return address pc is cached in; two addresses of one walk in one slot evict each
 * other, so a walk repeated can learn again (exposed for the unit test). */
uint32_t strobe_uw_slot(const strobe_uw_cache *c, uintptr_t pc) STROBE_UW_HIDDEN;

/* The rule for return address ra read from its FDE (exposed for the unit test). */
bool strobe_uw_rule(uintptr_t ra, strobe_uw_entry *out) STROBE_UW_HIDDEN;

#endif
