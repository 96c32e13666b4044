// SPDX-License-Identifier: Apache-2.0
/*
 * The user-stack unwinder (see unwind.h): elfutils libdwfl driven from a sample's registers and
 * stack copy.
 *
 * Per process a session: a Dwfl whose modules are the process's executable file mappings,
 * reported with dwfl_report_module at the address their ELF headers say (read once per mapping
 * by pread and cached by mapping id), and opened lazily by our find_elf callback only when an
 * unwind reaches code in them. find_elf hands libdwfl an ELF descriptor over the binary's image,
 * which the unwinder maps once and shares between all sessions (see image_of), so a session holds
 * no file descriptors and a binary is mapped once however many processes run it. Debug files are
 * never searched: a debuginfo lookup would load a whole DWARF file on the sampling path.
 *
 * The session is attached once (dwfl_attach_state); its callbacks read the sample being unwound
 * through the session pointer, so the Dwfl, its opened ELF files and libdw's decoded CIEs/FDEs
 * are reused by every later sample of the process. A session is re-reported when the process's
 * mapping list changes (a signature of it is compared each time) and sessions are evicted
 * least-recently-used when the estimate of what they hold passes the budget.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind.h"

#define MAX_SESSIONS 4096
#define SESSION_COST 16384 /* Dwfl, its process and thread state, the module table */

/* Where a mapping's ELF file sits in the process, from its headers. */
typedef struct layout {
	uint8_t state; /* 0 unknown, 1 usable, 2 not usable (not ELF, missing, odd) */
	uint64_t start, end; /* module range in the process */
} layout;

/* A binary mapped once for every session: read-only sharing of the file's pages, with a private
 * copy of the first page whose ELF header says "no section headers" (see find_elf). */
typedef struct image {
	uint64_t dev, ino;
	int64_t mtime_ns;
	size_t len;
	void *map;
} image;

typedef struct session {
	int32_t pid;
	bool usable;
	uint64_t sig;
	uint64_t last_use;
	size_t bytes;
	Dwfl *dwfl;
	struct strobe_unwinder *u;
} session;

struct strobe_unwinder {
	size_t budget, bytes;
	/* The architecture every session is attached with: an ELF header alone (x86-64), rather
	 * than letting libdwfl pick "any" module, which opens one and may pick a foreign one. */
	Elf64_Ehdr arch_hdr;
	Elf *arch;
	session **ss; /* heap cells: libdwfl holds a pointer to each */
	uint32_t nss, css;
	uint64_t clock;
	layout *lay;
	uint32_t nlay;
	image *img;
	uint32_t nimg, cimg;
	strobe_unwind_stats st;
	/* The sample being unwound and what its walk found. */
	const strobe_unwind_sample *cur;
	uint64_t *pcs;
	bool *act;
	unsigned max, n;
	bool truncated, mem_fail;
};

/* The session whose unwind is running: find_elf charges what it opens to it. The sampler calls
 * the unwinder from one thread; the variable is per thread all the same. */
static __thread session *opening;

/* What an opened module is charged: libdwfl's and libdw's state for it, and what libdw decodes
 * into its tree of CIEs and FDEs as they are used, bounded by the number of FDEs, which
 * .eh_frame_hdr's table counts (about 48 bytes of tree and FDE each). */
static size_t module_cost(const image *im)
{
	size_t cost = 16384;
	const Elf64_Ehdr *eh = im->map;
	if (eh->e_phoff >= im->len || eh->e_phnum > 64 ||
	    im->len - eh->e_phoff < (size_t)eh->e_phnum * sizeof(Elf64_Phdr))
		return cost;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)im->map + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_GNU_EH_FRAME || ph[i].p_offset >= im->len ||
		    im->len - ph[i].p_offset < 12)
			continue;
		/* version, eh_frame_ptr_enc, fde_count_enc, table_enc, eh_frame_ptr (udata4
		 * in practice), fde_count */
		const uint8_t *h = (const uint8_t *)im->map + ph[i].p_offset;
		if (h[0] == 1 && h[1] == 0x1b && h[2] == 0x03) {
			uint32_t nfde;
			memcpy(&nfde, h + 8, 4);
			cost += (size_t)nfde * 48;
		}
	}
	return cost;
}

/* ---- libdwfl callbacks ----------------------------------------------------------------------- */

/*
 * The binary of a module, mapped once per unwinder and shared by every session (libelf descriptors
 * made with elf_memory over it, one per module, since libdwfl ends each).
 *
 * The ELF header of the mapping (a private copy-on-write page) is edited to hide the section
 * headers, so that libdw finds the unwind tables the way the loader does, through the program
 * headers (PT_GNU_EH_FRAME: .eh_frame_hdr's binary-search table, then .eh_frame). Through the
 * section headers, libdw 0.188 misses the search table when .eh_frame comes before
 * .eh_frame_hdr (lld's layout: libLLVM, Chromium, Rust binaries) and then decodes the whole
 * .eh_frame linearly - 100+ ms for libLLVM in every process - and it would load a module's
 * whole DWARF to look for .debug_frame wherever .eh_frame has no entry. What remains unwound
 * without tables (a binary with .debug_frame only, such as Go's) goes by frame pointers.
 */
static const image *image_of(strobe_unwinder *u, int fd, const struct stat *sb)
{
	int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	for (uint32_t i = 0; i < u->nimg; i++)
		if (u->img[i].dev == (uint64_t)sb->st_dev && u->img[i].ino == (uint64_t)sb->st_ino &&
		    u->img[i].mtime_ns == mt && u->img[i].len == (size_t)sb->st_size)
			return &u->img[i];
	if (sb->st_size < (off_t)sizeof(Elf64_Ehdr) || sb->st_size > ((off_t)4 << 30) ||
	    u->nimg >= 65536)
		return NULL;
	if (u->nimg == u->cimg) {
		uint32_t nc = u->cimg ? u->cimg * 2 : 32;
		image *n = realloc(u->img, nc * sizeof(*n));
		if (!n)
			return NULL;
		u->img = n;
		u->cimg = nc;
	}
	size_t len = (size_t)sb->st_size;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return NULL;
	Elf64_Ehdr *eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) {
		munmap(m, len);
		return NULL;
	}
	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = SHN_UNDEF;
	image *im = &u->img[u->nimg++];
	*im = (image){(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, mt, len, m};
	return im;
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	/* Regular files only: a FIFO or device named by a (fed, untrusted) mapping would block
	 * or never end. */
	if (!opening)
		return -1;
	int fd = open(modname, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	struct stat sb;
	const image *im = NULL;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		im = image_of(opening->u, fd, &sb);
	close(fd);
	if (!im)
		return -1;
	Elf *e = elf_memory(im->map, im->len);
	if (!e)
		return -1;
	*elfp = e;
	size_t c = module_cost(im);
	opening->bytes += c;
	opening->u->bytes += c;
	if (opening->u->bytes > opening->u->st.cache_bytes_peak)
		opening->u->st.cache_bytes_peak = opening->u->bytes;
	return -1; /* no descriptor: the image stays mapped in the unwinder */
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			  char **debuginfo_file_name)
{
	return -1; /* the binary's own tables only (see above) */
}

static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	return 0; /* threads are named by the caller (get_thread) */
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	*thread_argp = arg;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	session *s = arg;
	strobe_unwinder *u = s->u;
	const strobe_unwind_sample *sm = u->cur;
	uint64_t sp = sm->regs[7];
	if (addr >= sp && addr - sp <= sm->stack_len && sm->stack_len - (addr - sp) >= 8) {
		memcpy(result, sm->stack + (addr - sp), 8);
		return true;
	}
	/* libdwfl takes a register it cannot read for an undefined one, and so a failed read for
	 * the outermost frame: remember it, the walk did not really end. */
	u->mem_fail = true;
	/* Past the copy, on what is plausibly still the stack: the slice was too small. */
	if (sm->stack_full && addr >= sp + sm->stack_len && addr - sp < (64u << 20))
		u->truncated = true;
	return false;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	session *s = arg;
	const uint64_t *r = s->u->cur->regs; /* AX BX CX DX SI DI BP SP IP R8..R15 */
	/* DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
	Dwarf_Word d[17] = {r[0], r[3], r[2], r[1], r[4], r[5], r[6], r[7],
			    r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[8]};
	if (!dwfl_thread_state_registers(thread, 0, 17, d))
		return false;
	dwfl_thread_state_register_pc(thread, r[8]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- module layout --------------------------------------------------------------------------- */

/* Reads the headers of a mapping's file once: the module's range in the process and the size of
 * nothing else (the tables themselves are read by libdw from the mapped file when used). */
static const layout *layout_of(strobe_unwinder *u, const strobe_tracker *t, uint32_t id,
			       const strobe_map *m)
{
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
	if (l->state)
		return l->state == 1 ? l : NULL;
	l->state = 2;
	const char *path = strobe_tracker_str(t, m->path);
	if (m->anon || !path || path[0] != '/' || strstr(path, " (deleted)"))
		return NULL;
	/* The ELF and program headers by pread: libelf would map the whole file (hundreds of MiB
	 * for libLLVM), and unmapping it costs a TLB shootdown on every CPU. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat sb;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	size_t phsz = 0;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum > 64)
		goto out;
	phsz = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	if (pread(fd, ph, phsz, (off_t)eh.e_phoff) != (ssize_t)phsz)
		goto out;
	uint64_t first = 0, hi = 0, bias = 0;
	bool have_first = false, have_bias = false;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		uint64_t align = ph[i].p_align ? ph[i].p_align : 1;
		if (!have_first) {
			first = ph[i].p_vaddr & -align;
			have_first = true;
		}
		if (ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz;
		/* The segment this mapping is: the one whose page-aligned file range holds
		 * pgoff. Its file offset X sits at m->start + X - pgoff and at ELF address
		 * X - p_offset + p_vaddr. */
		uint64_t off0 = ph[i].p_offset & ~(uint64_t)4095;
		if ((ph[i].p_flags & PF_X) && !have_bias && m->pgoff >= off0 &&
		    m->pgoff < ph[i].p_offset + ph[i].p_filesz) {
			bias = m->start - m->pgoff + ph[i].p_offset - ph[i].p_vaddr;
			have_bias = true;
		}
	}
	if (!have_first || !have_bias || (eh.e_type == ET_EXEC && bias != 0))
		goto out;
	l->start = bias + first;
	l->end = bias + hi;
	l->state = l->end > l->start ? 1 : 2;
out:
	close(fd);
	return l->state == 1 ? l : NULL;
}

/* ---- sessions -------------------------------------------------------------------------------- */

/* A signature of the file mappings of p: anonymous (JIT) code comes and goes without
 * changing the modules. */
static uint64_t maps_signature(const strobe_tracker *t, const strobe_proc *p)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	for (uint32_t i = 0; i < p->nvma; i++) {
		const strobe_map *m = strobe_tracker_map(t, p->vma[i].map);
		if (!m || m->anon)
			continue;
		h = (h ^ p->vma[i].start) * 0x100000001b3ull;
		h = (h ^ p->vma[i].end) * 0x100000001b3ull;
		h = (h ^ p->vma[i].map) * 0x100000001b3ull;
	}
	return h;
}

static void session_drop(strobe_unwinder *u, uint32_t i)
{
	session *s = u->ss[i];
	if (s->dwfl)
		dwfl_end(s->dwfl);
	u->bytes -= s->bytes;
	free(s);
	u->ss[i] = u->ss[--u->nss];
}

/* Evicts least-recently-used sessions (never `keep`) until the estimate fits the budget. */
static void evict(strobe_unwinder *u, const session *keep)
{
	while (u->bytes > u->budget || u->nss >= MAX_SESSIONS) {
		uint32_t victim = UINT32_MAX;
		for (uint32_t i = 0; i < u->nss; i++)
			if (u->ss[i] != keep &&
			    (victim == UINT32_MAX || u->ss[i]->last_use < u->ss[victim]->last_use))
				victim = i;
		if (victim == UINT32_MAX)
			return;
		session_drop(u, victim);
		u->st.sessions_evicted++;
	}
}

/* Reports the process's file mappings as the session's modules. The Dwfl is created and
 * attached once; later reports (the mappings changed: dlopen, exec) go through
 * dwfl_report_begin/end, which keeps the modules reported again unchanged - their open ELF
 * and decoded tables - and drops the others. */
static int session_build(strobe_unwinder *u, session *s, const strobe_tracker *t,
			 const strobe_proc *p)
{
	if (!s->dwfl) {
		s->dwfl = dwfl_begin(&dwfl_cbs);
		if (!s->dwfl)
			return -ENOMEM;
		u->bytes += SESSION_COST;
		s->bytes += SESSION_COST;
	}
	u->st.sessions_built++;
	dwfl_report_begin(s->dwfl);
	unsigned mods = 0;
	uint32_t last = 0;
	for (uint32_t i = 0; i < p->nvma; i++) {
		uint32_t id = p->vma[i].map;
		if (id == last || id <= STROBE_MAP_KERNEL)
			continue; /* one module per file even where it has several ranges */
		last = id;
		const strobe_map *m = strobe_tracker_map(t, id);
		const layout *l = m ? layout_of(u, t, id, m) : NULL;
		if (!l)
			continue;
		/* The name is the path: find_elf opens it. Overlaps (a file mapped twice)
		 * are refused by libdwfl; the first one stays. */
		if (dwfl_report_module(s->dwfl, strobe_tracker_str(t, m->path), l->start, l->end))
			mods++;
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (mods && !s->usable && dwfl_attach_state(s->dwfl, u->arch, p->pid, &thread_cbs, s))
		s->usable = true;
	return 0;
}

static session *session_for(strobe_unwinder *u, const strobe_tracker *t, const strobe_proc *p)
{
	uint64_t sig = maps_signature(t, p);
	session *s = NULL;
	for (uint32_t i = 0; i < u->nss; i++)
		if (u->ss[i]->pid == p->pid) {
			s = u->ss[i];
			break;
		}
	if (!s) {
		if (u->nss == u->css) {
			uint32_t nc = u->css ? u->css * 2 : 16;
			session **n = realloc(u->ss, nc * sizeof(*n));
			if (!n)
				return NULL;
			u->ss = n;
			u->css = nc;
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->pid = p->pid;
		s->u = u;
		s->sig = ~sig;
		u->ss[u->nss++] = s;
	}
	s->last_use = ++u->clock;
	if (s->sig != sig) {
		s->sig = sig;
		session_build(u, s, t, p);
		evict(u, s);
	}
	return s;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	strobe_unwinder *u = arg;
	Dwarf_Addr pc;
	bool act = false;
	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
	if (u->n >= u->max)
		return DWARF_CB_ABORT;
	u->pcs[u->n] = pc;
	u->act[u->n] = act;
	u->n++;
	return u->n >= u->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

int strobe_unwind(strobe_unwinder *u, const strobe_tracker *t, const strobe_proc *p,
		  const strobe_unwind_sample *sm, uint64_t *pcs, bool *activation, unsigned max,
		  unsigned *n)
{
	*n = 0;
	session *s = session_for(u, t, p);
	if (!s)
		return -ENOMEM;
	if (!s->usable)
		return -ENOENT;
	u->cur = sm;
	u->pcs = pcs;
	u->act = activation;
	u->max = max;
	u->n = 0;
	u->truncated = u->mem_fail = false;
	opening = s;
	int rc = dwfl_getthread_frames(s->dwfl, sm->tid, frame_cb, u);
	opening = NULL;
	evict(u, s);
	*n = u->n;
	u->cur = NULL;
	if (rc == 0 && !u->mem_fail)
		return STROBE_UNWIND_COMPLETE;
	if (u->n >= max)
		return STROBE_UNWIND_FULL;
	return u->truncated ? STROBE_UNWIND_TRUNCATED : STROBE_UNWIND_STOPPED;
}

strobe_unwinder *strobe_unwinder_new(size_t cache_bytes)
{
	strobe_unwinder *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->budget = cache_bytes ? cache_bytes : (size_t)64 << 20;
	elf_version(EV_CURRENT);
	Elf64_Ehdr *h = &u->arch_hdr;
	memcpy(h->e_ident, ELFMAG, SELFMAG);
	h->e_ident[EI_CLASS] = ELFCLASS64;
	h->e_ident[EI_DATA] = ELFDATA2LSB;
	h->e_ident[EI_VERSION] = EV_CURRENT;
	h->e_type = ET_EXEC;
	h->e_machine = EM_X86_64;
	h->e_version = EV_CURRENT;
	h->e_ehsize = sizeof(*h);
	u->arch = elf_memory((char *)h, sizeof(*h));
	if (!u->arch) {
		free(u);
		errno = EINVAL;
		return NULL;
	}
	return u;
}

void strobe_unwinder_free(strobe_unwinder *u)
{
	if (!u)
		return;
	while (u->nss)
		session_drop(u, u->nss - 1);
	free(u->ss);
	free(u->lay);
	for (uint32_t i = 0; i < u->nimg; i++)
		munmap(u->img[i].map, u->img[i].len);
	free(u->img);
	elf_end(u->arch);
	free(u);
}

void strobe_unwind_forget(strobe_unwinder *u, int32_t pid)
{
	for (uint32_t i = 0; i < u->nss; i++)
		if (u->ss[i]->pid == pid) {
			session_drop(u, i);
			return;
		}
}

void strobe_unwind_get_stats(const strobe_unwinder *u, strobe_unwind_stats *st)
{
	*st = u->st;
	st->sessions = u->nss;
	st->cache_bytes = u->bytes;
}
