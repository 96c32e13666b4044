// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the symbolizer's inputs that come from outside: the input is written as
 * /proc/kallsyms, /proc/modules and /tmp/perf-1.map under a sysroot (a temporary directory made
 * once), and as an ELF file handed to strobe_sym_object_get; a few addresses are then looked up
 * in each. elfutils parses the ELF and DWARF, but the code around it (segments, symbol tables,
 * CU and function indexes, inline walks, debug-file search) is ours and must not crash on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/symbolize.h"

static char root[64];
static char p_kallsyms[128], p_modules[128], p_perfmap[128], p_elf[128];

static void cleanup(void)
{
	unlink(p_kallsyms);
	unlink(p_modules);
	unlink(p_perfmap);
	unlink(p_elf);
	char d[128];
	snprintf(d, sizeof(d), "%s/proc", root);
	rmdir(d);
	snprintf(d, sizeof(d), "%s/tmp", root);
	rmdir(d);
	rmdir(root);
}

static int setup(void)
{
	snprintf(root, sizeof(root), "/tmp/strobe-fuzz-sym-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	char d[128];
	snprintf(d, sizeof(d), "%s/proc", root);
	mkdir(d, 0700);
	snprintf(d, sizeof(d), "%s/tmp", root);
	mkdir(d, 0700);
	snprintf(p_kallsyms, sizeof(p_kallsyms), "%s/proc/kallsyms", root);
	snprintf(p_modules, sizeof(p_modules), "%s/proc/modules", root);
	snprintf(p_perfmap, sizeof(p_perfmap), "%s/tmp/perf-1.map", root);
	snprintf(p_elf, sizeof(p_elf), "%s/obj.elf", root);
	atexit(cleanup);
	return 0;
}

static void put(const char *path, const uint8_t *data, size_t size)
{
	/* A new file each time (unlink first): the object cache keys on (dev, inode, path). */
	unlink(path);
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!root[0] && setup() < 0)
		abort();
	put(p_kallsyms, data, size);
	put(p_modules, data, size);
	put(p_perfmap, data, size);
	put(p_elf, data, size);

	uint64_t probe[8] = {0, 1, 0xffffffff81000000ull, 0xffffffffc0001000ull, 0x7f0000001000ull,
			     0x1000, UINT64_MAX, 0};
	if (size >= 8)
		memcpy(&probe[7], data, 8);

	strobe_sym_opts o = {.sysroot = root};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	if (!s)
		abort();
	for (int i = 0; i < 8; i++) {
		strobe_sym_frame f;
		const char *mod;
		if (strobe_sym_kernel(s, probe[i], &f, &mod) == 1 && (!f.function || !mod))
			abort();
		if (strobe_sym_perfmap(s, 1, probe[i], &f) == 1 && !f.function)
			abort();
	}
	strobe_sym_object *obj = NULL;
	if (strobe_sym_object_get(s, p_elf, 0, 0, 0, NULL, 0, &obj) == 0) {
		strobe_sym_object_has_symbols(obj);
		strobe_sym_object_has_lines(obj);
		strobe_sym_object_debug_file(obj);
		size_t len;
		strobe_sym_object_build_id(obj, &len);
		uint64_t offs[6] = {0, 0x40, 0x1000, 0x1130, size / 2, probe[7] & 0xffffff};
		for (int i = 0; i < 6; i++) {
			strobe_sym_frame f[8];
			int n = strobe_sym_lookup(s, obj, offs[i], f, 8);
			if (n < 0 || n > 8)
				abort();
			for (int j = 0; j < n; j++) /* every string must be readable */
				if ((f[j].function && strlen(f[j].function) > (1u << 20)) ||
				    (f[j].file && strlen(f[j].file) > (1u << 20)))
					abort();
		}
	}
	strobe_symbolizer_free(s);
	return 0;
}
