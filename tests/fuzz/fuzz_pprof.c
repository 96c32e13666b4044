// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the pprof decoder: any input either decodes or is rejected with a
 * message; what decodes must encode, decode again, and keep its totals.
 */
#include <stdio.h>
#include <stdlib.h>

#include "strobe/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_profile *p = NULL, *q = NULL;
	strobe_err err = {{0}};
	if (strobe_pprof_decode(data, size, "fuzz", &p, &err) < 0) {
		if (!err.msg[0])
			abort(); /* every rejection says why */
		return 0;
	}
	uint8_t *gz, *raw;
	size_t gzlen, rawlen;
	if (strobe_pprof_encode(p, &gz, &gzlen) < 0)
		abort();
	if (strobe_gunzip(gz, gzlen, &raw, &rawlen, NULL) < 0 ||
	    strobe_pprof_decode(raw, rawlen, "re", &q, &err) < 0)
		abort();
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (strobe_total(p, (int)t) != strobe_total(q, (int)t))
			abort();
	free(gz);
	free(raw);
	strobe_profile_free(p);
	strobe_profile_free(q);
	return 0;
}
