// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the reader of libstrobe-heap.so's channel (lib/heap_channel.c): what
 * another process wrote into shared memory is parsed into a snapshot, built into heap and mutex
 * profiles (with a namer, as the CLI names frames) and listed as leaks, so that a buggy or
 * hostile process can crash none of it. The seed corpus (tests/fuzz/corpus/fuzz_heap_channel)
 * holds small valid channels.
 */
#include <stdio.h>
#include <stdlib.h>

#include "strobe/heap_channel.h"
#include "strobe/profile.h"

static int namer(void *ctx, const char *path, uint64_t offset, strobe_heap_frame *out, int max)
{
	(void)ctx;
	if (max < 2 || (offset & 3) == 0)
		return 0;
	out[0] = (strobe_heap_frame){"inlined", path, (int64_t)(offset & 0xff), 0, 1};
	out[1] = (strobe_heap_frame){"outer", NULL, 0, 0, 0};
	return 2;
}

static void build_id(void *ctx, const char *path, char *hex, size_t cap)
{
	(void)ctx;
	snprintf(hex, cap, "%s", path[0] && path[1] == 'l' ? "0123abcd" : "");
}

static const char *const labels[] = {"env=fuzz", "=bad", "noeq", "k=v=w"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_heap_snap *s = NULL;
	strobe_err err;
	if (strobe_heap_snap_parse(data, size, &s, &err) < 0)
		return 0;
	for (int kind = STROBE_HEAP_KIND_ALLOC; kind <= STROBE_HEAP_KIND_LOCK; kind++) {
		strobe_profile *p = strobe_profile_new();
		strobe_heap_profile_opts o = {.kind = kind, .namer = namer, .pid_label = true,
					      .build_id = build_id, .labels = labels, .nlabels = 4};
		if (p)
			strobe_heap_profile_add(p, s, &o, &err);
		strobe_profile_free(p);
	}
	strobe_heap_leak *l = NULL;
	size_t n = 0;
	if (strobe_heap_leaks(s, &l, &n) == 0)
		free(l);
	strobe_heap_snap_free(s);
	return 0;
}
