/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How many frames a stack may have in the agent and the recorder, defined once. Plain defines
 * only: the BPF programs include it too (through offcpu.h).
 *
 * Two numbers, because a stack is put together from walks of two contexts:
 *   STROBE_STACK_DEPTH   what one walk of one context yields: the kernel's call chain of the
 *                        kernel part, the frame-pointer chain or the unwinder's walk of the user
 *                        part, the eBPF walkers. 127 is the kernel's default
 *                        kernel.perf_event_max_stack: perf_event_open refuses a larger
 *                        sample_max_stack (EOVERFLOW), so asking for more fails rather than
 *                        giving more.
 *   STROBE_STACK_FRAMES  one stack as the sampler aggregates it: a kernel walk then a user walk
 *                        (2 x 127 = 254 frames) fit whole, as does a native stack merged with
 *                        its Python frames (oncpu.c). Beyond it, the outermost frames are
 *                        dropped.
 */
#ifndef STROBE_AGENT_STACK_CAP_H
#define STROBE_AGENT_STACK_CAP_H

#define STROBE_STACK_DEPTH 127
#define STROBE_STACK_FRAMES 256

_Static_assert(STROBE_STACK_FRAMES >= 2 * STROBE_STACK_DEPTH,
	       "a kernel walk and a user walk fit in one stack");

#endif
