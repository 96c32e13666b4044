// SPDX-License-Identifier: Apache-2.0
/*
 * The symbol table of an executable in llvm-bolt's names (include/strobe/bolt_syms.h), and the
 * translation of a sampled address (a runtime address in a mapping) to the ELF virtual address
 * BOLT's symbol offsets are counted from: the file offset the mapping gives, then the PT_LOAD
 * segment holding that offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strobe/bolt_syms.h"
#include "strobe/pgo.h"
#include "strobe/symbolize.h"

#define BOLT_SYMS_MAX (1u << 24) /* symbols read from one file: a cap against a hostile table */
#define BOLT_PHDR_MAX 256u

typedef struct bsym {
	uint64_t addr, size;
	uint32_t idx; /* order in the table, for a stable sort */
	bool func, local;
	const char *name; /* in the ELF's string table until named */
	char *bolt;       /* BOLT's name, malloc'd (functions only) */
} bsym;

struct strobe_bolt_syms {
	bsym *fn;	 /* functions by address */
	size_t nfn;
	struct { uint64_t off, filesz, vaddr; } load[BOLT_PHDR_MAX];
	size_t nload;
	char bid[129];
	char *base; /* the file's base name, for mappings without a build ID */
};

static int cmp_addr(const void *x, const void *y)
{
	const bsym *a = x, *b = y;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

void strobe_bolt_syms_free(strobe_bolt_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfn; i++)
		free(s->fn[i].bolt);
	free(s->fn);
	free(s->base);
	free(s);
}

const char *strobe_bolt_syms_build_id(const strobe_bolt_syms *s) { return s->bid; }

strobe_bolt_syms *strobe_bolt_syms_open(const char *path, strobe_err *err)
{
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int oe = errno;
		strobe_errf(err, -oe, "%s: %s", path, strerror(oe));
		errno = oe;
		return NULL;
	}
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	strobe_bolt_syms *s = calloc(1, sizeof(*s));
	bsym *all = NULL;
	strobe_itab counts = {0};
	uint32_t *cnt = NULL;
	int rc = -ENOMEM;
	if (!s)
		goto out;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		rc = strobe_errf(err, -EINVAL, "%s: not an ELF executable", path);
		goto out;
	}
	const char *sl = strrchr(path, '/');
	if (!(s->base = strdup(sl ? sl + 1 : path)))
		goto out;
	uint8_t id[64];
	int idl = strobe_elf_build_id(path, id, sizeof id);
	if (idl > 0)
		strobe_build_id_hex(id, (size_t)idl, s->bid);
	size_t nph = 0;
	if (elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph && s->nload < BOLT_PHDR_MAX; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
				s->load[s->nload].off = ph.p_offset, s->load[s->nload].filesz = ph.p_filesz,
				s->load[s->nload++].vaddr = ph.p_vaddr;
		}
	Elf_Scn *symtab = NULL, *dynsym = NULL;
	for (Elf_Scn *sc = NULL; (sc = elf_nextscn(e, sc));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(sc, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = sc;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = sc;
	}
	Elf_Scn *sc = symtab ? symtab : dynsym;
	GElf_Shdr sh;
	Elf_Data *d = sc ? elf_getdata(sc, NULL) : NULL;
	if (!sc || !gelf_getshdr(sc, &sh) || !d || !sh.sh_entsize) {
		rc = strobe_errf(err, -ENOENT, "%s: no symbol table (stripped?): BOLT needs the "
					       "binary with its symbols", path);
		goto out;
	}
	size_t n = sh.sh_size / sh.sh_entsize;
	if (n > BOLT_SYMS_MAX)
		n = BOLT_SYMS_MAX;
	if (!(all = calloc(n ? n : 1, sizeof(*all))))
		goto out;
	size_t m = 0, nf = 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym))
			continue;
		int t = GELF_ST_TYPE(sym.st_info), b = GELF_ST_BIND(sym.st_info);
		if (t == STT_SECTION || t == STT_FILE || sym.st_shndx == SHN_UNDEF)
			continue;
		const char *nm = elf_strptr(e, sh.sh_link, sym.st_name);
		if (!nm || !*nm)
			continue;
		bool fn = t == STT_FUNC || t == STT_GNU_IFUNC;
		all[m++] = (bsym){sym.st_value, sym.st_size, (uint32_t)i, fn && sym.st_size > 0,
				  b == STB_LOCAL, nm, NULL};
		nf += fn && sym.st_size > 0;
	}
	qsort(all, m, sizeof(*all), cmp_addr);
	if (!(s->fn = calloc(nf ? nf : 1, sizeof(*s->fn))) || !(cnt = calloc(m + 1, sizeof(*cnt))))
		goto out;
	for (size_t i = 0; i < m; i++) {
		char *bn = NULL;
		if (all[i].local) {
			uint32_t c;
			if (strobe_itab_intern(&counts, all[i].name, strlen(all[i].name), &c, NULL) < 0)
				goto out;
			cnt[c]++;
			if (all[i].func && asprintf(&bn, "%s/%u", all[i].name, cnt[c]) < 0)
				goto out;
		} else if (all[i].func && !(bn = strdup(all[i].name))) {
			goto out;
		}
		if (all[i].func) {
			s->fn[s->nfn] = all[i];
			s->fn[s->nfn++].bolt = bn;
		}
	}
	if (!s->nfn) {
		rc = strobe_errf(err, -ENOENT, "%s: its symbol table has no functions", path);
		goto out;
	}
	rc = 0;
out:
	if (rc == -ENOMEM && (!err || !err->msg[0]))
		strobe_errf(err, rc, "%s: out of memory reading its symbols", path);
	free(all);
	free(cnt);
	strobe_itab_free(&counts);
	if (rc < 0) {
		strobe_bolt_syms_free(s);
		s = NULL;
	}
	if (e)
		elf_end(e);
	close(fd);
	if (rc < 0)
		errno = -rc;
	return s;
}

int strobe_bolt_syms_resolve(void *ctx, const strobe_profile *p, const strobe_location *loc,
			     const char **sym, uint64_t *offset)
{
	strobe_bolt_syms *s = ctx;
	const strobe_mapping *m = strobe_mapping_get(p, loc->mapping);
	const char *bid = strobe_str(p, m->build_id);
	if (*bid || *s->bid) {
		if (strcmp(bid, s->bid) != 0)
			return 0;
	} else {
		const char *f = strobe_str(p, m->filename), *sl = strrchr(f, '/');
		if (strcmp(sl ? sl + 1 : f, s->base) != 0)
			return 0;
	}
	if (loc->address < m->start || (m->limit && loc->address >= m->limit))
		return 0;
	uint64_t foff = loc->address - m->start + m->offset, va = 0;
	bool in = false;
	for (size_t i = 0; i < s->nload && !in; i++)
		if (foff >= s->load[i].off && foff - s->load[i].off < s->load[i].filesz)
			va = foff - s->load[i].off + s->load[i].vaddr, in = true;
	if (!in)
		return 0;
	size_t lo = 0, hi = s->nfn; /* the last function starting at or before va */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->fn[mid].addr <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || va - s->fn[lo - 1].addr >= s->fn[lo - 1].size)
		return 0;
	*sym = s->fn[lo - 1].bolt;
	*offset = va - s->fn[lo - 1].addr;
	return 1;
}
