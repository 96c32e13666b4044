// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the sampler's decoder of kernel perf records (samples with call chains
 * and raw tracepoint data, mmap2, comm, fork/exit, switch, lost), fed through the offline
 * interface, and for the profile built from whatever it accepted. The first input byte picks
 * the events (cpu, offcpu, wall), the mode (per-task or system-wide) and, in its top bits, the
 * call graph: frame pointers, or with registers and stack copies in the samples (dwarf, auto),
 * which are then unwound against the files the fed mmap records name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/sampler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	static const strobe_sampler_layout l = {
		.id = {11, 22, 33},
		.prev_state_offset = 32, .prev_state_size = 8, .next_pid_offset = 56,
		.wakeup_pid_offset = 24};
	unsigned ev = (data[0] & 3) ? (data[0] & 3) : 1;
	strobe_sampler_opts o = {.events = ev, .freq = 99, .all = data[0] & 4, .kernel = true,
				 .min_block_ns = (data[0] & 8) ? 100 : 0,
				 .call_graph = (unsigned)(data[0] >> 6) % 3, .stack_size = 512};
	strobe_sampler *s;
	if (strobe_sampler_open_offline(&o, &l, &s) < 0)
		return 0;
	/* Records must be 8-byte aligned, as they are in the ring. */
	uint64_t *copy = malloc(size - 1 + 8);
	if (copy) {
		memcpy(copy, data + 1, size - 1);
		/* Two rounds, split by time, so held records are compacted and re-sorted. */
		strobe_sampler_feed(s, copy, size - 1, (data[0] & 32) ? 2000 : INT64_MAX);
		strobe_sampler_feed(s, copy, 0, INT64_MAX);
		free(copy);
	}
	strobe_sampler_profile_opts po = {.per_thread = data[0] & 16};
	strobe_err err;
	strobe_profile *p = strobe_sampler_profile(s, &po, &err);
	strobe_profile_free(p);
	strobe_sampler_close(s);
	return 0;
}
