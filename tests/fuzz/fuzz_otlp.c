// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the OTLP profiles decoder (lib/otlp.c), which reads what any exporter
 * sends to POST /v1development/profiles. Any input either decodes or is refused with a message;
 * the input is read both as protobuf and, when it looks like JSON, as OTLP/JSON. What decodes
 * must encode, and decode again to the same series: the same sample types and the same total
 * for each (the encoder writes every sample with a value, so nothing may be lost or invented).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/otlp.h"

static void check(const strobe_otlp_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		const strobe_profile *p = b->s[i].profile;
		if (!p)
			continue;
		uint8_t *buf;
		size_t len;
		if (strobe_otlp_encode(p, b->s[i].labels, b->s[i].nlabels, &buf, &len) < 0)
			continue; /* out of memory only */
		strobe_otlp_batch b2;
		strobe_err err = {{0}};
		int r = strobe_otlp_decode(buf, len, NULL, &b2, &err);
		free(buf);
		if (r < 0) {
			fprintf(stderr, "our own encoding does not decode: %s\n", err.msg);
			abort();
		}
		/* one series back (labels included), or none when p had no sample types */
		if (p->ntypes && (b2.n != 1 || b2.s[0].profile->ntypes != p->ntypes))
			abort();
		for (uint32_t t = 0; p->ntypes && t < p->ntypes; t++)
			if (strobe_total(p, (int)t) != strobe_total(b2.s[0].profile, (int)t))
				abort();
		strobe_otlp_batch_free(&b2);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_otlp_batch b;
	strobe_err err = {{0}};
	strobe_otlp_limits lim = {.max_profiles = 64, .max_labels = 32};
	int r = strobe_otlp_decode(data, size, &lim, &b, &err);
	if (r == 0) {
		check(&b);
		strobe_otlp_batch_free(&b);
	} else if (!err.msg[0]) {
		abort(); /* refused without saying why */
	}
	if (size && data[0] == '{') {
		err.msg[0] = 0;
		r = strobe_otlp_decode_json((const char *)data, size, &lim, &b, &err);
		if (r == 0) {
			check(&b);
			strobe_otlp_batch_free(&b);
		} else if (!err.msg[0]) {
			abort();
		}
	}
	return 0;
}
