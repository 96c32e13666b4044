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
 * Without CAP_SYSLOG (kptr_restrict) every address in the file reads as zero: the kernel is
 * then "unavailable" and addresses are left unnamed, not all named after one symbol.
 * Modules load after we read the file, so a miss re-reads it, at most once a minute.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define LAST_SPAN 4096u
#define RELOAD_NS (60ll * 1000000000ll)
#define CORE_NAME "[kernel.kallsyms]"

typedef struct ksym {
	uint64_t addr;
	const char *name;
	uint32_t group;
	int rank;
} ksym;

struct sym_kernel {
	bool loaded;
	int64_t loaded_ns;
	sym_range *v;
	size_t n;
	/* Groups: 0 is the core kernel, then one per module, with their address span. */
	const char **group_name;
	uint64_t *group_lo, *group_hi;
	size_t ngroups, cgroups;
	strobe_itab group_ix; /* name pointer -> group */
};

typedef struct kparse {
	strobe_symbolizer *s;
	sym_kernel *k;
	ksym *v;
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

static int kallsyms_line(void *arg, const char *l, size_t len)
{
	kparse *ps = arg;
	const char *p = l, *e = l + len;
	uint64_t addr;
	if (!sym_parse_hex(&p, e, &addr) || p + 3 > e || p[0] != ' ' || p[2] != ' ')
		return 0; /* malformed: skipped */
	char type = p[1];
	p += 3;
	const char *name = p;
	while (p < e && *p != '\t' && *p != ' ')
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
		ksym *v = realloc(ps->v, nc * sizeof(*v));
		if (!v) {
			ps->err = -ENOMEM;
			return 1;
		}
		ps->v = v;
		ps->cap = nc;
	}
	const char *iname = sym_intern(&ps->s->strings, name, nlen);
	const char *imod = mod ? sym_intern(&ps->s->strings, mod, mlen) : ps->k->group_name[0];
	uint32_t g = 0;
	if (!iname || !imod || (mod && group_of(ps->k, imod, &g) < 0)) {
		ps->err = -ENOMEM;
		return 1;
	}
	ps->v[ps->n++] = (ksym){
		.addr = addr,
		.name = iname,
		.group = g,
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

static int cmp_ksym(const void *a, const void *b)
{
	const ksym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return y->rank - x->rank;
	return strcmp(x->name, y->name);
}

static void kernel_clear(sym_kernel *k)
{
	free(k->v);
	k->v = NULL;
	k->n = 0;
	k->ngroups = 0;
	strobe_itab_free(&k->group_ix);
	k->group_ix.fixed = sizeof(const char *);
}

static int kernel_load(strobe_symbolizer *s, sym_kernel *k)
{
	kernel_clear(k);
	k->loaded = true;
	k->loaded_ns = sym_now_ns();
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
	if (r < 0 || ps.err < 0 || !ps.n) { /* no file, or kptr_restrict zeroed every address */
		free(ps.v);
		return r < 0 ? r : ps.err < 0 ? ps.err : -ENOENT;
	}
	qsort(ps.v, ps.n, sizeof(*ps.v), cmp_ksym);
	for (size_t i = 0; i < ps.n; i++) {
		ksym *x = &ps.v[i];
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
	sym_range *v = malloc(ps.n * sizeof(*v));
	if (!v) {
		free(ps.v);
		return -ENOMEM;
	}
	size_t m = 0;
	for (size_t i = 0; i < ps.n; i++) {
		if (i && ps.v[i].addr == ps.v[i - 1].addr)
			continue;
		size_t j = i + 1;
		while (j < ps.n && ps.v[j].addr == ps.v[i].addr)
			j++;
		uint32_t grp = ps.v[i].group;
		/* The next symbol ends this one whichever module it is in: BPF programs sit
		 * between modules, and no two pieces of code overlap. */
		uint64_t end = k->group_hi[grp];
		if (j < ps.n && ps.v[j].addr < end)
			end = ps.v[j].addr;
		if (end <= ps.v[i].addr)
			end = ps.v[i].addr + 1;
		v[m++] = (sym_range){.start = ps.v[i].addr, .end = end, .name = ps.v[i].name,
				     .group = grp};
	}
	free(ps.v);
	k->v = v;
	k->n = m;
	return 0;
}

void sym_kernel_free(sym_kernel *k)
{
	if (!k)
		return;
	free(k->v);
	free(k->group_name);
	free(k->group_lo);
	free(k->group_hi);
	strobe_itab_free(&k->group_ix);
	free(k);
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
	size_t below;
	const sym_range *r = sym_ranges_find(k->v, k->n, addr, &below);
	if (!r && sym_now_ns() - k->loaded_ns >= RELOAD_NS) {
		kernel_load(s, k);
		r = sym_ranges_find(k->v, k->n, addr, &below);
	}
	if (r) {
		if (out)
			out->function = r->name;
		if (module)
			*module = k->group_name[r->group];
		return 1;
	}
	if (module && below != SIZE_MAX) {
		uint32_t g = k->v[below].group;
		if (addr >= k->group_lo[g] && addr < k->group_hi[g])
			*module = k->group_name[g];
	}
	return 0;
}
