// SPDX-License-Identifier: Apache-2.0
/*
 * The user-stack unwinder (see unwind.h): a cache of parsed unwind tables per binary, and the
 * x86-64 walk over a sample's registers and stack copy.
 *
 * The cache holds one entry per binary, found by build ID (from the kernel's MMAP2 record or the
 * file's own note) or, for a binary without one, by the file's dev/inode/mtime/size: the binary
 * mapped once (read-only sharing of the page cache, a private copy of the first page), a libelf
 * descriptor over that image and libdw's Dwarf_CFI of its .eh_frame, whose decoded CIEs and FDEs
 * accumulate as samples need them. Fifty processes of one libc share one entry. Entries are
 * dropped least-recently-used when the estimate of what they hold passes the budget; a mapping
 * remembers which entry (slot and generation) it resolved to, so a frame costs one comparison to
 * find its tables until that entry is dropped.
 *
 * The tables are located through the program headers (PT_GNU_EH_FRAME: .eh_frame_hdr's
 * binary-search table), as the loader sees the binary: the ELF header of the image is edited to
 * hide the section headers. Through the section headers, libdw 0.188 misses the search table when
 * .eh_frame comes before .eh_frame_hdr (lld's layout: libLLVM, Chromium, Rust binaries) and then
 * decodes the whole .eh_frame linearly, 100+ ms for libLLVM.
 *
 * .debug_frame is the fallback for a program counter that .eh_frame has no FDE for (code built
 * with -fno-asynchronous-unwind-tables -g: its CFI goes to .debug_frame, while the C runtime's
 * objects still bring an .eh_frame): from the binary's own sections, else from its debug file
 * under /usr/lib/debug/.build-id/. It is opened only then, once per binary, through libdw's
 * Dwarf (which reads and decompresses the file's DWARF sections: charged to the budget), so
 * binaries whose .eh_frame covers everything never pay for it. Go binaries (.debug_frame only,
 * compressed with the rest of their DWARF) keep frame pointers, which the walk follows where no
 * table has the address; their .debug_frame is read all the same on the first such frame.
 *
 * The vDSO has no file: its image is the kernel's, the same in every process, so ours
 * (AT_SYSINFO_EHDR) is copied once and stands for every process's [vdso] mapping.
 *
 * The walk, per frame: the binary of the program counter (the return address minus one for a
 * caller, which is inside the call instruction), the CFI rules at that address (from a small
 * cache of rules by address, else from libdw, then cached when they have the usual forms), the
 * CFA from its rule, the caller's registers from theirs (DWARF expressions over the registers
 * and the stack copy, evaluated here: the handful of operators CFI uses), the caller's stack
 * pointer = CFA. Without a table entry: a leaf just past its binary's entry point is the
 * outermost frame (the dynamic loader's entry code), at another leaf of a file-backed binary the
 * return address is taken at the stack pointer (a PLT stub: nothing pushed yet), elsewhere the
 * frame pointer is followed. It stops at an undefined return address (the outermost frame), at a
 * read outside the stack (past the copy, the process's own memory is read: see extend()), or when
 * the stack pointer does not grow.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/elf_image.h"
#include "unwind.h"

#define MAX_BINS 4096
#define BIN_COST 16384 /* libelf's and libdw's fixed state for an opened binary */
#define FDE_COST 48    /* libdw's tree node and decoded FDE, per FDE it decoded */
#define FDE_SET_MAX (1u << 22) /* FDE start addresses remembered per binary, at most */
#define NREG 17        /* DWARF x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, 16 = RA */
#define R_BP 6
#define R_SP 7
#define R_RA 16
#define EXT_MAX (256u << 10) /* the most of a stack read beyond the copy, per unwind */
#define EXT_CHUNK (16u << 10)
#define EXT_CHECK 64 /* without a return address in the copy: its last bytes, unchanged */
#define MEM_FDS 4    /* /proc/PID/mem kept open, for the processes extended last */
#define ENTRY_CODE 64 /* bytes after a binary's entry point taken for its entry code */
#define RULE_BITS 11   /* the per-address rule cache: 2^11 entries of 64 bytes */
#define RULE_SLOTS (1u << RULE_BITS)

/* A binary in the cache. */
typedef struct bin {
	bool used;
	bool heap;        /* img is malloc'd (the vDSO), else mmap'd */
	uint8_t id_len;
	uint8_t id[STROBE_BUILD_ID_MAX];
	uint32_t gen;     /* bumped when the slot is reused */
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	void *img;
	size_t len;
	Elf *elf;
	Dwarf_CFI *cfi;   /* NULL: no .eh_frame (frames there go by frame pointers) */
	/* .debug_frame, opened on the first PC .eh_frame lacks: dstate 0 not tried, 1 dcfi
	 * usable, 2 none. dimg: a second, unedited view of the file (section headers intact)
	 * when its own sections include .debug_frame, until it is opened; then fimg, a small ELF
	 * image holding that section alone (see frame_image), is what libdw reads. */
	uint8_t dstate;
	bool own_debug_frame;
	void *dimg;
	size_t dlen;
	void *fimg;
	size_t flen;
	Elf *delf;
	Dwarf *dw;
	Dwarf_CFI *dcfi;
	size_t bytes;
	uint64_t last_use;
	/* Start addresses of the FDEs libdw has decoded here (open addressing, 0 = empty): the
	 * estimate grows by FDE_COST per FDE actually decoded, not per FDE in the binary; charging
	 * every FDE up front made libxul (274k FDEs: 13 MB) and node (76k) together overflow the
	 * default budget, and each sample in one of them reloaded it (a 180 MB mapping parsed
	 * again, several times a second on a host running a browser). */
	uint64_t *fde;
	uint32_t nfde, cfde;
} bin;

/*
 * The rules of one address, as a frame step needs them: what libdw's dwarf_cfi_addrframe gives
 * (finding the FDE, running its CIE's and its own instructions up to the address) and the
 * questions put to it cost most of a step, and the same few hundred addresses come back sample
 * after sample (the same loops, the same call sites). Only the forms compilers emit are kept:
 * the CFA a register plus a constant, each callee-saved register and the return address
 * undefined, unchanged, or saved at the CFA plus a constant; any other address (an expression
 * rule, a signal frame) is stepped by libdw every time. Keyed by binary (slot and generation,
 * so a dropped binary's rules are never used for its successor) and address; direct-mapped.
 */
enum { RK_NONE, RK_UNDEF, RK_SAME, RK_OFF };
typedef struct urule {
	uint64_t pc;     /* ELF address in the binary */
	uint32_t bin;    /* slot + 1; 0 = empty */
	uint32_t gen;
	int32_t cfa_off;
	uint8_t cfa_reg;
	bool dbg;        /* from .debug_frame */
	uint8_t kind[7]; /* per callee[] register below */
	int32_t off[7];  /* RK_OFF: saved at CFA + off */
} urule;

/* The registers a step recovers (the caller-saved ones are dead in the caller, by the ABI):
 * DWARF rbx, rbp, r12-r15 and the return address. */
static const uint8_t callee[] = {3, 6, 12, 13, 14, 15, 16};

/* What a mapping (a tracker map id) resolved to. */
typedef struct layout {
	uint8_t state;    /* 0 not yet, 1 usable, 2 not usable (not ELF, missing, odd) */
	uint32_t slot, gen;
	uint64_t bias;    /* process address - ELF address */
} layout;

struct unwinder {
	size_t budget, bytes;
	bin *bins;
	uint32_t nbins; /* slots in use or free below this */
	uint64_t clock; /* one tick per unwind: entries used by the current one are not evicted */
	layout *lay;
	uint32_t nlay;
	uint8_t *ext; /* EXT_MAX bytes: the stack read beyond the copy, for the current unwind */
	struct {
		int fd;       /* -1: free */
		int32_t pid;
		const char *root;
		uint64_t used; /* clock of the last use */
	} mem[MEM_FDS];
	char debug_dir[256]; /* where debug files are looked up by build ID */
	urule *rules;        /* RULE_SLOTS, allocated on first use */
	bool no_rules;       /* every frame stepped by libdw (unwinder_set_rule_cache) */
	unwind_stats st;
};

/* ---- images ---------------------------------------------------------------------------------- */

static const Elf64_Phdr *phdrs(const void *img, size_t len, unsigned *n)
{
	const Elf64_Ehdr *eh = img;
	*n = 0;
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phnum == 0 || eh->e_phnum > 64 || eh->e_phoff >= len ||
	    len - eh->e_phoff < (size_t)eh->e_phnum * sizeof(Elf64_Phdr) || eh->e_phoff % 8)
		return NULL;
	*n = eh->e_phnum;
	return (const Elf64_Phdr *)((const char *)img + eh->e_phoff);
}

/* What a binary's entry is charged: libelf's and libdw's state, and what libdw decodes into its
 * tree of CIEs and FDEs as they are used: FDE_COST per distinct FDE a lookup returned (and the
 * set that tells them apart). The image itself is the page cache's (file-backed, shared) and not
 * counted. */
static void fde_seen(unwinder *u, bin *b, uint64_t start)
{
	uint64_t key = start + 1; /* 0 marks an empty slot */
	if (b->nfde >= FDE_SET_MAX)
		return;
	if (2 * (b->nfde + 1) > b->cfde) {
		uint32_t nc = b->cfde ? b->cfde * 2 : 64;
		uint64_t *nt = calloc(nc, sizeof(*nt));
		if (!nt)
			return; /* the estimate stays low: no harm beyond that */
		for (uint32_t i = 0; i < b->cfde; i++) {
			if (!b->fde[i])
				continue;
			uint32_t j = (uint32_t)((b->fde[i] * 0x9e3779b97f4a7c15ull) >> 32) & (nc - 1);
			while (nt[j])
				j = (j + 1) & (nc - 1);
			nt[j] = b->fde[i];
		}
		size_t grown = (size_t)(nc - b->cfde) * sizeof(*nt);
		free(b->fde);
		b->fde = nt;
		b->cfde = nc;
		b->bytes += grown;
		u->bytes += grown;
	}
	uint32_t j = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (b->cfde - 1);
	while (b->fde[j]) {
		if (b->fde[j] == key)
			return;
		j = (j + 1) & (b->cfde - 1);
	}
	b->fde[j] = key;
	b->nfde++;
	b->bytes += FDE_COST;
	u->bytes += FDE_COST;
	if (u->bytes > u->st.cache_bytes_peak)
		u->st.cache_bytes_peak = u->bytes;
}

static bool has_eh_frame(const void *img, size_t len)
{
	unsigned nph;
	const Elf64_Phdr *ph = phdrs(img, len, &nph);
	for (unsigned i = 0; ph && i < nph; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			return true;
	return false;
}

/* Whether the image's section headers (still there: read before bin_add hides them) name a
 * non-empty section `name` with contents in the file. Bounds-checked: the image is untrusted. */
static bool has_section(const void *img, size_t len, const char *name)
{
	const Elf64_Ehdr *eh = img;
	if (len < sizeof(*eh) || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
	    eh->e_shnum > 65000 || eh->e_shoff >= len || eh->e_shoff % 8 ||
	    (len - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum || eh->e_shstrndx >= eh->e_shnum)
		return false;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)img + eh->e_shoff);
	const Elf64_Shdr *st = &sh[eh->e_shstrndx];
	if (st->sh_offset >= len || st->sh_size > len - st->sh_offset)
		return false;
	const char *names = (const char *)img + st->sh_offset;
	size_t nl = strlen(name);
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_PROGBITS && sh[i].sh_size && sh[i].sh_name < st->sh_size &&
		    st->sh_size - sh[i].sh_name > nl &&
		    memcmp(names + sh[i].sh_name, name, nl + 1) == 0)
			return true;
	return false;
}

/* ---- the cache ------------------------------------------------------------------------------- */

static void bin_drop(unwinder *u, bin *b)
{
	if (b->dw)
		dwarf_end(b->dw); /* dcfi is the Dwarf's */
	if (b->delf)
		elf_end(b->delf);
	if (b->dimg)
		munmap(b->dimg, b->dlen);
	free(b->fimg);
	if (b->cfi)
		dwarf_cfi_end(b->cfi);
	if (b->elf)
		elf_end(b->elf);
	if (b->heap)
		free(b->img);
	else if (b->img)
		munmap(b->img, b->len);
	free(b->fde);
	u->bytes -= b->bytes;
	uint32_t gen = b->gen + 1;
	memset(b, 0, sizeof(*b));
	b->gen = gen;
}

/* Drops least-recently-used entries, never one used by the unwind under way, until the
 * estimate fits the budget. */
static void evict(unwinder *u)
{
	while (u->bytes > u->budget) {
		bin *victim = NULL;
		for (uint32_t i = 0; i < u->nbins; i++) {
			bin *b = &u->bins[i];
			if (b->used && b->last_use < u->clock &&
			    (!victim || b->last_use < victim->last_use))
				victim = b;
		}
		if (!victim)
			return;
		bin_drop(u, victim);
		u->st.evictions++;
	}
}

static bin *bin_slot(unwinder *u)
{
	for (uint32_t i = 0; i < u->nbins; i++)
		if (!u->bins[i].used)
			return &u->bins[i];
	if (u->nbins < MAX_BINS)
		return &u->bins[u->nbins++];
	return NULL;
}

/* Makes an entry of an image (taken over: freed or unmapped on failure): hides the section
 * headers (see the top of the file) and opens the CFI. */
static bin *bin_add(unwinder *u, void *img, size_t len, bool heap, const struct stat *sb)
{
	bin *b = bin_slot(u);
	unsigned nph;
	if (!b || !phdrs(img, len, &nph)) {
		if (heap)
			free(img);
		else
			munmap(img, len);
		return NULL;
	}
	b->own_debug_frame = !heap && has_section(img, len, ".debug_frame");
	Elf64_Ehdr *eh = img;
	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = SHN_UNDEF;
	b->used = true;
	b->heap = heap;
	b->img = img;
	b->len = len;
	/* The section headers are hidden by now: the build ID comes from the PT_NOTE segments. */
	const uint8_t *id;
	size_t idn = strobe_elf_build_id_of(img, len, &id);
	b->id_len = idn <= STROBE_BUILD_ID_MAX ? (uint8_t)idn : 0;
	if (b->id_len)
		memcpy(b->id, id, b->id_len);
	if (sb) {
		b->dev = (uint64_t)sb->st_dev;
		b->ino = (uint64_t)sb->st_ino;
		b->size = (uint64_t)sb->st_size;
		b->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	}
	b->elf = elf_memory(img, len);
	if (b->elf && has_eh_frame(img, len))
		b->cfi = dwarf_getcfi_elf(b->elf);
	b->bytes = BIN_COST + (heap ? len : 0);
	u->bytes += b->bytes;
	if (u->bytes > u->st.cache_bytes_peak)
		u->st.cache_bytes_peak = u->bytes;
	u->st.misses++;
	return b;
}

/* Maps the regular file at path (refusing FIFOs and devices a fed mapping could name) and makes
 * its entry, unless the cache has it already under the same file identity. */
static bin *bin_open(unwinder *u, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat sb;
	bin *b = NULL;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    sb.st_size > ((off_t)4 << 30))
		goto out;
	int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
	for (uint32_t i = 0; i < u->nbins; i++) {
		bin *c = &u->bins[i];
		if (c->used && !c->heap && c->dev == (uint64_t)sb.st_dev &&
		    c->ino == (uint64_t)sb.st_ino && c->mtime_ns == mt &&
		    c->size == (uint64_t)sb.st_size) {
			b = c;
			u->st.hits++;
			goto out;
		}
	}
	void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (m != MAP_FAILED)
		b = bin_add(u, m, (size_t)sb.st_size, false, &sb);
	if (b && b->own_debug_frame) {
		/* The unedited view .debug_frame is read through, if ever: address space only, the
		 * pages are the page cache's until libelf writes (it does not) */
		m = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			b->dimg = m;
			b->dlen = (size_t)sb.st_size;
		}
	}
out:
	close(fd);
	return b;
}

/* Our own vDSO, copied (the kernel's image is the same in every process). */
static bin *bin_vdso(unwinder *u)
{
	for (uint32_t i = 0; i < u->nbins; i++)
		if (u->bins[i].used && u->bins[i].heap)
			return &u->bins[i];
	const uint8_t *v;
	size_t len;
	if (strobe_vdso_image(&v, &len) < 0)
		return NULL;
	void *img = malloc(len);
	if (!img)
		return NULL;
	memcpy(img, v, len);
	return bin_add(u, img, len, true, NULL);
}

#define FRAME_MAX (64u << 20) /* the most of a .debug_frame taken, decompressed */

/*
 * A minimal ELF image holding only the .debug_frame of the file image img (decompressed when it
 * is compressed), in a heap buffer: NULL when img has none. Given a whole debug file,
 * dwarf_begin_elf decompresses every DWARF section it knows: 6.7 MB of heap for libc's debug
 * file (measured with heaptrack in the agent), where the unwinder reads one section. The new
 * image keeps the original's identification and machine (libdw's CFI reads the class, byte
 * order and ABI from them) and has no program headers: .debug_frame's addresses are absolute.
 * libelf may write into img (elf_compress updates the section header there): the caller
 * unmaps img afterwards.
 */
static void *frame_image(void *img, size_t len, size_t *out_len)
{
	static const char names[] = "\0.debug_frame\0.shstrtab"; /* offsets 0, 1, 14 */
	Elf *e = elf_memory(img, len);
	void *out = NULL;
	size_t shstrndx;
	if (!e || gelf_getclass(e) != ELFCLASS64 || elf_getshdrstrndx(e, &shstrndx) != 0)
		goto done;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		if (n && sh.sh_type == SHT_PROGBITS && strcmp(n, ".debug_frame") == 0)
			break;
	}
	if (!scn || ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0))
		goto done;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || !d->d_size || d->d_size > FRAME_MAX)
		goto done;
	size_t data_off = sizeof(Elf64_Ehdr), names_off = (data_off + d->d_size + 7) & ~(size_t)7;
	size_t sh_off = (names_off + sizeof(names) + 7) & ~(size_t)7;
	size_t total = sh_off + 3 * sizeof(Elf64_Shdr);
	uint8_t *m = calloc(1, total);
	if (!m)
		goto done;
	Elf64_Ehdr *eh = (Elf64_Ehdr *)m;
	const Elf64_Ehdr *oh = img;
	memcpy(eh->e_ident, oh->e_ident, EI_NIDENT);
	eh->e_type = oh->e_type;
	eh->e_machine = oh->e_machine;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_shoff = sh_off;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	memcpy(m + data_off, d->d_buf, d->d_size);
	memcpy(m + names_off, names, sizeof(names));
	Elf64_Shdr *nsh = (Elf64_Shdr *)(m + sh_off);
	nsh[1] = (Elf64_Shdr){.sh_name = 1, .sh_type = SHT_PROGBITS, .sh_addr = sh.sh_addr,
			      .sh_offset = data_off, .sh_size = d->d_size, .sh_addralign = 1};
	nsh[2] = (Elf64_Shdr){.sh_name = 14, .sh_type = SHT_STRTAB, .sh_offset = names_off,
			      .sh_size = sizeof(names), .sh_addralign = 1};
	out = m;
	*out_len = total;
done:
	if (e)
		elf_end(e);
	return out;
}

/* Maps the file fd (size len) when it has a .debug_frame section: into *img, true. */
static bool has_debug_frame_fd(int fd, size_t len, void **img)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return false;
	if (!has_section(m, len, ".debug_frame")) {
		munmap(m, len);
		return false;
	}
	*img = m;
	return true;
}

/* The .debug_frame CFI of a binary, opened on first use (see the top of the file); NULL when it
 * has none. Its addresses are the binary's (a debug file keeps the addresses of its binary). */
static Dwarf_CFI *debug_cfi(unwinder *u, bin *b)
{
	if (b->dstate)
		return b->dstate == 1 ? b->dcfi : NULL;
	b->dstate = 2;
	if (b->heap)
		return NULL; /* the vDSO: .eh_frame only */
	if (!b->dimg && b->id_len) {
		char path[64 + 2 * STROBE_BUILD_ID_MAX];
		int o = snprintf(path, sizeof(path), "%s/.build-id/%02x/", u->debug_dir, b->id[0]);
		for (unsigned i = 1; i < b->id_len && o > 0 && (size_t)o + 3 < sizeof(path); i++)
			o += snprintf(path + o, sizeof(path) - (size_t)o, "%02x", b->id[i]);
		if (o > 0 && (size_t)o + 7 < sizeof(path)) {
			memcpy(path + o, ".debug", 7);
			int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
			struct stat sb;
			if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
			    sb.st_size >= (off_t)sizeof(Elf64_Ehdr) && sb.st_size <= ((off_t)4 << 30) &&
			    has_debug_frame_fd(fd, (size_t)sb.st_size, &b->dimg))
				b->dlen = (size_t)sb.st_size;
			if (fd >= 0)
				close(fd);
		}
	}
	if (!b->dimg)
		return NULL;
	b->fimg = frame_image(b->dimg, b->dlen, &b->flen);
	munmap(b->dimg, b->dlen);
	b->dimg = NULL;
	if (!b->fimg)
		return NULL;
	b->delf = elf_memory(b->fimg, b->flen);
	if (b->delf)
		b->dw = dwarf_begin_elf(b->delf, DWARF_C_READ, NULL);
	if (b->dw)
		b->dcfi = dwarf_getcfi(b->dw);
	size_t cost = BIN_COST + b->flen;
	b->bytes += cost;
	u->bytes += cost;
	if (u->bytes > u->st.cache_bytes_peak)
		u->st.cache_bytes_peak = u->bytes;
	if (!b->dcfi)
		return NULL;
	u->st.debug_frame_bins++;
	b->dstate = 1;
	return b->dcfi;
}

bool unwind_bias(const Elf64_Phdr *ph, unsigned nph, unsigned e_type, uint64_t start,
			uint64_t pgoff, uint64_t *bias)
{
	for (unsigned i = 0; ph && i < nph; i++) {
		uint64_t off0 = ph[i].p_offset & ~(uint64_t)4095;
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && pgoff >= off0 &&
		    pgoff < ph[i].p_offset + ph[i].p_filesz) {
			*bias = start - pgoff + ph[i].p_offset - ph[i].p_vaddr;
			return e_type != ET_EXEC || *bias == 0;
		}
	}
	return false;
}

static bool image_bias(const bin *b, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	unsigned nph;
	const Elf64_Phdr *ph = phdrs(b->img, b->len, &nph);
	const Elf64_Ehdr *eh = b->img;
	return unwind_bias(ph, nph, eh->e_type, start, pgoff, bias);
}

/* The entry of mapping id in process pid, resolved on first use and after its entry was
 * dropped. NULL when the mapping has no usable binary (anonymous, unreadable, not ELF). */
static bin *bin_for(unwinder *u, const tracker *t, int32_t pid, uint32_t id,
		    uint64_t *bias)
{
	if (id <= STROBE_MAP_KERNEL)
		return NULL;
	if (id >= u->nlay) {
		uint32_t nn = u->nlay ? u->nlay : 64;
		while (nn <= id)
			nn *= 2;
		layout *nl = realloc(u->lay, nn * sizeof(*nl));
		if (!nl)
			return NULL;
		memset(nl + u->nlay, 0, (nn - u->nlay) * sizeof(*nl));
		u->lay = nl;
		u->nlay = nn;
	}
	layout *l = &u->lay[id];
	if (l->state == 2)
		return NULL;
	if (l->state == 1) {
		bin *b = &u->bins[l->slot];
		if (b->used && b->gen == l->gen) {
			u->st.hits++;
			b->last_use = u->clock;
			*bias = l->bias;
			return b;
		}
	}
	l->state = 2;
	const proc_map *m = tracker_map(t, id);
	const char *path = m ? tracker_str(t, m->path) : NULL;
	if (!m || m->anon || !path)
		return NULL;
	bin *b = NULL;
	uint64_t pgoff = m->pgoff;
	if (strcmp(path, "[vdso]") == 0) {
		b = bin_vdso(u);
		pgoff = 0;
	} else if (path[0] == '/') {
		/* The kernel's build ID finds the entry without opening anything. */
		for (uint32_t i = 0; m->build_id_len && i < u->nbins && !b; i++)
			if (u->bins[i].used && u->bins[i].id_len == m->build_id_len &&
			    memcmp(u->bins[i].id, m->build_id, m->build_id_len) == 0)
				b = &u->bins[i];
		if (b)
			u->st.hits++;
		else if (!strstr(path, " (deleted)"))
			b = bin_open(u, path);
		/* The file at that path is not (or no longer) the one mapped: the process's own
		 * view of it, while it lives. */
		if ((!b || (m->build_id_len && b->id_len &&
			    (b->id_len != m->build_id_len ||
			     memcmp(b->id, m->build_id, b->id_len) != 0))) &&
		    t->proc_root && pid > 0) {
			char mf[128];
			snprintf(mf, sizeof(mf), "%s/%d/map_files/%llx-%llx", t->proc_root, (int)pid,
				 (unsigned long long)m->start, (unsigned long long)m->end);
			b = bin_open(u, mf);
		}
		if (b && m->build_id_len && b->id_len &&
		    (b->id_len != m->build_id_len || memcmp(b->id, m->build_id, b->id_len) != 0))
			b = NULL;
	}
	if (!b || !image_bias(b, m->start, pgoff, &l->bias))
		return NULL;
	l->state = 1;
	l->slot = (uint32_t)(b - u->bins);
	l->gen = b->gen;
	b->last_use = u->clock;
	*bias = l->bias;
	return b;
}

/* ---- the walk -------------------------------------------------------------------------------- */

typedef struct walk {
	unwinder *u;
	const unwind_sample *sm;
	const char *proc_root; /* NULL: records only, the process is not there to read */
	uint64_t r[NREG];
	uint32_t valid;  /* bit per register of r */
	bool truncated;  /* a read went past the end of a full slice */
	uint64_t ra_slot; /* where the last return address read from the copy was */
	/* The frame being stepped: its binary's tables, and its CFA rule when it is the stack
	 * pointer plus a constant (the frame's size). */
	Dwarf_CFI *cur_cfi;
	uint64_t cur_bias, cfa_off;
	bool cfa_sp;
	int memfd;       /* /proc/PID/mem: -1 not opened yet, -2 not usable */
	size_t ext_len;  /* bytes of u->ext valid, from the end of the copy up */
	bool ext_end;    /* a read reached the top of the stack's mapping: nothing more to read */
} walk;

/*
 * Reads more of the stack from the process itself, from the end of the copy up to past `need`:
 * the frames far from the leaf (the callers of a deep stack) are the ones least likely to have
 * changed since the sample, as the thread has not returned into them. Accepted only when the
 * last return address the walk read from the copy is still in the process, at the same place:
 * had the thread returned past that frame's caller, the slot would hold another call's return
 * address, or nothing; had it returned and called again from the same place, the callers above
 * are the same ones. The frame being stepped (the one the slot returns into) may since have
 * called another function from another call site: a return address there is accepted too when
 * its tables give the same frame, CFA = stack pointer + the same size, in the same binary: the
 * same function still running at the same place. (The frame's own locals change as it runs:
 * comparing them would refuse most running threads.) Without such an address (one frame larger
 * than the copy), the last EXT_CHECK bytes of the copy must be unchanged.
 */
/* Whether a CFA rule is the stack pointer plus a constant (libdw gives it as DW_OP_bregx 7). */
static bool cfa_sp_plus(const Dwarf_Op *ops, size_t nops, uint64_t *off)
{
	if (nops != 1)
		return false;
	if (ops[0].atom == DW_OP_bregx && ops[0].number == R_SP)
		*off = ops[0].number2;
	else if (ops[0].atom == DW_OP_breg7)
		*off = ops[0].number;
	else
		return false;
	return true;
}

static bool same_frame(const walk *w, uint64_t ra)
{
	Dwarf_Frame *g;
	Dwarf_Op *ops;
	size_t nops;
	if (!w->cur_cfi || !w->cfa_sp || ra - 1 < w->cur_bias ||
	    dwarf_cfi_addrframe(w->cur_cfi, ra - 1 - w->cur_bias, &g) != 0)
		return false;
	uint64_t off;
	bool same = dwarf_frame_cfa(g, &ops, &nops) == 0 && cfa_sp_plus(ops, nops, &off) &&
		    off == w->cfa_off;
	free(g);
	return same;
}

/*
 * /proc/PID/mem of a process, kept open between unwinds: a process with deep stacks has most
 * of its samples extended, and opening the file for each was most of what an extension cost.
 * An fd stays bound to the process it was opened for, so a pid reused since reads nothing
 * through it: the caller asks again with `fresh` when a read fails.
 */
static int mem_fd(unwinder *u, const char *root, int32_t pid, bool fresh)
{
	unsigned slot = MEM_FDS;
	for (unsigned i = 0; i < MEM_FDS; i++)
		if (u->mem[i].fd >= 0 && u->mem[i].pid == pid && u->mem[i].root == root) {
			if (!fresh) {
				u->mem[i].used = u->clock;
				return u->mem[i].fd;
			}
			close(u->mem[i].fd);
			u->mem[i].fd = -1;
			slot = i;
			break;
		}
	for (unsigned i = 0; slot == MEM_FDS && i < MEM_FDS; i++)
		if (u->mem[i].fd < 0)
			slot = i;
	if (slot == MEM_FDS) {
		slot = 0;
		for (unsigned i = 1; i < MEM_FDS; i++)
			if (u->mem[i].used < u->mem[slot].used)
				slot = i;
		close(u->mem[slot].fd);
		u->mem[slot].fd = -1;
	}
	char path[64];
	snprintf(path, sizeof(path), "%s/%d/mem", root, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	u->mem[slot].fd = fd;
	u->mem[slot].pid = pid;
	u->mem[slot].root = root;
	u->mem[slot].used = u->clock;
	return fd;
}

static bool extend(walk *w, uint64_t need)
{
	const unwind_sample *sm = w->sm;
	uint64_t end = sm->regs[7] + sm->stack_len;
	if (w->memfd == -2 || !w->proc_root || (!w->ra_slot && sm->stack_len < EXT_CHECK) ||
	    need - end >= EXT_MAX)
		return false;
	if (w->memfd == -1) {
		uint8_t now[EXT_CHECK];
		uint64_t at = w->ra_slot ? w->ra_slot : end - EXT_CHECK;
		size_t len = w->ra_slot ? 8 : EXT_CHECK;
		w->memfd = -2;
		if (!w->u->ext && !(w->u->ext = malloc(EXT_MAX)))
			return false;
		int fd = -1;
		bool same = false;
		for (int fresh = 0; fresh < 2 && !same; fresh++) {
			if ((fd = mem_fd(w->u, w->proc_root, sm->pid, fresh)) < 0)
				return false;
			same = pread(fd, now, len, (off_t)at) == (ssize_t)len;
		}
		if (same && memcmp(now, sm->stack + (at - sm->regs[7]), len) != 0) {
			uint64_t ra;
			memcpy(&ra, now, 8);
			same = w->ra_slot && same_frame(w, ra);
		}
		if (!same) {
			w->u->st.ext_changed++;
			/* A copy cut short by pages never touched: they are read all the same, which
			 * maps them (the shared zero page, no memory charged), so that the kernel's
			 * next copies of this stack go through them. */
			if (fd >= 0 && !sm->stack_full)
				(void)!pread(fd, w->u->ext, (size_t)(need - end), (off_t)end);
			return false;
		}
		w->memfd = fd; /* the unwinder's: kept open for the next unwind */
		w->u->st.extended++;
	}
	size_t want = (size_t)(need - end) + EXT_CHUNK;
	want = want > EXT_MAX ? EXT_MAX : want & ~(size_t)(EXT_CHUNK - 1);
	/* Once a read has failed (the top of the stack's mapping: EIO), later reads of this walk
	 * would fail the same way: each deref past the top retried it, a dozen failed system
	 * calls for some unwinds of a main thread. */
	while (w->ext_len < want && !w->ext_end) {
		ssize_t got = pread(w->memfd, w->u->ext + w->ext_len, want - w->ext_len,
				    (off_t)(end + w->ext_len));
		if (got <= 0)
			w->ext_end = true;
		else
			w->ext_len += (size_t)got;
	}
	return need - end < w->ext_len;
}

static bool mem_read(walk *w, uint64_t addr, uint64_t *out)
{
	uint64_t sp = w->sm->regs[7], len = w->sm->stack_len;
	if (addr >= sp && addr - sp <= len && len - (addr - sp) >= 8) {
		memcpy(out, w->sm->stack + (addr - sp), 8);
		return true;
	}
	/* At or past the end of the copy, on what is plausibly still the stack. A full copy: the
	 * slice was too small. A short one: the kernel's copy (which cannot fault pages in) stopped
	 * at the top of the stack's mapping, where nothing is left to read and the read below fails,
	 * or at a page of the stack that was never touched - a large local buffer used only in part,
	 * as GNU sort's 8.6 KB one - with the callers' frames above it: the process's memory has
	 * them (and reads the untouched page as zeros). */
	if (addr >= sp && addr - sp < (64u << 20) && addr - sp + 8 > len) {
		/* (A word straddling the end does not happen on an aligned stack.) */
		if (addr >= sp + len && extend(w, addr + 8)) {
			memcpy(out, w->u->ext + (addr - sp - len), 8);
			return true;
		}
		if (w->sm->stack_full)
			w->truncated = true;
	}
	return false;
}

/* Evaluates a CFI expression (libdw's rules come as DWARF expressions; those of offset and
 * register rules are built by libdw, those of expression rules are the binary's, with the CFA
 * pushed by a leading DW_OP_call_frame_cfa). *value: the result is a value rather than the
 * address of one. */
static bool eval(walk *w, const Dwarf_Op *ops, size_t nops, uint64_t cfa, uint64_t *res,
		 bool *value)
{
	uint64_t st[32];
	unsigned n = 0;
	*value = false;
#define NEED(k)                                                                                   \
	do {                                                                                      \
		if (n < (k))                                                                      \
			return false;                                                             \
	} while (0)
#define PUSH(v)                                                                                   \
	do {                                                                                      \
		if (n >= 32)                                                                      \
			return false;                                                             \
		uint64_t v_ = (v);                                                                \
		st[n++] = v_;                                                                     \
	} while (0)
	for (size_t i = 0; i < nops; i++) {
		uint8_t a = ops[i].atom;
		uint64_t x, y;
		if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
			PUSH((uint64_t)(a - DW_OP_lit0));
			continue;
		}
		if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
			unsigned r = a - DW_OP_breg0;
			if (r >= NREG || !(w->valid & (1u << r)))
				return false;
			PUSH(w->r[r] + ops[i].number);
			continue;
		}
		if (a >= DW_OP_reg0 && a <= DW_OP_reg31) { /* the value is in the register */
			unsigned r = a - DW_OP_reg0;
			if (r >= NREG || !(w->valid & (1u << r)) || i + 1 != nops)
				return false;
			*res = w->r[r];
			*value = true;
			return true;
		}
		switch (a) {
		case DW_OP_bregx:
			if (ops[i].number >= NREG || !(w->valid & (1u << ops[i].number)))
				return false;
			PUSH(w->r[ops[i].number] + ops[i].number2);
			break;
		case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u: case DW_OP_const2s:
		case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u: case DW_OP_const8s:
		case DW_OP_constu: case DW_OP_consts: case DW_OP_addr:
			PUSH(ops[i].number);
			break;
		case DW_OP_call_frame_cfa:
			PUSH(cfa);
			break;
		case DW_OP_dup:
			NEED(1);
			PUSH(st[n - 1]);
			break;
		case DW_OP_over:
			NEED(2);
			PUSH(st[n - 2]);
			break;
		case DW_OP_drop:
			NEED(1);
			n--;
			break;
		case DW_OP_swap:
			NEED(2);
			x = st[n - 1], st[n - 1] = st[n - 2], st[n - 2] = x;
			break;
		case DW_OP_deref:
			NEED(1);
			if (!mem_read(w, st[n - 1], &st[n - 1]))
				return false;
			break;
		case DW_OP_plus_uconst:
			NEED(1);
			st[n - 1] += ops[i].number;
			break;
		case DW_OP_neg:
			NEED(1);
			st[n - 1] = -st[n - 1];
			break;
		case DW_OP_not:
			NEED(1);
			st[n - 1] = ~st[n - 1];
			break;
		case DW_OP_plus: case DW_OP_minus: case DW_OP_and: case DW_OP_or: case DW_OP_xor:
		case DW_OP_mul: case DW_OP_shl: case DW_OP_shr: case DW_OP_shra:
		case DW_OP_eq: case DW_OP_ne: case DW_OP_ge: case DW_OP_gt: case DW_OP_le:
		case DW_OP_lt:
			NEED(2);
			y = st[--n];
			x = st[n - 1];
			switch (a) {
			case DW_OP_plus: x += y; break;
			case DW_OP_minus: x -= y; break;
			case DW_OP_and: x &= y; break;
			case DW_OP_or: x |= y; break;
			case DW_OP_xor: x ^= y; break;
			case DW_OP_mul: x *= y; break;
			case DW_OP_shl: x = y < 64 ? x << y : 0; break;
			case DW_OP_shr: x = y < 64 ? x >> y : 0; break;
			case DW_OP_shra: x = (uint64_t)((int64_t)x >> (y < 64 ? y : 63)); break;
			case DW_OP_eq: x = x == y; break;
			case DW_OP_ne: x = x != y; break;
			case DW_OP_ge: x = (int64_t)x >= (int64_t)y; break;
			case DW_OP_gt: x = (int64_t)x > (int64_t)y; break;
			case DW_OP_le: x = (int64_t)x <= (int64_t)y; break;
			default: x = (int64_t)x < (int64_t)y; break;
			}
			st[n - 1] = x;
			break;
		case DW_OP_nop:
			break;
		case DW_OP_stack_value:
			if (i + 1 != nops)
				return false;
			*value = true;
			break;
		default:
			return false; /* not seen in CFI */
		}
	}
#undef NEED
#undef PUSH
	if (n == 0)
		return false;
	*res = st[n - 1];
	return true;
}

enum { STEP_OK, STEP_END, STEP_FAIL };

/* The end of a step: the caller's registers (those in nvalid), its stack pointer the CFA. */
static int step_finish(walk *w, const uint64_t *nv, uint32_t nvalid, uint64_t cfa)
{
	if (!(nvalid & (1u << R_RA)))
		return STEP_FAIL;
	for (unsigned r = 0; r < NREG; r++)
		if (nvalid & (1u << r))
			w->r[r] = nv[r];
	w->valid = nvalid;
	w->r[R_SP] = cfa; /* x86-64: the caller's stack pointer is the CFA */
	w->valid |= 1u << R_SP;
	return w->r[R_RA] == 0 ? STEP_END : STEP_OK;
}

static urule *rule_slot(unwinder *u, const bin *b, uint64_t pc)
{
	uint64_t h = (pc ^ ((uint64_t)(b - u->bins) << 44)) * 0x9e3779b97f4a7c15ull;
	return &u->rules[h >> (64 - RULE_BITS)];
}

/* The cached rules of address pc of binary b, or NULL. */
static const urule *rule_find(unwinder *u, const bin *b, uint64_t pc)
{
	if (!u->rules)
		return NULL;
	const urule *e = rule_slot(u, b, pc);
	return e->bin == (uint32_t)(b - u->bins) + 1 && e->gen == b->gen && e->pc == pc ? e : NULL;
}

/* Caches frame f's rules for address pc of b when they have the forms urule holds (NULL if
 * not: the frame is stepped by libdw). */
static const urule *rule_keep(unwinder *u, const bin *b, uint64_t pc, Dwarf_Frame *f,
			      bool dbg)
{
	bool signal = false;
	if (dwarf_frame_info(f, NULL, NULL, &signal) != R_RA || signal)
		return NULL;
	Dwarf_Op *ops, mem[3];
	size_t nops;
	if (dwarf_frame_cfa(f, &ops, &nops) != 0 || nops != 1)
		return NULL;
	uint64_t reg, off;
	if (ops[0].atom == DW_OP_bregx) {
		reg = ops[0].number;
		off = ops[0].number2;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		reg = (uint64_t)(ops[0].atom - DW_OP_breg0);
		off = ops[0].number;
	} else {
		return NULL;
	}
	if (reg >= NREG || (int64_t)off != (int32_t)off)
		return NULL;
	urule r = {.pc = pc, .bin = (uint32_t)(b - u->bins) + 1, .gen = b->gen, .dbg = dbg,
		   .cfa_reg = (uint8_t)reg, .cfa_off = (int32_t)off};
	for (size_t i = 0; i < sizeof(callee); i++) {
		if (dwarf_frame_register(f, callee[i], mem, &ops, &nops) != 0) {
			r.kind[i] = RK_NONE;
		} else if (nops == 0) {
			r.kind[i] = ops == mem ? RK_UNDEF : RK_SAME;
		} else if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa &&
			   ops[1].atom == DW_OP_plus_uconst &&
			   (int64_t)ops[1].number == (int32_t)ops[1].number) {
			r.kind[i] = RK_OFF; /* libdw's form of "saved at CFA + N" */
			r.off[i] = (int32_t)ops[1].number;
		} else {
			return NULL;
		}
	}
	if (!u->rules && !(u->rules = calloc(RULE_SLOTS, sizeof(*u->rules))))
		return NULL;
	urule *e = rule_slot(u, b, pc);
	*e = r;
	return e;
}

/* One frame by the tables: the caller's registers in w from frame f's rules. */
static int step_cfi(walk *w, Dwarf_Frame *f, bool *signal)
{
	Dwarf_Op *ops, mem[3];
	size_t nops;
	uint64_t cfa, v;
	bool isval;
	*signal = false;
	int ra = dwarf_frame_info(f, NULL, NULL, signal);
	if (ra != R_RA)
		return STEP_FAIL;
	if (dwarf_frame_cfa(f, &ops, &nops) != 0 || nops == 0 ||
	    !eval(w, ops, nops, 0, &cfa, &isval))
		return STEP_FAIL;
	w->cfa_sp = cfa_sp_plus(ops, nops, &w->cfa_off);
	/* Only the callee-saved registers and the return address are recovered (callee[]), all
	 * of them out of a signal frame. */
	static const uint8_t all[] = {0, 1, 2, 3, 4, 5, R_BP, 8, 9, 10, 11, 12, 13, 14, 15, R_RA};
	const uint8_t *regs = *signal ? all : callee;
	size_t nr = *signal ? sizeof(all) : sizeof(callee);
	uint64_t nv[NREG];
	uint32_t nvalid = 0;
	for (size_t i = 0; i < nr; i++) {
		unsigned r = regs[i];
		if (dwarf_frame_register(f, (int)r, mem, &ops, &nops) != 0)
			continue;
		if (nops == 0) {
			if (ops == mem) { /* undefined */
				if (r == R_RA)
					return STEP_END;
				continue;
			}
			if (w->valid & (1u << r)) { /* same value */
				nv[r] = w->r[r];
				nvalid |= 1u << r;
			}
			continue;
		}
		if (!eval(w, ops, nops, cfa, &v, &isval))
			continue;
		uint64_t slot = v;
		if (!isval && !mem_read(w, v, &v))
			continue;
		if (r == R_RA && !isval && slot - w->sm->regs[7] < w->sm->stack_len)
			w->ra_slot = slot;
		nv[r] = v;
		nvalid |= 1u << r;
	}
	return step_finish(w, nv, nvalid, cfa);
}

/* One frame by rules from the cache: step_cfi's work, without libdw. */
static int step_rule(walk *w, const urule *ru)
{
	if (!(w->valid & (1u << ru->cfa_reg)))
		return STEP_FAIL;
	uint64_t cfa = w->r[ru->cfa_reg] + (uint64_t)(int64_t)ru->cfa_off;
	w->cfa_sp = ru->cfa_reg == R_SP;
	w->cfa_off = (uint64_t)(int64_t)ru->cfa_off;
	uint64_t nv[NREG], v;
	uint32_t nvalid = 0;
	for (size_t i = 0; i < sizeof(callee); i++) {
		unsigned r = callee[i];
		switch (ru->kind[i]) {
		case RK_UNDEF:
			if (r == R_RA)
				return STEP_END;
			break;
		case RK_SAME:
			if (w->valid & (1u << r)) {
				nv[r] = w->r[r];
				nvalid |= 1u << r;
			}
			break;
		case RK_OFF: {
			uint64_t slot = cfa + (uint64_t)(int64_t)ru->off[i];
			if (!mem_read(w, slot, &v))
				break;
			if (r == R_RA && slot - w->sm->regs[7] < w->sm->stack_len)
				w->ra_slot = slot;
			nv[r] = v;
			nvalid |= 1u << r;
			break;
		}
		default:
			break;
		}
	}
	return step_finish(w, nv, nvalid, cfa);
}

/* One frame without a table: at a leaf of a binary's code (a PLT stub, entry code without CFI)
 * the return address is at the stack pointer; elsewhere by the frame pointer. */
static int step_nocfi(walk *w, bool leaf_of_file)
{
	uint64_t ra, bp;
	uint64_t slot;
	if (leaf_of_file) {
		slot = w->r[R_SP];
		if (!mem_read(w, slot, &ra))
			return STEP_FAIL;
		w->r[R_SP] += 8;
	} else {
		slot = w->r[R_BP] + 8;
		if (!(w->valid & (1u << R_BP)) || w->r[R_BP] < w->r[R_SP] ||
		    !mem_read(w, w->r[R_BP], &bp) || !mem_read(w, slot, &ra))
			return STEP_FAIL;
		w->r[R_SP] = w->r[R_BP] + 16;
		w->r[R_BP] = bp;
	}
	if (slot - w->sm->regs[7] < w->sm->stack_len)
		w->ra_slot = slot;
	w->r[R_RA] = ra;
	w->valid |= (1u << R_RA) | (1u << R_SP);
	return ra == 0 ? STEP_FAIL : STEP_OK;
}

int unwind(unwinder *u, const tracker *t, const proc *p,
		  const unwind_sample *sm, uint64_t *pcs, bool *activation, unsigned max,
		  unsigned *n)
{
	*n = 0;
	if (max == 0)
		return STROBE_UNWIND_FULL;
	u->clock++;
	const uint64_t *r = sm->regs; /* perf order: AX BX CX DX SI DI BP SP IP R8..R15 */
	walk w = {.u = u,
		  .sm = sm,
		  .proc_root = t->proc_root,
		  .memfd = -1,
		  .r = {r[0], r[3], r[2], r[1], r[4], r[5], r[6], r[7], r[9], r[10], r[11], r[12],
			r[13], r[14], r[15], r[16], r[8]},
		  .valid = (1u << NREG) - 1};
	bool act = true, leaf_known = false;
	int rc = STROBE_UNWIND_STOPPED;
	for (;;) {
		uint64_t pc = w.r[R_RA];
		if (*n >= max) {
			rc = STROBE_UNWIND_FULL;
			break;
		}
		pcs[*n] = pc;
		activation[*n] = act;
		(*n)++;
		/* A return address is looked up inside the call instruction before it. */
		uint64_t at = act ? pc : pc - 1, bias = 0, sp = w.r[R_SP];
		uint32_t id = tracker_find(p, at);
		if (*n == 1)
			leaf_known = id != STROBE_MAP_NONE;
		bin *b = bin_for(u, t, p->pid, id, &bias);
		Dwarf_Frame *f = NULL;
		int step;
		bool signal = false;
		w.cur_cfi = NULL;
		w.cfa_sp = false;
		Dwarf_CFI *cfi = NULL;
		const urule *ru = b && !u->no_rules ? rule_find(u, b, at - bias) : NULL;
		if (ru) {
			cfi = ru->dbg ? b->dcfi : b->cfi;
			u->st.rule_hits++;
			if (ru->dbg)
				u->st.debug_frame_frames++;
		} else if (b && b->cfi && dwarf_cfi_addrframe(b->cfi, at - bias, &f) == 0)
			cfi = b->cfi;
		else if (b && (cfi = debug_cfi(u, b)) &&
			 dwarf_cfi_addrframe(cfi, at - bias, &f) == 0)
			u->st.debug_frame_frames++;
		else
			cfi = NULL;
		/* A leaf at its binary's entry point (a process or ld.so sampled before its first
		 * instruction ran), or without CFI just past it (the dynamic loader's _start and
		 * _dl_start_user, around its call of _dl_start, hand-written without CFI): the stack
		 * pointer is at argc, no return address, nothing above. Taking argc for a return
		 * address made "0x5;_start". */
		if (*n == 1 && b && !b->heap) {
			uint64_t past = at - bias - ((const Elf64_Ehdr *)b->img)->e_entry;
			if (past == 0 || (!cfi && past < ENTRY_CODE)) {
				free(f);
				rc = STROBE_UNWIND_COMPLETE;
				break;
			}
		}
		if (cfi) {
			if (!ru) {
				Dwarf_Addr fstart, fend;
				if (dwarf_frame_info(f, &fstart, &fend, NULL) >= 0)
					fde_seen(u, b, fstart);
				if (!u->no_rules)
					ru = rule_keep(u, b, at - bias, f, cfi != b->cfi);
			}
			w.cur_cfi = cfi;
			w.cur_bias = bias;
			step = ru ? step_rule(&w, ru) : step_cfi(&w, f, &signal);
			free(f);
		} else {
			step = step_nocfi(&w, *n == 1 && b && b->cfi);
		}
		if (step == STEP_END) {
			rc = STROBE_UNWIND_COMPLETE;
			break;
		}
		/* The stack grows down: a caller's frame is above its callee's (a signal frame
		 * may come from another stack: reads outside the copy stop it). */
		if (step == STEP_FAIL || (!signal && w.r[R_SP] <= sp)) {
			rc = w.truncated ? STROBE_UNWIND_TRUNCATED : STROBE_UNWIND_STOPPED;
			break;
		}
		act = signal;
	}
	evict(u);
	if (*n == 1 && !leaf_known && rc != STROBE_UNWIND_COMPLETE) {
		*n = 0; /* the leaf is in no mapping known and nothing came of it */
		return -ENOENT;
	}
	return rc;
}

unwinder *unwinder_new(size_t cache_bytes)
{
	unwinder *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->bins = calloc(MAX_BINS, sizeof(*u->bins));
	if (!u->bins) {
		free(u);
		return NULL;
	}
	u->budget = cache_bytes ? cache_bytes : (size_t)64 << 20;
	for (unsigned i = 0; i < MEM_FDS; i++)
		u->mem[i].fd = -1;
	unwinder_set_debug_dir(u, NULL);
	elf_version(EV_CURRENT);
	return u;
}

void unwinder_set_rule_cache(unwinder *u, bool on)
{
	u->no_rules = !on;
}

void unwinder_set_debug_dir(unwinder *u, const char *dir)
{
	snprintf(u->debug_dir, sizeof(u->debug_dir), "%s", dir ? dir : "/usr/lib/debug");
}

/*
 * Every file image is a private mapping whose only written page is the first (the ELF header,
 * edited by bin_add); the other pages are the page cache's until something writes them, and
 * nothing does (libelf converts nothing in place for native x86-64 images). MADV_DONTNEED on
 * them unmaps those pages from the agent, and a later read maps the same page again from the
 * cache (a minor fault): nothing is lost, while the resident size stops growing with every
 * binary the host runs (a compiler's 180 MB libLLVM leaves megabytes behind otherwise). The
 * first page is kept, the edit would be lost with it. The unedited views (dimg, before
 * debug_cfi opens them) are never written: all of them goes.
 */
void unwinder_drop_pages(unwinder *u)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	for (uint32_t i = 0; u && i < u->nbins; i++) {
		bin *b = &u->bins[i];
		if (!b->used)
			continue;
		if (!b->heap && b->img && b->len > pg)
			madvise((char *)b->img + pg, b->len - pg, MADV_DONTNEED);
		if (b->dimg)
			madvise(b->dimg, b->dlen, MADV_DONTNEED);
	}
}

void unwinder_free(unwinder *u)
{
	if (!u)
		return;
	for (uint32_t i = 0; i < u->nbins; i++)
		if (u->bins[i].used)
			bin_drop(u, &u->bins[i]);
	free(u->bins);
	free(u->rules);
	free(u->lay);
	free(u->ext);
	for (unsigned i = 0; i < MEM_FDS; i++)
		if (u->mem[i].fd >= 0)
			close(u->mem[i].fd);
	free(u);
}

void unwind_get_stats(const unwinder *u, unwind_stats *st)
{
	*st = u->st;
	st->cache_bytes = u->bytes;
	st->binaries = 0;
	for (uint32_t i = 0; i < u->nbins; i++)
		st->binaries += u->bins[i].used;
}
