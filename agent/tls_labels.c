// SPDX-License-Identifier: Apache-2.0
/*
 * User space of the C SDK's per-thread labels (sdk/strobe_labels.h). The kernel finds a
 * thread's block as its thread pointer plus a per-process offset, which the SDK publishes in a
 * global struct, strobe_labels_process, when the program starts. This finds that struct once
 * per process: through /proc/PID/maps, the ELF files mapped into it (the executable or a
 * shared library that linked the SDK), each file's symbol table (.symtab, else .dynsym) for the
 * symbol, and its load bias from the mapping of the file's first loadable segment; then reads
 * the struct from the process's memory (process_vm_readv) and checks its magic, version and
 * size. The offset goes into the eBPF program's map of processes.
 *
 * Everything read here comes from the profiled process or its files: the struct is checked
 * before its offset is used, and a block decoded here is checked slot by slot (a key or value
 * must end within its slot), so a process cannot make the agent read past anything.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../sdk/strobe_labels.h"
#include "strobe/proc_maps.h"
#include "tls_labels_user.h"

_Static_assert(sizeof(struct tls_block) == sizeof(struct strobe_labels_block),
	       "agent/tls_labels.h and sdk/strobe_labels.h disagree on the block");
_Static_assert(STROBE_TLS_MAGIC == STROBE_LABELS_MAGIC && STROBE_TLS_SLOTS == STROBE_LABELS_SLOTS &&
		       STROBE_TLS_KEY_MAX == STROBE_LABELS_KEY_MAX &&
		       STROBE_TLS_VALUE_MAX == STROBE_LABELS_VALUE_MAX,
	       "agent/tls_labels.h and sdk/strobe_labels.h disagree on the constants");

#define MAX_FILES 256 /* distinct files of one process looked at */

typedef struct find_ctx {
	const char *root;
	pid_t pid;
	char *seen[MAX_FILES];
	size_t nseen;
	uint64_t addr; /* found: the symbol's address in the process */
} find_ctx;

/* What sym_in_file found in a file, by (device, inode, size, mtime): every process of a host
 * maps the same few files (libc, ld.so, the shell), and a fresh process is looked at while it
 * runs, so reading each file's symbol tables again per process (thousands of symbols of libc
 * compared one by one) cost the agent a busy host's share of a core under process churn, and
 * made it late to read short-lived processes' identities. Direct-mapped: a collision reads a
 * file again. Shared by the agent's threads, hence the lock. */
#define FILE_CACHE 512 /* a power of two */
static struct file_seen {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
	uint64_t val, load_vaddr;
	int etype;
	bool used;
} file_cache[FILE_CACHE];
static pthread_mutex_t file_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t sym_in_file_uncached(const char *path, uint64_t *load_vaddr, int *etype);

/* The symbol's value in the file at path (0: none) and the file's first PT_LOAD's (vaddr -
 * offset), so that address = value - first_vaddr + (start of the mapping of offset 0). */
static uint64_t sym_in_file(const char *path, uint64_t *load_vaddr, int *etype)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return 0;
	int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	uint64_t h = ((uint64_t)st.st_dev * 0x9e3779b97f4a7c15ull) ^ (uint64_t)st.st_ino;
	struct file_seen *f = &file_cache[(h ^ (h >> 29)) & (FILE_CACHE - 1)];
	pthread_mutex_lock(&file_cache_mu);
	if (f->used && f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
	    f->mtime_ns == mt) {
		uint64_t v = f->val;
		*load_vaddr = f->load_vaddr;
		*etype = f->etype;
		pthread_mutex_unlock(&file_cache_mu);
		return v;
	}
	pthread_mutex_unlock(&file_cache_mu);
	*load_vaddr = UINT64_MAX;
	*etype = 0;
	uint64_t v = sym_in_file_uncached(path, load_vaddr, etype);
	if (!*etype)
		return v; /* not read (gone, unreadable): not remembered */
	pthread_mutex_lock(&file_cache_mu);
	*f = (struct file_seen){.dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
				.mtime_ns = mt, .val = v, .load_vaddr = *load_vaddr,
				.etype = *etype, .used = true};
	pthread_mutex_unlock(&file_cache_mu);
	return v;
}

static uint64_t sym_in_file_uncached(const char *path, uint64_t *load_vaddr, int *etype)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	uint64_t val = 0;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	if (!e || !gelf_getehdr(e, &eh))
		goto out;
	*etype = eh.e_type;
	*load_vaddr = UINT64_MAX;
	size_t nph = 0;
	elf_getphdrnum(e, &nph);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
			*load_vaddr = ph.p_vaddr - ph.p_offset;
			break;
		}
	}
	for (int pass = 0; pass < 2 && !val; pass++) {
		Elf_Scn *scn = NULL;
		while (!val && (scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || !sh.sh_entsize)
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
			for (size_t k = 0; k < n; k++) {
				GElf_Sym sym;
				const char *name;
				if (!gelf_getsym(d, (int)k, &sym) || sym.st_shndx == SHN_UNDEF ||
				    GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
					continue;
				name = elf_strptr(e, sh.sh_link, sym.st_name);
				if (name && strcmp(name, STROBE_LABELS_PROCESS_SYMBOL) == 0) {
					val = sym.st_value;
					break;
				}
			}
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return val;
}

static int on_map(void *arg, const strobe_maps_entry *m)
{
	find_ctx *c = arg;
	if (c->addr || m->path[0] != '/' || m->offset != 0)
		return 0; /* a file's first mapping gives its load address */
	for (size_t i = 0; i < c->nseen; i++)
		if (strcmp(c->seen[i], m->path) == 0)
			return 0;
	if (c->nseen == MAX_FILES || !(c->seen[c->nseen] = strdup(m->path)))
		return 0; /* not looked at: at worst the symbol is not found (-ENOENT) */
	c->nseen++;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%d/root%s", c->root, (int)c->pid, m->path);
	uint64_t first = 0;
	int etype = 0;
	uint64_t v = sym_in_file(path, &first, &etype);
	if (v && first != UINT64_MAX)
		c->addr = etype == ET_DYN ? v - first + m->start : v;
	return 0;
}

int tls_labels_offset(const char *proc_root, pid_t pid, int64_t *offset, strobe_err *err)
{
	elf_version(EV_CURRENT);
	find_ctx c = {.root = proc_root ? proc_root : "/proc", .pid = pid};
	int r = strobe_proc_maps_read(c.root, pid, on_map, &c);
	for (size_t i = 0; i < c.nseen; i++)
		free(c.seen[i]);
	if (r < 0)
		return strobe_errf(err, r, "process %d: cannot read its mappings: %s", (int)pid,
				   strerror(-r));
	if (!c.addr)
		return strobe_errf(err, -ENOENT, "process %d: no %s symbol (it does not use the C "
						 "SDK)",
				   (int)pid, STROBE_LABELS_PROCESS_SYMBOL);
	struct strobe_labels_process p;
	struct iovec lo = {&p, sizeof(p)}, re = {(void *)(uintptr_t)c.addr, sizeof(p)};
	if (process_vm_readv(pid, &lo, 1, &re, 1, 0) != (ssize_t)sizeof(p))
		return strobe_errf(err, -errno, "process %d: cannot read %s at %#llx: %s", (int)pid,
				   STROBE_LABELS_PROCESS_SYMBOL, (unsigned long long)c.addr,
				   strerror(errno));
	if (p.magic != STROBE_LABELS_MAGIC || p.version != STROBE_LABELS_VERSION ||
	    p.size != sizeof(struct strobe_labels_block))
		return strobe_errf(err, -ENODATA,
				   "process %d: %s is not published (magic %#x, version %u, size "
				   "%u; this agent reads version %u)",
				   (int)pid, STROBE_LABELS_PROCESS_SYMBOL, p.magic, p.version, p.size,
				   STROBE_LABELS_VERSION);
	*offset = p.tls_offset;
	return 0;
}

int tls_labels_decode(const struct tls_label_slot *slots, uint32_t nslots,
			     strobe_labelpair *out, size_t cap)
{
	if (nslots > STROBE_TLS_SLOTS)
		return -EINVAL;
	size_t n = 0;
	for (uint32_t i = 0; i < nslots; i++) {
		const struct tls_label_slot *s = &slots[i];
		if (!memchr(s->key, 0, sizeof(s->key)) || !memchr(s->value, 0, sizeof(s->value)))
			return -EINVAL;
		if (!s->key[0] || n == cap)
			continue;
		out[n++] = (strobe_labelpair){s->key, s->value};
	}
	return (int)n;
}
