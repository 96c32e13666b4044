// SPDX-License-Identifier: Apache-2.0
/*
 * Source lines and inlined frames from DWARF, through libdw.
 *
 * An address is named in three bisections and one short walk: the compilation unit from a
 * table of every CU's ranges, the function from a per-CU table of subprogram ranges (built the
 * first time an address falls in that CU), then the walk down that one function's DIEs along
 * the scopes containing the address, collecting DW_TAG_inlined_subroutine entries. The leaf's
 * line comes from the CU's line table (dwarf_getsrc_die), each caller's from the
 * DW_AT_call_file / DW_AT_call_line of the inlined instance below it.
 *
 * Not dwfl_module_addrdie + dwarf_getscopes (what eu-addr2line does): dwarf_getscopes walks the
 * whole CU, then walks it again to find an inlined function's abstract origin, and addr2line
 * walks it a third time (dwarf_getscopes_die) to recover the physical nesting; with CUs of
 * thousands of DIEs that is most of the cost of a lookup. And libdw 0.188 finds CUs through
 * .debug_aranges, which clang does not emit by default; CU ranges read here from each CU's own
 * DW_AT_ranges / low_pc work either way.
 *
 * Memory. libdw decompresses every DWARF section when it opens a file and keeps each CU's
 * line table, once parsed, until the end: libc's separate debug file (libc6-dbg) is 4 MB on
 * disk, 10 MB decompressed, and its line tables as many again once a busy host's samples have
 * touched most of its CUs. Under a budget (opts.max_debug_bytes) the sections are measured
 * before libdw opens them, from the section headers, and the line tables are counted as they
 * are parsed (about LINE_BYTES a row, CU_BYTES a unit), so the symbolizer can refuse or drop
 * what would pass it.
 */
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define MAX_CUS (1u << 20)
#define MAX_NEST 8               /* namespaces / classes searched for subprograms */
#define MAX_STEPS (4u << 20)     /* DIEs visited per CU index or per lookup walk */
#define LOOK_BACK 8
/* libdw's memory per line-table row, and per compilation unit once the CUs are indexed (its
 * unit, abbreviation and range caches), measured on libc6-dbg with libdw 0.188. */
#define LINE_BYTES 56u
/* GCC's and LLVM's attribute for an inlined call's discriminator; elfutils' dwarf.h lacks it. */
#ifndef DW_AT_GNU_discriminator
#define DW_AT_GNU_discriminator 0x2136
#endif
#define CU_BYTES 1600u

typedef struct addr_range {
	uint64_t lo, hi; /* [lo, hi), DWARF addresses */
	uint64_t ref;    /* CU index, or a subprogram's DIE offset */
} addr_range;

typedef struct cu_info {
	Dwarf_Die cudie;
	addr_range *fns; /* subprogram ranges, sorted; built on first use */
	size_t nfns;
	bool indexed;
	bool lines_counted;
} cu_info;

struct sym_dwarf {
	Dwarf *dw;
	uint64_t bias; /* module address = DWARF address + bias */
	cu_info *cus;
	size_t ncus;
	addr_range *cu_ranges;
	size_t ncu_ranges;
	uint64_t section_bytes; /* the DWARF sections, decompressed (0 when not measured) */
	uint64_t line_bytes;    /* line tables parsed so far, estimated */
};

typedef struct range_vec {
	addr_range *v;
	size_t n, cap;
} range_vec;

static int push_range(range_vec *r, uint64_t lo, uint64_t hi, uint64_t ref)
{
	if (r->n == r->cap) {
		if (r->cap >= SYM_MAX_ENTRIES)
			return -E2BIG;
		size_t nc = r->cap ? r->cap * 2 : 64;
		addr_range *v = realloc(r->v, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = nc;
	}
	r->v[r->n++] = (addr_range){lo, hi, ref};
	return 0;
}

/* Every [lo, hi) range of a DIE (low_pc/high_pc or DW_AT_ranges). */
static int push_die_ranges(range_vec *r, Dwarf_Die *die, uint64_t ref)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	int k = 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0 && k++ < 65536)
		if (hi > lo && push_range(r, lo, hi, ref) < 0)
			return -1;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const addr_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static const addr_range *find_range(const addr_range *v, size_t n, uint64_t pc)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < LOOK_BACK; i--, k++)
		if (pc < v[i - 1].hi)
			return &v[i - 1];
	return NULL;
}

void sym_dwarf_free(sym_dwarf *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->ncus; i++)
		free(d->cus[i].fns);
	free(d->cus);
	free(d->cu_ranges);
	free(d);
}

uint64_t sym_dwarf_held_bytes(const sym_dwarf *d)
{
	return d ? d->section_bytes + d->ncus * CU_BYTES + d->line_bytes : 0;
}

/* The size of the DWARF sections of the ELF file at path once decompressed, from its section
 * headers (SHF_COMPRESSED sections give it in their header, GNU .zdebug_ ones after "ZLIB").
 * 0 when the file cannot be read. */
static uint64_t dwarf_section_bytes(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint64_t total = 0;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t shstrndx;
	if (elf && elf_kind(elf) == ELF_K_ELF && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
				continue;
			const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
			if (!name)
				continue;
			uint64_t size = sh.sh_size;
			if (strncmp(name, ".debug_", 7) == 0) {
				GElf_Chdr ch;
				if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
					size = ch.ch_size;
			} else if (strncmp(name, ".zdebug_", 8) == 0) {
				Elf_Data *raw = elf_rawdata(scn, NULL);
				const uint8_t *b = raw ? raw->d_buf : NULL;
				if (b && raw->d_size >= 12 && memcmp(b, "ZLIB", 4) == 0) {
					size = 0;
					for (int i = 4; i < 12; i++)
						size = size << 8 | b[i];
				}
			} else {
				continue;
			}
			total = total + size < total ? UINT64_MAX : total + size;
		}
	}
	elf_end(elf);
	close(fd);
	return total;
}

void sym_dwarf_load(strobe_sym_object *o)
{
	if (o->dwarf_loaded)
		return;
	o->dwarf_loaded = true;
	if (!o->mod || o->over_budget || (o->owner && o->owner->no_dwarf))
		return;
	uint64_t budget = o->owner ? o->owner->max_debug : 0, sections = 0;
	if (budget) {
		/* Where the DWARF is: the separate debug file, which loading the symbol table
		 * has looked for (when the binary has no .symtab of its own), or the binary. */
		dwfl_module_getsymtab(o->mod);
		const char *main_file = NULL, *debug_file = NULL;
		dwfl_module_info(o->mod, NULL, NULL, NULL, NULL, NULL, &main_file, &debug_file);
		const char *file = debug_file ? debug_file : main_file;
		sections = file ? dwarf_section_bytes(file) : 0;
		if (sections > budget / 2) {
			o->over_budget = true;
			o->owner->over_budget++;
			return;
		}
	}
	Dwarf_Addr bias = 0;
	Dwarf *dw = dwfl_module_getdwarf(o->mod, &bias);
	if (!dw)
		return;
	sym_dwarf *d = calloc(1, sizeof(*d));
	if (!d)
		return;
	d->dw = dw;
	d->bias = bias;
	d->section_bytes = sections;
	range_vec rv = {0};
	size_t ccus = 0;
	Dwarf_CU *cu = NULL;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie;
	while (d->ncus < MAX_CUS &&
	       dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, NULL) == 0) {
		/* Type units and partial units hold no code; split (skeleton) units are not
		 * followed to their .dwo. */
		if (unit_type != DW_UT_compile)
			continue;
		if (d->ncus == ccus) {
			size_t nc = ccus ? ccus * 2 : 64;
			cu_info *v = realloc(d->cus, nc * sizeof(*v));
			if (!v)
				break;
			d->cus = v;
			ccus = nc;
		}
		d->cus[d->ncus] = (cu_info){.cudie = cudie};
		if (push_die_ranges(&rv, &cudie, d->ncus) < 0)
			break;
		d->ncus++;
	}
	if (!rv.n) {
		free(rv.v);
		sym_dwarf_free(d);
		return;
	}
	qsort(rv.v, rv.n, sizeof(*rv.v), cmp_range);
	d->cu_ranges = rv.v;
	d->ncu_ranges = rv.n;
	o->dw = d;
}

/* Subprograms with code, searched at CU level and inside namespaces and classes (where clang
 * puts the definitions of C++ functions). Not inside other subprograms: nested functions (a
 * GCC extension) are named after the function they are nested in. */
static void index_scope(range_vec *r, Dwarf_Die *parent, int depth, size_t *steps)
{
	Dwarf_Die die;
	if (dwarf_child(parent, &die) != 0)
		return;
	do {
		if (++*steps > MAX_STEPS)
			return;
		switch (dwarf_tag(&die)) {
		case DW_TAG_subprogram:
			if (push_die_ranges(r, &die, dwarf_dieoffset(&die)) < 0)
				return;
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module:
			if (depth < MAX_NEST && dwarf_haschildren(&die) > 0)
				index_scope(r, &die, depth + 1, steps);
			break;
		default:
			break;
		}
	} while (dwarf_siblingof(&die, &die) == 0);
}

static void index_cu(cu_info *c)
{
	c->indexed = true;
	range_vec rv = {0};
	size_t steps = 0;
	index_scope(&rv, &c->cudie, 0, &steps);
	if (rv.n)
		qsort(rv.v, rv.n, sizeof(*rv.v), cmp_range);
	c->fns = rv.v;
	c->nfns = rv.n;
}

/* The linkage (mangled) name when there is one, as the symbol table spells it, so a frame
 * named from DWARF and one named from the symbol table agree. */
static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	return n && *n ? n : NULL;
}

static int64_t die_udata(Dwarf_Die *die, unsigned attr)
{
	Dwarf_Attribute a;
	Dwarf_Word w;
	if (dwarf_formudata(dwarf_attr(die, attr, &a), &w) != 0 || w > INT64_MAX)
		return -1;
	return (int64_t)w;
}

int sym_dwarf_frames(strobe_sym_object *o, uint64_t addr, strobe_sym_frame *out, int cap)
{
	sym_dwarf *d = o->dw;
	if (!d || cap <= 0 || addr < d->bias)
		return 0;
	uint64_t pc = addr - d->bias;
	const addr_range *cr = find_range(d->cu_ranges, d->ncu_ranges, pc);
	if (!cr)
		return 0;
	cu_info *cu = &d->cus[cr->ref];
	if (!cu->indexed)
		index_cu(cu);

	/* chain[0] is the subprogram, chain[i] the inlined instance nested i deep. */
	Dwarf_Die chain[SYM_MAX_INLINE];
	int depth = 0;
	const addr_range *fr = find_range(cu->fns, cu->nfns, pc);
	if (fr && dwarf_offdie(d->dw, fr->ref, &chain[0])) {
		depth = 1;
		Dwarf_Die cur = chain[0], child;
		size_t steps = 0;
		while (depth < SYM_MAX_INLINE && dwarf_child(&cur, &child) == 0) {
			bool found = false;
			int tag = 0;
			do {
				if (++steps > MAX_STEPS)
					break;
				tag = dwarf_tag(&child);
				switch (tag) {
				case DW_TAG_inlined_subroutine:
				case DW_TAG_lexical_block:
				case DW_TAG_try_block:
				case DW_TAG_catch_block:
				case DW_TAG_with_stmt:
					found = dwarf_haspc(&child, pc) > 0;
					break;
				default:
					break;
				}
			} while (!found && dwarf_siblingof(&child, &child) == 0);
			if (!found)
				break;
			if (tag == DW_TAG_inlined_subroutine)
				chain[depth++] = child;
			cur = child;
		}
	}

	const char *file = NULL;
	int64_t line = 0, col = 0;
	uint32_t disc = 0;
	if (!cu->lines_counted) {
		Dwarf_Lines *lines;
		size_t nlines;
		cu->lines_counted = true;
		if (dwarf_getsrclines(&cu->cudie, &lines, &nlines) == 0)
			d->line_bytes += (uint64_t)nlines * LINE_BYTES;
	}
	Dwarf_Line *ln = dwarf_getsrc_die(&cu->cudie, pc);
	if (ln) {
		int l = 0, c = 0;
		file = dwarf_linesrc(ln, NULL, NULL);
		if (dwarf_lineno(ln, &l) == 0 && l > 0)
			line = l;
		if (dwarf_linecol(ln, &c) == 0 && c > 0)
			col = c;
		unsigned dv = 0;
		if (dwarf_linediscriminator(ln, &dv) == 0)
			disc = dv;
	}
	if (!depth) {
		if (!file)
			return 0;
		/* Code with a line table but no subprogram (assembly): the caller names it
		 * from the symbol table. */
		memset(&out[0], 0, sizeof(out[0]));
		out[0] = (strobe_sym_frame){.file = file, .line = line, .column = col,
					    .discriminator = disc};
		return 1;
	}

	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (dwarf_getsrcfiles(&cu->cudie, &files, &nfiles) != 0)
		files = NULL;
	/* Innermost first; when the chain is longer than cap the innermost are dropped but still
	 * walked, since each one's call site is the position in the frame above it. */
	int n = 0, skip = depth > cap ? depth - cap : 0;
	for (int i = depth - 1; i >= 0; i--) {
		if (i < depth - skip) {
			strobe_sym_frame *f = &out[n++];
			memset(f, 0, sizeof(*f));
			f->function = die_name(&chain[i]);
			f->file = file;
			f->line = line;
			f->column = col;
			f->discriminator = disc;
			int dl;
			if (dwarf_decl_line(&chain[i], &dl) == 0 && dl > 0)
				f->start_line = dl;
		}
		if (i == 0)
			break;
		int64_t cf = die_udata(&chain[i], DW_AT_call_file);
		file = files && cf >= 0 && (uint64_t)cf < nfiles
			       ? dwarf_filesrc(files, (size_t)cf, NULL, NULL)
			       : NULL;
		line = die_udata(&chain[i], DW_AT_call_line);
		col = die_udata(&chain[i], DW_AT_call_column);
		/* the call site's discriminator (LLVM writes it on the inlined instance when the
		 * call shares its line with other blocks) */
		int64_t cd = die_udata(&chain[i], DW_AT_GNU_discriminator);
		disc = cd > 0 && cd <= UINT32_MAX ? (uint32_t)cd : 0;
		if (line < 0)
			line = 0;
		if (col < 0)
			col = 0;
	}
	return n;
}
