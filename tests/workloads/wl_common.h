/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the recorder's truth workloads (tests/workloads/*.c): clocks, a CPU spin the
 * compiler cannot delete, and the "key value" truth file. Header-only because the Makefile builds
 * each tests/workloads/X.c alone into build/workloads/X. */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np, pipe2 */
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int64_t wl_clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline int64_t wl_mono_ns(void) { return wl_clock_ns(CLOCK_MONOTONIC); }
static inline int64_t wl_process_cpu_ns(void) { return wl_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

/* The thread CPU clock has no vDSO fast path: glibc's clock_gettime makes a syscall, and a
 * sample taken during it (kernel frames, then glibc's frame-pointer-less code) unwinds past the
 * function that asked, so the CPU a burner spends reading its clock (several % in a VM, where
 * syscalls are dear) would be charged to its caller. Making the syscall inline, from the
 * burner's own body, keeps those samples on the burner, where the truth (which counts system
 * time too) puts them. */
static inline __attribute__((always_inline)) int64_t wl_thread_cpu_ns(void)
{
	struct timespec ts;
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(228L /* SYS_clock_gettime */), "D"((long)CLOCK_THREAD_CPUTIME_ID), "S"(&ts)
			 : "rcx", "r11", "memory");
	(void)ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = 113; /* SYS_clock_gettime */
	register long x0 __asm__("x0") = CLOCK_THREAD_CPUTIME_ID;
	register long x1 __asm__("x1") = (long)&ts;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
#endif
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A sink the optimiser must honour, so the spin loops below are never deleted. */
static volatile uint64_t wl_sink;

/* About 100 us of pure arithmetic, inlined into the caller so that the cycles are the caller's
 * own (its frame pointer intact); long enough that the clock reads between chunks stay a small
 * part of the burn. */
#define WL_SPIN_CHUNK(acc)                                              \
	do {                                                            \
		for (int wl_i_ = 0; wl_i_ < 100000; wl_i_++)             \
			(acc) = (acc) * 6364136223846793005ULL + 1442695040888963407ULL; \
		wl_sink = (acc);                                        \
	} while (0)

static inline double wl_parse_seconds(const char *s, const char *prog)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || *end || !(d > 0) || d > 3600) {
		fprintf(stderr, "%s: bad duration '%s' (seconds, > 0)\n", prog, s);
		exit(2);
	}
	return d;
}

/* The command line "PROG [-o TRUTH] SECONDS" of the workloads that take nothing else: the
 * truth file's path (NULL: none) and the duration; exits 2 with a usage line otherwise. */
static inline void wl_args_truth_seconds(int argc, char **argv, const char *prog,
					 const char **truth, double *secs)
{
	int c;
	*truth = NULL;
	while ((c = getopt(argc, argv, "o:")) != -1) {
		if (c != 'o')
			goto usage;
		*truth = optarg;
	}
	if (optind != argc - 1)
		goto usage;
	*secs = wl_parse_seconds(argv[optind], prog);
	return;
usage:
	fprintf(stderr, "usage: %s [-o TRUTH] SECONDS\n", prog);
	exit(2);
}

static inline FILE *wl_truth_open(const char *path, const char *prog)
{
	if (!path)
		return NULL;
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		exit(1);
	}
	return f;
}

static inline void wl_truth_close(FILE *f, const char *path, const char *prog)
{
	if (f && (fflush(f) || ferror(f) || fclose(f))) {
		fprintf(stderr, "%s: writing %s failed\n", prog, path);
		exit(1);
	}
}

static inline void wl_sleep_ns(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

#endif
