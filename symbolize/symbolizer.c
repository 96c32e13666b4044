// SPDX-License-Identifier: Apache-2.0
/*
 * The symbolizer itself: options, the object cache and the lookup entry point.
 *
 * Objects are cached by build ID first, because that is the identity that survives everything
 * a profiler sees happen to a binary: the same libc mapped by a thousand processes, reached
 * through different paths (a container's root, a bind mount, a hard link), or replaced on disk
 * after the process started. When the build ID is unknown (stripped of its note, or the kernel
 * did not report one), (device, inode, path) is the key, and failures are cached under it too,
 * so a sampler asking again for an unreadable file costs a hash lookup, not an open().
 *
 * Lookups go through a small direct-mapped cache of (object, offset) -> frames: a profile
 * names the same hot addresses over and over, and a hit costs a hash and a copy where a miss
 * walks symbol tables and DWARF.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#include "internal.h"
#include "strobe/elf_image.h"

#define CACHE_SETS 1024u     /* two entries each; a power of two */
#define CACHE_FRAMES 4       /* deeper inline chains are not cached */
#define NAME_MAX_POOLED (64u << 10) /* function and file names longer than this are cut */
#define DEMANGLED_MAX 4096u         /* readable names longer than this are cut */

struct sym_cache_entry {
	const strobe_sym_object *obj; /* NULL: empty */
	uint64_t offset;
	uint32_t used;                /* the symbolizer's clock at the last hit */
	int n;
	strobe_sym_frame f[CACHE_FRAMES];
};

typedef struct sym_bid_key {
	uint8_t len;
	uint8_t id[STROBE_BUILD_ID_MAX];
	uint8_t pad[3];
} sym_bid_key;

typedef struct sym_path_key_head {
	uint64_t dev, ino;
} sym_path_key_head;

strobe_symbolizer *strobe_symbolizer_new(const strobe_sym_opts *opts)
{
	static const strobe_sym_opts none;
	if (!opts)
		opts = &none;
	/* libelf refuses every call until a version is agreed; doing it here keeps callers from
	 * having to know that. */
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	strobe_symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		goto nomem;
	s->vdso_fd = -1; /* before any goto nomem: free closes it */
	s->no_dwarf = opts->no_dwarf;
	s->no_kernel = opts->no_kernel;
	s->max_debug = opts->max_debug_bytes;
	s->by_build_id.fixed = sizeof(sym_bid_key);
	const char *root = opts->sysroot ? opts->sysroot : "";
	size_t rl = strlen(root);
	while (rl > 0 && root[rl - 1] == '/') /* "/" and "/x/" mean "" and "/x" */
		rl--;
	s->sysroot = strndup(root, rl);
	if (!s->sysroot)
		goto nomem;
	size_t nd = 0;
	while (opts->debug_dirs && opts->debug_dirs[nd])
		nd++;
	s->debug_dirs = calloc(nd + 1, sizeof(*s->debug_dirs));
	if (!s->debug_dirs)
		goto nomem;
	for (size_t i = 0; i < nd; i++)
		if (!(s->debug_dirs[i] = strdup(opts->debug_dirs[i])))
			goto nomem;
	return s;
nomem:
	strobe_symbolizer_free(s);
	errno = ENOMEM;
	return NULL;
}

/* Everything held for user space: objects, the caches by build ID and by path, the lookup cache
 * and the perf maps (strobe_symbolizer_free and _renew). */
static void forget_user(strobe_symbolizer *s)
{
	for (size_t i = 0; i < s->nobjs; i++) {
		sym_object_close(s->objs[i]);
		free(s->objs[i]);
	}
	free(s->objs);
	s->objs = NULL;
	s->nobjs = s->cobjs = 0;
	strobe_itab_free(&s->by_build_id);
	s->by_build_id.fixed = sizeof(sym_bid_key);
	strobe_itab_free(&s->by_path);
	free(s->bid_obj);
	free(s->path_obj);
	free(s->path_err);
	s->bid_obj = s->path_obj = NULL;
	s->path_err = NULL;
	s->cbid = s->cpath = 0;
	free(s->cache);
	s->cache = NULL;
	s->clock = 0;
	sym_perfmaps_free(s->perfmaps);
	s->perfmaps = NULL;
}

void strobe_symbolizer_free(strobe_symbolizer *s)
{
	if (!s)
		return;
	forget_user(s);
	if (s->vdso_fd >= 0)
		close(s->vdso_fd);
	for (char **d = s->debug_dirs; d && *d; d++)
		free(*d);
	free(s->debug_dirs);
	free(s->sysroot);
	sym_kernel_free(s->kernel);
	sym_strpool_free(&s->strings);
	free(s);
}

/* The vDSO's memfd stays too: it is this process's. */
int strobe_symbolizer_renew(strobe_symbolizer *s)
{
	if (!s)
		return -EINVAL;
	forget_user(s);
	if (s->kernel)
		sym_kernel_renew(s->kernel);
	sym_strpool_free(&s->strings);
	s->over_budget = 0;
	s->generation++;
	return 0;
}

size_t strobe_symbolizer_over_budget(const strobe_symbolizer *s)
{
	return s ? s->over_budget : 0;
}

/* ---- object cache ---------------------------------------------------------------------------- */

static sym_bid_key bid_key(const uint8_t *id, size_t len)
{
	sym_bid_key k;
	memset(&k, 0, sizeof(k));
	/* Longer IDs are cut to what the kernel reports in MMAP2, so both spellings meet. */
	k.len = (uint8_t)(len > STROBE_BUILD_ID_MAX ? STROBE_BUILD_ID_MAX : len);
	memcpy(k.id, id, k.len);
	return k;
}

static strobe_sym_object *find_by_bid(strobe_symbolizer *s, const uint8_t *id, size_t len)
{
	sym_bid_key k = bid_key(id, len);
	uint32_t i = strobe_itab_find(&s->by_build_id, &k, sizeof(k));
	return i == UINT32_MAX ? NULL : s->bid_obj[i];
}

static int add_bid(strobe_symbolizer *s, strobe_sym_object *o)
{
	sym_bid_key k = bid_key(o->build_id, o->build_id_len);
	uint32_t i;
	int r = strobe_itab_intern(&s->by_build_id, &k, sizeof(k), &i, NULL);
	if (r < 0)
		return r;
	if (i >= s->cbid) {
		uint32_t nc = s->cbid ? s->cbid * 2 : 64;
		strobe_sym_object **v = realloc(s->bid_obj, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->bid_obj = v;
		s->cbid = nc;
	}
	s->bid_obj[i] = o;
	return 0;
}

/* Path keys are built in a small buffer: dev, ino, then the path bytes. */
static void *path_key(const char *path, dev_t dev, ino_t ino, size_t *len)
{
	size_t pl = strlen(path);
	uint8_t *k = malloc(sizeof(sym_path_key_head) + pl);
	if (!k)
		return NULL;
	sym_path_key_head h = {(uint64_t)dev, (uint64_t)ino};
	memcpy(k, &h, sizeof(h));
	memcpy(k + sizeof(h), path, pl);
	*len = sizeof(h) + pl;
	return k;
}

/* 1 and *o / *err when the key is known, 0 when not. */
static int find_by_path(strobe_symbolizer *s, const char *path, dev_t dev, ino_t ino,
			strobe_sym_object **o, int *err)
{
	size_t len;
	void *k = path_key(path, dev, ino, &len);
	if (!k)
		return 0;
	uint32_t i = strobe_itab_find(&s->by_path, k, len);
	free(k);
	if (i == UINT32_MAX)
		return 0;
	*o = s->path_obj[i];
	*err = s->path_err[i];
	return 1;
}

static int add_path(strobe_symbolizer *s, const char *path, dev_t dev, ino_t ino,
		    strobe_sym_object *o, int err)
{
	size_t len;
	void *k = path_key(path, dev, ino, &len);
	if (!k)
		return -ENOMEM;
	uint32_t i;
	int r = strobe_itab_intern(&s->by_path, k, len, &i, NULL);
	free(k);
	if (r < 0)
		return r;
	if (i >= s->cpath) {
		uint32_t nc = s->cpath ? s->cpath * 2 : 64;
		strobe_sym_object **v = realloc(s->path_obj, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->path_obj = v;
		int *e = realloc(s->path_err, nc * sizeof(*e));
		if (!e)
			return -ENOMEM;
		s->path_err = e;
		s->cpath = nc;
	}
	s->path_obj[i] = o;
	s->path_err[i] = err;
	return 0;
}

/* A deleted file is still reachable through the process's map_files links, whose targets read
 * as the original path with " (deleted)". Scanning them costs a readdir, paid only when the
 * path itself cannot be opened. */
static int open_map_files(strobe_symbolizer *s, const char *path, pid_t pid, dev_t dev,
			  ino_t ino)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "/proc/%d/map_files", (int)pid);
	char *dir = sym_rooted(s, rel);
	if (!dir)
		return -ENOMEM;
	DIR *d = opendir(dir);
	if (!d) {
		int r = -errno;
		free(dir);
		return r;
	}
	int fd = -ENOENT;
	size_t pl = strlen(path);
	const char *del = " (deleted)";
	if (pl > strlen(del) && strcmp(path + pl - strlen(del), del) == 0)
		pl -= strlen(del);
	struct dirent *e;
	char link[PATH_MAX], target[PATH_MAX];
	while (fd < 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (snprintf(link, sizeof(link), "%s/%s", dir, e->d_name) >= (int)sizeof(link))
			continue;
		ssize_t tl = readlink(link, target, sizeof(target) - 1);
		if (tl < 0)
			continue;
		target[tl] = 0;
		if ((size_t)tl < pl || memcmp(target, path, pl) != 0 ||
		    (target[pl] && strcmp(target + pl, del) != 0))
			continue;
		int f = open(link, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (f < 0)
			continue;
		if ((dev || ino) && (fstat(f, &st) < 0 || st.st_ino != ino)) {
			close(f);
			continue;
		}
		fd = f;
	}
	closedir(d);
	free(dir);
	return fd;
}

/* The file behind a mapping: the path itself, then the process's view of it. */
static int open_object_file(strobe_symbolizer *s, const char *path, pid_t pid, dev_t dev,
			    ino_t ino, char **opened_as)
{
	*opened_as = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || pid <= 0)
		return fd >= 0 ? fd : -errno;
	int err = -errno;
	if (path[0] == '/') {
		char rel[64];
		snprintf(rel, sizeof(rel), "/proc/%d/root", (int)pid);
		char *root = sym_rooted(s, rel);
		if (!root)
			return -ENOMEM;
		size_t a = strlen(root);
		char *p = realloc(root, a + strlen(path) + 1);
		if (!p) {
			free(root);
			return -ENOMEM;
		}
		strcpy(p + a, path);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			*opened_as = p;
			return fd;
		}
		free(p);
	}
	fd = open_map_files(s, path, pid, dev, ino);
	return fd >= 0 ? fd : err;
}

/* Reads what identifies the file (is it ELF we can use, its build ID) without building
 * anything, so a cache hit by build ID costs one mmap of the headers. */
static int probe_elf(int fd, uint8_t *id, size_t *idlen)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	int r = 0;
	GElf_Ehdr eh;
	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		r = -ENOEXEC;
	} else {
		const uint8_t *p = NULL;
		int n = sym_elf_build_id(elf, &p);
		*idlen = (size_t)n > STROBE_BUILD_ID_MAX ? STROBE_BUILD_ID_MAX : (size_t)n;
		if (*idlen)
			memcpy(id, p, *idlen);
	}
	elf_end(elf);
	return r;
}

/*
 * The vDSO is no file: the kernel maps the same image into every process of an architecture, so
 * our own copy (found through the auxiliary vector) names the frames of every 64-bit process on
 * this kernel. It is copied into a memfd once so it opens like any other object.
 */
static int vdso_path(strobe_symbolizer *s, char *buf, size_t cap)
{
	if (s->vdso_fd == -1) {
		s->vdso_fd = -2;
		const uint8_t *base = NULL;
		size_t size = 0;
		strobe_vdso_image(&base, &size);
		int fd = size ? memfd_create("strobe-vdso", MFD_CLOEXEC) : -1;
		if (fd >= 0 && write(fd, base, size) == (ssize_t)size)
			s->vdso_fd = fd;
		else if (fd >= 0)
			close(fd);
	}
	if (s->vdso_fd < 0)
		return -ENOENT;
	snprintf(buf, cap, "/proc/self/fd/%d", s->vdso_fd);
	return 0;
}

int strobe_sym_object_get(strobe_symbolizer *s, const char *path, pid_t pid, dev_t dev, ino_t ino,
			  const uint8_t *build_id, size_t build_id_len, strobe_sym_object **out)
{
	if (!s || !path || !*path || !out || (build_id_len && !build_id))
		return -EINVAL;
	*out = NULL;
	char vdso[64];
	if (strcmp(path, "[vdso]") == 0) {
		int r = vdso_path(s, vdso, sizeof(vdso));
		if (r < 0)
			return r;
		path = vdso;
		pid = 0;
		dev = 0;
		ino = 0;
	}
	if (build_id_len) {
		strobe_sym_object *o = find_by_bid(s, build_id, build_id_len);
		if (o) {
			*out = o;
			return 0;
		}
	}
	strobe_sym_object *o;
	int err;
	if ((dev || ino) && find_by_path(s, path, dev, ino, &o, &err)) {
		*out = o;
		return o ? 0 : err;
	}
	char *opened_as;
	int fd = open_object_file(s, path, pid, dev, ino, &opened_as);
	if (fd < 0)
		return fd; /* not cached: the file may appear (a mount, a container) */
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int r = -ENOEXEC;
		if (fstat(fd, &st) < 0)
			r = -errno;
		else if (S_ISDIR(st.st_mode))
			r = -EISDIR;
		close(fd);
		free(opened_as);
		return r;
	}
	if (!dev && !ino) {
		dev = st.st_dev;
		ino = st.st_ino;
		if (find_by_path(s, path, dev, ino, &o, &err)) {
			close(fd);
			free(opened_as);
			*out = o;
			return o ? 0 : err;
		}
	}
	uint8_t id[STROBE_BUILD_ID_MAX];
	size_t idlen = 0;
	int r = probe_elf(fd, id, &idlen);
	if (r < 0) {
		close(fd);
		free(opened_as);
		return add_path(s, path, dev, ino, NULL, r) < 0 ? -ENOMEM : r;
	}
	if (build_id_len) {
		sym_bid_key want = bid_key(build_id, build_id_len), got = bid_key(id, idlen);
		if (memcmp(&want, &got, sizeof(want)) != 0) {
			/* The file on disk is not what the process mapped (replaced since): naming
			 * addresses from it would be wrong, which is worse than not naming them. */
			close(fd);
			free(opened_as);
			return -ESTALE;
		}
	}
	if (idlen && !build_id_len && (o = find_by_bid(s, id, idlen))) {
		close(fd);
		free(opened_as);
		if (add_path(s, path, dev, ino, o, 0) < 0)
			return -ENOMEM;
		*out = o;
		return 0;
	}
	if (s->nobjs == s->cobjs) {
		size_t nc = s->cobjs ? s->cobjs * 2 : 16;
		strobe_sym_object **v = realloc(s->objs, nc * sizeof(*v));
		if (!v) {
			close(fd);
			free(opened_as);
			return -ENOMEM;
		}
		s->objs = v;
		s->cobjs = nc;
	}
	o = calloc(1, sizeof(*o));
	if (!o || !(o->path = strdup(path))) {
		free(o);
		close(fd);
		free(opened_as);
		return -ENOMEM;
	}
	o->dev = dev;
	o->ino = ino;
	memcpy(o->build_id, id, idlen);
	o->build_id_len = idlen;
	o->opened_as = opened_as ? opened_as : strdup(path);
	r = sym_object_open(s, o, fd, o->opened_as ? o->opened_as : path);
	if (r < 0) {
		sym_object_close(o);
		free(o);
		return add_path(s, path, dev, ino, NULL, r) < 0 ? -ENOMEM : r;
	}
	s->objs[s->nobjs++] = o;
	if ((idlen && add_bid(s, o) < 0) || add_path(s, path, dev, ino, o, 0) < 0)
		return -ENOMEM; /* o stays owned by s->objs */
	*out = o;
	return 0;
}

const uint8_t *strobe_sym_object_build_id(const strobe_sym_object *o, size_t *len)
{
	if (len)
		*len = o ? o->build_id_len : 0;
	return o ? o->build_id : NULL;
}

const char *strobe_sym_object_path(const strobe_sym_object *o)
{
	return o ? o->path : NULL;
}

/* The "has" questions are answered from the loaded tables; loading is a cache fill that does
 * not change what the object is, hence the const in the signature. */
bool strobe_sym_object_has_symbols(const strobe_sym_object *o)
{
	if (!o)
		return false;
	strobe_sym_object *w = (strobe_sym_object *)o;
	if (!w->known_syms) {
		sym_object_ensure(w);
		sym_object_load_symbols(w);
		w->known_syms = w->nsyms > 0 ? 2 : 1;
	}
	return w->known_syms == 2;
}

bool strobe_sym_object_has_lines(const strobe_sym_object *o)
{
	if (!o)
		return false;
	strobe_sym_object *w = (strobe_sym_object *)o;
	if (!w->known_lines) {
		sym_object_ensure(w);
		sym_dwarf_load(w);
		w->known_lines = w->dw ? 2 : 1;
	}
	return w->known_lines == 2;
}

const char *strobe_sym_object_debug_file(const strobe_sym_object *o)
{
	sym_object_ensure((strobe_sym_object *)o);
	if (!o || !o->mod)
		return NULL;
	/* Finding the debug file is what loading the symbol table or DWARF does; ask for both
	 * (the symbol table alone does not look when the binary has a .symtab). */
	dwfl_module_getsymtab(o->mod);
	sym_dwarf_load((strobe_sym_object *)o);
	const char *main_file = NULL, *debug_file = NULL;
	dwfl_module_info(o->mod, NULL, NULL, NULL, NULL, NULL, &main_file, &debug_file);
	if (debug_file && main_file && strcmp(debug_file, main_file) == 0)
		return NULL;
	return debug_file;
}

/* ---- lookups --------------------------------------------------------------------------------- */

/* Two-way set associative: with one way, two hot addresses that share a slot would evict each
 * other on every sample. Returns the entry holding (o, offset), or the one to replace. */
static sym_cache_entry *cache_slot(strobe_symbolizer *s, const strobe_sym_object *o,
				   uint64_t offset, bool *hit)
{
	*hit = false;
	if (!s->cache && !(s->cache = calloc(2 * CACHE_SETS, sizeof(*s->cache))))
		return NULL;
	uint64_t h = (uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ull ^ offset * 0xff51afd7ed558ccdull;
	h ^= h >> 29;
	sym_cache_entry *e = &s->cache[2 * (h & (CACHE_SETS - 1))];
	s->clock++;
	for (int i = 0; i < 2; i++)
		if (e[i].obj == o && e[i].offset == offset) {
			e[i].used = s->clock;
			*hit = true;
			return &e[i];
		}
	return e[0].used <= e[1].used ? &e[0] : &e[1];
}

/* Copies n frames into out[0..max), keeping the outermost when there are more. */
static int copy_out(const strobe_sym_frame *f, int n, strobe_sym_frame *out, int max)
{
	int skip = n > max ? n - max : 0;
	memcpy(out, f + skip, (size_t)(n - skip) * sizeof(*f));
	return n - skip;
}

int strobe_sym_lookup(strobe_symbolizer *s, strobe_sym_object *o, uint64_t offset,
		      strobe_sym_frame *out, int max)
{
	if (!s || !o || max < 0 || (max && !out))
		return -EINVAL;
	if (!max)
		return 0;
	bool hit;
	sym_cache_entry *c = cache_slot(s, o, offset, &hit);
	if (hit)
		return copy_out(c->f, c->n, out, max);

	strobe_sym_frame f[SYM_MAX_INLINE];
	int n = 0;
	uint64_t addr;
	sym_object_ensure(o);
	if (o->mod && sym_object_offset_to_addr(o, offset, &addr)) {
		sym_object_load_symbols(o);
		const sym_range *sym = sym_object_symbol(o, addr);
		if (!s->no_dwarf) {
			sym_dwarf_load(o);
			n = sym_dwarf_frames(o, addr, f, SYM_MAX_INLINE);
		}
		if (n == 0 && sym) {
			memset(&f[0], 0, sizeof(f[0]));
			f[0].function = sym->name;
			n = 1;
		} else if (n > 0 && sym) {
			/* The function the code belongs to (the outermost frame; the others are
			 * inlined into it) is named by the symbol table, as without DWARF, so that
			 * a frame reads the same in every mode: DWARF names a function by its
			 * source name, where the symbol table may name it by an alias (glibc's
			 * __libc_start_main_impl is __libc_start_main@@GLIBC_2.34). */
			f[n - 1].function = sym->name;
		}
	}
	/* Names point into the object's ELF and DWARF data, which a release (the caller's, or the
	 * budget's below) frees: hand out pooled copies, which live as long as the symbolizer. */
	for (int i = 0; i < n; i++) {
		if (f[i].function) {
			char clean[DEMANGLED_MAX];
			size_t cl = strobe_sym_demangle(f[i].function, clean, sizeof(clean));
			f[i].system_name = sym_intern_max(&s->strings, f[i].function,
							  strlen(f[i].function), NAME_MAX_POOLED);
			f[i].function = cl == strlen(f[i].function) &&
						memcmp(clean, f[i].function, cl) == 0
					    ? f[i].system_name
					    : sym_intern_max(&s->strings, clean, cl, NAME_MAX_POOLED);
		}
		if (f[i].file)
			f[i].file = sym_intern_max(&s->strings, f[i].file, strlen(f[i].file),
						   NAME_MAX_POOLED);
	}
	if (s->max_debug && o->dw && sym_dwarf_held_bytes(o->dw) > s->max_debug)
		strobe_sym_object_release(s, o); /* over the budget: reloaded on the next miss */
	if (c && n <= CACHE_FRAMES) {
		c->obj = o;
		c->offset = offset;
		c->n = n;
		c->used = s->clock;
		memcpy(c->f, f, (size_t)n * sizeof(*f));
	}
	return copy_out(f, n, out, max);
}
