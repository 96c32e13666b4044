// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the sampler's decoder of kernel perf records (samples with call chains
 * and raw tracepoint data, mmap2, comm, fork/exit, switch, lost), fed through the offline
 * interface, and for the profile built from whatever it accepted. The first input byte picks
 * the events (cpu, offcpu, wall), the mode (per-task or system-wide) and, in its top bits, the
 * call graph: frame pointers, or with registers and stack copies in the samples (dwarf, auto),
 * which are then unwound against the files the fed mmap records name. The same records also go
 * to the decoders alone (agent/record_decode.c), whose handlers read every byte handed to them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/sampler.h"

#include "../../agent/record_decode.h"


/* ---- the decoders alone (agent/record_decode.c), on every record of the input ---------------- */

/* Each handler reads every byte it is handed, so that the sanitizers check the decoder's
 * bounds, not only what the sampler happens to use. */
static volatile uint64_t sink;

static void f_sample(void *ctx, int kind, const rec_sample *sm, const rec_unwound *pre)
{
	uint64_t x = (uint64_t)kind + sm->time + sm->pid;
	for (uint64_t i = 0; i < sm->nr; i++)
		x += sm->ips[i];
	for (uint32_t i = 0; i < sm->raw_size; i++)
		x += sm->raw[i];
	for (uint64_t i = 0; sm->stack && i < sm->stack_size; i++)
		x += sm->stack[i];
	for (int32_t i = 0; pre && i < pre->nu; i++)
		x += pre->pcs[8 * (size_t)i] + pre->act[i];
	sink += x;
}
static void f_mmap2(void *ctx, const rec_mmap2 *m)
{
	uint64_t x = strlen(m->path) + m->start;
	for (uint8_t i = 0; m->build_id && i < m->build_id_len; i++)
		x += m->build_id[i];
	sink += x;
}
static void f_comm(void *ctx, int32_t pid, int32_t tid, const char *comm, bool exec)
{
	sink += strlen(comm) + (uint64_t)pid + exec;
}
static void f_fork(void *ctx, int32_t pid, int32_t ppid, int32_t tid)
{
	sink += (uint64_t)pid + (uint64_t)ppid;
}
static void f_exit(void *ctx, int32_t pid, int32_t tid)
{
	sink += (uint64_t)tid;
}
static void f_switch_in(void *ctx, int32_t tid, int64_t time)
{
	sink += (uint64_t)time;
}

static void decode_all(const strobe_sampler_layout *l, bool stacks, const uint64_t *buf,
		       size_t len)
{
	static const rec_handlers hs = {f_sample, f_mmap2, f_comm, f_fork, f_exit, f_switch_in};
	/* the sample types the sampler asks for (agent/sampler.c, sampler_alloc) */
	const uint64_t common = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				PERF_SAMPLE_CPU;
	const uint64_t st = stacks ? PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER : 0;
	uint64_t types[EVK_WAKEUP + 1] = {
		[EVK_CLOCK] = common | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | st,
		[EVK_SWITCH] = common | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN |
			       PERF_SAMPLE_RAW | st,
		[EVK_WAKEUP] = common | PERF_SAMPLE_RAW};
	event_kinds k;
	event_kinds_init(&k);
	for (int i = 0; i < 3; i++)
		if (event_kinds_add(&k, l->id[i], EVK_CLOCK + i) < 0)
			goto out;
	rec_decoder d = {&k, types};
	const uint8_t *p = (const uint8_t *)buf;
	while (len >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		memcpy(&h, p, sizeof(h));
		if (h.size < sizeof(h) || h.size > len || h.size % 8)
			break;
		/* p stays 8-byte aligned: buf is, and every size is a multiple of 8 */
		const struct perf_event_header *hp = (const void *)p;
		rec_decode(&d, hp, &hs, NULL);
		sink += (uint64_t)rec_time(&d, hp);
		p += h.size;
		len -= h.size;
	}
out:
	event_kinds_free(&k);
}
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
	strobe_sampler *s = strobe_sampler_open_offline(&o, &l);
	if (!s)
		return 0;
	/* Records must be 8-byte aligned, as they are in the ring. */
	uint64_t *copy = malloc(size - 1 + 8);
	if (copy) {
		memcpy(copy, data + 1, size - 1);
		decode_all(&l, o.call_graph != STROBE_CG_FP, copy, size - 1);
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
