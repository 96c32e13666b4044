// SPDX-License-Identifier: Apache-2.0
/*
 * A binary's .eh_frame as the compact rows the eBPF off-CPU program walks stacks with (see
 * unwind_rows.h). The FDEs come from .eh_frame_hdr's sorted search table (found through the
 * PT_GNU_EH_FRAME segment, so stripped binaries work too); each FDE's rows from libdw, asking
 * dwarf_cfi_addrframe at the FDE's start and then at the end of each range it returns, so libdw
 * does all the CFA-program interpretation and this file only classifies the result. A gap
 * between FDEs gets a frame-pointer row, so an address in code without CFI never borrows the
 * rules of the function before it (except alignment padding). Consecutive equal rows are merged.
 *
 * Only x86-64 is handled, and of its rules only what the program follows (offcpu.bpf.c): the
 * CFA rsp or rbp plus a 16-bit constant, the return address at CFA - 8 or undefined, rbp
 * unchanged or saved at CFA plus a multiple of 8. Other callee-saved registers are not needed:
 * on x86-64 compilers define the CFA only through rsp or rbp. One expression is followed too,
 * the one the linker writes for its PLT stubs (rsp + K, 8 more once the stub's push has run: at
 * (rip & 15) >= N), since a sample can land in a stub of every program. Anything else becomes a
 * BAD row, where the walk stops (stack-realigning prologues, signal frames).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/buf.h"
#include "unwind.h"
#include "unwind_rows.h"

#define R_BP 6
#define R_SP 7
#define R_RA 16
#define MAX_FILE ((off_t)4 << 30)

/* A register rule as libdw gives it: 0 undefined, 1 unchanged, 2 saved at CFA + *off, -1 any
 * other form. */
static int reg_rule(Dwarf_Frame *f, int reg, int64_t *off)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;
	if (dwarf_frame_register(f, reg, mem, &ops, &nops) != 0)
		return -1;
	if (nops == 0)
		return ops == mem ? 0 : 1; /* libdw: ops = mem for undefined, NULL for same value */
	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number; /* a negative offset wraps */
		return 2;
	}
	return -1;
}

/* A PLT stub's CFA expression (DW_OP_breg7 K; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus: rsp + K + 8 * ((rip & 15) >= N)):
 * N with *off = K, or -1 for any other expression. */
static int plt_rule(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	if (nops != 9 || ops[0].atom != DW_OP_breg0 + R_SP || ops[1].atom != DW_OP_breg16 ||
	    ops[1].number != 0 || ops[2].atom != DW_OP_lit15 || ops[3].atom != DW_OP_and ||
	    ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit15 || ops[5].atom != DW_OP_ge ||
	    ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus)
		return -1;
	*off = (int64_t)ops[0].number;
	if (*off <= 0 || *off > INT16_MAX)
		return -1;
	return ops[4].atom - DW_OP_lit0;
}

/* The row of frame f at pc. */
static struct ob_row classify(Dwarf_Frame *f, uint32_t pc)
{
	struct ob_row r = {.pc = pc, .kind = STROBE_OB_ROW_BAD};
	bool signal = false;
	if (dwarf_frame_info(f, NULL, NULL, &signal) != R_RA || signal)
		return r;
	int64_t ra_off = 0, bp_off = 0;
	int ra = reg_rule(f, R_RA, &ra_off);
	if (ra == 0) {
		r.kind = STROBE_OB_ROW_END;
		return r;
	}
	if (ra != 2 || ra_off != -8)
		return r;
	Dwarf_Op *ops;
	size_t nops;
	if (dwarf_frame_cfa(f, &ops, &nops) != 0)
		return r;
	int64_t plt_off;
	int plt_at = plt_rule(ops, nops, &plt_off);
	if (plt_at >= 0) {
		if (reg_rule(f, R_BP, &bp_off) != 1)
			return r; /* (a stub leaves rbp alone) */
		r.kind = STROBE_OB_ROW_PLT;
		r.cfa_off = (int16_t)plt_off;
		r.rbp_off8 = (int8_t)plt_at;
		return r;
	}
	if (nops != 1)
		return r;
	uint64_t reg;
	int64_t off;
	if (ops[0].atom == DW_OP_bregx) {
		reg = ops[0].number;
		off = (int64_t)ops[0].number2;
	} else if (ops[0].atom == DW_OP_breg0 + R_SP || ops[0].atom == DW_OP_breg0 + R_BP) {
		reg = (uint64_t)(ops[0].atom - DW_OP_breg0);
		off = (int64_t)ops[0].number;
	} else {
		return r;
	}
	if ((reg != R_SP && reg != R_BP) || off != (int16_t)off || off <= 0)
		return r;
	int bp = reg_rule(f, R_BP, &bp_off);
	if (bp < 0 || (bp == 2 && (bp_off % 8 || bp_off / 8 != (int8_t)(bp_off / 8))))
		return r;
	r.kind = reg == R_SP ? STROBE_OB_ROW_SP : STROBE_OB_ROW_BP;
	r.cfa_off = (int16_t)off;
	if (bp == 2) {
		r.kind |= STROBE_OB_ROW_RBP;
		r.rbp_off8 = (int8_t)(bp_off / 8);
	}
	return r;
}

/* The rows so far (their bytes: the buffer's maximum is max_rows rows, so one more is -E2BIG),
 * and the FDE count for out. */
typedef struct rows_buf {
	urows *out;
	strobe_buf rows;
} rows_buf;

static int push(rows_buf *b, struct ob_row r)
{
	if (b->rows.len) {
		struct ob_row *last = (struct ob_row *)(b->rows.p + b->rows.len) - 1;
		if (last->kind == r.kind && last->cfa_off == r.cfa_off && last->rbp_off8 == r.rbp_off8)
			return 0; /* the same rules go on */
		if (last->pc == r.pc) { /* an empty range before it */
			*last = r;
			return 0;
		}
	}
	return strobe_buf_add(&b->rows, &r, sizeof(r));
}

/* A 4-byte little-endian signed value at p. */
static int32_t s32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* The rows of every FDE of .eh_frame_hdr's table (hdr: its bytes, at ELF address hdr_addr). */
static int walk_fdes(Dwarf_CFI *cfi, const uint8_t *hdr, size_t len, uint64_t hdr_addr,
		     rows_buf *b)
{
	/* version 1; eh_frame_ptr (any 4-byte encoding: only skipped); the FDE count as udata4;
	 * the table as datarel sdata4 pairs (initial location, FDE address) - what every linker
	 * writes. Another layout: no rows, frame pointers instead. */
	if (len < 12 || hdr[0] != 1 || (hdr[1] & 0x0f) != DW_EH_PE_sdata4 ||
	    hdr[2] != DW_EH_PE_udata4 || hdr[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -ENOENT;
	uint32_t count;
	memcpy(&count, hdr + 8, 4);
	if (count > (len - 12) / 8)
		return -ENOENT;
	b->out->fdes = count;
	const uint8_t *tab = hdr + 12;
	uint64_t cursor = 0; /* where the rows so far end */
	for (uint32_t i = 0; i < count; i++) {
		uint64_t start = hdr_addr + (uint64_t)(int64_t)s32(tab + 8 * i);
		uint64_t next = i + 1 < count ? hdr_addr + (uint64_t)(int64_t)s32(tab + 8 * (i + 1))
					      : UINT64_MAX;
		if (start < cursor) /* overlapping FDEs: the first one's rows stand */
			start = cursor;
		if (start >= UINT32_MAX)
			break;
		/* Code no FDE covers; not a gap of under 32 bytes (the padding that aligns the next
		 * function: a tenth of the rows otherwise, and no address in it is ever executed). */
		if (cursor && start > cursor && (start - cursor >= 32 || start % 16)) {
			int rc = push(b, (struct ob_row){.pc = (uint32_t)cursor});
			if (rc < 0)
				return rc;
		}
		uint64_t pc = start;
		while (pc < next && pc < UINT32_MAX) {
			Dwarf_Frame *f = NULL;
			if (dwarf_cfi_addrframe(cfi, pc, &f) != 0)
				break;
			Dwarf_Addr s = 0, e = 0;
			dwarf_frame_info(f, &s, &e, NULL);
			struct ob_row r = classify(f, (uint32_t)pc);
			free(f);
			int rc = push(b, r);
			if (rc < 0)
				return rc;
			if (e <= pc)
				break;
			pc = e;
		}
		if (pc > cursor)
			cursor = pc;
	}
	if (cursor && cursor < UINT32_MAX) /* past the last FDE */
		return push(b, (struct ob_row){.pc = (uint32_t)cursor});
	return 0;
}

int urows_build(int fd, uint32_t max_rows, urows *out)
{
	memset(out, 0, sizeof(*out));
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(Elf64_Ehdr) || sb.st_size > MAX_FILE)
		return -ENOEXEC;
	size_t len = (size_t)sb.st_size;
	/* Private and writable: the section headers are hidden below, so libdw finds the CFI
	 * through the program headers (.eh_frame_hdr) alone, without reading section names. */
	uint8_t *img = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (img == MAP_FAILED)
		return -errno;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	int rc = -ENOEXEC;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_machine != EM_X86_64) {
		munmap(img, len);
		return rc;
	}
	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = SHN_UNDEF;
	out->e_type = eh->e_type;
	Elf *elf = elf_memory((char *)img, len);
	size_t nph = 0;
	const uint8_t *hdr = NULL;
	size_t hlen = 0;
	uint64_t haddr = 0;
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		rc = -ENOENT;
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_offset > len ||
			    ph.p_filesz > len - ph.p_offset)
				continue;
			if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && out->nload < 4) {
				out->load[out->nload++] = ph; /* GElf_Phdr is Elf64_Phdr */
			} else if (ph.p_type == PT_GNU_EH_FRAME) {
				hdr = img + ph.p_offset;
				hlen = ph.p_filesz;
				haddr = ph.p_vaddr;
			}
		}
	}
	Dwarf_CFI *cfi = hdr && out->nload ? dwarf_getcfi_elf(elf) : NULL;
	if (cfi) {
		rows_buf b = {.out = out};
		strobe_buf_init(&b.rows, (size_t)max_rows * sizeof(*out->rows));
		rc = walk_fdes(cfi, hdr, hlen, haddr, &b);
		dwarf_cfi_end(cfi);
		if (rc >= 0 && b.rows.len) {
			out->n = (uint32_t)(b.rows.len / sizeof(*out->rows));
			out->rows = (struct ob_row *)strobe_buf_take(&b.rows, NULL);
		}
		strobe_buf_free(&b.rows);
	}
	if (elf)
		elf_end(elf);
	munmap(img, len);
	return rc;
}

void urows_free(urows *r)
{
	free(r->rows);
	r->rows = NULL;
	r->n = 0;
}

bool urows_bias(const urows *r, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	return unwind_bias(r->load, r->nload, r->e_type, start, pgoff, bias);
}

const struct ob_row *urows_find(const urows *r, uint64_t pc)
{
	uint32_t lo = 0, hi = r->n; /* the answer is below hi */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (r->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &r->rows[lo - 1] : NULL;
}
