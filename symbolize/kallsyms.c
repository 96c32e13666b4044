// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel symbols from /proc/kallsyms (under opts.sysroot), modules included.
 *
 * Lines read "ffffffff81000000 T _stext" for the core kernel and
 * "ffffffffc0a01000 t ext4_fill_super\t[ext4]" for modules (BPF programs appear as "[bpf]").
 * Only text symbols (t T w W) are kept: the file has no sizes, so a symbol extends to the next
 * one, and a data symbol between two functions would cut the first one short. The table is
 * sorted once and searched by bisection.
 *
 * A symbol's extent stops at the next symbol, and never crosses into another module: the last
 * symbol of a module ends where /proc/modules says the module ends, or 4 KiB after it starts
 * when the size is unknown (the core kernel's last symbol likewise), rather than swallowing
 * everything up to the next module.
 *
 * The table is compact because it is large (about 120,000 text symbols) and its names are
 * rarely asked for: 16 bytes per symbol (address, module) plus the names, in address order,
 * compressed with zstd in blocks of ZBLOCK names: 0.65 MB for the 3.1 MB of names of a
 * Debian 12 kernel, the whole table 2.6 MB, against 5 MB with the names as they are and 11 MB
 * as pooled strings and ranges. The always-on agent keeps this table for its life, and its
 * resident size has a goal (30 MB), so the names are worth the few microseconds a block
 * takes to decompress; a small cache by symbol keeps the names asked for again and again (the
 * same kernel frames, in profile after profile) from decompressing twice. A symbol's end is
 * worked out at lookup from its successor. Only a name actually returned is copied into the
 * symbolizer's string pool, where it outlives reloads of the table.
 *
 * Without CAP_SYSLOG (kptr_restrict) every address in the file reads as zero: the kernel is
 * then "unavailable" and addresses are left unnamed, not all named after one symbol.
 * Modules load after we read the file, so a miss re-reads it, at most once a minute.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "internal.h"
#include "strobe/clock.h"

#define LAST_SPAN 4096u
#define RELOAD_NS (60ll * 1000000000ll)
#define CORE_NAME "[kernel.kallsyms]"
#define ZBLOCK 256        /* names per compressed block (about 6.5 KB of names) */
#define NAME_CACHE 2048u  /* names remembered by symbol index, direct-mapped */

/* One text symbol: 16 bytes. While parsing, rank orders symbols that share an address; after
 * the table is built it is unused. */
typedef struct ksym {
	uint64_t addr;
	uint32_t name; /* offset in the name arena */
	uint16_t group;
	uint16_t rank;
} ksym;

struct sym_kernel {
	bool loaded;
	int64_t loaded_ns;
	ksym *v; /* sorted by address, one symbol per address */
	size_t n;
	char *names; /* NUL-terminated names, back to back (while loading, or when packing them
			failed) */
	size_t nnames, cnames;
	/* The names once packed: block b (names of symbols b*ZBLOCK...) is the zstd frame
	 * z[zoff[b] .. zoff[b+1]); zbuf holds block zcur decompressed (zmax bytes at most). */
	uint8_t *z;
	uint32_t *zoff;
	size_t nz, zmax, zcur;
	char *zbuf;
	ZSTD_DCtx *dctx;
	struct kname {
		uint32_t idx1; /* symbol index + 1, 0 = empty */
		const char *name; /* pooled */
	} *cache;         /* NAME_CACHE entries, allocated on first use */
	/* Groups: 0 is the core kernel, then one per module, with their address span. */
	const char **group_name;
	uint64_t *group_lo, *group_hi;
	size_t ngroups, cgroups;
	strobe_itab group_ix; /* name pointer -> group */
};

typedef struct kparse {
	strobe_symbolizer *s;
	sym_kernel *k;
	size_t cap;
	int err;
} kparse;

/* The group of a module name ("[ext4]"), created when new. Names are pooled, so the pointer
 * is the key. */
static int group_of(sym_kernel *k, const char *name, uint32_t *g)
{
	if (k->ngroups && k->group_name[k->ngroups - 1] == name) { /* modules are contiguous */
		*g = (uint32_t)(k->ngroups - 1);
		return 0;
	}
	bool added;
	int r = strobe_itab_intern(&k->group_ix, &name, sizeof(name), g, &added);
	if (r < 0)
		return r;
	if (!added)
		return 0;
	if (k->ngroups >= 65536)
		return -E2BIG;
	if (k->ngroups == k->cgroups) {
		size_t nc = k->cgroups ? k->cgroups * 2 : 64;
		const char **gn = realloc(k->group_name, nc * sizeof(*gn));
		if (!gn)
			return -ENOMEM;
		k->group_name = gn;
		uint64_t *lo = realloc(k->group_lo, nc * sizeof(*lo));
		if (!lo)
			return -ENOMEM;
		k->group_lo = lo;
		uint64_t *hi = realloc(k->group_hi, nc * sizeof(*hi));
		if (!hi)
			return -ENOMEM;
		k->group_hi = hi;
		k->cgroups = nc;
	}
	k->group_name[k->ngroups] = name;
	k->group_lo[k->ngroups] = UINT64_MAX;
	k->group_hi[k->ngroups] = 0;
	*g = (uint32_t)k->ngroups++;
	return 0;
}

/* Appends name[0..len) and a NUL to the arena; its offset, or UINT32_MAX when out of memory.
 * Names are cut like the string pool cuts them, so a name reads the same either way. */
static uint32_t arena_add(sym_kernel *k, const char *name, size_t len)
{
	if (len > SYM_MAX_NAME) {
		len = SYM_MAX_NAME;
		while (len > 0 && ((unsigned char)name[len] & 0xc0) == 0x80)
			len--;
	}
	if (k->nnames + len + 1 > k->cnames) {
		size_t nc = k->cnames ? k->cnames * 2 : 64u << 10;
		while (nc < k->nnames + len + 1)
			nc *= 2;
		if (nc > UINT32_MAX)
			return UINT32_MAX;
		char *v = realloc(k->names, nc);
		if (!v)
			return UINT32_MAX;
		k->names = v;
		k->cnames = nc;
	}
	uint32_t off = (uint32_t)k->nnames;
	memcpy(k->names + off, name, len);
	k->names[off + len] = 0;
	k->nnames += len + 1;
	return off;
}

static int kallsyms_line(void *arg, const char *l, size_t len)
{
	kparse *ps = arg;
	sym_kernel *k = ps->k;
	const char *p = l, *e = l + len;
	uint64_t addr;
	if (!sym_parse_hex(&p, e, &addr) || p + 3 > e || p[0] != ' ' || p[2] != ' ')
		return 0; /* malformed: skipped */
	char type = p[1];
	p += 3;
	const char *name = p;
	while (p < e && *p != '\t' && *p != ' ' && *p != 0)
		p++;
	size_t nlen = (size_t)(p - name);
	if (!nlen || !strchr("tTwW", type) || !addr)
		return 0;
	while (p < e && (*p == '\t' || *p == ' '))
		p++;
	const char *mod = NULL;
	size_t mlen = 0;
	if (p < e && *p == '[') {
		const char *close = memchr(p, ']', (size_t)(e - p));
		if (!close)
			return 0;
		mod = p;
		mlen = (size_t)(close - p) + 1;
	}
	if (k->n == ps->cap) {
		if (ps->cap >= SYM_MAX_ENTRIES)
			return 1; /* stop: the cap is reached */
		size_t nc = ps->cap ? ps->cap * 2 : 4096;
		ksym *v = realloc(k->v, nc * sizeof(*v));
		if (!v) {
			ps->err = -ENOMEM;
			return 1;
		}
		k->v = v;
		ps->cap = nc;
	}
	const char *imod = mod ? sym_intern(&ps->s->strings, mod, mlen) : k->group_name[0];
	uint32_t g = 0, off = arena_add(k, name, nlen);
	if (off == UINT32_MAX || !imod || (mod && group_of(k, imod, &g) < 0)) {
		ps->err = -ENOMEM;
		return 1;
	}
	k->v[k->n++] = (ksym){
		.addr = addr,
		.name = off,
		.group = (uint16_t)g,
		.rank = type == 'T' ? 4 : type == 't' ? 3 : type == 'W' ? 2 : 1,
	};
	return 0;
}

/* /proc/modules: "ext4 1036288 1 - Live 0xffffffffc0a4e000". Gives each module's true end. */
static int modules_line(void *arg, const char *l, size_t len)
{
	kparse *ps = arg;
	sym_kernel *k = ps->k;
	const char *sp = memchr(l, ' ', len);
	if (!sp || sp == l || (size_t)(sp - l) > 256)
		return 0;
	char name[260];
	name[0] = '[';
	memcpy(name + 1, l, (size_t)(sp - l));
	name[1 + (sp - l)] = ']';
	size_t nlen = (size_t)(sp - l) + 2;
	uint64_t size = 0;
	const char *p = sp + 1, *e = l + len;
	for (; p < e && *p >= '0' && *p <= '9'; p++) {
		if (size > (UINT64_MAX - 9) / 10)
			return 0;
		size = size * 10 + (uint64_t)(*p - '0');
	}
	const char *last = e;
	while (last > p && last[-1] != ' ')
		last--;
	uint64_t base;
	if (!sym_parse_hex(&last, e, &base) || last != e || !base || !size || base + size < base)
		return 0;
	const char *iname = sym_intern(&ps->s->strings, name, nlen);
	for (size_t g = 1; iname && g < k->ngroups; g++)
		if (k->group_name[g] == iname) {
			if (base < k->group_lo[g])
				k->group_lo[g] = base;
			k->group_hi[g] = base + size;
		}
	return 0;
}

/* qsort has no context argument: the arena being sorted against. */
static const char *sort_names;

static int cmp_ksym(const void *a, const void *b)
{
	const ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return (int)y->rank - (int)x->rank;
	return strcmp(sort_names + x->name, sort_names + y->name);
}

static void names_unpack_free(sym_kernel *k)
{
	free(k->z);
	free(k->zoff);
	free(k->zbuf);
	free(k->cache);
	ZSTD_freeDCtx(k->dctx);
	k->z = NULL;
	k->zoff = NULL;
	k->zbuf = NULL;
	k->cache = NULL;
	k->dctx = NULL;
	k->nz = k->zmax = 0;
	k->zcur = SIZE_MAX;
}

/* Compresses the names (k->names, in k->v's order) into blocks of ZBLOCK and frees them; on
 * failure (no memory) the names stay as they are, which lookups read just as well. */
static void names_pack(sym_kernel *k)
{
	size_t nz = (k->n + ZBLOCK - 1) / ZBLOCK, cap = k->nnames / 3 + 4096, len = 0, zmax = 0;
	uint32_t *zoff = malloc((nz + 1) * sizeof(*zoff));
	uint8_t *z = malloc(cap);
	char *blk = NULL;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	for (size_t b = 0; b < nz; b++) /* the largest block, for one buffer */
		for (size_t i = b * ZBLOCK, bl = 0; i < k->n && i < (b + 1) * ZBLOCK; i++)
			if ((bl += strlen(k->names + k->v[i].name) + 1) > zmax)
				zmax = bl;
	if (!zoff || !z || !cctx || !dctx || !(blk = malloc(zmax ? zmax : 1)))
		goto fail;
	for (size_t b = 0; b < nz; b++) {
		size_t bl = 0;
		for (size_t i = b * ZBLOCK; i < k->n && i < (b + 1) * ZBLOCK; i++) {
			const char *nm = k->names + k->v[i].name;
			size_t l = strlen(nm) + 1;
			memcpy(blk + bl, nm, l);
			bl += l;
		}
		size_t bound = ZSTD_compressBound(bl);
		if (len + bound > cap) {
			size_t nc = cap * 2 > len + bound ? cap * 2 : len + bound;
			uint8_t *nzb = nc <= UINT32_MAX ? realloc(z, nc) : NULL;
			if (!nzb)
				goto fail;
			z = nzb;
			cap = nc;
		}
		size_t r = ZSTD_compressCCtx(cctx, z + len, cap - len, blk, bl, 3);
		if (ZSTD_isError(r))
			goto fail;
		zoff[b] = (uint32_t)len;
		len += r;
	}
	zoff[nz] = (uint32_t)len;
	uint8_t *fit = realloc(z, len ? len : 1);
	k->z = fit ? fit : z;
	k->zoff = zoff;
	k->nz = nz;
	k->zmax = zmax;
	k->zbuf = blk;
	k->zcur = SIZE_MAX;
	k->dctx = dctx;
	ZSTD_freeCCtx(cctx);
	free(k->names);
	k->names = NULL;
	k->nnames = k->cnames = 0;
	return;
fail:
	free(zoff);
	free(z);
	free(blk);
	ZSTD_freeCCtx(cctx);
	ZSTD_freeDCtx(dctx);
}

/* The pooled name of symbol i, or NULL (no memory, or a block that does not decompress). */
static const char *name_of(strobe_symbolizer *s, sym_kernel *k, size_t i)
{
	if (k->names) {
		const char *nm = k->names + k->v[i].name;
		return sym_intern(&s->strings, nm, strlen(nm));
	}
	if (!k->cache && !(k->cache = calloc(NAME_CACHE, sizeof(*k->cache))))
		return NULL;
	struct kname *c = &k->cache[i % NAME_CACHE];
	if (c->idx1 == i + 1)
		return c->name;
	size_t b = i / ZBLOCK;
	if (k->zcur != b) {
		size_t r = ZSTD_decompressDCtx(k->dctx, k->zbuf, k->zmax, k->z + k->zoff[b],
					       k->zoff[b + 1] - k->zoff[b]);
		if (ZSTD_isError(r)) {
			k->zcur = SIZE_MAX;
			return NULL;
		}
		k->zcur = b;
	}
	const char *nm = k->zbuf;
	for (size_t j = b * ZBLOCK; j < i; j++)
		nm += strlen(nm) + 1;
	const char *pooled = sym_intern(&s->strings, nm, strlen(nm));
	if (pooled)
		*c = (struct kname){.idx1 = (uint32_t)(i + 1), .name = pooled};
	return pooled;
}

static void kernel_clear(sym_kernel *k)
{
	free(k->v);
	k->v = NULL;
	k->n = 0;
	free(k->names);
	k->names = NULL;
	k->nnames = k->cnames = 0;
	names_unpack_free(k);
	k->ngroups = 0;
	strobe_itab_free(&k->group_ix);
	k->group_ix.fixed = sizeof(const char *);
}

static int kernel_load(strobe_symbolizer *s, sym_kernel *k)
{
	kernel_clear(k);
	k->loaded = true;
	k->loaded_ns = strobe_mono_ns();
	kparse ps = {.s = s, .k = k};
	uint32_t g;
	const char *core = sym_intern(&s->strings, CORE_NAME, strlen(CORE_NAME));
	if (!core || group_of(k, core, &g) < 0)
		return -ENOMEM;
	char *path = sym_rooted(s, "/proc/kallsyms");
	if (!path)
		return -ENOMEM;
	int r = sym_read_lines(path, kallsyms_line, &ps);
	free(path);
	if (r < 0 || ps.err < 0 || !k->n) { /* no file, or kptr_restrict zeroed every address */
		kernel_clear(k);
		return r < 0 ? r : ps.err < 0 ? ps.err : -ENOENT;
	}
	/* The core kernel's symbols come in address order, and without modules that is the
	 * whole file: then only runs sharing an address need sorting, and qsort's scratch copy
	 * of the table (2 MB) is never made. */
	sort_names = k->names;
	bool sorted = true;
	for (size_t i = 1; i < k->n && sorted; i++)
		sorted = k->v[i - 1].addr <= k->v[i].addr;
	if (!sorted) {
		qsort(k->v, k->n, sizeof(*k->v), cmp_ksym);
	} else {
		for (size_t i = 0, j; i < k->n; i = j) {
			for (j = i + 1; j < k->n && k->v[j].addr == k->v[i].addr; j++)
				;
			if (j - i > 1)
				qsort(k->v + i, j - i, sizeof(*k->v), cmp_ksym);
		}
	}
	sort_names = NULL;
	for (size_t i = 0; i < k->n; i++) {
		const ksym *x = &k->v[i];
		if (x->addr < k->group_lo[x->group])
			k->group_lo[x->group] = x->addr;
		uint64_t end = x->addr + LAST_SPAN < x->addr ? UINT64_MAX : x->addr + LAST_SPAN;
		if (end > k->group_hi[x->group])
			k->group_hi[x->group] = end;
	}
	if ((path = sym_rooted(s, "/proc/modules"))) {
		sym_read_lines(path, modules_line, &ps); /* optional: sizes only sharpen ends */
		free(path);
	}
	/* One symbol per address: the first after sorting (T before t before W before w, then
	 * by name) names it. */
	size_t m = 0;
	for (size_t i = 0; i < k->n; i++)
		if (!m || k->v[i].addr != k->v[m - 1].addr)
			k->v[m++] = k->v[i];
	k->n = m;
	/* Give back the slack of doubling: the table lives as long as the symbolizer. */
	ksym *v = realloc(k->v, m * sizeof(*v));
	if (v)
		k->v = v;
	names_pack(k);
	if (k->names) { /* not packed: give back the arena's slack at least */
		char *names = realloc(k->names, k->nnames);
		if (names)
			k->names = names;
		k->cnames = k->nnames;
	}
	return 0;
}

void sym_kernel_free(sym_kernel *k)
{
	if (!k)
		return;
	free(k->v);
	free(k->names);
	names_unpack_free(k);
	free(k->group_name);
	free(k->group_lo);
	free(k->group_hi);
	strobe_itab_free(&k->group_ix);
	free(k);
}

/* The index of the last symbol at or before addr (SIZE_MAX when none), and whether addr lies
 * inside it: a symbol ends at the next one, and never past the end of its module. */
static size_t kernel_find(const sym_kernel *k, uint64_t addr, bool *inside)
{
	size_t lo = 0, hi = k->n; /* first index with addr > addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*inside = false;
	if (!lo)
		return SIZE_MAX;
	const ksym *x = &k->v[lo - 1];
	uint64_t end = k->group_hi[x->group];
	if (lo < k->n && k->v[lo].addr < end)
		end = k->v[lo].addr;
	if (end <= x->addr)
		end = x->addr + 1;
	*inside = addr < end;
	return lo - 1;
}

int strobe_sym_kernel(strobe_symbolizer *s, uint64_t addr, strobe_sym_frame *out,
		      const char **module)
{
	if (module)
		*module = NULL;
	if (out)
		memset(out, 0, sizeof(*out));
	if (!s || s->no_kernel)
		return 0;
	if (!s->kernel && !(s->kernel = calloc(1, sizeof(*s->kernel))))
		return 0;
	sym_kernel *k = s->kernel;
	if (!k->loaded)
		kernel_load(s, k);
	bool inside;
	size_t below = kernel_find(k, addr, &inside);
	if (!inside && strobe_mono_ns() - k->loaded_ns >= RELOAD_NS) {
		kernel_load(s, k);
		below = kernel_find(k, addr, &inside);
	}
	if (inside) {
		const ksym *x = &k->v[below];
		/* Pooled: the caller may hold it across a reload of the table. */
		const char *pooled = name_of(s, k, below);
		if (!pooled)
			return 0;
		if (out)
			out->function = pooled;
		if (module)
			*module = k->group_name[x->group];
		return 1;
	}
	if (module && below != SIZE_MAX) {
		uint32_t g = k->v[below].group;
		if (addr >= k->group_lo[g] && addr < k->group_hi[g])
			*module = k->group_name[g];
	}
	return 0;
}
