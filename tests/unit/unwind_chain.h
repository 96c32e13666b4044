/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Call chains for tests/unit/test_unwind_cache.c: tests/unit/unwind_chain.c is built twice, at
 * -O0 with frame pointers (uwc_o0_*) and at -O2 without them (uwc_o2_*), so that one chain mixes
 * rsp-based and rbp-based frames, alloca frames, recursion and a call back through libc (qsort).
 */
#ifndef STROBE_TEST_UNWIND_CHAIN_H
#define STROBE_TEST_UNWIND_CHAIN_H

struct uwc_ctx;
typedef int (*uwc_step)(int depth, struct uwc_ctx *c);
struct uwc_ctx {
	uwc_step steps[8]; /* the next step is steps[depth % nsteps] */
	int nsteps;
	int (*leaf)(struct uwc_ctx *c);
};

#define UWC_DECL(v)                                              \
	int uwc_##v##_step(int depth, struct uwc_ctx *c);        \
	int uwc_##v##_alloca(int depth, struct uwc_ctx *c);      \
	int uwc_##v##_qsort(int depth, struct uwc_ctx *c);      \
	int uwc_##v##_early(int depth, struct uwc_ctx *c);
UWC_DECL(o0)
UWC_DECL(o2)

#endif
