// SPDX-License-Identifier: Apache-2.0
/*
 * One ELF object: opening it through libdwfl, finding its separate debug file, turning file
 * offsets into addresses, and its function symbols as a sorted table.
 *
 * libdwfl does the ELF work (symbol tables from .symtab, the debug file, MiniDebugInfo's
 * .gnu_debugdata, .dynsym; DWARF with its bias) but its address -> symbol search is a linear
 * scan of the whole table per call, so the symbols are read out of it once into a table sorted
 * by address and searched by bisection here.
 *
 * Debug files are found by our own find_debuginfo callback rather than
 * dwfl_standard_find_debuginfo: it applies opts.debug_dirs and the sysroot, never reaches for
 * debuginfod (a network fetch from inside a profiler's hot path), and checks every candidate
 * against the binary (same build ID, or the .gnu_debuglink CRC when there is no build ID), so a
 * stale debug file left in a directory cannot name addresses wrongly.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <elfutils/libdwelf.h>

#include "internal.h"

/* ---- debug file search ---------------------------------------------------------------------- */

/* CRC-32 of a whole file, as .gnu_debuglink records it (zlib's polynomial). */
static int file_crc(int fd, uint32_t *crc)
{
	unsigned char buf[1 << 14];
	uLong c = crc32(0, Z_NULL, 0);
	off_t pos = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), pos);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		c = crc32(c, buf, (uInt)n);
		pos += n;
	}
	*crc = (uint32_t)c;
	return 0;
}

/*
 * Opens path and keeps it when it is the debug file of the module: the same build ID when both
 * have one, else (debuglink candidates only) the CRC the link records. Returns the fd or -1.
 */
static int try_debug_file(Dwfl_Module *mod, const char *path, const struct stat *main_st,
			  bool check_crc, GElf_Word crc)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (main_st && st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino)) {
		close(fd); /* not a file, or the binary itself reached through its own link name */
		return -1;
	}
	const unsigned char *want = NULL;
	GElf_Addr vaddr;
	int wantlen = dwfl_module_build_id(mod, &want, &vaddr);
	bool ok = false;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		const uint8_t *got = NULL;
		int gotlen = sym_elf_build_id(elf, &got);
		if (wantlen > 0 && gotlen > 0) {
			ok = gotlen == wantlen && memcmp(got, want, (size_t)gotlen) == 0;
		} else if (check_crc) {
			uint32_t c;
			ok = file_crc(fd, &c) == 0 && c == crc;
		}
	}
	elf_end(elf);
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Tries a + b + c as the debug file; on success *out takes the path. */
static int try_path(Dwfl_Module *mod, const char *a, const char *b, const char *c,
		    const struct stat *main_st, bool check_crc, GElf_Word crc, char **out)
{
	char *p = NULL;
	if (asprintf(&p, "%s%s%s", a, b, c) < 0)
		return -1;
	int fd = try_debug_file(mod, p, main_st, check_crc, crc);
	if (fd < 0) {
		free(p);
		return -1;
	}
	*out = p;
	return fd;
}

/* The directory part of path with a trailing '/' ("./" when there is none), malloc'd. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup("./");
	return strndup(path, (size_t)(slash - path) + 1);
}

/* A separate debug file (objcopy --only-keep-debug, the server's debug-info store) keeps the
 * program headers but not the code: the code segments have p_filesz 0, and their p_offset is no
 * longer the file's. The code segments' offsets in the executable are rebuilt from the layout every
 * linker writes: the first PT_LOAD maps file offset 0 at the image's base, and the others keep
 * their distance from it (p_offset = p_vaddr - base); code is all that is sampled. */
static void debug_file_segments(Elf *elf, size_t nph, strobe_sym_object *o)
{
	uint64_t base = UINT64_MAX;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < base)
			base = ph.p_vaddr;
	}
	if (base == UINT64_MAX)
		return;
	base &= ~(uint64_t)0xfff;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_filesz ||
		    !ph.p_memsz || !(ph.p_flags & PF_X))
			continue;
		o->seg[o->nseg++] = (sym_segment){.offset = ph.p_vaddr - base, .filesz = ph.p_memsz,
						  .vaddr = ph.p_vaddr, .exec = true};
	}
}

/*
 * The search order (docs/symbolization.md): by build ID under every debug_dirs entry, then under
 * <sysroot>/usr/lib/debug; then by .gnu_debuglink next to the binary, in its .debug/, under
 * every debug_dirs entry mirroring the binary's directory, and under /usr/lib/debug the same way.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink,
			  GElf_Word crc, char **debuginfo_file_name)
{
	strobe_sym_object *o = *userdata;
	if (!o || !o->owner)
		return -1;
	strobe_symbolizer *s = o->owner;
	/* libdwfl asks through this same callback for a dwz alternate file (.gnu_debugaltlink),
	 * passing its name as the debuglink. Searching by the module's build ID would hand it
	 * the debug file itself; no alternate file is better than a wrong one. */
	GElf_Addr mbias;
	GElf_Word own_crc;
	Elf *main_elf = dwfl_module_getelf(mod, &mbias);
	const char *own = main_elf ? dwelf_elf_gnu_debuglink(main_elf, &own_crc) : NULL;
	if (debuglink && (!own || strcmp(own, debuglink) != 0))
		return -1;
	char *sysdebug = sym_rooted(s, "/usr/lib/debug");
	if (!sysdebug)
		return -1;
	struct stat main_st, *mst = NULL;
	if (file_name && stat(file_name, &main_st) == 0)
		mst = &main_st;
	int fd = -1;
	const unsigned char *id = NULL;
	GElf_Addr vaddr;
	int idlen = dwfl_module_build_id(mod, &id, &vaddr);
	if (idlen >= 2 && idlen <= 64) {
		char hex[2 * 64 + 1], rel[2 * 64 + 32];
		strobe_build_id_hex(id, (size_t)idlen, hex);
		snprintf(rel, sizeof(rel), "/.build-id/%.2s/%s.debug", hex, hex + 2);
		for (size_t i = 0; fd < 0 && s->debug_dirs[i]; i++)
			fd = try_path(mod, s->debug_dirs[i], rel, "", mst, false, 0,
				      debuginfo_file_name);
		if (fd < 0)
			fd = try_path(mod, sysdebug, rel, "", mst, false, 0, debuginfo_file_name);
	}
	/* A debuglink is a file name; one with a '/' would make the search open arbitrary files. */
	if (fd < 0 && debuglink && *debuglink && !strchr(debuglink, '/')) {
		char *dir = dir_of(file_name ? file_name : o->path);
		/* Mirrors under debug directories follow the path the process used, not a
		 * /proc/PID/root prefix we may have opened it through. */
		char *pdir = dir_of(o->path);
		if (dir && pdir) {
			const char *mdir = pdir[0] == '/' ? pdir : NULL;
			fd = try_path(mod, dir, "", debuglink, mst, true, crc, debuginfo_file_name);
			if (fd < 0)
				fd = try_path(mod, dir, ".debug/", debuglink, mst, true, crc,
					      debuginfo_file_name);
			for (size_t i = 0; fd < 0 && mdir && s->debug_dirs[i]; i++) {
				char *d = NULL;
				if (asprintf(&d, "%s%s", s->debug_dirs[i], mdir) < 0)
					break;
				fd = try_path(mod, d, "", debuglink, mst, true, crc,
					      debuginfo_file_name);
				free(d);
			}
			if (fd < 0 && mdir)
				fd = try_path(mod, sysdebug, mdir, debuglink, mst, true, crc,
					      debuginfo_file_name);
		}
		free(dir);
		free(pdir);
	}
	free(sysdebug);
	return fd;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf, /* unused: we report every module with its fd */
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* ---- opening ---------------------------------------------------------------------------------- */

int sym_object_open(strobe_symbolizer *s, strobe_sym_object *o, int fd, const char *opened_as)
{
	o->owner = s;
	o->dwfl = dwfl_begin(&callbacks);
	if (!o->dwfl) {
		close(fd);
		return -ENOMEM;
	}
	dwfl_report_begin(o->dwfl);
	/* ET_DYN placed at 0: module addresses are then ELF addresses (bias 0) in the usual
	 * case, but the bias is read back rather than assumed (prelinked objects differ). */
	o->mod = dwfl_report_elf(o->dwfl, o->path, opened_as, fd, 0, false);
	if (!o->mod) {
		close(fd); /* libdwfl takes the fd only on success */
		return -ENOEXEC;
	}
	dwfl_report_end(o->dwfl, NULL, NULL);
	void **ud = NULL;
	dwfl_module_info(o->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (ud)
		*ud = o;
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(o->mod, &bias);
	if (!elf)
		return -ENOEXEC;
	o->bias = bias;
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) < 0)
		return -ENOEXEC;
	if (nph > 4096) /* real objects have a dozen; more is a hostile file */
		nph = 4096;
	o->seg = calloc(nph ? nph : 1, sizeof(*o->seg));
	if (!o->seg)
		return -ENOMEM;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		o->seg[o->nseg++] = (sym_segment){
			.offset = ph.p_offset,
			.filesz = ph.p_filesz,
			.vaddr = ph.p_vaddr,
			.exec = (ph.p_flags & PF_X) != 0,
		};
	}
	bool code = false;
	for (size_t i = 0; i < o->nseg; i++)
		code |= o->seg[i].exec;
	if (!code)
		debug_file_segments(elf, nph, o);
	return o->nseg ? 0 : -ENOEXEC;
}

/* Frees what an object loaded (libdw's DWARF, our indexes, the symbol array), keeping what
 * identifies it. */
static void object_unload(strobe_sym_object *o)
{
	if (o->dwfl)
		dwfl_end(o->dwfl);
	o->dwfl = NULL;
	o->mod = NULL;
	sym_dwarf_free(o->dw);
	o->dw = NULL;
	o->dwarf_loaded = false;
	free(o->seg);
	o->seg = NULL;
	o->nseg = 0;
	free(o->syms);
	o->syms = NULL;
	o->nsyms = 0;
	o->syms_loaded = false;
}

void sym_object_close(strobe_sym_object *o)
{
	if (!o)
		return;
	object_unload(o);
	free(o->opened_as);
	free(o->path);
}

void strobe_sym_object_release(strobe_symbolizer *s, strobe_sym_object *o)
{
	(void)s;
	if (!o || o->released || !o->opened_as)
		return;
	object_unload(o);
	o->released = true;
	/* Give the freed debug information back to the system now: glibc keeps freed heap in its
	 * arenas, and the point of releasing is the process's footprint. */
	malloc_trim(0);
}

void sym_object_ensure(strobe_sym_object *o)
{
	if (!o || !o->released)
		return;
	o->released = false; /* once: a file gone since is not retried on every lookup */
	int fd = open(o->opened_as, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (sym_object_open(o->owner, o, fd, o->opened_as) < 0)
		object_unload(o);
}

bool sym_object_offset_to_addr(const strobe_sym_object *o, uint64_t offset, uint64_t *addr)
{
	/* Executable segments first: old layouts map the last page of text again at the start
	 * of the data segment, and a sampled address is code. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < o->nseg; i++) {
			const sym_segment *g = &o->seg[i];
			if ((pass == 0 && !g->exec) || offset < g->offset ||
			    offset - g->offset >= g->filesz)
				continue;
			*addr = offset - g->offset + g->vaddr + o->bias;
			return true;
		}
	return false;
}

/* ---- function symbols ------------------------------------------------------------------------ */

/* While the table is built, a sym_range carries what ordering needs: group the rank (bit 3:
 * the symbol has a size), seq the symbol's index in the table, end the provisional end (start +
 * size, or the end of its section for a symbol without a size). One array, sorted in place:
 * node has 107,000 symbols, and a second array of wider records plus qsort's scratch copy of
 * it were 14 MB at the peak of loading. */
#define RANK_SIZED 8u

static int cmp_sym(const void *a, const void *b)
{
	const sym_range *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->group != y->group)
		return x->group > y->group ? -1 : 1;
	/* Then the symbol table's order, not the names: comparing names would read most of the
	 * string table (C++ binaries have an alias for every constructor and destructor), which
	 * for node is 7 MB brought into memory for a choice the order makes as stably. */
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void sym_object_load_symbols(strobe_sym_object *o)
{
	if (o->syms_loaded)
		return;
	o->syms_loaded = true;
	if (!o->mod)
		return;
	int n = dwfl_module_getsymtab(o->mod);
	if (n <= 1)
		return;
	size_t cap = (size_t)n < SYM_MAX_ENTRIES ? (size_t)n : SYM_MAX_ENTRIES;
	sym_range *v = malloc(cap * sizeof(*v));
	if (!v)
		return;
	size_t k = 0;
	for (int i = 1; i < n && k < cap; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx = 0;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name =
			dwfl_module_getsym_info(o->mod, i, &sym, &addr, &shndx, &elf, &bias);
		/* st_name, not *name: reading every name would bring the whole string table
		 * into memory (node's is 7 MB), where only the names asked for are needed. */
		if (!name || !sym.st_name || shndx == SHN_UNDEF || shndx == SHN_ABS ||
		    shndx == SHN_COMMON || shndx == (GElf_Word)-1)
			continue;
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		GElf_Shdr sh;
		Elf_Scn *scn = elf ? elf_getscn(elf, shndx) : NULL;
		bool have_sh = scn && gelf_getshdr(scn, &sh);
		if (type == STT_NOTYPE) {
			/* Labels in hand-written assembly name code too, but not ARM mapping
			 * symbols ($x, $d) or compiler-local labels. */
			if (!have_sh || !(sh.sh_flags & SHF_EXECINSTR) || name[0] == '$' ||
			    strncmp(name, ".L", 2) == 0)
				continue;
		} else if (type != STT_FUNC && type != STT_GNU_IFUNC) {
			continue;
		}
		/* Several names for one address (aliases, .symtab and .dynsym both): the typed,
		 * sized, global one wins, then the first in the table, so the choice is stable. */
		uint64_t end;
		if (sym.st_size) {
			end = addr + sym.st_size;
			if (end < addr)
				end = UINT64_MAX;
		} else {
			end = have_sh ? sh.sh_addr + sh.sh_size + bias : 0; /* its section's end */
		}
		v[k++] = (sym_range){
			.start = addr,
			.end = end,
			.name = name,
			.group = (type != STT_NOTYPE) * 16u + (sym.st_size > 0) * RANK_SIZED +
				 (bind == STB_GLOBAL ? 3u : bind == STB_WEAK ? 2u : 1u),
			.seq = (uint32_t)i,
		};
	}
	if (k)
		qsort(v, k, sizeof(*v), cmp_sym);
	/* One symbol per address, in place: reads run ahead of writes. */
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		if (i > 0 && v[i].start == v[i - 1].start)
			continue; /* v[i - 1].start is intact: a write only ever changes an end */
		size_t next = i + 1;
		while (next < k && v[next].start == v[i].start)
			next++;
		uint64_t end = v[i].end;
		if (!(v[i].group & RANK_SIZED)) {
			/* No size (assembly): up to the next symbol, within its section. */
			uint64_t section_end = v[i].end;
			end = next < k ? v[next].start
				       : section_end > v[i].start ? section_end : v[i].start + 1;
			if (section_end > v[i].start && section_end < end)
				end = section_end;
		}
		v[m++] = (sym_range){.start = v[i].start, .end = end, .name = v[i].name};
	}
	if (!m) {
		free(v);
		return;
	}
	sym_range *r = realloc(v, m * sizeof(*r)); /* give back what was skipped */
	o->syms = r ? r : v;
	o->nsyms = m;
}

const sym_range *sym_object_symbol(const strobe_sym_object *o, uint64_t addr)
{
	return o->nsyms ? sym_ranges_find(o->syms, o->nsyms, addr, NULL) : NULL;
}
