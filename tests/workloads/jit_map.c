// SPDX-License-Identifier: Apache-2.0
/*
 * A JIT, reduced to its essence for the recorder's test: machine code copied into anonymous
 * executable memory and announced in /tmp/perf-PID.map (the convention perf, V8, the JVM's
 * perf-map-agent and LuaJIT use), then run until it has used the given seconds of CPU (its own
 * CPU clock, so a loaded machine gives a profile as full as an idle one). Nearly all of the
 * process's CPU is spent in that code, so a profile must name it "jit_hot_loop" from the map.
 *
 *   jit_map SECONDS
 *
 * x86-64 only (the code is x86-64 instructions); elsewhere it exits 77 (skip).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
#if !defined(__x86_64__)
	(void)argc;
	(void)argv;
	return 77;
#else
	double secs = argc > 1 ? atof(argv[1]) : 2;
	/* mov ecx, 20000000; 1: dec ecx; jnz 1b; ret  -- about 10 ms a call */
	static const unsigned char code[] = {0xb9, 0x00, 0x2d, 0x31, 0x01, 0xff, 0xc9,
					     0x75, 0xfc, 0xc3};
	uint8_t *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("jit_map: mmap");
		return 1;
	}
	memcpy(mem, code, sizeof(code));
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)mem, sizeof(code));
	fclose(f);
	void (*fn)(void) = (void (*)(void))(uintptr_t)mem;
	struct timespec t0, t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		fn();
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	/* The map stays after exit, as a JIT's does: the recorder names frames at the end. The
	 * test removes it. */
	return 0;
#endif
}
