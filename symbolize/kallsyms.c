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
 * rarely asked for. The always-on agent keeps it for its life and its resident size has a goal
 * (15 MB in --symbolize server mode, where this table is most of what naming costs), so:
 *  - an address is 4 bytes, its offset from the lowest one (kernel text and modules lie within
 *    a few GB of each other; 8 bytes each when they do not);
 *  - a symbol's module is not stored per symbol: symbols of one module are contiguous in
 *    address order, so runs of (first index, module) give it by bisection;
 *  - names are compressed with zstd in blocks of ZBLOCK names, in address order: 0.65 MB for
 *    the 3.1 MB of names of a Debian 12 kernel.
 * The process grows by 1.6 MB for 122,000 symbols (the arrays 1.1 MB, the rest the decompressor
 * and the name cache); it grew by 3.2 MB with 16 bytes a symbol, 5 MB with the names as text.
 * A name costs the few microseconds its block takes to decompress; a small cache
 * by symbol keeps the names asked for again and again (the same kernel frames, in profile after
 * profile) from decompressing twice. A symbol's end is worked out at lookup from its successor.
 * Only a name actually returned is copied into the symbolizer's string pool, where it outlives
 * reloads of the table. Module names have a pool of their own, so that the table (and the
 * module names handed out) outlive strobe_symbolizer_renew, which empties the symbolizer's pool:
 * the agent renews its symbolizer every 30 minutes, and rebuilding this table then was its peak.
 *
 * The build is streamed, so that its peak stays low: /proc/kallsyms is read
 * once, and each name is compressed with its block as it is read (in the file's order); only
 * addresses, ranks and file positions are held per symbol (16 bytes) while they are sorted.
 * The names are then moved into address order one block at a time (the core kernel is listed
 * in address order already, so its blocks are read once each). Measured on this host's 122,000
 * symbols: 4.1 MB at the peak of a load (VmHWM growth), against 6.0 MB when the names were held
 * as text. The build's freed heap is handed back at once (malloc_trim).
 *
 * Without CAP_SYSLOG (kptr_restrict) every address in the file reads as zero: the kernel is
 * then "unavailable" and addresses are left unnamed, not all named after one symbol.
 * Modules load after we read the file, so a miss re-reads it, at most once a minute.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "internal.h"
#include "strobe/clock.h"

#define LAST_SPAN 4096u
#define RELOAD_NS (60ll * 1000000000ll)
#define CORE_NAME "[kernel.kallsyms]"
#define ZBLOCK 256        /* names per compressed block (about 6.5 KB of names) */
#define ZLEVEL 3
#define NAME_CACHE 2048u  /* names remembered by symbol index, direct-mapped */

/* Names, NUL-terminated, in blocks of ZBLOCK: block b is the zstd frame z[zoff[b] ..
 * zoff[b+1]), at most zmax bytes once decompressed. */
typedef struct zblocks {
	uint8_t *z;
	size_t len, cap;
	uint32_t *zoff;
	size_t nz, czoff;
	size_t zmax;
} zblocks;

/* Fills a zblocks name by name: the open block, and the compressor. */
typedef struct zwriter {
	zblocks *zb;
	char *blk;
	size_t blen, bcap;
	unsigned count;
	ZSTD_CCtx *cctx;
} zwriter;

/* Reads names back, one decompressed block at a time; pos is name `at` of block cur, so that
 * names asked for in order cost one step each. */
typedef struct zreader {
	const zblocks *zb;
	ZSTD_DCtx *dctx;
	char *buf;
	size_t cur, at;
	const char *pos, *end;
} zreader;

struct sym_kernel {
	bool loaded;
	int64_t loaded_ns;
	size_t n;
	uint64_t base;
	uint32_t *off;    /* addresses, base + off[i], sorted, one symbol per address; */
	uint64_t *addr64; /* or whole, when they span more than 4 GB */
	/* symbol i belongs to group run_group[r] for the last run r with run_at[r] <= i */
	uint32_t *run_at;
	uint16_t *run_group;
	size_t nruns;
	zblocks names; /* in address order */
	zreader rd;
	struct kname {
		uint32_t idx1; /* symbol index + 1, 0 = empty */
		const char *name; /* pooled */
	} *cache;         /* NAME_CACHE entries, allocated on first use */
	/* Groups: 0 is the core kernel, then one per module, with their address span. */
	const char **group_name;
	uint64_t *group_lo, *group_hi;
	size_t ngroups, cgroups;
	strobe_itab group_ix; /* name pointer -> group */
	/* The module names, pooled here rather than in the symbolizer's pool: the table and they
	 * outlive strobe_symbolizer_renew, which empties that one. */
	sym_strpool gnames;
};

/* A symbol while the table is built: rank orders symbols that share an address, fidx is its
 * name's place in the file. */
typedef struct kbsym {
	uint64_t addr;
	uint32_t fidx;
	uint16_t group;
	uint16_t rank;
} kbsym;

typedef struct kparse {
	strobe_symbolizer *s;
	sym_kernel *k;
	kbsym *v;
	size_t n, cap;
	zblocks fz; /* names in the file's order */
	zwriter fw;
	int err;
} kparse;

static void zb_free(zblocks *zb)
{
	free(zb->z);
	free(zb->zoff);
	*zb = (zblocks){0};
}

static int zw_flush(zwriter *w)
{
	zblocks *zb = w->zb;
	if (!w->count)
		return 0;
	if (zb->nz + 2 > zb->czoff) {
		size_t nc = zb->czoff ? zb->czoff * 2 : 64;
		uint32_t *o = realloc(zb->zoff, nc * sizeof(*o));
		if (!o)
			return -ENOMEM;
		zb->zoff = o;
		zb->czoff = nc;
	}
	size_t bound = ZSTD_compressBound(w->blen);
	if (zb->len + bound > zb->cap) {
		size_t nc = zb->cap ? zb->cap * 2 : 64u << 10;
		while (nc < zb->len + bound)
			nc *= 2;
		uint8_t *z = nc <= UINT32_MAX ? realloc(zb->z, nc) : NULL;
		if (!z)
			return -ENOMEM;
		zb->z = z;
		zb->cap = nc;
	}
	if (!w->cctx && !(w->cctx = ZSTD_createCCtx()))
		return -ENOMEM;
	size_t r = ZSTD_compressCCtx(w->cctx, zb->z + zb->len, zb->cap - zb->len, w->blk, w->blen,
				     ZLEVEL);
	if (ZSTD_isError(r))
		return -ENOMEM;
	zb->zoff[zb->nz++] = (uint32_t)zb->len;
	zb->len += r;
	zb->zoff[zb->nz] = (uint32_t)zb->len;
	if (w->blen > zb->zmax)
		zb->zmax = w->blen;
	w->blen = 0;
	w->count = 0;
	return 0;
}

/* Appends name[0..len) to the open block, cut like the string pool cuts names (so that a name
 * reads the same either way); the block is compressed when it has ZBLOCK names. */
static int zw_add(zwriter *w, const char *name, size_t len)
{
	if (len > SYM_MAX_NAME) {
		len = SYM_MAX_NAME;
		while (len > 0 && ((unsigned char)name[len] & 0xc0) == 0x80)
			len--;
	}
	if (w->blen + len + 1 > w->bcap) {
		size_t nc = w->bcap ? w->bcap * 2 : 16u << 10;
		while (nc < w->blen + len + 1)
			nc *= 2;
		char *b = realloc(w->blk, nc);
		if (!b)
			return -ENOMEM;
		w->blk = b;
		w->bcap = nc;
	}
	memcpy(w->blk + w->blen, name, len);
	w->blk[w->blen + len] = 0;
	w->blen += len + 1;
	return ++w->count == ZBLOCK ? zw_flush(w) : 0;
}

/* The last block, then the compressor and the open block are freed and the blocks fitted. */
static int zw_finish(zwriter *w)
{
	int r = zw_flush(w);
	ZSTD_freeCCtx(w->cctx);
	free(w->blk);
	w->cctx = NULL;
	w->blk = NULL;
	w->blen = w->bcap = w->count = 0;
	zblocks *zb = w->zb;
	if (r == 0 && zb->z) {
		uint8_t *z = realloc(zb->z, zb->len ? zb->len : 1);
		if (z)
			zb->z = z;
		zb->cap = zb->len;
	}
	return r;
}

static void zr_free(zreader *r)
{
	ZSTD_freeDCtx(r->dctx);
	free(r->buf);
	*r = (zreader){.cur = SIZE_MAX};
}

/* Name i (NUL-terminated, valid until the next call), or NULL: no memory, or a block that does
 * not decompress. */
static const char *zr_name(zreader *r, size_t i)
{
	const zblocks *zb = r->zb;
	size_t b = i / ZBLOCK, j = i % ZBLOCK;
	if (b >= zb->nz)
		return NULL;
	if (r->cur != b) {
		if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
			return NULL;
		if (!r->buf && !(r->buf = malloc(zb->zmax ? zb->zmax : 1)))
			return NULL;
		size_t got = ZSTD_decompressDCtx(r->dctx, r->buf, zb->zmax, zb->z + zb->zoff[b],
						 zb->zoff[b + 1] - zb->zoff[b]);
		if (ZSTD_isError(got) || !got || r->buf[got - 1]) {
			r->cur = SIZE_MAX;
			return NULL;
		}
		r->cur = b;
		r->at = 0;
		r->pos = r->buf;
		r->end = r->buf + got;
	}
	if (j < r->at) {
		r->at = 0;
		r->pos = r->buf;
	}
	for (; r->at < j; r->at++) {
		r->pos += strlen(r->pos) + 1;
		if (r->pos >= r->end) { /* fewer names than asked for: not a block of ours */
			r->cur = SIZE_MAX;
			return NULL;
		}
	}
	return r->pos;
}

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
	if (ps->n == ps->cap) {
		if (ps->cap >= SYM_MAX_ENTRIES)
			return 1; /* stop: the cap is reached */
		size_t nc = ps->cap ? ps->cap * 2 : 4096;
		kbsym *v = realloc(ps->v, nc * sizeof(*v));
		if (!v) {
			ps->err = -ENOMEM;
			return 1;
		}
		ps->v = v;
		ps->cap = nc;
	}
	const char *imod = mod ? sym_intern(&k->gnames, mod, mlen) : k->group_name[0];
	uint32_t g = 0;
	if (!imod || (mod && group_of(k, imod, &g) < 0) || zw_add(&ps->fw, name, nlen) < 0) {
		ps->err = -ENOMEM;
		return 1;
	}
	ps->v[ps->n] = (kbsym){
		.addr = addr,
		.fidx = (uint32_t)ps->n,
		.group = (uint16_t)g,
		.rank = type == 'T' ? 4 : type == 't' ? 3 : type == 'W' ? 2 : 1,
	};
	ps->n++;
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
	const char *iname = sym_intern(&k->gnames, name, nlen);
	for (size_t g = 1; iname && g < k->ngroups; g++)
		if (k->group_name[g] == iname) {
			if (base < k->group_lo[g])
				k->group_lo[g] = base;
			k->group_hi[g] = base + size;
		}
	return 0;
}

/* The order of the table: by address, then T before t before W before w, then by name (read
 * back from the file-order blocks: only symbols sharing an address and a type get that far). */
typedef struct ksort {
	zreader rd;
	char a[SYM_MAX_NAME + 1];
} ksort;

static int cmp_kbsym(const void *pa, const void *pb, void *arg)
{
	const kbsym *x = pa, *y = pb;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return (int)y->rank - (int)x->rank;
	ksort *ks = arg;
	const char *na = zr_name(&ks->rd, x->fidx);
	if (!na)
		return 0;
	size_t la = strlen(na);
	memcpy(ks->a, na, la + 1); /* the next read may replace the block */
	const char *nb = zr_name(&ks->rd, y->fidx);
	return nb ? strcmp(ks->a, nb) : 0;
}

/* Sorts v: the core kernel comes in address order and modules after it, so the sorted prefix
 * only has its runs of equal addresses sorted, the rest is sorted alone and merged in (scratch:
 * the rest only, not a copy of the whole table). */
static void sort_table(kbsym *v, size_t n, ksort *ks)
{
	size_t p = 1;
	while (p < n && v[p - 1].addr <= v[p].addr)
		p++;
	if (p > n)
		p = n;
	for (size_t i = 0, j; i < p; i = j) {
		for (j = i + 1; j < p && v[j].addr == v[i].addr; j++)
			;
		if (j - i > 1)
			qsort_r(v + i, j - i, sizeof(*v), cmp_kbsym, ks);
	}
	if (p == n)
		return;
	size_t m = n - p;
	kbsym *tail = malloc(m * sizeof(*tail));
	if (!tail) {
		qsort_r(v, n, sizeof(*v), cmp_kbsym, ks);
		return;
	}
	qsort_r(v + p, m, sizeof(*v), cmp_kbsym, ks);
	memcpy(tail, v + p, m * sizeof(*tail));
	size_t i = p, j = m, w = n; /* merged from the back: v[w..n) is done */
	while (j > 0) {
		if (i > 0 && cmp_kbsym(&v[i - 1], &tail[j - 1], ks) > 0)
			v[--w] = v[--i];
		else
			v[--w] = tail[--j];
	}
	free(tail);
}

static void kernel_clear(sym_kernel *k)
{
	free(k->off);
	free(k->addr64);
	free(k->run_at);
	free(k->run_group);
	k->off = NULL;
	k->addr64 = NULL;
	k->run_at = NULL;
	k->run_group = NULL;
	k->n = k->nruns = 0;
	zb_free(&k->names);
	zr_free(&k->rd);
	free(k->cache);
	k->cache = NULL;
	k->ngroups = 0;
	strobe_itab_free(&k->group_ix);
	k->group_ix.fixed = sizeof(const char *);
}

static inline uint64_t addr_at(const sym_kernel *k, size_t i)
{
	return k->off ? k->base + k->off[i] : k->addr64[i];
}

static uint32_t group_at(const sym_kernel *k, size_t i)
{
	size_t lo = 0, hi = k->nruns; /* first run starting after i */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->run_at[mid] <= i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? k->run_group[lo - 1] : 0;
}

/* The table from the sorted, deduplicated v[0..n): the names moved into address order, one
 * block of the file's order read at a time (then those blocks are freed), then the addresses
 * and the group runs. */
static int table_from(sym_kernel *k, const kbsym *v, size_t n, zreader *frd, zblocks *fz)
{
	zwriter w = {.zb = &k->names};
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		const char *nm = zr_name(frd, v[i].fidx);
		r = nm ? zw_add(&w, nm, strlen(nm)) : -ENOMEM;
	}
	int f = zw_finish(&w);
	zr_free(frd);
	zb_free(fz);
	if (r < 0 || f < 0)
		return r < 0 ? r : f;
	k->base = v[0].addr;
	if (v[n - 1].addr - k->base <= UINT32_MAX) {
		if (!(k->off = malloc(n * sizeof(*k->off))))
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			k->off[i] = (uint32_t)(v[i].addr - k->base);
	} else {
		if (!(k->addr64 = malloc(n * sizeof(*k->addr64))))
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			k->addr64[i] = v[i].addr;
	}
	size_t nruns = 0;
	for (size_t i = 0; i < n; i++)
		nruns += !i || v[i].group != v[i - 1].group;
	k->run_at = malloc(nruns * sizeof(*k->run_at));
	k->run_group = malloc(nruns * sizeof(*k->run_group));
	if (!k->run_at || !k->run_group)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!i || v[i].group != v[i - 1].group) {
			k->run_at[k->nruns] = (uint32_t)i;
			k->run_group[k->nruns++] = v[i].group;
		}
	k->n = n;
	return 0;
}

static int kernel_load(strobe_symbolizer *s, sym_kernel *k)
{
	kernel_clear(k);
	k->loaded = true;
	k->loaded_ns = strobe_mono_ns();
	kparse ps = {.s = s, .k = k};
	ps.fw.zb = &ps.fz;
	uint32_t g;
	const char *core = sym_intern(&k->gnames, CORE_NAME, strlen(CORE_NAME));
	if (!core || group_of(k, core, &g) < 0)
		return -ENOMEM;
	char *path = sym_rooted(s, "/proc/kallsyms");
	if (!path)
		return -ENOMEM;
	int r = sym_read_lines(path, kallsyms_line, &ps);
	free(path);
	int f = zw_finish(&ps.fw);
	if (r < 0 || ps.err < 0 || f < 0 || !ps.n) { /* no file, or kptr_restrict zeroed every address */
		r = r < 0 ? r : ps.err < 0 ? ps.err : f < 0 ? f : -ENOENT;
		goto out;
	}
	ksort *ks = malloc(sizeof(*ks));
	if (!ks) {
		r = -ENOMEM;
		goto out;
	}
	ks->rd = (zreader){.zb = &ps.fz, .cur = SIZE_MAX};
	sort_table(ps.v, ps.n, ks);
	for (size_t i = 0; i < ps.n; i++) {
		const kbsym *x = &ps.v[i];
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
	for (size_t i = 0; i < ps.n; i++)
		if (!m || ps.v[i].addr != ps.v[m - 1].addr)
			ps.v[m++] = ps.v[i];
	r = table_from(k, ps.v, m, &ks->rd, &ps.fz);
	free(ks);
out:
	free(ps.v);
	zb_free(&ps.fz);
	if (r < 0)
		kernel_clear(k);
	else
		k->rd = (zreader){.zb = &k->names, .cur = SIZE_MAX};
	/* The build's arrays were freed, but glibc keeps freed heap in its arenas: give it back now,
	 * or the agent carries it until its next interval's trim. */
	malloc_trim(0);
	return r;
}

void sym_kernel_free(sym_kernel *k)
{
	if (!k)
		return;
	kernel_clear(k);
	free(k->group_name);
	free(k->group_lo);
	free(k->group_hi);
	sym_strpool_free(&k->gnames);
	free(k);
}

void sym_kernel_renew(sym_kernel *k)
{
	free(k->cache); /* its names were pooled in the renewed pool */
	k->cache = NULL;
}

/* The pooled name of symbol i, or NULL (no memory, or a block that does not decompress). */
static const char *name_of(strobe_symbolizer *s, sym_kernel *k, size_t i)
{
	if (!k->cache && !(k->cache = calloc(NAME_CACHE, sizeof(*k->cache))))
		return NULL;
	struct kname *c = &k->cache[i % NAME_CACHE];
	if (c->idx1 == i + 1)
		return c->name;
	const char *nm = zr_name(&k->rd, i);
	const char *pooled = nm ? sym_intern(&s->strings, nm, strlen(nm)) : NULL;
	if (pooled)
		*c = (struct kname){.idx1 = (uint32_t)(i + 1), .name = pooled};
	return pooled;
}

/* The index of the last symbol at or before addr (SIZE_MAX when none), and whether addr lies
 * inside it: a symbol ends at the next one, and never past the end of its module. */
static size_t kernel_find(const sym_kernel *k, uint64_t addr, bool *inside)
{
	size_t lo = 0, hi = k->n; /* first index with addr > addr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr_at(k, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*inside = false;
	if (!lo)
		return SIZE_MAX;
	uint64_t at = addr_at(k, lo - 1);
	uint64_t end = k->group_hi[group_at(k, lo - 1)];
	if (lo < k->n && addr_at(k, lo) < end)
		end = addr_at(k, lo);
	if (end <= at)
		end = at + 1;
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
		/* Pooled: the caller may hold it across a reload of the table. */
		const char *pooled = name_of(s, k, below);
		if (!pooled)
			return 0;
		if (out)
			out->function = pooled;
		if (module)
			*module = k->group_name[group_at(k, below)];
		return 1;
	}
	if (module && below != SIZE_MAX) {
		uint32_t g = group_at(k, below);
		if (addr >= k->group_lo[g] && addr < k->group_hi[g])
			*module = k->group_name[g];
	}
	return 0;
}
