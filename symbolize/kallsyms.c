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
 * The table keeps addresses only, and names just the symbols that are hit. The always-on agent
 * keeps it for its life and has a resident-size goal (15 MB in --symbolize=server mode with 200
 * processes), while a Debian 12 kernel lists about 122,000 text symbols with 3.1 MB of names,
 * of which a profile names a few hundred. So an address is 4 bytes (its offset from the start
 * of its segment: a new segment starts wherever offsets would pass 32 bits), a module is a run
 * of symbols, and a name is read again from /proc/kallsyms when a symbol is first hit, then
 * kept (pooled, by symbol index). Reading the file again costs what loading it did (tens of ms
 * of the kernel's time), so callers that name many frames at once ask for all their addresses
 * first (strobe_sym_kernel_prefetch: one read for all the names not known yet); a lone miss
 * reads the file for itself. The table was 2.6 MB with the names compressed (and peaked at
 * about 9 MB while it was built); it is now 0.5 MB and peaks at 1.7 MB while loading.
 *
 * A symbol shares its address with others (aliases): the one named is the first by type (T,
 * then t, W, w) and then by name, chosen when its name is read.
 *
 * Without CAP_SYSLOG (kptr_restrict) every address in the file reads as zero: the kernel is
 * then "unavailable" and addresses are left unnamed, not all named after one symbol.
 * Modules load after we read the file, so a miss re-reads it, at most once a minute; a name
 * whose address is gone when the file is read again (a module unloaded) stays unnamed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "strobe/clock.h"

#define LAST_SPAN 4096u
#define RELOAD_NS (60ll * 1000000000ll)
#define CORE_NAME "[kernel.kallsyms]"
#define NAMES_MAX (1u << 18) /* slots of names kept by symbol index (half used at most; past
					that the table starts again): every symbol of a big kernel */

/* A stretch of symbols whose addresses are offsets (32 bits) from base. */
typedef struct kseg {
	uint64_t base;
	uint32_t first; /* index of its first symbol */
} kseg;

/* A stretch of symbols of one group (the core kernel, or a module). */
typedef struct krun {
	uint32_t first;
	uint32_t group;
} krun;

struct sym_kernel {
	bool loaded;
	int64_t loaded_ns;
	uint32_t *off; /* sorted by address, one symbol per address: address - its segment's base */
	size_t n;
	kseg *seg;
	size_t nseg;
	krun *run;
	size_t nrun;
	/* Names read so far: open addressing by symbol index (idx1 = index + 1, 0 empty). */
	struct kname {
		uint32_t idx1;
		const char *name; /* pooled */
	} *names;
	size_t nnames, cnames;
	uint64_t rereads; /* reads of the file for names (for tests) */
	/* Groups: 0 is the core kernel, then one per module, with their address span. */
	const char **group_name;
	uint64_t *group_lo, *group_hi;
	size_t ngroups, cgroups;
	strobe_itab group_ix; /* name pointer -> group */
};

/* While loading: every text symbol's address and group, in file order. */
typedef struct kparse {
	strobe_symbolizer *s;
	sym_kernel *k;
	uint64_t *addr;
	uint32_t *group;
	size_t n, cap;
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

/* A kallsyms line: its address, type rank (T 4, t 3, W 2, w 1; 0 not text), name and module
 * (without its brackets' content checked). False when malformed. */
static bool parse_line(const char *l, size_t len, uint64_t *addr, int *rank, const char **name,
		       size_t *nlen, const char **mod, size_t *mlen)
{
	const char *p = l, *e = l + len;
	if (!sym_parse_hex(&p, e, addr) || p + 3 > e || p[0] != ' ' || p[2] != ' ')
		return false;
	char type = p[1];
	p += 3;
	*name = p;
	while (p < e && *p != '\t' && *p != ' ' && *p != 0)
		p++;
	*nlen = (size_t)(p - *name);
	*rank = type == 'T' ? 4 : type == 't' ? 3 : type == 'W' ? 2 : type == 'w' ? 1 : 0;
	if (!*nlen || !*rank || !*addr)
		return false;
	while (p < e && (*p == '\t' || *p == ' '))
		p++;
	*mod = NULL;
	*mlen = 0;
	if (p < e && *p == '[') {
		const char *close = memchr(p, ']', (size_t)(e - p));
		if (!close)
			return false;
		*mod = p;
		*mlen = (size_t)(close - p) + 1;
	}
	return true;
}

static int kallsyms_line(void *arg, const char *l, size_t len)
{
	kparse *ps = arg;
	sym_kernel *k = ps->k;
	uint64_t addr;
	int rank;
	const char *name, *mod;
	size_t nlen, mlen;
	if (!parse_line(l, len, &addr, &rank, &name, &nlen, &mod, &mlen))
		return 0; /* malformed, or not text: skipped */
	if (ps->n == ps->cap) {
		if (ps->cap >= SYM_MAX_ENTRIES)
			return 1; /* stop: the cap is reached */
		size_t nc = ps->cap ? ps->cap * 2 : 4096;
		uint64_t *a = realloc(ps->addr, nc * sizeof(*a));
		if (a)
			ps->addr = a;
		uint32_t *g = a ? realloc(ps->group, nc * sizeof(*g)) : NULL;
		if (!g) {
			ps->err = -ENOMEM;
			return 1;
		}
		ps->group = g;
		ps->cap = nc;
	}
	const char *imod = mod ? sym_intern(&ps->s->strings, mod, mlen) : k->group_name[0];
	uint32_t g = 0;
	if (!imod || (mod && group_of(k, imod, &g) < 0)) {
		ps->err = -ENOMEM;
		return 1;
	}
	ps->addr[ps->n] = addr;
	ps->group[ps->n++] = g;
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

/* qsort has no context argument: the addresses an index array is sorted by. */
static const uint64_t *sort_addr;

static int cmp_idx(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (sort_addr[x] != sort_addr[y])
		return sort_addr[x] < sort_addr[y] ? -1 : 1;
	return x < y ? -1 : x > y; /* file order among aliases: their group is the first's */
}

static void names_clear(sym_kernel *k)
{
	free(k->names);
	k->names = NULL;
	k->nnames = k->cnames = 0;
}

static void kernel_clear(sym_kernel *k)
{
	free(k->off);
	free(k->seg);
	free(k->run);
	k->off = NULL;
	k->seg = NULL;
	k->run = NULL;
	k->n = k->nseg = k->nrun = 0;
	names_clear(k);
	k->ngroups = 0;
	strobe_itab_free(&k->group_ix);
	k->group_ix.fixed = sizeof(const char *);
}

/* The compact table from the parsed symbols (sorted by address, aliases dropped); -ENOMEM. */
static int kernel_build(sym_kernel *k, kparse *ps)
{
	size_t n = ps->n;
	bool sorted = true;
	for (size_t i = 1; i < n && sorted; i++)
		sorted = ps->addr[i - 1] <= ps->addr[i];
	uint32_t *order = NULL;
	if (!sorted) { /* modules list their symbols in symbol-table order */
		if (!(order = malloc(n * sizeof(*order))))
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			order[i] = (uint32_t)i;
		sort_addr = ps->addr;
		qsort(order, n, sizeof(*order), cmp_idx);
		sort_addr = NULL;
	}
	size_t m = 0, cseg = 0, crun = 0;
	k->off = malloc(n * sizeof(*k->off));
	if (!k->off) {
		free(order);
		return -ENOMEM;
	}
	uint64_t prev = 0;
	for (size_t j = 0; j < n; j++) {
		size_t i = order ? order[j] : j;
		uint64_t a = ps->addr[i];
		uint32_t g = ps->group[i];
		if (m && a == prev)
			continue; /* an alias: named when its name is read */
		if (!k->nseg || a - k->seg[k->nseg - 1].base > UINT32_MAX) {
			if (k->nseg == cseg) {
				cseg = cseg ? 2 * cseg : 4;
				kseg *v = realloc(k->seg, cseg * sizeof(*v));
				if (!v)
					goto nomem;
				k->seg = v;
			}
			k->seg[k->nseg++] = (kseg){.base = a, .first = (uint32_t)m};
		}
		if (!k->nrun || k->run[k->nrun - 1].group != g) {
			if (k->nrun == crun) {
				crun = crun ? 2 * crun : 16;
				krun *v = realloc(k->run, crun * sizeof(*v));
				if (!v)
					goto nomem;
				k->run = v;
			}
			k->run[k->nrun++] = (krun){.first = (uint32_t)m, .group = g};
		}
		k->off[m++] = (uint32_t)(a - k->seg[k->nseg - 1].base);
		prev = a;
		if (a < k->group_lo[g])
			k->group_lo[g] = a;
		uint64_t end = a + LAST_SPAN < a ? UINT64_MAX : a + LAST_SPAN;
		if (end > k->group_hi[g])
			k->group_hi[g] = end;
	}
	free(order);
	k->n = m;
	uint32_t *fit = realloc(k->off, (m ? m : 1) * sizeof(*fit));
	if (fit)
		k->off = fit;
	return 0;
nomem:
	free(order);
	return -ENOMEM;
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
	if (r == 0 && ps.err == 0 && ps.n)
		r = kernel_build(k, &ps);
	free(ps.addr);
	free(ps.group);
	if (r < 0 || ps.err < 0 || !k->n) { /* no file, or kptr_restrict zeroed every address */
		kernel_clear(k);
		return r < 0 ? r : ps.err < 0 ? ps.err : -ENOENT;
	}
	if ((path = sym_rooted(s, "/proc/modules"))) {
		sym_read_lines(path, modules_line, &ps); /* optional: sizes only sharpen ends */
		free(path);
	}
	return 0;
}

void sym_kernel_free(sym_kernel *k)
{
	if (!k)
		return;
	free(k->off);
	free(k->seg);
	free(k->run);
	names_clear(k);
	free(k->group_name);
	free(k->group_lo);
	free(k->group_hi);
	strobe_itab_free(&k->group_ix);
	free(k);
}

/* The segment of symbol i. */
static const kseg *seg_of(const sym_kernel *k, size_t i)
{
	size_t lo = 0, hi = k->nseg; /* first segment starting after i */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->seg[mid].first <= i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return &k->seg[lo - 1];
}

static uint64_t addr_of(const sym_kernel *k, size_t i)
{
	return seg_of(k, i)->base + k->off[i];
}

static uint32_t group_at(const sym_kernel *k, size_t i)
{
	size_t lo = 0, hi = k->nrun;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k->run[mid].first <= i)
			lo = mid + 1;
		else
			hi = mid;
	}
	return k->run[lo - 1].group;
}

/* The index of the last symbol at or before addr (SIZE_MAX when none), and whether addr lies
 * inside it: a symbol ends at the next one, and never past the end of its module. */
static size_t kernel_find(const sym_kernel *k, uint64_t addr, bool *inside)
{
	*inside = false;
	size_t sl = 0, sh = k->nseg; /* first segment with base > addr */
	while (sl < sh) {
		size_t mid = sl + (sh - sl) / 2;
		if (k->seg[mid].base <= addr)
			sl = mid + 1;
		else
			sh = mid;
	}
	if (!sl)
		return SIZE_MAX;
	const kseg *sg = &k->seg[sl - 1];
	uint64_t rel = addr - sg->base;
	size_t lo = sg->first, hi = sl < k->nseg ? k->seg[sl].first : k->n;
	if (rel > UINT32_MAX) {
		lo = hi; /* past every offset of the segment: its last symbol */
	} else {
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (k->off[mid] <= rel)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	size_t at = lo - 1; /* lo > sg->first: the segment's first symbol is at its base */
	uint64_t start = sg->base + k->off[at];
	uint64_t end = k->group_hi[group_at(k, at)];
	if (at + 1 < k->n) {
		uint64_t next = addr_of(k, at + 1);
		if (next < end)
			end = next;
	}
	if (end <= start)
		end = start + 1;
	*inside = addr < end;
	return at;
}

static struct kname *name_slot(sym_kernel *k, size_t i)
{
	if (!k->cnames)
		return NULL;
	size_t mask = k->cnames - 1, h = (i * 0x9E3779B97F4A7C15ull) >> 20;
	for (size_t j = h & mask;; j = (j + 1) & mask)
		if (!k->names[j].idx1 || k->names[j].idx1 == i + 1)
			return &k->names[j];
}

static const char *name_known(sym_kernel *k, size_t i)
{
	struct kname *e = name_slot(k, i);
	return e && e->idx1 ? e->name : NULL;
}

static void name_keep(sym_kernel *k, size_t i, const char *pooled)
{
	if (k->nnames + 1 > k->cnames / 2) { /* grow (or, past the bound, start again) */
		size_t nc = k->cnames ? 2 * k->cnames : 1024;
		if (nc > NAMES_MAX)
			nc = NAMES_MAX;
		struct kname *old = k->names;
		size_t oc = k->cnames;
		struct kname *v = calloc(nc, sizeof(*v));
		if (!v)
			return;
		k->names = v;
		k->cnames = nc;
		k->nnames = 0;
		for (size_t j = 0; j < oc && k->nnames + 1 <= nc / 2; j++)
			if (old[j].idx1) {
				*name_slot(k, old[j].idx1 - 1) = old[j];
				k->nnames++;
			}
		free(old);
		if (k->nnames + 1 > k->cnames / 2) {
			memset(k->names, 0, k->cnames * sizeof(*k->names));
			k->nnames = 0;
		}
	}
	struct kname *e = name_slot(k, i);
	if (!e->idx1)
		k->nnames++;
	*e = (struct kname){.idx1 = (uint32_t)(i + 1), .name = pooled};
}

/* Reading the file again for the names of some symbols: their addresses (sorted), and for each
 * the best alias seen so far. */
typedef struct kwant {
	uint64_t addr;
	uint32_t idx;
	int rank;
	char *name;
} kwant;

typedef struct kreread {
	kwant *w;
	size_t n;
	int err;
} kreread;

static int want_line(void *arg, const char *l, size_t len)
{
	kreread *rr = arg;
	uint64_t addr;
	int rank;
	const char *name, *mod;
	size_t nlen, mlen;
	if (!parse_line(l, len, &addr, &rank, &name, &nlen, &mod, &mlen))
		return 0;
	size_t lo = 0, hi = rr->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rr->w[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == rr->n || rr->w[lo].addr != addr)
		return 0;
	kwant *w = &rr->w[lo];
	if (nlen > SYM_MAX_NAME) { /* cut as the string pool cuts, so aliases compare as pooled */
		nlen = SYM_MAX_NAME;
		while (nlen > 0 && ((unsigned char)name[nlen] & 0xc0) == 0x80)
			nlen--;
	}
	if (w->name) {
		if (rank < w->rank)
			return 0;
		if (rank == w->rank) {
			size_t ol = strlen(w->name);
			int c = memcmp(name, w->name, nlen < ol ? nlen : ol);
			if (c > 0 || (c == 0 && nlen >= ol))
				return 0;
		}
	}
	char *copy = malloc(nlen + 1);
	if (!copy) {
		rr->err = -ENOMEM;
		return 1;
	}
	memcpy(copy, name, nlen);
	copy[nlen] = 0;
	free(w->name);
	w->name = copy;
	w->rank = rank;
	return 0;
}

static int by_want_addr(const void *a, const void *b)
{
	const kwant *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Names symbols idx[0..n) (not known yet) with one read of the file. */
static int read_names(strobe_symbolizer *s, sym_kernel *k, const uint32_t *idx, size_t n)
{
	if (!n)
		return 0;
	kreread rr = {.w = calloc(n, sizeof(kwant)), .n = n};
	if (!rr.w)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		rr.w[i] = (kwant){.addr = addr_of(k, idx[i]), .idx = idx[i]};
	qsort(rr.w, n, sizeof(*rr.w), by_want_addr);
	char *path = sym_rooted(s, "/proc/kallsyms");
	int r = path ? sym_read_lines(path, want_line, &rr) : -ENOMEM;
	free(path);
	k->rereads++;
	for (size_t i = 0; i < n; i++) {
		if (rr.w[i].name && r == 0 && rr.err == 0) {
			const char *pooled = sym_intern(&s->strings, rr.w[i].name, strlen(rr.w[i].name));
			if (pooled)
				name_keep(k, rr.w[i].idx, pooled);
		}
		free(rr.w[i].name);
	}
	free(rr.w);
	return r < 0 ? r : rr.err;
}

static sym_kernel *kernel_of(strobe_symbolizer *s)
{
	if (!s || s->no_kernel)
		return NULL;
	if (!s->kernel && !(s->kernel = calloc(1, sizeof(*s->kernel))))
		return NULL;
	if (!s->kernel->loaded)
		kernel_load(s, s->kernel);
	return s->kernel;
}

/* The symbol containing addr (reloading the table at most once a minute when none does), or
 * SIZE_MAX; *below the last symbol at or before it. */
static size_t kernel_at(strobe_symbolizer *s, sym_kernel *k, uint64_t addr, size_t *below)
{
	bool inside;
	*below = kernel_find(k, addr, &inside);
	if (!inside && strobe_mono_ns() - k->loaded_ns >= RELOAD_NS) {
		kernel_load(s, k);
		*below = kernel_find(k, addr, &inside);
	}
	return inside ? *below : SIZE_MAX;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int strobe_sym_kernel_prefetch(strobe_symbolizer *s, const uint64_t *addrs, size_t n)
{
	sym_kernel *k = kernel_of(s);
	if (!k || !k->n || !n)
		return 0;
	uint32_t *idx = malloc(n * sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		size_t below, at = kernel_at(s, k, addrs[i], &below);
		if (at != SIZE_MAX && !name_known(k, at))
			idx[m++] = (uint32_t)at;
	}
	/* each symbol once */
	size_t u = 0;
	qsort(idx, m, sizeof(*idx), cmp_u32);
	for (size_t i = 0; i < m; i++)
		if (!u || idx[i] != idx[u - 1])
			idx[u++] = idx[i];
	int r = read_names(s, k, idx, u);
	free(idx);
	return r;
}

uint64_t strobe_sym_kernel_rereads(const strobe_symbolizer *s)
{
	return s && s->kernel ? s->kernel->rereads : 0;
}

int strobe_sym_kernel(strobe_symbolizer *s, uint64_t addr, strobe_sym_frame *out,
		      const char **module)
{
	if (module)
		*module = NULL;
	if (out)
		memset(out, 0, sizeof(*out));
	sym_kernel *k = kernel_of(s);
	if (!k || !k->n)
		return 0;
	size_t below, at = kernel_at(s, k, addr, &below);
	if (at != SIZE_MAX) {
		/* Pooled: the caller may hold it across a reload of the table. */
		const char *pooled = name_known(k, at);
		if (!pooled) {
			uint32_t i = (uint32_t)at;
			read_names(s, k, &i, 1);
			pooled = name_known(k, at);
		}
		if (!pooled)
			return 0;
		if (out)
			out->function = pooled;
		if (module)
			*module = k->group_name[group_at(k, at)];
		return 1;
	}
	if (module && below != SIZE_MAX) {
		uint32_t g = group_at(k, below);
		if (addr >= k->group_lo[g] && addr < k->group_hi[g])
			*module = k->group_name[g];
	}
	return 0;
}
