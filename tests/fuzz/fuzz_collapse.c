// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the perf script reader: strobe_collapse under every option combination
 * (chosen by the first byte) and the perf script profile decoder.
 */
#include <stdlib.h>

#include "strobe/codec.h"
#include "strobe/collapse.h"

static int sink(const char *stack, size_t len, uint64_t count, void *ctx)
{
	(void)count;
	size_t *total = ctx;
	*total += len;
	if (len == 0)
		abort(); /* every stack holds at least the process name */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t f = data[0];
	strobe_collapse_opts o = {.pid = f & 1, .tid = f & 2, .kernel = f & 4, .jit = f & 8,
				  .all = f & 16, .addrs = f & 32};
	size_t total = 0;
	strobe_err err;
	strobe_collapse((const char *)data + 1, size - 1, "fuzz", &o, sink, &total, &err);
	strobe_profile *p = NULL;
	if (strobe_perf_script_decode((const char *)data + 1, size - 1, "fuzz", &p, &err) == 0)
		strobe_profile_free(p);
	return 0;
}
