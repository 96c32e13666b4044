// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the perf script reader: strobe_collapse under every option combination
 * (chosen by the first byte), the streaming form fed in pieces (split points from the second
 * byte) which must give the same output as the one-shot call, and the perf script profile
 * decoder.
 */
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/collapse.h"

typedef struct sink_ctx {
	uint64_t sum; /* a checksum of what was emitted, to compare the two forms */
	size_t n;
} sink_ctx;

static int sink(const char *stack, size_t len, uint64_t count, void *ctx)
{
	sink_ctx *s = ctx;
	if (len < 2)
		abort(); /* every stack starts with the process name, two characters or more */
	s->sum = s->sum * 1000003u + strobe_hash(stack, len) + count;
	s->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint8_t f = data[0], step = (uint8_t)(data[1] | 1);
	const char *in = (const char *)data + 2;
	size_t len = size - 2;
	strobe_collapse_opts o = {.pid = f & 1, .tid = f & 2, .kernel = f & 4, .jit = f & 8,
				  .all = f & 16, .addrs = f & 32, .srcline = f & 64,
				  .event_filter = (f & 128) ? "cycles:" : NULL};
	sink_ctx whole = {0}, parts = {0};
	strobe_err err;
	int r1 = strobe_collapse(in, len, "fuzz", &o, sink, &whole, &err);
	strobe_collapser *c = strobe_collapser_new("fuzz", &o);
	if (!c)
		return 0;
	int r2 = 0;
	for (size_t at = 0; at < len && !r2; at += step)
		r2 = strobe_collapser_feed(c, in + at, len - at < step ? len - at : step, &err);
	if (!r2)
		r2 = strobe_collapser_finish(c, sink, &parts, &err);
	strobe_collapser_free(c);
	if (r1 != r2 || whole.sum != parts.sum || whole.n != parts.n)
		abort(); /* a line split between pieces must not change anything */
	strobe_profile *p = NULL;
	if (strobe_perf_script_decode(in, len, "fuzz", &p, &err) == 0)
		strobe_profile_free(p);
	return 0;
}
