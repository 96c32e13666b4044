// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for symbolize/bolt_syms.c, which reads executables a tenant uploaded to the
 * debug-info store when the server writes BOLT fdata (GET /api/v1/pgo?format=bolt): the input is
 * written as a file, opened as a symbol table, and a spread of addresses in mappings of its build
 * ID (and of none) is resolved. libelf parses the ELF; the symbol walk, the BOLT naming, the
 * segment translation and the binary search are ours and must not crash or read out of bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strobe/bolt_syms.h"

static char path[64];

static void cleanup(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!path[0]) {
		snprintf(path, sizeof(path), "/tmp/strobe-fuzz-bolt-XXXXXX");
		int fd = mkstemp(path);
		if (fd < 0)
			abort();
		close(fd);
		atexit(cleanup);
	}
	FILE *f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size))
		abort();
	fclose(f);
	strobe_err err = {{0}};
	strobe_bolt_syms *s = strobe_bolt_syms_open(path, &err);
	if (!s)
		return 0;
	strobe_profile *p = strobe_profile_new();
	if (!p)
		abort();
	/* two mappings: the file's build ID (or its name when it has none), and another binary */
	const char *bid = strobe_bolt_syms_build_id(s);
	uint32_t m1 = strobe_mapping_intern(p, &(strobe_mapping){.start = 0x400000, .limit = 0x800000,
		.offset = 0, .filename = strobe_str_intern0(p, path), .build_id = strobe_str_intern0(p, bid)});
	uint32_t m2 = strobe_mapping_intern(p, &(strobe_mapping){.start = 0x1000, .limit = 0x2000,
		.build_id = strobe_str_intern0(p, "00ff")});
	for (uint64_t a = 0x400000; a < 0x800000; a += 0x1fff) {
		uint32_t l = strobe_location_intern(p, (a & 0x2000) ? m2 : m1, a, NULL, 0, false);
		const char *sym;
		uint64_t off;
		if (l != UINT32_MAX && strobe_bolt_syms_resolve(s, p, strobe_location_get(p, l), &sym, &off) == 1 &&
		    !sym[0])
			abort(); /* a named site has a name */
	}
	strobe_profile_free(p);
	strobe_bolt_syms_free(s);
	return 0;
}
