// SPDX-License-Identifier: Apache-2.0
/* offcpu_alternate: one thread that blocks, turn about, at two call sites that differ only two
 * frames above the blocking call and sit at the same depth with frames of the same size, so that
 * at each switch-out its ip, sp, bp and innermost frame record are the same for both. For the
 * agent's in-kernel off-CPU collection, which reuses a thread's user stack when those match (see
 * user_stack_key in agent/offcpu.bpf.c): each site's blocked time must still go to its own
 * stack.
 *
 *   offcpu_alternate [-o TRUTH] SECONDS
 *
 * Round: site_alt_a_outer -> alt_mid -> alt_block -> nanosleep(20 ms), then
 *        site_alt_b_outer -> alt_mid -> alt_block -> nanosleep(30 ms).
 * Debian's glibc has no frame pointers, so a stack taken inside nanosleep starts from the rbp of
 * alt_block: [alt_block's frame] holds the return into alt_mid (the same for both sites), the
 * next record the return into site_alt_X_outer (the one that differs).
 *
 * Truth ("key value" lines): "site_alt_a_outer NS" and "site_alt_b_outer NS", the
 * CLOCK_MONOTONIC time spent in nanosleep from each site, and their round counts. */
#include "wl_common.h"

#include <unistd.h>

static struct {
	int64_t ns;
	long rounds;
} s_a, s_b;

static __attribute__((noinline)) int64_t alt_block(int64_t ns)
{
	int64_t t0 = wl_mono_ns();
	wl_sleep_ns(ns);
	return wl_mono_ns() - t0;
}
static __attribute__((noinline)) int64_t alt_mid(int64_t ns)
{
	int64_t t = alt_block(ns);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
	return t;
}
/* The same code shape, so the same frame size: the stacks differ only in this return address. */
static __attribute__((noinline)) void site_alt_a_outer(void)
{
	s_a.ns += alt_mid(20000000);
	s_a.rounds++;
}
static __attribute__((noinline)) void site_alt_b_outer(void)
{
	s_b.ns += alt_mid(30000000);
	s_b.rounds++;
}

int main(int argc, char **argv)
{
	const char *truth;
	double secs;
	wl_args_truth_seconds(argc, argv, "offcpu_alternate", &truth, &secs);
	FILE *tf = wl_truth_open(truth, "offcpu_alternate");
	int64_t deadline = wl_mono_ns() + (int64_t)(secs * 1e9);
	while (wl_mono_ns() < deadline) {
		site_alt_a_outer();
		site_alt_b_outer();
	}
	if (tf)
		fprintf(tf, "pid %d\nsite_alt_a_outer %lld\nrounds_site_alt_a_outer %ld\n"
			    "site_alt_b_outer %lld\nrounds_site_alt_b_outer %ld\n",
			(int)getpid(), (long long)s_a.ns, s_a.rounds, (long long)s_b.ns, s_b.rounds);
	wl_truth_close(tf, truth, "offcpu_alternate");
	return 0;
}
