/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the two halves of libstrobe-heap.so (heap.c: the allocator wrappers and the channel;
 * locks.c: the pthread lock wrappers) share. Everything here is hidden: the library exports only
 * the libc names it interposes.
 */
#ifndef STROBE_PRELOAD_INTERNAL_H
#define STROBE_PRELOAD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "strobe/heap_channel.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Per-thread state. Initial-exec TLS: the library is loaded at start (LD_PRELOAD), so its TLS
 * is in the static block and reaching it is one %fs-relative load, with no call and no malloc. */
typedef struct heap_tls {
	int64_t left;     /* bytes until the next heap sample; <= 0: take the slow path */
	uint64_t rng;     /* 0 until the thread's first slow path seeds it */
	uint32_t guard;   /* nonzero while the library runs its own code on this thread */
	uint32_t inited;  /* the countdown has been drawn (left = 0 before that is no sample) */
} heap_tls;
extern __thread heap_tls strobe_heap_tls __attribute__((tls_model("initial-exec"))) HIDDEN;

/* Lock profiling: 0 = off, else the delay scale D (ns) of sampling by delay. Set at start. */
extern uint64_t strobe_lock_sample_ns HIDDEN;

/* Makes sure the real functions are resolved (dlsym(RTLD_NEXT)); cheap once done. */
void strobe_heap_resolve(void) HIDDEN;
/* Records one contended wait of delay_ns already weighted: milli-contentions and ns. The caller
 * holds the guard. */
void strobe_heap_record_lock(uint64_t count_milli, uint64_t delay_ns) HIDDEN;
uint64_t strobe_heap_now_ns(void) HIDDEN;

#endif
