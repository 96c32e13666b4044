// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the unwinder's reading of the unwind tables of a file it is handed, and
 * for its walk over a stack copy. libdw decodes the CIEs and FDEs, but the code around it is
 * ours and must not crash on any file a process maps: the edit of the image's ELF header that
 * hides the section headers, the program-header walk to PT_GNU_EH_FRAME, the FDE bookkeeping,
 * the .debug_frame fallback (the file's own sections, else a debug file by build ID), and the
 * evaluation of the CFA and register rules over the registers and the stack copy. The same file
 * is also made into the eBPF off-CPU walk's rows (agent/unwind_rows.c: .eh_frame_hdr's search
 * table read by hand, every FDE's ranges from libdw), and the rows looked up at the pc.
 *
 * Input: 2 bytes (little-endian) the program counter's offset in the file's mapping, 1 byte of
 * flags (bit 0: the stack copy was full, so the walk may try to read on; bit 1: the frame
 * pointer points into the copy), 1 byte the copy's length in 8-byte words, the copy, and the
 * rest is the file. The file is written afresh under a temporary directory for every input and
 * mapped at a fixed address in a synthetic process whose pid cannot exist (so reading on from
 * /proc/PID/mem fails, as for a process that has exited); a new unwinder each time, whose debug
 * directory is that temporary directory, so nothing of the host's is read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strobe/sampler.h"

#include "../../agent/unwind.h"
#include "../../agent/unwind_rows.h"

#include <fcntl.h>

#define BASE 0x400000ull
#define SP 0x7ffd00000000ull
#define PID 999999999 /* above any pid_max */

static char root[64], path[128];

static void cleanup(void)
{
	unlink(path);
	rmdir(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!root[0]) {
		snprintf(root, sizeof(root), "/tmp/strobe-fuzz-unwind-XXXXXX");
		if (!mkdtemp(root))
			abort();
		snprintf(path, sizeof(path), "%s/bin", root);
		atexit(cleanup);
	}
	if (size < 4)
		return 0;
	uint64_t pc_off = (uint64_t)data[0] | (uint64_t)data[1] << 8;
	uint8_t flags = data[2];
	size_t stack_len = (size_t)(data[3] & 63) * 8;
	if (size < 4 + stack_len)
		return 0;
	static uint8_t stack[63 * 8];
	memcpy(stack, data + 4, stack_len);
	const uint8_t *file = data + 4 + stack_len;
	size_t file_len = size - 4 - stack_len;

	/* A new file (a new inode) every time: the unwinder maps it, and a file rewritten in place
	 * under a mapping would be a different fault than the one this target looks for. */
	unlink(path);
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (file_len && fwrite(file, 1, file_len, f) != file_len)
		abort();
	fclose(f);

	tracker t;
	if (tracker_init(&t) < 0)
		return 0;
	uint64_t map_len = (file_len + 4095) & ~4095ull;
	if (!map_len)
		map_len = 4096;
	if (tracker_mmap(&t, PID, BASE, map_len, 0, 0, 0, NULL, 0, path) < 0) {
		tracker_free(&t);
		return 0;
	}
	unwinder *u = unwinder_new(1 << 20);
	if (!u) {
		tracker_free(&t);
		return 0;
	}
	unwinder_set_debug_dir(u, root);

	uint64_t regs[STROBE_UNWIND_NREGS] = {0};
	regs[6] = (flags & 2) && stack_len >= 16 ? SP + 8 : 0; /* bp */
	regs[7] = SP;                                            /* sp */
	regs[8] = BASE + (pc_off % map_len);                      /* ip */
	unwind_sample sm = {.pid = PID, .tid = PID, .regs = regs, .stack = stack,
				   .stack_len = stack_len, .stack_full = flags & 1};
	uint64_t pcs[64];
	bool act[64];
	unsigned n = 0;
	const proc *p = tracker_proc(&t, PID, false);
	if (p)
		unwind(u, &t, p, &sm, pcs, act, 64, &n);
	unwinder_free(u);
	tracker_free(&t);

	int fd = open(path, O_RDONLY);
	urows r;
	if (fd >= 0 && urows_build(fd, 1 << 16, &r) == 0) {
		for (uint32_t i = 1; i < r.n; i++) /* strictly sorted, as the program's search needs */
			if (r.rows[i - 1].pc >= r.rows[i].pc)
				abort();
		const struct ob_row *row = urows_find(&r, pc_off);
		if (row && row->pc > pc_off)
			abort();
		uint64_t bias;
		urows_bias(&r, BASE, 0, &bias);
		urows_free(&r);
	}
	if (fd >= 0)
		close(fd);
	return 0;
}
