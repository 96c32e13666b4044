// SPDX-License-Identifier: Apache-2.0
/*
 * libstrobe-heap.so's unwind-step cache (preload/unwind_cache.c) against libgcc: from the same
 * leaf, the cached walk must report exactly the frames _Unwind_Backtrace reports, on deep chains
 * that mix frames built at -O0 with frame pointers and at -O2 without, alloca frames (rbp-based
 * CFA at -O2), plain recursion, calls after a mid-function epilogue, and a call back through
 * libc's qsort. The second walk of a chain
 * must be served by the cache alone (nothing learned), a new generation (what a dlclose starts)
 * must forget every entry, and a corrupted entry must make the comparison fail.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unwind.h>

#include <cmocka.h>

#include "../../preload/unwind_cache.h"
#include "unwind_chain.h"

#define MAXF 256

static strobe_uw_cache *cache;
static uint64_t gcc_pc[MAXF], uw_pc[MAXF];
static uint32_t gcc_n;
static int uw_n;
static uint32_t uw_max = MAXF;
static bool uw_truncated;

static _Unwind_Reason_Code one(struct _Unwind_Context *ctx, void *arg)
{
	(void)arg;
	uintptr_t ip = _Unwind_GetIP(ctx);
	if (!ip || gcc_n == MAXF)
		return _URC_END_OF_STACK;
	gcc_pc[gcc_n++] = ip;
	return _URC_NO_REASON;
}

/* Both walks from here; frame 0 of each is this function (at two different calls). */
static __attribute__((noinline)) int leaf(struct uwc_ctx *c)
{
	(void)c;
	gcc_n = 0;
	_Unwind_Backtrace(one, NULL);
	strobe_uw_req q = {.pc = uw_pc, .max = uw_max};
	uw_n = strobe_uw_backtrace(cache, &q);
	uw_truncated = q.truncated;
	return 1;
}

/* Whether the cached walk gave libgcc's frames (past frame 0). */
static bool same(void)
{
	if (uw_n < 2 || (uint32_t)uw_n != gcc_n)
		return false;
	return memcmp(gcc_pc + 1, uw_pc + 1, (gcc_n - 1) * sizeof(uint64_t)) == 0;
}

static void run_chain(struct uwc_ctx *c, int depth)
{
	c->leaf = leaf;
	assert_true(c->steps[0](depth, c) > 0);
}

static int setup(void **st)
{
	(void)st;
	cache = strobe_uw_cache_new(4096);
	return cache ? 0 : -1;
}
static int teardown(void **st)
{
	(void)st;
	strobe_uw_cache_free(cache);
	cache = NULL;
	return 0;
}

/* Both walks' frames, named where dladdr can: what a failed comparison shows. */
static void dump_walks(void)
{
	uint32_t n = gcc_n > (uint32_t)uw_n ? gcc_n : (uint32_t)uw_n;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t pcs[2] = {i < gcc_n ? gcc_pc[i] : 0, (int)i < uw_n ? uw_pc[i] : 0};
		const char *names[2] = {"-", "-"};
		for (int k = 0; k < 2; k++) {
			Dl_info di;
			if (pcs[k] && dladdr((void *)(uintptr_t)pcs[k], &di) && di.dli_sname)
				names[k] = di.dli_sname;
			else if (pcs[k] && dladdr((void *)(uintptr_t)pcs[k], &di) && di.dli_fname)
				names[k] = di.dli_fname;
		}
		print_message("%3u libgcc %#18llx %-24s cache %#18llx %s\n", i,
			      (unsigned long long)pcs[0], names[0], (unsigned long long)pcs[1], names[1]);
	}
}

/* How many of the walk's distinct return addresses share their cache slot with another one of
 * them: the direct-mapped cache evicts one for the other, so a repeated walk learns these again
 * (a 40-deep chain's ~15 addresses collide in a 4096-slot cache in ~3 % of address layouts). */
static uint64_t colliding(void)
{
	uint64_t n = 0;
	for (int i = 0; i < uw_n; i++) {
		bool dup = false, shares = false;
		for (int j = 0; j < uw_n && !dup; j++) {
			if (uw_pc[j] == uw_pc[i])
				dup = j < i;
			else if (strobe_uw_slot(cache, (uintptr_t)uw_pc[j]) ==
				 strobe_uw_slot(cache, (uintptr_t)uw_pc[i]))
				shares = true;
		}
		n += !dup && shares;
	}
	return n;
}

/* Walks the chain twice: both must equal libgcc's; the second learns nothing, but for the
 * addresses that evict each other in the cache. */
static uint64_t check_chain(struct uwc_ctx *c, int depth)
{
	uint64_t learned = 0, first = __atomic_load_n(&cache->learned, __ATOMIC_RELAXED);
	for (int round = 0; round < 2; round++) { /* one call site: the same return addresses */
		if (round) {
			learned = __atomic_load_n(&cache->learned, __ATOMIC_RELAXED);
			first = learned - first;
		}
		run_chain(c, depth);
		assert_true(gcc_n > (uint32_t)depth);
		if ((uint32_t)uw_n != gcc_n)
			dump_walks();
		assert_int_equal(uw_n, gcc_n);
		assert_true(same());
	}
	uint64_t again = __atomic_load_n(&cache->learned, __ATOMIC_RELAXED) - learned;
	uint64_t evicting = colliding();
	if (again > evicting)
		dump_walks();
	assert_in_range(again, 0, evicting);
	return first;
}

static void test_nofp_o2(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step}, .nsteps = 1};
	check_chain(&c, 40);
}

static void test_fp_o0(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o0_step}, .nsteps = 1};
	check_chain(&c, 40);
}

static void test_mixed_alloca(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step, uwc_o0_step, uwc_o2_alloca, uwc_o0_alloca,
				      uwc_o2_step},
			    .nsteps = 5};
	check_chain(&c, 60);
}

static void test_through_qsort(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step, uwc_o2_qsort, uwc_o0_step, uwc_o0_qsort},
			    .nsteps = 4};
	check_chain(&c, 30);
	/* libc's msort frames are in the walk, between a qsort step and its callback */
	bool in_libc = false;
	for (uint32_t i = 1; i < gcc_n; i++) {
		Dl_info di;
		if (dladdr((void *)(uintptr_t)gcc_pc[i], &di) && di.dli_fname &&
		    strstr(di.dli_fname, "libc.so"))
			in_libc = true;
	}
	assert_true(in_libc);
}

/* gcc's mid-function epilogue (remember_state, ret, restore_state): the leaf is called after it */
static void test_early_return(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step, uwc_o2_early, uwc_o0_early}, .nsteps = 3};
	check_chain(&c, 31);
}

/* max frames kept: truncated, and the first max are libgcc's */
static void test_truncated(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step, uwc_o0_step}, .nsteps = 2};
	uw_max = 6;
	run_chain(&c, 20);
	uw_max = MAXF;
	assert_int_equal(uw_n, 6);
	assert_true(uw_truncated);
	assert_memory_equal(gcc_pc + 1, uw_pc + 1, 5 * sizeof(uint64_t));
}

/* a new generation (after a dlclose) forgets every entry; during one, walks ask libgcc */
static void test_invalidate(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step, uwc_o0_alloca}, .nsteps = 2};
	uint64_t first = check_chain(&c, 20);
	uint64_t before = __atomic_load_n(&cache->learned, __ATOMIC_RELAXED);
	/* without a new generation, the run below learns only its own call site (<= 2 entries);
	 * with one, all the first walk learned but that call site */
	strobe_uw_invalidate(cache);
	run_chain(&c, 20);
	assert_true(same());
	assert_true(__atomic_load_n(&cache->learned, __ATOMIC_RELAXED) >= before + first - 2);
	strobe_uw_unload_begin(cache);
	run_chain(&c, 20);
	assert_int_equal(uw_n, -1);
	strobe_uw_unload_end(cache);
	run_chain(&c, 20);
	assert_true(same());
}

static strobe_uw_entry *entry_for(uint64_t pc)
{
	for (uint32_t i = 0; i < cache->nslots; i++)
		if (cache->slots[i].pc == pc && cache->slots[i].gen == cache->gen)
			return &cache->slots[i];
	return NULL;
}

/* The comparison notices a corrupted cache: an entry that ends the walk early, and one whose
 * CFA offset is off by 8. */
static void test_corrupted_entry_detected(void **st)
{
	(void)st;
	struct uwc_ctx c = {.steps = {uwc_o2_step}, .nsteps = 1};
	check_chain(&c, 10);
	strobe_uw_entry *e = entry_for(gcc_pc[3]);
	assert_non_null(e);
	assert_int_equal(e->kind, STROBE_UW_STEP);
	e->kind = STROBE_UW_END;
	run_chain(&c, 10);
	assert_false(same());
	e->kind = STROBE_UW_STEP;
	run_chain(&c, 10);
	assert_true(same());
	e->cfa_off += 8;
	run_chain(&c, 10);
	assert_false(same());
	e->cfa_off -= 8;
	run_chain(&c, 10);
	assert_true(same());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_nofp_o2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fp_o0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed_alloca, setup, teardown),
		cmocka_unit_test_setup_teardown(test_through_qsort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_early_return, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalidate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupted_entry_detected, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
