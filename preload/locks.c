// SPDX-License-Identifier: Apache-2.0
/*
 * libstrobe-heap.so, lock half: lock-contention profiles of pthread mutexes and rwlocks.
 *
 * Each wrapper tries the lock first. Acquired (or any answer but EBUSY): that is the whole cost,
 * a trylock in place of a lock plus the call through this library. Contended: the wait for the
 * real lock is timed with CLOCK_MONOTONIC and kept by sampling by delay: a wait of d ns is kept
 * with probability min(1, d/D), D = STROBE_LOCK_SAMPLE_NS (default 100 us, 0 = off), and then
 * counts as max(1, D/d) contentions and max(d, D) ns, so both sums stay unbiased while the
 * unwinding (a few microseconds) happens at most about once per D of waiting. The stack is the
 * waiter's, taken after it got the lock (Go's mutex profile shows the unlocker's instead).
 *
 * Locks taken inside glibc itself (stdio, the loader, malloc's arenas) do not go through these
 * symbols and are not seen; condition variables re-acquire their mutex internally, likewise.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "internal.h"

static int (*real_mutex_lock)(pthread_mutex_t *);
static int (*real_mutex_trylock)(pthread_mutex_t *);
static int (*real_mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
static int (*real_mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*real_rd)(pthread_rwlock_t *);
static int (*real_tryrd)(pthread_rwlock_t *);
static int (*real_timedrd)(pthread_rwlock_t *, const struct timespec *);
static int (*real_wr)(pthread_rwlock_t *);
static int (*real_trywr)(pthread_rwlock_t *);
static int (*real_timedwr)(pthread_rwlock_t *, const struct timespec *);

/* glibc's aliases: used until dlsym has answered (dlsym may itself take locks). */
extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_tryrdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_trywrlock(pthread_rwlock_t *);

#include <dlfcn.h>

static int resolved; /* 0 no, 1 in progress, 2 done */

static void lock_resolve(void)
{
	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) == 2)
		return;
	int expected = 0;
	if (!__atomic_compare_exchange_n(&resolved, &expected, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* another thread is resolving (this one, if dlsym itself took a lock: it has the
		 * guard set and must not wait). Wait for it, boundedly: the timed variants have no
		 * fallback of their own to call meanwhile. */
		if (strobe_heap_tls.guard == 0)
			for (int i = 0; i < 100000 && __atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2; i++)
				sched_yield();
		return;
	}
	strobe_heap_tls.guard++;
	strobe_heap_resolve(); /* dlsym's own allocations need the heap half ready */
	real_mutex_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
	real_mutex_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
	real_mutex_timedlock = dlsym(RTLD_NEXT, "pthread_mutex_timedlock");
	real_mutex_clocklock = dlsym(RTLD_NEXT, "pthread_mutex_clocklock");
	real_rd = dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
	real_tryrd = dlsym(RTLD_NEXT, "pthread_rwlock_tryrdlock");
	real_timedrd = dlsym(RTLD_NEXT, "pthread_rwlock_timedrdlock");
	real_wr = dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
	real_trywr = dlsym(RTLD_NEXT, "pthread_rwlock_trywrlock");
	real_timedwr = dlsym(RTLD_NEXT, "pthread_rwlock_timedwrlock");
	if (!real_mutex_lock)
		real_mutex_lock = __pthread_mutex_lock;
	if (!real_mutex_trylock)
		real_mutex_trylock = __pthread_mutex_trylock;
	if (!real_rd)
		real_rd = __pthread_rwlock_rdlock;
	if (!real_wr)
		real_wr = __pthread_rwlock_wrlock;
	if (!real_tryrd)
		real_tryrd = __pthread_rwlock_tryrdlock;
	if (!real_trywr)
		real_trywr = __pthread_rwlock_trywrlock;
	__atomic_store_n(&resolved, 2, __ATOMIC_RELEASE);
	strobe_heap_tls.guard--;
}

/* Sampling by delay (see the top of the file). */
static void contended(uint64_t t0)
{
	uint64_t d = strobe_heap_now_ns() - t0, D = strobe_lock_sample_ns;
	heap_tls *t = &strobe_heap_tls;
	if (t->guard)
		return;
	t->guard = 1;
	if (d >= D) {
		strobe_heap_record_lock(1000, d);
	} else {
		if (!t->rng)
			t->rng = t0 ^ (uint64_t)(uintptr_t)t ^ 0x9E3779B97F4A7C15ULL;
		/* keep with probability d/D */
		uint64_t r = strobe_heap_rand(&t->rng) >> 11; /* 53 bits */
		if ((double)r < (double)d / (double)D * 9007199254740992.0)
			strobe_heap_record_lock(d ? 1000 * D / d : 1000 * D, D);
	}
	t->guard = 0;
}

/* The common shape: try; on EBUSY, time the real call. */
#define CONTENDED(call)                                                                          \
	do {                                                                                     \
		uint64_t t0_ = strobe_heap_now_ns();                                             \
		int rc_ = (call);                                                                \
		if (rc_ == 0)                                                                    \
			contended(t0_);                                                          \
		return rc_;                                                                      \
	} while (0)

static inline bool profiling(void)
{
	return strobe_lock_sample_ns != 0 && strobe_heap_tls.guard == 0;
}

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (UNLIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)) {
		lock_resolve();
		if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)
			return __pthread_mutex_lock(m);
	}
	if (!profiling())
		return real_mutex_lock(m);
	int rc = real_mutex_trylock(m);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_mutex_lock(m));
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
	lock_resolve();
	if (!real_mutex_timedlock)
		return ENOSYS;
	if (!profiling() || !real_mutex_trylock)
		return real_mutex_timedlock(m, abstime);
	int rc = real_mutex_trylock(m);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_mutex_timedlock(m, abstime));
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
	lock_resolve();
	if (!real_mutex_clocklock)
		return ENOSYS;
	if (!profiling() || !real_mutex_trylock)
		return real_mutex_clocklock(m, clk, abstime);
	int rc = real_mutex_trylock(m);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_mutex_clocklock(m, clk, abstime));
}

EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	if (UNLIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)) {
		lock_resolve();
		if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)
			return __pthread_rwlock_rdlock(l);
	}
	if (!profiling())
		return real_rd(l);
	int rc = real_tryrd(l);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_rd(l));
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	if (UNLIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)) {
		lock_resolve();
		if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) != 2)
			return __pthread_rwlock_wrlock(l);
	}
	if (!profiling())
		return real_wr(l);
	int rc = real_trywr(l);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_wr(l));
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
	lock_resolve();
	if (!real_timedrd)
		return ENOSYS;
	if (!profiling())
		return real_timedrd(l, abstime);
	int rc = real_tryrd(l);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_timedrd(l, abstime));
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
	lock_resolve();
	if (!real_timedwr)
		return ENOSYS;
	if (!profiling())
		return real_timedwr(l, abstime);
	int rc = real_trywr(l);
	if (LIKELY(rc != EBUSY))
		return rc;
	CONTENDED(real_timedwr(l, abstime));
}
