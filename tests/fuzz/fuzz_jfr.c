// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the JFR reader (lib/jfr.c) and the LabelsSnapshot decoder beside it.
 *
 * Any input either decodes or is refused with a message that names the input and a byte
 * offset, leaving nothing behind. What decodes is well formed: at least one column, every
 * column one of the documented kinds, no negative value, and the same bytes decode to the same
 * totals a second time (with a tight memory cap the reader may refuse with -E2BIG, never
 * crash). Seeds in tests/fuzz/corpus/fuzz_jfr/: a real openjdk-17 recording
 * (tests/fixtures/jfr/cpusplit.jfr), pieces of it cut at chunk, event and string boundaries,
 * and two chunks back to back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "strobe/jfr.h"

static void check(const strobe_profile *p)
{
	if (!p->ntypes)
		abort();
	for (uint32_t t = 0; t < p->ntypes; t++)
		if (!strobe_jfr_kind_of(strobe_str(p, p->types[t].type)))
			abort();
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++)
		for (uint32_t t = 0; t < p->ntypes; t++)
			if (strobe_sample_values(p, s)[t] < 0)
				abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_profile *p = NULL, *q = NULL;
	strobe_err err = {{0}};
	int r = strobe_jfr_decode(data, size, "fuzz", NULL, &p, &err);
	if (r < 0) {
		if (!err.msg[0] || p || strncmp(err.msg, "fuzz", 4) != 0)
			abort();
	} else {
		check(p);
		/* The same with labels for every context id 1..3 and sample counts in ns. */
		static const strobe_jfr_label l[] = {{"endpoint", "/a"}, {"user", "b"}};
		static const strobe_jfr_context c[] = {{1, l, 2}, {2, l, 1}, {3, l + 1, 1}};
		strobe_jfr_options o = {.period_ns = 10000000, .contexts = c, .ncontexts = 3};
		if (strobe_jfr_decode(data, size, "fuzz", &o, &q, &err) < 0)
			abort();
		if (q->ntypes != p->ntypes)
			abort();
		for (uint32_t t = 0; t < p->ntypes; t++) {
			const char *u = strobe_str(p, p->types[t].unit);
			int64_t a = strobe_total(p, t), b = strobe_total(q, t);
			if (!strcmp(u, "count") && !strcmp(strobe_str(p, p->types[t].type), "cpu")) {
				if (a > INT64_MAX / 10000000)
					continue; /* clamped at INT64_MAX in q */
				a *= 10000000;
			}
			if (a != b && strcmp(strobe_str(p, p->types[t].type), "wall"))
				abort();
		}
		strobe_profile_free(q);
		q = NULL;
		strobe_profile_free(p);
		p = NULL;
		/* A tight memory cap: a refusal, not a crash. */
		o.max_memory = 4096;
		if (strobe_jfr_decode(data, size, "fuzz", &o, &q, &err) == 0)
			strobe_profile_free(q);
	}
	strobe_profile_free(p);
	/* The labels decoder on the same bytes. */
	strobe_jfr_labels ls;
	if (strobe_jfr_labels_decode(data, size, &ls, &err) == 0) {
		for (size_t i = 1; i < ls.n; i++)
			if (ls.contexts[i].id <= ls.contexts[i - 1].id)
				abort();
		for (size_t i = 0; i < ls.n; i++)
			for (uint32_t k = 0; k < ls.contexts[i].nlabels; k++)
				if (!ls.contexts[i].labels[k].name[0])
					abort();
		strobe_jfr_labels_free(&ls);
	}
	return 0;
}
