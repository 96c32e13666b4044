// SPDX-License-Identifier: Apache-2.0
/*
 * Build IDs and the vDSO from ELF images in memory (include/strobe/elf_image.h). Plain reads of
 * the headers, no libelf: the agent's unwinder reads build IDs of images it has mapped itself,
 * and the base library depends on no ELF library.
 */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/auxv.h>

#include "strobe/elf_image.h"

/* The first GNU build-ID note in [p, p + n). */
static size_t note_build_id(const uint8_t *p, size_t n, const uint8_t **id)
{
	while (n >= 12) {
		uint32_t nsz, dsz, type;
		memcpy(&nsz, p, 4);
		memcpy(&dsz, p + 4, 4);
		memcpy(&type, p + 8, 4);
		size_t na = ((size_t)nsz + 3) & ~(size_t)3, da = ((size_t)dsz + 3) & ~(size_t)3;
		if (na > n - 12 || da > n - 12 - na)
			return 0;
		if (type == NT_GNU_BUILD_ID && nsz == 4 && memcmp(p + 12, "GNU", 4) == 0 && dsz > 0) {
			*id = p + 12 + na;
			return dsz;
		}
		p += 12 + na + da;
		n -= 12 + na + da;
	}
	return 0;
}

/* A table of num entries of entsize bytes at off, within len. */
static bool table_ok(size_t len, uint64_t off, uint64_t num, uint64_t entsize, size_t want)
{
	return num && entsize == want && off < len && num <= (len - off) / entsize;
}

/* Offset and size of a note area within len: false when out of bounds. */
static bool area_ok(size_t len, uint64_t off, uint64_t size)
{
	return off < len && size <= len - off;
}

size_t strobe_elf_build_id_of(const void *img, size_t len, const uint8_t **id)
{
	const uint8_t *b = img;
	if (!img || len < EI_NIDENT || memcmp(b, ELFMAG, SELFMAG) != 0 ||
	    b[EI_DATA] != ELFDATA2LSB)
		return 0;
	size_t n;
	if (b[EI_CLASS] == ELFCLASS64 && len >= sizeof(Elf64_Ehdr)) {
		Elf64_Ehdr eh;
		memcpy(&eh, b, sizeof(eh));
		if (table_ok(len, eh.e_shoff, eh.e_shnum, eh.e_shentsize, sizeof(Elf64_Shdr))) {
			for (unsigned i = 0; i < eh.e_shnum; i++) {
				Elf64_Shdr sh;
				memcpy(&sh, b + eh.e_shoff + (size_t)i * sizeof(sh), sizeof(sh));
				if (sh.sh_type == SHT_NOTE && area_ok(len, sh.sh_offset, sh.sh_size) &&
				    (n = note_build_id(b + sh.sh_offset, sh.sh_size, id)))
					return n;
			}
			return 0;
		}
		if (!table_ok(len, eh.e_phoff, eh.e_phnum, eh.e_phentsize, sizeof(Elf64_Phdr)))
			return 0;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			memcpy(&ph, b + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
			if (ph.p_type == PT_NOTE && area_ok(len, ph.p_offset, ph.p_filesz) &&
			    (n = note_build_id(b + ph.p_offset, ph.p_filesz, id)))
				return n;
		}
		return 0;
	}
	if (b[EI_CLASS] == ELFCLASS32 && len >= sizeof(Elf32_Ehdr)) {
		Elf32_Ehdr eh;
		memcpy(&eh, b, sizeof(eh));
		if (table_ok(len, eh.e_shoff, eh.e_shnum, eh.e_shentsize, sizeof(Elf32_Shdr))) {
			for (unsigned i = 0; i < eh.e_shnum; i++) {
				Elf32_Shdr sh;
				memcpy(&sh, b + eh.e_shoff + (size_t)i * sizeof(sh), sizeof(sh));
				if (sh.sh_type == SHT_NOTE && area_ok(len, sh.sh_offset, sh.sh_size) &&
				    (n = note_build_id(b + sh.sh_offset, sh.sh_size, id)))
					return n;
			}
			return 0;
		}
		if (!table_ok(len, eh.e_phoff, eh.e_phnum, eh.e_phentsize, sizeof(Elf32_Phdr)))
			return 0;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf32_Phdr ph;
			memcpy(&ph, b + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
			if (ph.p_type == PT_NOTE && area_ok(len, ph.p_offset, ph.p_filesz) &&
			    (n = note_build_id(b + ph.p_offset, ph.p_filesz, id)))
				return n;
		}
	}
	return 0;
}

/* Section header i of either class, as 64-bit fields. */
static void shdr_at(const uint8_t *b, bool is64, uint64_t shoff, unsigned i, Elf64_Shdr *out)
{
	if (is64) {
		memcpy(out, b + shoff + (size_t)i * sizeof(Elf64_Shdr), sizeof(*out));
		return;
	}
	Elf32_Shdr s;
	memcpy(&s, b + shoff + (size_t)i * sizeof(s), sizeof(s));
	*out = (Elf64_Shdr){.sh_name = s.sh_name, .sh_type = s.sh_type, .sh_offset = s.sh_offset,
			    .sh_size = s.sh_size};
}

int strobe_elf_contents(const void *img, size_t len, unsigned *flags)
{
	const uint8_t *b = img;
	*flags = 0;
	if (!img || len < EI_NIDENT || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_DATA] != ELFDATA2LSB)
		return -EINVAL;
	bool is64 = b[EI_CLASS] == ELFCLASS64;
	uint64_t shoff, shnum, shent, shstrndx;
	if (is64 && len >= sizeof(Elf64_Ehdr)) {
		Elf64_Ehdr eh;
		memcpy(&eh, b, sizeof(eh));
		shoff = eh.e_shoff, shnum = eh.e_shnum, shent = eh.e_shentsize, shstrndx = eh.e_shstrndx;
	} else if (b[EI_CLASS] == ELFCLASS32 && len >= sizeof(Elf32_Ehdr)) {
		Elf32_Ehdr eh;
		memcpy(&eh, b, sizeof(eh));
		shoff = eh.e_shoff, shnum = eh.e_shnum, shent = eh.e_shentsize, shstrndx = eh.e_shstrndx;
	} else {
		return -EINVAL;
	}
	if (!table_ok(len, shoff, shnum, shent, is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)) ||
	    shstrndx >= shnum)
		return -EINVAL;
	Elf64_Shdr strs;
	shdr_at(b, is64, shoff, (unsigned)shstrndx, &strs);
	if (!area_ok(len, strs.sh_offset, strs.sh_size))
		return -EINVAL;
	const char *names = (const char *)b + strs.sh_offset;
	for (unsigned i = 0; i < shnum; i++) {
		Elf64_Shdr sh;
		shdr_at(b, is64, shoff, i, &sh);
		if (sh.sh_name >= strs.sh_size || !memchr(names + sh.sh_name, 0, strs.sh_size - sh.sh_name))
			continue; /* a name out of its table: not one we look for */
		const char *nm = names + sh.sh_name;
		bool has_bytes = sh.sh_type != SHT_NOBITS && sh.sh_size > 0 && area_ok(len, sh.sh_offset, sh.sh_size);
		if (has_bytes && (!strcmp(nm, ".debug_info") || !strcmp(nm, ".zdebug_info")))
			*flags |= STROBE_ELF_DEBUG_INFO;
		else if (has_bytes && !strcmp(nm, ".text"))
			*flags |= STROBE_ELF_CODE;
		else if (has_bytes && sh.sh_type == SHT_SYMTAB)
			*flags |= STROBE_ELF_SYMTAB;
	}
	return 0;
}

int strobe_vdso_image(const uint8_t **img, size_t *len)
{
	const uint8_t *v = (const uint8_t *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!v)
		return -ENOENT;
	/* Its size: the end of whatever its headers describe (section headers come last). */
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)v;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phnum > 64 || eh->e_phentsize != sizeof(Elf64_Phdr))
		return -ENOENT;
	size_t n = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(v + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_offset + ph[i].p_filesz > n)
			n = ph[i].p_offset + ph[i].p_filesz;
	if (n < sizeof(*eh) || n > (1u << 20))
		return -ENOENT;
	*img = v;
	*len = n;
	return 0;
}
