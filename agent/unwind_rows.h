/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A binary's unwind tables as compact rows for the eBPF off-CPU program's own stack walk
 * (agent/offcpu.bpf.c): one row per range of addresses whose rules are the same, sorted by
 * address, each saying how to find the caller from there (the CFA as the stack pointer or the
 * frame pointer plus a constant; where rbp was saved; the return address at CFA - 8). The
 * kernel cannot run libdw, so the rules are worked out here, once per binary, from .eh_frame
 * (every FDE listed in .eh_frame_hdr, each range of rows as libdw's dwarf_cfi_addrframe gives
 * it), and the program only binary-searches them. Private to agent/.
 */
#ifndef STROBE_AGENT_UNWIND_ROWS_H
#define STROBE_AGENT_UNWIND_ROWS_H

#include <elf.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>

#include "offcpu.h"

typedef struct urows {
	struct ob_row *rows; /* sorted by pc (ELF addresses) */
	uint32_t n;
	uint32_t fdes;              /* FDEs in .eh_frame_hdr */
	Elf64_Phdr load[4];         /* the executable PT_LOAD segments, for a mapping's bias */
	unsigned nload;
	uint16_t e_type;
} urows;

/*
 * The rows of the ELF file open at fd (x86-64 only). At most max_rows: -E2BIG beyond them.
 * -ENOENT when it has no .eh_frame_hdr the rows can be listed from (the walk then follows frame
 * pointers through it), -ENOEXEC when it is not an x86-64 ELF file, other -errno.
 */
int urows_build(int fd, uint32_t max_rows, urows *out);
void urows_free(urows *r);

/* Process address - ELF address for the mapping at start of file offset pgoff
 * (unwind_bias); false when no executable segment of the file holds pgoff. */
bool urows_bias(const urows *r, uint64_t start, uint64_t pgoff, uint64_t *bias);

/* The row for ELF address pc (the last at or before it), or NULL before the first. */
const struct ob_row *urows_find(const urows *r, uint64_t pc);

#endif
