// SPDX-License-Identifier: Apache-2.0
/*
 * Call-chain steps for tests/unit/test_unwind_cache.c, built once per variant (-DUWC_V=o0 at -O0
 * with frame pointers, -DUWC_V=o2 at -O2 without): each step calls the next one through the
 * context and adds to its result afterwards, so no call is a tail call and every frame stays.
 */
#include <alloca.h>
#include <stdlib.h>

#include "unwind_chain.h"

#define CAT3(a, b, c) a##b##c
#define NAME(v, f) CAT3(uwc_, v, f)

static int next(int depth, struct uwc_ctx *c)
{
	if (depth <= 0)
		return c->leaf(c);
	return c->steps[depth % c->nsteps](depth - 1, c);
}

int NAME(UWC_V, _step)(int depth, struct uwc_ctx *c)
{
	volatile int r = next(depth, c);
	return r + 1;
}

/* alloca: the CFA is rbp-based even at -O2 */
int NAME(UWC_V, _alloca)(int depth, struct uwc_ctx *c)
{
	volatile char *buf = alloca(16 + (size_t)(depth & 7) * 48);
	buf[0] = (char)depth;
	volatile int r = next(depth, c);
	return r + buf[0];
}

/* qsort calls back into the chain from libc's own frames (a shared library's unwind tables) */
static struct uwc_ctx *q_ctx;
static int q_depth, q_result, q_called;

static int cmp(const void *a, const void *b)
{
	if (!q_called) {
		q_called = 1;
		q_result = next(q_depth, q_ctx);
	}
	return *(const int *)a - *(const int *)b;
}

int NAME(UWC_V, _qsort)(int depth, struct uwc_ctx *c)
{
	int v[2] = {2, 1};
	q_ctx = c;
	q_depth = depth;
	q_called = 0;
	qsort(v, 2, sizeof(v[0]), cmp);
	volatile int r = q_result;
	return r + v[0];
}

/* an early return after the prologue: at -O2 its epilogue sits mid-function between
 * remember_state and restore_state, and the rows after it must get the CFA back */
int NAME(UWC_V, _early)(int depth, struct uwc_ctx *c)
{
	int a = depth * 7 + c->nsteps;
	volatile int v = a;
	if (v == -1)
		return a;
	volatile int r = next(depth, c);
	return r + a + v;
}
