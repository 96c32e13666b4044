// SPDX-License-Identifier: Apache-2.0
/*
 * The user-stack unwinder (see unwind.h): elfutils libdwfl driven from a sample's registers and
 * stack copy.
 *
 * Per process a session: a Dwfl whose modules are the process's executable file mappings,
 * reported with dwfl_report_module at the address their ELF headers say (computed once per
 * mapping and cached by mapping id, so one read of a binary's headers serves every process that
 * maps it), and opened lazily by our find_elf callback only when an unwind reaches code in them.
 * find_elf maps the file (ELF_C_READ_MMAP), tells libelf it is done with the descriptor and
 * closes it, so a cached session holds no file descriptors. Debug files are never searched: the
 * tables in the binary (.eh_frame, or .debug_frame where the binary has it) are what unwinds; a
 * debuginfo lookup would load a whole DWARF file on the sampling path.
 *
 * The session is attached once (dwfl_attach_state); its callbacks read the sample being unwound
 * through the session pointer, so the Dwfl, its opened ELF files and libdw's decoded CIEs/FDEs
 * are reused by every later sample of the process. A session is rebuilt when the process's
 * mapping list changes (a signature of it is compared each time) and sessions are evicted
 * least-recently-used when the estimate of what they hold passes the budget.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwind.h"

#define MAX_SESSIONS 4096
#define SESSION_COST 16384 /* Dwfl, its process and thread state, the module table */
#define MODULE_COST 2048   /* a Dwfl_Module before its file is opened */

/* Where a mapping's ELF file sits in the process, from its headers. */
typedef struct layout {
	uint8_t state; /* 0 unknown, 1 usable, 2 not usable (not ELF, missing, odd) */
	uint64_t start, end; /* module range in the process */
	uint64_t cfi_bytes;  /* .eh_frame + .eh_frame_hdr + .debug_frame */
} layout;

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
	session **ss; /* heap cells: libdwfl holds a pointer to each */
	uint32_t nss, css;
	uint64_t clock;
	layout *lay;
	uint32_t nlay;
	strobe_unwind_stats st;
	/* The sample being unwound and what its walk found. */
	const strobe_unwind_sample *cur;
	uint64_t *pcs;
	bool *act;
	unsigned max, n;
	bool truncated;
};

/* ---- libdwfl callbacks ----------------------------------------------------------------------- */

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	/* Regular files only: a FIFO or device named by a (fed, untrusted) mapping would block
	 * or never end. */
	int fd = open(modname, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	struct stat sb;
	Elf *e = NULL;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e && elf_kind(e) == ELF_K_ELF && elf_cntl(e, ELF_C_FDDONE) == 0) {
		*elfp = e;
	} else if (e) {
		elf_end(e);
	}
	close(fd); /* mapped; libelf no longer needs it */
	return -1;
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
 * its unwind sections. */
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
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat sb;
	Elf *e = NULL;
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode))
		e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t phnum = 0;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || elf_getphdrnum(e, &phnum) != 0)
		goto out;
	uint64_t first = 0, hi = 0, bias = 0;
	bool have_first = false, have_bias = false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		uint64_t align = ph.p_align ? ph.p_align : 1;
		if (!have_first) {
			first = ph.p_vaddr & -align;
			have_first = true;
		}
		if (ph.p_vaddr + ph.p_memsz > hi)
			hi = ph.p_vaddr + ph.p_memsz;
		/* The segment this mapping is: the one whose page-aligned file range holds
		 * pgoff. Its file offset X sits at m->start + X - pgoff and at ELF address
		 * X - p_offset + p_vaddr. */
		uint64_t off0 = ph.p_offset & ~(uint64_t)4095;
		if ((ph.p_flags & PF_X) && !have_bias && m->pgoff >= off0 &&
		    m->pgoff < ph.p_offset + ph.p_filesz) {
			bias = m->start - m->pgoff + ph.p_offset - ph.p_vaddr;
			have_bias = true;
		}
	}
	if (!have_first || !have_bias || (eh.e_type == ET_EXEC && bias != 0))
		goto out;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (elf_getshdrstrndx(e, &shstrndx) == 0) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *name;
			if (!gelf_getshdr(scn, &sh) ||
			    !(name = elf_strptr(e, shstrndx, sh.sh_name)))
				continue;
			if (!strcmp(name, ".eh_frame") || !strcmp(name, ".eh_frame_hdr") ||
			    !strcmp(name, ".debug_frame"))
				l->cfi_bytes += sh.sh_size;
		}
	}
	l->start = bias + first;
	l->end = bias + hi;
	l->state = l->end > l->start ? 1 : 2;
out:
	if (e)
		elf_end(e);
	close(fd);
	return l->state == 1 ? l : NULL;
}

/* ---- sessions -------------------------------------------------------------------------------- */

static uint64_t maps_signature(const strobe_proc *p)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ p->nvma;
	for (uint32_t i = 0; i < p->nvma; i++) {
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

/* (Re)builds a session's Dwfl from the process's mappings. */
static int session_build(strobe_unwinder *u, session *s, const strobe_tracker *t,
			 const strobe_proc *p)
{
	if (s->dwfl)
		dwfl_end(s->dwfl);
	u->bytes -= s->bytes;
	s->bytes = SESSION_COST;
	s->usable = false;
	s->dwfl = dwfl_begin(&dwfl_cbs);
	if (!s->dwfl) {
		u->bytes += s->bytes;
		return -ENOMEM;
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
		if (dwfl_report_module(s->dwfl, strobe_tracker_str(t, m->path), l->start, l->end)) {
			mods++;
			s->bytes += MODULE_COST + l->cfi_bytes;
		}
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
	u->bytes += s->bytes;
	if (u->bytes > u->st.cache_bytes_peak)
		u->st.cache_bytes_peak = u->bytes;
	if (mods && dwfl_attach_state(s->dwfl, NULL, p->pid, &thread_cbs, s))
		s->usable = true;
	return 0;
}

static session *session_for(strobe_unwinder *u, const strobe_tracker *t, const strobe_proc *p)
{
	uint64_t sig = maps_signature(p);
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
	u->truncated = false;
	int rc = dwfl_getthread_frames(s->dwfl, sm->tid, frame_cb, u);
	*n = u->n;
	u->cur = NULL;
	if (rc == 0)
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
