// SPDX-License-Identifier: Apache-2.0
/*
 * The decoders of the kernel's perf records (record_decode.h), one per record type in a table,
 * each checking the record's size before it reads a field.
 */
#include <string.h>
#include <sys/sysmacros.h>

#include "record_decode.h"
#include "strobe/symbolize.h" /* STROBE_BUILD_ID_MAX */

/* The sample_id_all trailer of a non-sample record: pid, tid, time, cpu, identifier. */
typedef struct trailer {
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
	uint64_t id;
} trailer;

static bool get_trailer(const struct perf_event_header *h, trailer *t)
{
	if (h->size < sizeof(*h) + sizeof(*t))
		return false;
	memcpy(t, (const uint8_t *)h + h->size - sizeof(*t), sizeof(*t));
	return true;
}

bool rec_parse_sample(const struct perf_event_header *h, uint64_t type, rec_sample *sm)
{
	const uint8_t *p = (const uint8_t *)(h + 1), *end = (const uint8_t *)h + h->size;
	memset(sm, 0, sizeof(*sm));
#define TAKE(dst, n)                                                                              \
	do {                                                                                      \
		if ((size_t)(end - p) < (n))                                                      \
			return false;                                                             \
		memcpy((dst), p, (n));                                                            \
		p += (n);                                                                         \
	} while (0)
	uint32_t two[2];
	if (type & PERF_SAMPLE_IDENTIFIER)
		TAKE(&sm->id, 8);
	if (type & PERF_SAMPLE_IP)
		TAKE(&sm->ip, 8);
	if (type & PERF_SAMPLE_TID) {
		TAKE(two, 8);
		sm->pid = two[0];
		sm->tid = two[1];
	}
	if (type & PERF_SAMPLE_TIME)
		TAKE(&sm->time, 8);
	if (type & PERF_SAMPLE_CPU) {
		TAKE(two, 8);
		sm->cpu = two[0];
	}
	if (type & PERF_SAMPLE_PERIOD)
		TAKE(&sm->period, 8);
	if (type & PERF_SAMPLE_CALLCHAIN) {
		TAKE(&sm->nr, 8);
		if (sm->nr > (size_t)(end - p) / 8)
			return false;
		sm->ips = (const uint64_t *)p;
		p += sm->nr * 8;
	}
	if (type & PERF_SAMPLE_RAW) {
		TAKE(&sm->raw_size, 4);
		if (sm->raw_size > (size_t)(end - p))
			return false;
		sm->raw = p;
		p += sm->raw_size; /* the kernel pads size + data to 8 bytes */
	}
	if (type & PERF_SAMPLE_REGS_USER) {
		TAKE(&sm->abi, 8);
		if (sm->abi) /* the mask is the sampler's: STROBE_SAMPLER_REGS_MASK, 17 registers */
			TAKE(sm->regs, sizeof(sm->regs));
	}
	if (type & PERF_SAMPLE_STACK_USER) {
		TAKE(&sm->stack_size, 8);
		if (sm->stack_size) {
			if (sm->stack_size > (size_t)(end - p))
				return false;
			sm->stack = p;
			p += sm->stack_size;
			TAKE(&sm->stack_dyn, 8);
			if (sm->stack_dyn > sm->stack_size)
				sm->stack_dyn = sm->stack_size;
		}
	}
#undef TAKE
	return true;
}

uint64_t rec_raw_u(const rec_sample *sm, int off, int size)
{
	if (off < 0 || size <= 0 || size > 8 || (uint32_t)(off + size) > sm->raw_size)
		return 0;
	uint64_t v = 0;
	memcpy(&v, sm->raw + off, (size_t)size); /* little-endian hosts only (x86, arm64) */
	return v;
}

int rec_sample_kind(const rec_decoder *d, const struct perf_event_header *h)
{
	uint64_t id;
	if (h->type != PERF_RECORD_SAMPLE || h->size < sizeof(*h) + 8)
		return 0;
	memcpy(&id, h + 1, 8); /* PERF_SAMPLE_IDENTIFIER: first, whatever the event */
	return event_kinds_get(d->kinds, id);
}

int64_t rec_time(const rec_decoder *d, const struct perf_event_header *h)
{
	if (h->type == PERF_RECORD_SAMPLE) {
		int kind = rec_sample_kind(d, h);
		rec_sample sm;
		if (!kind || !rec_parse_sample(h, d->sample_type[kind], &sm))
			return 0;
		return rec_ts(sm.time);
	}
	trailer t;
	return get_trailer(h, &t) ? rec_ts(t.time) : 0;
}

/* ---- one decoder per record type ------------------------------------------------------------- */

typedef void (*decoder_fn)(const rec_decoder *d, const struct perf_event_header *h,
			   const uint8_t *b, size_t blen, const rec_handlers *hs, void *ctx);

static void dec_sample(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
		       size_t blen, const rec_handlers *hs, void *ctx)
{
	int kind = rec_sample_kind(d, h);
	rec_sample sm;
	if (!kind || !hs->sample || !rec_parse_sample(h, d->sample_type[kind], &sm))
		return;
	hs->sample(ctx, kind, &sm, NULL);
}

static void dec_unwound(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
			size_t blen, const rec_handlers *hs, void *ctx)
{
	const struct perf_event_header *in = (const void *)b;
	if (!hs->sample || blen < sizeof(*in) + 8 + 8 || in->size < sizeof(*in) + 8 ||
	    in->size > blen - 8 || in->size % 8 || in->type != PERF_RECORD_SAMPLE)
		return;
	int kind = rec_sample_kind(d, in);
	rec_sample sm;
	if ((kind != EVK_CLOCK && kind != EVK_SWITCH) ||
	    !rec_parse_sample(in, d->sample_type[kind], &sm))
		return;
	const uint8_t *a = (const uint8_t *)in + in->size;
	size_t rest = blen - in->size;
	int32_t nu;
	uint32_t n;
	memcpy(&nu, a, 4);
	memcpy(&n, a + 4, 4);
	if (n > STROBE_STACK_FRAMES || n != (nu > 0 ? (uint32_t)nu : 0) || rest < 8 + (size_t)n * 9)
		return;
	rec_unwound pre = {nu, a + 8, a + 8 + (size_t)n * 8};
	hs->sample(ctx, kind, &sm, &pre);
}

static void dec_mmap2(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
		      size_t blen, const rec_handlers *hs, void *ctx)
{
	/* pid, tid, addr, len, pgoff, {maj, min, ino, ino_generation | build id}, prot, flags,
	 * filename, then the trailer */
	if (!hs->mmap2 || blen < 8 + 24 + 24 + 8 + 1 + sizeof(trailer))
		return;
	uint32_t pt[2], prot, mm[2];
	uint64_t a[3];
	memcpy(pt, b, 8);
	memcpy(a, b + 8, 24);
	memcpy(&prot, b + 56, 4);
	if (!(prot & 4 /* PROT_EXEC */))
		return;
	const char *name = (const char *)(b + 64);
	if (!memchr(name, 0, blen - 64 - sizeof(trailer)))
		return;
	rec_mmap2 m = {.pid = (int32_t)pt[0], .start = a[0], .len = a[1], .pgoff = a[2],
		       .path = name};
	if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		uint8_t bl = b[32];
		m.build_id = b + 36;
		m.build_id_len = bl > STROBE_BUILD_ID_MAX ? STROBE_BUILD_ID_MAX : bl;
	} else {
		memcpy(mm, b + 32, 8);
		memcpy(&m.ino, b + 40, 8);
		m.dev = makedev(mm[0], mm[1]);
	}
	hs->mmap2(ctx, &m);
}

static void dec_comm(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
		     size_t blen, const rec_handlers *hs, void *ctx)
{
	if (!hs->comm || blen < 8 + 1 + sizeof(trailer))
		return;
	uint32_t pt[2];
	memcpy(pt, b, 8);
	char comm[16];
	size_t n = strnlen((const char *)b + 8, blen - 8 - sizeof(trailer));
	if (n >= sizeof(comm))
		n = sizeof(comm) - 1;
	memcpy(comm, b + 8, n);
	comm[n] = 0;
	hs->comm(ctx, (int32_t)pt[0], (int32_t)pt[1], comm,
		 (h->misc & PERF_RECORD_MISC_COMM_EXEC) != 0);
}

static void dec_task(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
		     size_t blen, const rec_handlers *hs, void *ctx)
{
	uint32_t v[4]; /* pid, ppid, tid, ptid */
	if (blen < 16)
		return;
	memcpy(v, b, 16);
	if (h->type == PERF_RECORD_FORK && hs->fork)
		hs->fork(ctx, (int32_t)v[0], (int32_t)v[1], (int32_t)v[2]);
	else if (h->type == PERF_RECORD_EXIT && hs->exit)
		hs->exit(ctx, (int32_t)v[0], (int32_t)v[2]);
}

static void dec_switch(const rec_decoder *d, const struct perf_event_header *h, const uint8_t *b,
		       size_t blen, const rec_handlers *hs, void *ctx)
{
	trailer t;
	if (hs->switch_in && !(h->misc & PERF_RECORD_MISC_SWITCH_OUT) && get_trailer(h, &t))
		hs->switch_in(ctx, (int32_t)t.tid, rec_ts(t.time));
}

static const decoder_fn decoders[] = {
	[PERF_RECORD_SAMPLE] = dec_sample,
	[PERF_RECORD_MMAP2] = dec_mmap2,
	[PERF_RECORD_COMM] = dec_comm,
	[PERF_RECORD_FORK] = dec_task,
	[PERF_RECORD_EXIT] = dec_task,
	[PERF_RECORD_SWITCH] = dec_switch,
	[PERF_RECORD_SWITCH_CPU_WIDE] = dec_switch,
};

void rec_decode(const rec_decoder *d, const struct perf_event_header *h, const rec_handlers *hs,
		void *ctx)
{
	const uint8_t *b = (const uint8_t *)(h + 1);
	size_t blen = h->size - sizeof(*h);
	if (h->size < sizeof(*h))
		return;
	if (h->type == REC_UNWOUND) {
		dec_unwound(d, h, b, blen, hs, ctx);
		return;
	}
	if (h->type < sizeof(decoders) / sizeof(decoders[0]) && decoders[h->type])
		decoders[h->type](d, h, b, blen, hs, ctx);
}
