// SPDX-License-Identifier: Apache-2.0
/* deep_recurse: a stack deeper than the user stack copy, for the unwinder's tests. main calls
 * recurse() DEPTH times (each frame holding a 256-byte local array, so 100 frames take about
 * 30 KiB of stack: more than the 16 KiB the kernel copies with an on-CPU sample, and the walk
 * must read the rest from the process), and the innermost call spins in spin() until SECONDS of
 * CPU are used, then the whole chain returns and starts again, so that every sample has the
 * known stack
 *
 *   _start;__libc_start_main;...;main;run;recurse x DEPTH;spin
 *
 *   deep_recurse [-d DEPTH] SECONDS        (DEPTH 100 by default, at most 100000)
 *
 * Built -O2 -fomit-frame-pointer as build/workloads/deep_recurse-nofp: only the unwind tables
 * can walk it. The frames stay below 127 (the default frame limit) at the default depth. */
#include "wl_common.h"

#include <unistd.h>

static __attribute__((noinline)) void spin(int64_t until)
{
	uint64_t acc = (uint64_t)until;
	do
		WL_SPIN_CHUNK(acc);
	while (wl_thread_cpu_ns() < until);
}

/* Not a tail call (the array is used after the call), and not inlined: one frame per level. */
static __attribute__((noinline)) uint64_t recurse(int left, int64_t until)
{
	volatile uint8_t pad[256];
	pad[0] = (uint8_t)left;
	pad[255] = (uint8_t)(left >> 8);
	if (left > 0)
		recurse(left - 1, until);
	else
		spin(until);
	return pad[0] + pad[255];
}

static __attribute__((noinline)) void run(int depth, int64_t end)
{
	while (wl_thread_cpu_ns() < end) {
		int64_t until = wl_thread_cpu_ns() + 20 * 1000000;
		recurse(depth - 1, until < end ? until : end);
	}
}

int main(int argc, char **argv)
{
	int depth = 100, c;
	while ((c = getopt(argc, argv, "d:")) != -1) {
		if (c == 'd' && atoi(optarg) > 0 && atoi(optarg) <= 100000) {
			depth = atoi(optarg);
		} else {
			fprintf(stderr, "usage: deep_recurse [-d DEPTH (1-100000)] SECONDS\n");
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: deep_recurse [-d DEPTH (1-100000)] SECONDS\n");
		return 2;
	}
	double secs = wl_parse_seconds(argv[optind], "deep_recurse");
	run(depth, wl_thread_cpu_ns() + (int64_t)(secs * 1e9));
	return 0;
}
