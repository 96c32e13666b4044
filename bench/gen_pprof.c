// SPDX-License-Identifier: Apache-2.0
/*
 * Benchmark input generator: writes a gzipped pprof with N unique stacks drawn from a fixed
 * seed, shaped like a real CPU profile (a few thousand functions in a handful of mappings,
 * locations with addresses and line numbers, stacks 8-48 deep, string and numeric labels), so
 * `strobe top` and `go tool pprof -top` are timed on the same realistic input.
 *
 *   gen_pprof OUT.pb.gz [NSTACKS] [SEED]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"

static uint64_t rng_state;
static uint64_t rnd(void) /* xorshift64*: reproducible across libcs, unlike rand() */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gen_pprof OUT.pb.gz [NSTACKS] [SEED]\n");
		return 2;
	}
	long nstacks = argc > 2 ? atol(argv[2]) : 200000;
	rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 42;
	strobe_profile *p = strobe_profile_new();
	strobe_profile_add_type(p, "samples", "count");
	strobe_profile_add_type(p, "cpu", "nanoseconds");
	p->period = 10000000;
	p->period_type = (strobe_value_type){strobe_str_intern0(p, "cpu"),
					     strobe_str_intern0(p, "nanoseconds")};
	enum { NMAP = 8, NFUNC = 6000, NLOC = 60000 };
	uint32_t maps[NMAP], funcs[NFUNC], locs[NLOC];
	char buf[256];
	for (int m = 0; m < NMAP; m++) {
		snprintf(buf, sizeof(buf), "/usr/lib/x86_64-linux-gnu/libbench%d.so", m);
		snprintf(buf + 128, 64, "%016llx%016llx", (unsigned long long)rnd(),
			 (unsigned long long)rnd());
		strobe_mapping mp = {.start = 0x400000ull + (uint64_t)m * 0x10000000ull,
				     .limit = 0x400000ull + (uint64_t)(m + 1) * 0x10000000ull,
				     .filename = strobe_str_intern0(p, buf),
				     .build_id = strobe_str_intern0(p, buf + 128),
				     .has_functions = 1, .has_filenames = 1, .has_line_numbers = 1};
		maps[m] = strobe_mapping_intern(p, &mp);
	}
	for (int f = 0; f < NFUNC; f++) {
		snprintf(buf, sizeof(buf), "github.com/example/svc/pkg%d.(*Type%d).Method%d", f % 97,
			 f % 13, f);
		char file[128];
		snprintf(file, sizeof(file), "/src/svc/pkg%d/file%d.go", f % 97, f % 7);
		strobe_function fn = {.name = strobe_str_intern0(p, buf),
				      .system_name = strobe_str_intern0(p, buf),
				      .filename = strobe_str_intern0(p, file),
				      .start_line = (int64_t)(rnd() % 2000)};
		funcs[f] = strobe_function_intern(p, &fn);
	}
	for (int l = 0; l < NLOC; l++) {
		int m = (int)(rnd() % NMAP);
		strobe_line ln = {.function = funcs[rnd() % NFUNC], .line = (int64_t)(rnd() % 5000)};
		locs[l] = strobe_location_intern(p, maps[m],
						 strobe_mapping_get(p, maps[m])->start + rnd() % 0xffffff,
						 &ln, 1, false);
	}
	uint32_t kthread = strobe_str_intern0(p, "thread"), kbytes = strobe_str_intern0(p, "bytes");
	for (long s = 0; s < nstacks; s++) {
		/* Shared prefixes, as real stacks have: the first frames come from a small set. */
		uint32_t st = 0;
		int depth = 8 + (int)(rnd() % 41);
		for (int d = 0; d < depth; d++) {
			uint32_t pool = d < 4 ? 50 : NLOC;
			st = strobe_stack_push(p, st, locs[rnd() % pool]);
		}
		snprintf(buf, sizeof(buf), "worker-%d", (int)(rnd() % 64));
		strobe_label lab[2] = {{.key = kthread, .str = strobe_str_intern0(p, buf)},
				       {.key = kbytes, .num = (int64_t)(rnd() % 100000),
					.num_unit = kbytes}};
		int64_t n = 1 + (int64_t)(rnd() % 20);
		int64_t v[2] = {n, n * 10000000};
		strobe_sample_add(p, st, strobe_labelset_intern(p, lab, 2), v);
	}
	uint8_t *out;
	size_t len;
	if (strobe_pprof_encode(p, &out, &len) < 0) {
		fprintf(stderr, "gen_pprof: encode failed\n");
		return 1;
	}
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(out, 1, len, f) != len || fclose(f) != 0) {
		perror(argv[1]);
		return 1;
	}
	fprintf(stderr, "gen_pprof: %s: %ld stacks, %zu bytes gzipped\n", argv[1], nstacks, len);
	free(out);
	strobe_profile_free(p);
	return 0;
}
