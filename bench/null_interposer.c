// SPDX-License-Identifier: Apache-2.0
/*
 * The floor of interposition, for bench/heap.sh: an LD_PRELOAD library whose malloc family only
 * forwards to glibc's own entry points (__libc_malloc and friends, which glibc exports for
 * exactly this), with no sampling, no thread-local state and no table. What it costs a program
 * is what any preload heap profiler pays before it does anything (one more call and return per
 * allocation and per free, and the program's calls going through the PLT to a library other
 * than libc); libstrobe-heap.so's wrappers are measured against it. Built -O2 like the library.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

EXPORT void *malloc(size_t n) { return __libc_malloc(n); }
EXPORT void free(void *p) { __libc_free(p); }
EXPORT void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
EXPORT void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
EXPORT void *memalign(size_t align, size_t n) { return __libc_memalign(align, n); }
