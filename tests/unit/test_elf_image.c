// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of ELF images in memory (lib/elf_image.c): the build ID from a PT_NOTE segment,
 * from a note section (which wins over the segments when section headers are there), of a
 * 32-bit image, other notes skipped, every truncation refused, and this process's vDSO (its
 * image, and a build ID when the kernel gives it one).
 */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include <cmocka.h>

#include "strobe/elf_image.h"

/* A note at p: another note first, then GNU build ID id (n bytes); returns its size. */
static size_t put_notes(uint8_t *p, const uint8_t *id, uint32_t n)
{
	uint32_t h1[3] = {4, 4, 1}; /* NT_GNU_ABI_TAG */
	memcpy(p, h1, 12);
	memcpy(p + 12, "GNU", 4);
	memset(p + 16, 0, 4);
	uint32_t h2[3] = {4, n, NT_GNU_BUILD_ID};
	memcpy(p + 20, h2, 12);
	memcpy(p + 32, "GNU", 4);
	memcpy(p + 36, id, n);
	return 36 + ((n + 3) & ~3u);
}

static const uint8_t id_a[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
				 7,    8,    9,    10,   11, 12, 13, 14, 15, 16};
static const uint8_t id_b[8] = {0xca, 0xfe, 0xba, 0xbe, 9, 9, 9, 9};

/* A 64-bit image: PT_NOTE with id_a at 0x100; with_sections adds a note section holding id_b
 * at 0x200. */
static size_t image64(uint8_t *img, bool with_sections)
{
	memset(img, 0, 0x400);
	Elf64_Ehdr eh = {.e_type = ET_DYN, .e_machine = EM_X86_64, .e_version = EV_CURRENT};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1;
	size_t nn = put_notes(img + 0x100, id_a, sizeof(id_a));
	Elf64_Phdr ph = {.p_type = PT_NOTE, .p_offset = 0x100, .p_filesz = nn};
	memcpy(img + eh.e_phoff, &ph, sizeof(ph));
	if (with_sections) {
		size_t sn = put_notes(img + 0x200, id_b, sizeof(id_b));
		Elf64_Shdr sh[2] = {{0}, {.sh_type = SHT_NOTE, .sh_offset = 0x200, .sh_size = sn}};
		eh.e_shoff = 0x300;
		eh.e_shentsize = sizeof(Elf64_Shdr);
		eh.e_shnum = 2;
		memcpy(img + 0x300, sh, sizeof(sh));
	}
	memcpy(img, &eh, sizeof(eh));
	return 0x400;
}

static void test_build_id_64(void **state)
{
	(void)state;
	uint8_t img[0x400];
	const uint8_t *id = NULL;
	size_t len = image64(img, false);
	assert_int_equal(strobe_elf_build_id_of(img, len, &id), sizeof(id_a));
	assert_memory_equal(id, id_a, sizeof(id_a));
	assert_ptr_equal(id, img + 0x100 + 20 + 16);
	len = image64(img, true);
	assert_int_equal(strobe_elf_build_id_of(img, len, &id), sizeof(id_b));
	assert_memory_equal(id, id_b, sizeof(id_b));
	/* truncated anywhere: never read past the end */
	for (size_t n = 0; n < 0x300 + 2 * sizeof(Elf64_Shdr); n++) {
		size_t got = strobe_elf_build_id_of(img, n, &id);
		assert_true(got == 0 || got == sizeof(id_a));
		if (got)
			assert_true(id + got <= img + n);
	}
	/* a note whose size runs past its segment */
	image64(img, false);
	uint32_t big = 4096;
	memcpy(img + 0x100 + 20 + 4, &big, 4);
	assert_int_equal(strobe_elf_build_id_of(img, 0x400, &id), 0);
	/* not ELF, big-endian */
	image64(img, false);
	img[EI_DATA] = ELFDATA2MSB;
	assert_int_equal(strobe_elf_build_id_of(img, 0x400, &id), 0);
	img[0] = 0;
	assert_int_equal(strobe_elf_build_id_of(img, 0x400, &id), 0);
}

static void test_build_id_32(void **state)
{
	(void)state;
	uint8_t img[0x200] = {0};
	Elf32_Ehdr eh = {.e_type = ET_EXEC, .e_machine = EM_386, .e_version = EV_CURRENT};
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS32;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(Elf32_Phdr);
	eh.e_phnum = 1;
	size_t nn = put_notes(img + 0x80, id_b, sizeof(id_b));
	Elf32_Phdr ph = {.p_type = PT_NOTE, .p_offset = 0x80, .p_filesz = (Elf32_Word)nn};
	memcpy(img, &eh, sizeof(eh));
	memcpy(img + eh.e_phoff, &ph, sizeof(ph));
	const uint8_t *id = NULL;
	assert_int_equal(strobe_elf_build_id_of(img, sizeof(img), &id), sizeof(id_b));
	assert_memory_equal(id, id_b, sizeof(id_b));
}

/* The roles of an uploaded file: this test binary (built with -g, not stripped) has all three;
 * an image of section headers without names has none; a string-table index past the table, a
 * table past the end and a non-ELF buffer are refused; every truncation of this binary either
 * is refused or reports only what lies within it. */
static void test_contents(void **state)
{
	(void)state;
	FILE *f = fopen("/proc/self/exe", "rb");
	assert_non_null(f);
	static uint8_t self[64 << 20];
	size_t n = fread(self, 1, sizeof(self), f);
	fclose(f);
	assert_true(n > 0 && n < sizeof(self));
	unsigned fl = 0;
	assert_int_equal(strobe_elf_contents(self, n, &fl), 0);
	assert_int_equal(fl, STROBE_ELF_DEBUG_INFO | STROBE_ELF_CODE | STROBE_ELF_SYMTAB);

	uint8_t img[0x400];
	image64(img, true);
	assert_int_equal(strobe_elf_contents(img, sizeof(img), &fl), 0);
	assert_int_equal(fl, 0); /* its sections have no names: nothing it holds is ours to use */
	Elf64_Ehdr eh;
	memcpy(&eh, img, sizeof(eh));
	eh.e_shstrndx = 2; /* past the two sections */
	memcpy(img, &eh, sizeof(eh));
	assert_int_equal(strobe_elf_contents(img, sizeof(img), &fl), -EINVAL);
	eh.e_shstrndx = 0;
	eh.e_shoff = 0x3f0; /* the table runs past the end */
	memcpy(img, &eh, sizeof(eh));
	assert_int_equal(strobe_elf_contents(img, sizeof(img), &fl), -EINVAL);
	assert_int_equal(strobe_elf_contents("#!/bin/sh\n", 10, &fl), -EINVAL);
	assert_int_equal(strobe_elf_contents(self, 3, &fl), -EINVAL);
	/* The section headers are at the end: cut there, the file is refused. */
	assert_int_equal(strobe_elf_contents(self, n - 1, &fl), -EINVAL);
}

static void test_vdso(void **state)
{
	(void)state;
	const uint8_t *img;
	size_t len;
	if (!getauxval(AT_SYSINFO_EHDR)) {
		assert_int_equal(strobe_vdso_image(&img, &len), -ENOENT);
		return;
	}
	assert_int_equal(strobe_vdso_image(&img, &len), 0);
	assert_ptr_equal(img, (const uint8_t *)getauxval(AT_SYSINFO_EHDR));
	assert_true(len > sizeof(Elf64_Ehdr) && len <= (1u << 20));
	assert_memory_equal(img, ELFMAG, SELFMAG);
	const uint8_t *id = NULL;
	size_t n = strobe_elf_build_id_of(img, len, &id);
	if (n)
		assert_true(id > img && id + n <= img + len);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_id_64),
		cmocka_unit_test(test_build_id_32),
		cmocka_unit_test(test_contents),
		cmocka_unit_test(test_vdso),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
