// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/unwind_rows.c, the rows the eBPF off-CPU program walks stacks by. The
 * oracle is libdw asked address by address (dwarf_cfi_addrframe at each address, not the range
 * walk the builder does): for every address sampled across a binary's code, the row found by
 * binary search must say what libdw's rules there say (the CFA register and offset, the return
 * address at CFA - 8 or undefined, where rbp was saved), and an address no FDE covers must get a
 * frame-pointer row. Run over this test's own executable (built with ASan: large, every
 * function with CFI) and the C library it runs on (Debian's: no frame pointers). Also the
 * errors: a file that is not ELF, one without PT_GNU_EH_FRAME, a cap too small for the rows (by
 * one row: the cap is exact).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"

#include "../../agent/unwind_rows.h"
#define UNIT_TMPDIR_NAME "urows"
#include "unit_tmpdir.h"

/* Evaluates a CFA expression with rsp = 0 and rip = pc into *cfa, for the operations a PLT
 * stub's uses; false for any other (the oracle of PLT rows). */
static bool eval_cfa(const Dwarf_Op *ops, size_t n, uint64_t pc, int64_t *cfa)
{
	int64_t st[16];
	size_t sp = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t a = ops[i].atom;
		if (sp >= 16)
			return false;
		if (a == DW_OP_breg7)
			st[sp++] = (int64_t)ops[i].number;
		else if (a == DW_OP_breg16)
			st[sp++] = (int64_t)pc + (int64_t)ops[i].number;
		else if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
			st[sp++] = a - DW_OP_lit0;
		else if (sp < 2)
			return false;
		else if (a == DW_OP_and)
			sp--, st[sp - 1] &= st[sp];
		else if (a == DW_OP_ge)
			sp--, st[sp - 1] = st[sp - 1] >= st[sp];
		else if (a == DW_OP_shl)
			sp--, st[sp - 1] = (int64_t)((uint64_t)st[sp - 1] << st[sp]);
		else if (a == DW_OP_plus)
			sp--, st[sp - 1] += st[sp];
		else
			return false;
	}
	if (sp != 1)
		return false;
	*cfa = st[0];
	return true;
}

/* Whether libdw's frame f at pc agrees with row r; why not in *why. */
static bool agrees(Dwarf_Frame *f, const struct ob_row *r, uint64_t pc, const char **why)
{
	unsigned kind = r->kind & STROBE_OB_ROW_KIND;
	Dwarf_Op mem[3], *ops;
	size_t nops;
	bool signal = false;
	int ra_reg = dwarf_frame_info(f, NULL, NULL, &signal);
	if (dwarf_frame_register(f, 16, mem, &ops, &nops) != 0) {
		*why = "libdw has no rule for the return address";
		return kind == STROBE_OB_ROW_BAD;
	}
	bool ra_undef = nops == 0 && ops == mem;
	bool ra_cfa8 = nops == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
		       ops[1].atom == DW_OP_plus_uconst && (int64_t)ops[1].number == -8;
	if (ra_reg != 16 || signal) {
		*why = "a signal frame or another return register";
		return kind == STROBE_OB_ROW_BAD;
	}
	if (ra_undef) {
		*why = "the return address is undefined: END expected";
		return kind == STROBE_OB_ROW_END;
	}
	Dwarf_Op *cops;
	size_t cn;
	int reg = -1;
	int64_t off = 0, plt_cfa;
	if (dwarf_frame_cfa(f, &cops, &cn) == 0 && cn > 1 && ra_cfa8 &&
	    dwarf_frame_register(f, 6, mem, &ops, &nops) == 0 && nops == 0 && ops != mem &&
	    eval_cfa(cops, cn, pc, &plt_cfa)) {
		/* a PLT stub's expression (rbp unchanged): the row's CFA at pc is the same */
		*why = "a PLT expression whose CFA the row gives otherwise";
		return kind == STROBE_OB_ROW_PLT &&
		       r->cfa_off + ((pc & 15) >= (uint64_t)(uint8_t)r->rbp_off8 ? 8 : 0) == plt_cfa;
	}
	if (dwarf_frame_cfa(f, &cops, &cn) == 0 && cn == 1) {
		if (cops[0].atom == DW_OP_bregx) {
			reg = (int)cops[0].number;
			off = (int64_t)cops[0].number2;
		} else if (cops[0].atom >= DW_OP_breg0 && cops[0].atom <= DW_OP_breg31) {
			reg = cops[0].atom - DW_OP_breg0;
			off = (int64_t)cops[0].number;
		}
	}
	if (!ra_cfa8 || (reg != 6 && reg != 7) || off <= 0 || off > INT16_MAX) {
		*why = "rules the walk does not follow: BAD expected";
		return kind == STROBE_OB_ROW_BAD;
	}
	if (dwarf_frame_register(f, 6, mem, &ops, &nops) != 0)
		return kind == STROBE_OB_ROW_BAD;
	bool bp_saved = nops == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
			ops[1].atom == DW_OP_plus_uconst;
	if (nops && !bp_saved)
		return kind == STROBE_OB_ROW_BAD;
	*why = "the CFA or rbp rule differs";
	if (kind != (reg == 7 ? STROBE_OB_ROW_SP : STROBE_OB_ROW_BP) || r->cfa_off != off)
		return false;
	if (!bp_saved)
		return !(r->kind & STROBE_OB_ROW_RBP);
	return (r->kind & STROBE_OB_ROW_RBP) && 8 * (int64_t)r->rbp_off8 == (int64_t)ops[1].number;
}

/* Checks the rows of the file at path at every step-th address of its executable segments,
 * and at each row's first address and the one before it. */
static unsigned check_binary(const char *path, unsigned step)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	urows r;
	assert_int_equal(urows_build(fd, 1u << 24, &r), 0);
	assert_true(r.n > 10);
	assert_true(r.nload > 0);
	for (uint32_t i = 1; i < r.n; i++)
		assert_true(r.rows[i - 1].pc < r.rows[i].pc);

	/* the oracle: libdw over the same file, opened its own way */
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	assert_non_null(cfi);
	unsigned checked = 0, nofde = 0, bad = 0, plt = 0;
	for (unsigned s = 0; s < r.nload; s++) {
		uint64_t lo = r.load[s].p_vaddr, hi = lo + r.load[s].p_filesz;
		uint32_t ri = 0;
		for (uint64_t pc = lo; pc < hi;) {
			const struct ob_row *row = urows_find(&r, pc);
			Dwarf_Frame *f = NULL;
			if (dwarf_cfi_addrframe(cfi, pc, &f) != 0) {
				nofde++;
				/* no FDE: a frame-pointer row, but for the padding (under 32 bytes)
				 * before the next function, which may keep the previous rows */
				bool padding = false;
				for (uint64_t q = pc + 1; q < pc + 32 && !padding; q++) {
					Dwarf_Frame *g = NULL;
					padding = dwarf_cfi_addrframe(cfi, q, &g) == 0;
					free(g);
				}
				if (row && !padding && (row->kind & STROBE_OB_ROW_KIND) != STROBE_OB_ROW_FP)
					fail_msg("%s: %#lx has no FDE but row %#x kind %u", path,
						 (unsigned long)pc, row->pc, row->kind);
			} else {
				const char *why = "";
				if (!row)
					fail_msg("%s: %#lx has an FDE but no row", path, (unsigned long)pc);
				if (!agrees(f, row, pc, &why))
					fail_msg("%s: %#lx: row %#x (kind %u cfa %d rbp %d) disagrees with "
						 "libdw: %s", path, (unsigned long)pc, row->pc, row->kind,
						 row->cfa_off, row->rbp_off8, why);
				if ((row->kind & STROBE_OB_ROW_KIND) == STROBE_OB_ROW_BAD)
					bad++;
				if ((row->kind & STROBE_OB_ROW_KIND) == STROBE_OB_ROW_PLT)
					plt++;
				free(f);
			}
			checked++;
			/* the next sample: step bytes on, or a row's first address (or the one
			 * before it) if one comes first */
			while (ri < r.n && r.rows[ri].pc <= pc)
				ri++;
			uint64_t nx = pc + step;
			if (ri < r.n && r.rows[ri].pc - 1 > pc && r.rows[ri].pc - 1 < nx)
				nx = r.rows[ri].pc - 1;
			else if (ri < r.n && r.rows[ri].pc < nx)
				nx = r.rows[ri].pc;
			pc = nx;
		}
	}
	print_message("%s: %u rows, %u addresses checked (%u without an FDE, %u BAD, %u PLT)\n",
		      path, r.n, checked, nofde, bad, plt);
	assert_true(checked > 1000);
	dwarf_cfi_end(cfi);
	elf_end(elf);
	urows_free(&r);
	close(fd);
	return plt;
}

/* (its PLT stubs, lazily bound, have the linker's expression: some addresses there are PLT rows) */
static void test_own_executable(void **state)
{
	(void)state;
	assert_true(check_binary("/proc/self/exe", 7) > 0);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	if (strstr(info->dlpi_name, "/libc.so")) {
		snprintf(data, 4096, "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static void test_libc(void **state)
{
	(void)state;
	char path[4096] = "";
	dl_iterate_phdr(find_libc, path);
	if (!path[0])
		SKIP_CASE("statically linked: no libc.so mapped");
	check_binary(path, 5);
}

/* A copy of this executable at path, with its PT_GNU_EH_FRAME header made PT_NULL. */
static void copy_without_hdr(const char *path)
{
	int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(in >= 0);
	off_t len = lseek(in, 0, SEEK_END);
	uint8_t *img = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE, in, 0);
	assert_true(img != MAP_FAILED);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + eh->e_phoff);
	bool found = false;
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME) {
			ph[i].p_type = PT_NULL;
			found = true;
		}
	assert_true(found);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(img, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	munmap(img, (size_t)len);
	close(in);
}

static void test_errors(void **state)
{
	(void)state;
	char path[300];
	urows r;

	snprintf(path, sizeof(path), "%s/not-elf", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 100; i++)
		fputs("not an ELF file at all\n", f);
	fclose(f);
	int fd = open(path, O_RDONLY);
	assert_int_equal(urows_build(fd, 1000, &r), -ENOEXEC);
	assert_null(r.rows);
	close(fd);

	snprintf(path, sizeof(path), "%s/no-hdr", dir);
	copy_without_hdr(path);
	fd = open(path, O_RDONLY);
	assert_int_equal(urows_build(fd, 1u << 24, &r), -ENOENT);
	assert_int_equal(r.n, 0);
	close(fd);

	fd = open("/proc/self/exe", O_RDONLY);
	assert_int_equal(urows_build(fd, 100, &r), -E2BIG);
	assert_null(r.rows);
	/* max_rows is exact: the rows of a file fit in as many, not in one fewer */
	urows all;
	assert_int_equal(urows_build(fd, 1u << 24, &all), 0);
	assert_true(all.n > 100);
	assert_int_equal(urows_build(fd, all.n, &r), 0);
	assert_int_equal(r.n, all.n);
	assert_memory_equal(r.rows, all.rows, all.n * sizeof(*all.rows));
	urows_free(&r);
	assert_int_equal(urows_build(fd, all.n - 1, &r), -E2BIG);
	assert_null(r.rows);
	urows_free(&all);
	close(fd);

	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(urows_build(fd, 100, &r), -ENOEXEC);
	close(fd);
}

/* The bias of a mapping: a shared object's segment mapped at some address. */
static void test_bias(void **state)
{
	(void)state;
	urows r = {.nload = 1, .e_type = ET_DYN};
	r.load[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_vaddr = 0x26000,
				 .p_offset = 0x26000, .p_filesz = 0x156000};
	uint64_t bias = 0;
	assert_true(urows_bias(&r, 0x7f0000026000ull, 0x26000, &bias));
	assert_int_equal(bias, 0x7f0000000000ull);
	assert_false(urows_bias(&r, 0x7f0000000000ull, 0x200000, &bias)); /* not x */
	/* a non-PIE executable is where it was linked, or it is not the file */
	r.e_type = ET_EXEC;
	r.load[0].p_vaddr = 0x401000;
	r.load[0].p_offset = 0x1000;
	assert_true(urows_bias(&r, 0x401000, 0x1000, &bias));
	assert_int_equal(bias, 0);
	assert_false(urows_bias(&r, 0x501000, 0x1000, &bias));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_executable),
		cmocka_unit_test(test_libc),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
		cmocka_unit_test(test_bias),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
