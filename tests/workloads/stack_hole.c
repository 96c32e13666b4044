// SPDX-License-Identifier: Apache-2.0
/* stack_hole: a stack whose copy stops short, for the unwinder's tests. A thread calls hole(),
 * whose frame holds a 12 KiB buffer of which only the lowest bytes are ever written (as GNU
 * sort's key comparator has an 8.6 KB one, used only for long keys), and hole() calls spin(),
 * which burns the CPU. The buffer's middle pages were never touched, so they are not present,
 * and the kernel's copy of the user stack with a sample (copy_from_user_nmi: it cannot fault a
 * page in) stops at the first of them: hole()'s return address, 12 KiB above spin's stack
 * pointer and inside the 16 KiB asked for, is not in the copy. Every sample has the stack
 *
 *   clone3;start_thread;thread_main;hole;spin
 *
 *   stack_hole [-o TRUTH] SECONDS
 *
 * TRUTH gets "absent_pages N": how many of the buffer's pages mincore() found not resident just
 * before the spin (0 would make the test meaningless: a build whose compiler probes the stack,
 * -fstack-clash-protection, touches them all). Built -O2 -fomit-frame-pointer as
 * build/workloads/stack_hole-nofp: only the unwind tables can walk it. */
#include "wl_common.h"

#include <pthread.h>
#include <sys/mman.h>

#define HOLE_BYTES (12 << 10)

static int64_t g_end;
static int g_absent = -1;

static __attribute__((noinline)) void spin(int64_t until)
{
	uint64_t acc = (uint64_t)until;
	do
		WL_SPIN_CHUNK(acc);
	while (wl_thread_cpu_ns() < until);
}

/* Pages of [p, p + len) that are wholly inside it and not resident. */
static int absent_pages(const volatile uint8_t *p, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~((uintptr_t)pg - 1);
	unsigned char vec[HOLE_BYTES / 4096 + 1];
	if (hi <= lo || (hi - lo) / (uintptr_t)pg > sizeof(vec) ||
	    mincore((void *)lo, hi - lo, vec) != 0)
		return 0;
	int n = 0;
	for (uintptr_t i = 0; i < (hi - lo) / (uintptr_t)pg; i++)
		n += !(vec[i] & 1);
	return n;
}

/* Not inlined, not a tail call (the buffer is read after the call). */
static __attribute__((noinline)) uint64_t hole(int64_t until)
{
	volatile uint8_t buf[HOLE_BYTES];
	buf[0] = 1; /* the lowest address: the page spin()'s frame continues */
	if (g_absent < 0)
		g_absent = absent_pages(buf, sizeof(buf));
	spin(until);
	return buf[0];
}

static void *thread_main(void *arg)
{
	(void)arg;
	while (wl_thread_cpu_ns() < g_end) {
		int64_t until = wl_thread_cpu_ns() + 20 * 1000000;
		hole(until < g_end ? until : g_end);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *truth;
	double secs;
	wl_args_truth_seconds(argc, argv, "stack_hole", &truth, &secs);
	FILE *tf = wl_truth_open(truth, "stack_hole");
	g_end = (int64_t)(secs * 1e9);
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0) {
		fprintf(stderr, "stack_hole: pthread_create failed\n");
		return 1;
	}
	pthread_join(t, NULL);
	if (tf)
		fprintf(tf, "absent_pages %d\n", g_absent);
	wl_truth_close(tf, truth, "stack_hole");
	return 0;
}
