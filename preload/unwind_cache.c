// SPDX-License-Identifier: Apache-2.0
/*
 * The unwind-step cache of libstrobe-heap.so (see unwind_cache.h): a small DWARF call-frame
 * interpreter that reduces the FDE row covering a return address to an rsp/rbp-relative step,
 * the lock-free direct-mapped cache of those steps, and the walk that uses them.
 *
 * Why read the FDE rather than learn k from two successive _Unwind_GetCFA values: the observed
 * difference of two CFAs is right for this one call only when the CFA is rsp-based; an rbp-based
 * frame (frame pointers, alloca, stack realignment) gives a different difference at every call,
 * and nothing in libgcc's context says which rule produced it. The FDE says it, exactly as libgcc
 * reads it (the same _Unwind_Find_FDE, the row for ra - 1), so the cached step is libgcc's step.
 */
#include "unwind_cache.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#if !defined(__x86_64__)
/* Other architectures: no cache (strobe_uw_cache_new gives NULL); libgcc walks every stack. */
strobe_uw_cache *strobe_uw_cache_new(uint32_t nslots)
{
	(void)nslots;
	return NULL;
}
void strobe_uw_cache_free(strobe_uw_cache *c) { (void)c; }
void strobe_uw_invalidate(strobe_uw_cache *c) { (void)c; }
void strobe_uw_unload_begin(strobe_uw_cache *c) { (void)c; }
void strobe_uw_unload_end(strobe_uw_cache *c) { (void)c; }
int strobe_uw_backtrace(strobe_uw_cache *c, strobe_uw_req *q)
{
	(void)c;
	(void)q;
	return -1;
}
#else

struct dwarf_eh_bases {
	void *tbase;
	void *dbase;
	void *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

#define MAX_STEPS 512u           /* frames walked at most (skipped ones included) */
#define MAX_FRAME (16u << 20)    /* a CFA further than this above the last one: ask libgcc */

/* ---- the CFA interpreter -------------------------------------------------------------------- */

enum { R_SAME, R_OFFSET, R_UNDEF, R_OTHER };
typedef struct row {
	int cfa_reg;        /* 6, 7, or -1 (an expression or another register) */
	int64_t cfa_off;
	int bp_how, ra_how; /* R_* */
	int64_t bp_off, ra_off;
	bool sp_ruled;      /* some rule for rsp itself: not the default "rsp = CFA" */
} row;

typedef struct rd {
	const uint8_t *p, *end;
	bool bad;
} rd;

static uint64_t uleb(rd *r)
{
	uint64_t v = 0;
	for (unsigned shift = 0; r->p < r->end; shift += 7) {
		uint8_t b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static int64_t sleb(rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (r->p < r->end) {
		uint8_t b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			return (int64_t)v;
		}
	}
	r->bad = true;
	return 0;
}

static uint64_t fixed(rd *r, unsigned n)
{
	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, r->p, n); /* little-endian */
	r->p += n;
	return v;
}

/* Bytes an encoded pointer of this DW_EH_PE encoding takes; 0 for a variable length, -1 bad. */
static int enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x00: return 8; /* absptr */
	case 0x01: case 0x09: return 0; /* uleb128, sleb128 */
	case 0x02: case 0x0a: return 2;
	case 0x03: case 0x0b: return 4;
	case 0x04: case 0x0c: return 8;
	default: return -1;
	}
}

static void skip_enc(rd *r, uint8_t enc)
{
	if (enc == 0xff) /* DW_EH_PE_omit */
		return;
	int n = enc_size(enc);
	if (n < 0)
		r->bad = true;
	else if (n == 0)
		(void)uleb(r);
	else
		(void)fixed(r, (unsigned)n);
}

static void set_rule(row *s, uint64_t reg, int how, int64_t off)
{
	if (reg == 6) {
		s->bp_how = how;
		s->bp_off = off;
	} else if (reg == 16) {
		s->ra_how = how;
		s->ra_off = off;
	} else if (reg == 7) {
		s->sp_ruled = true;
	}
}

/* Runs CFA instructions while loc < target (libgcc's rule: the row for target - 1). init is the
 * state after the CIE's instructions (for DW_CFA_restore), NULL while running those. Returns
 * false on anything this reduction does not handle. */
static bool run(rd *r, row *s, const row *init, uint64_t loc, uint64_t target, uint64_t caf,
		int64_t daf)
{
	row stack[4];
	unsigned depth = 0;
	while (r->p < r->end && !r->bad && loc < target) {
		uint8_t op = *r->p++;
		uint64_t reg, delta = 0;
		switch (op >> 6) {
		case 1:
			delta = (uint64_t)(op & 0x3f);
			loc += delta * caf;
			continue;
		case 2:
			set_rule(s, op & 0x3f, R_OFFSET, (int64_t)uleb(r) * daf);
			continue;
		case 3:
			reg = op & 0x3f;
			if (!init)
				return false;
			if (reg == 6)
				s->bp_how = init->bp_how, s->bp_off = init->bp_off;
			else if (reg == 16)
				s->ra_how = init->ra_how, s->ra_off = init->ra_off;
			else if (reg == 7)
				s->sp_ruled = init->sp_ruled;
			continue;
		}
		switch (op) {
		case 0x00: /* nop */
			break;
		case 0x02: loc += fixed(r, 1) * caf; break;
		case 0x03: loc += fixed(r, 2) * caf; break;
		case 0x04: loc += fixed(r, 4) * caf; break;
		case 0x05: /* offset_extended */
			reg = uleb(r);
			set_rule(s, reg, R_OFFSET, (int64_t)uleb(r) * daf);
			break;
		case 0x06: /* restore_extended */
			reg = uleb(r);
			if (!init || reg == 6 || reg == 16 || reg == 7)
				return false;
			break;
		case 0x07: /* undefined */
			set_rule(s, uleb(r), R_UNDEF, 0);
			break;
		case 0x08: /* same_value */
			set_rule(s, uleb(r), R_SAME, 0);
			break;
		case 0x09: /* register */
			reg = uleb(r);
			(void)uleb(r);
			set_rule(s, reg, R_OTHER, 0);
			break;
		case 0x0a: /* remember_state */
			if (depth == 4)
				return false;
			stack[depth++] = *s;
			break;
		case 0x0b: /* restore_state: the CFA rule too, as libgcc (and gcc's epilogues) do */
			if (!depth)
				return false;
			*s = stack[--depth];
			break;
		case 0x0c: /* def_cfa */
			reg = uleb(r);
			s->cfa_reg = reg == 6 || reg == 7 ? (int)reg : -1;
			s->cfa_off = (int64_t)uleb(r);
			break;
		case 0x0d: /* def_cfa_register */
			reg = uleb(r);
			s->cfa_reg = reg == 6 || reg == 7 ? (int)reg : -1;
			break;
		case 0x0e: /* def_cfa_offset */
			s->cfa_off = (int64_t)uleb(r);
			break;
		case 0x0f: /* def_cfa_expression */
			delta = uleb(r);
			if (delta > (uint64_t)(r->end - r->p))
				return false;
			r->p += delta;
			s->cfa_reg = -1;
			break;
		case 0x10: /* expression */
		case 0x16: /* val_expression */
			reg = uleb(r);
			delta = uleb(r);
			if (delta > (uint64_t)(r->end - r->p))
				return false;
			r->p += delta;
			set_rule(s, reg, R_OTHER, 0);
			break;
		case 0x11: /* offset_extended_sf */
			reg = uleb(r);
			set_rule(s, reg, R_OFFSET, sleb(r) * daf);
			break;
		case 0x12: /* def_cfa_sf */
			reg = uleb(r);
			s->cfa_reg = reg == 6 || reg == 7 ? (int)reg : -1;
			s->cfa_off = sleb(r) * daf;
			break;
		case 0x13: /* def_cfa_offset_sf */
			s->cfa_off = sleb(r) * daf;
			break;
		case 0x14: /* val_offset */
			reg = uleb(r);
			(void)uleb(r);
			set_rule(s, reg, R_OTHER, 0);
			break;
		case 0x15: /* val_offset_sf */
			reg = uleb(r);
			(void)sleb(r);
			set_rule(s, reg, R_OTHER, 0);
			break;
		case 0x2e: /* GNU_args_size */
			(void)uleb(r);
			break;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = uleb(r);
			set_rule(s, reg, R_OFFSET, -(int64_t)uleb(r) * daf);
			break;
		default: /* set_loc and anything rarer */
			return false;
		}
	}
	return !r->bad;
}

bool strobe_uw_rule(uintptr_t ra, strobe_uw_entry *out)
{
	memset(out, 0, sizeof(*out));
	out->pc = ra;
	out->kind = STROBE_UW_ASK;
	struct dwarf_eh_bases b;
	const uint8_t *fde = ra > 1 ? _Unwind_Find_FDE((void *)(ra - 1), &b) : NULL;
	if (!fde)
		return true; /* no FDE: JIT code, or a signal trampoline libgcc recognises itself */
	uint32_t flen, cie_delta, clen;
	memcpy(&flen, fde, 4);
	memcpy(&cie_delta, fde + 4, 4);
	if (flen == 0xffffffffu || flen < 8 || cie_delta == 0)
		return true;
	const uint8_t *cie = fde + 4 - cie_delta;
	memcpy(&clen, cie, 4);
	if (clen == 0xffffffffu || clen < 8)
		return true;
	rd c = {.p = cie + 8, .end = cie + 4 + clen};
	uint8_t version = (uint8_t)fixed(&c, 1);
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(c.end - c.p));
	c.p += alen + 1;
	if (c.p > c.end || (version != 1 && version != 3))
		return true;
	uint64_t caf = uleb(&c);
	int64_t daf = sleb(&c);
	uint64_t ra_col = version == 1 ? fixed(&c, 1) : uleb(&c);
	uint8_t fde_enc = 0; /* absptr */
	if (aug[0] == 'z') {
		uint64_t zlen = uleb(&c);
		const uint8_t *zend = c.p + zlen;
		if (zlen > (uint64_t)(c.end - c.p))
			return true;
		for (size_t i = 1; i < alen && !c.bad; i++) {
			if (aug[i] == 'R') {
				fde_enc = (uint8_t)fixed(&c, 1);
			} else if (aug[i] == 'L') {
				(void)fixed(&c, 1);
			} else if (aug[i] == 'P') {
				uint8_t pe = (uint8_t)fixed(&c, 1);
				skip_enc(&c, pe);
			} else {
				return true; /* 'S' (a signal frame) or unknown: libgcc's business */
			}
		}
		c.p = zend;
	} else if (alen) {
		return true;
	}
	if (c.bad || ra_col != 16 || caf == 0)
		return true;
	row init = {.cfa_reg = -1, .bp_how = R_SAME, .ra_how = R_SAME};
	if (!run(&c, &init, NULL, 0, UINT64_MAX, caf, daf))
		return true;
	rd f = {.p = fde + 8, .end = fde + 4 + flen};
	skip_enc(&f, fde_enc & 0x0f); /* pc_begin (b.func has it) */
	skip_enc(&f, fde_enc & 0x0f); /* pc_range */
	if (aug[0] == 'z') {
		uint64_t zlen = uleb(&f);
		if (zlen > (uint64_t)(f.end - f.p))
			return true;
		f.p += zlen;
	}
	row s = init;
	uint64_t func = (uint64_t)(uintptr_t)b.func;
	if (f.bad || !run(&f, &s, &init, func, ra, caf, daf))
		return true;
	if (s.ra_how == R_UNDEF) {
		out->kind = STROBE_UW_END; /* the outermost frame (_start, clone): libgcc stops */
		return true;
	}
	if (s.cfa_reg < 0 || s.sp_ruled || s.ra_how != R_OFFSET || s.ra_off != -8 ||
	    (s.bp_how != R_SAME && s.bp_how != R_OFFSET) || s.cfa_off <= 0 ||
	    s.cfa_off > INT32_MAX || s.bp_off < INT32_MIN || s.bp_off > INT32_MAX)
		return true;
	out->kind = STROBE_UW_STEP;
	out->cfa_reg = (uint8_t)s.cfa_reg;
	out->cfa_off = (int32_t)s.cfa_off;
	out->bp_how = s.bp_how == R_OFFSET ? STROBE_UW_BP_AT_CFA : STROBE_UW_BP_SAME;
	out->bp_off = (int32_t)s.bp_off;
	return true;
}

/* ---- the cache ------------------------------------------------------------------------------ */

strobe_uw_cache *strobe_uw_cache_new(uint32_t nslots)
{
	uint32_t n = 1;
	while (n < nslots && n < (1u << 24))
		n <<= 1;
	size_t size = sizeof(strobe_uw_cache) + (size_t)n * sizeof(strobe_uw_entry);
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	strobe_uw_cache *c = m;
	c->nslots = n;
	c->gen = 1;
	c->map_size = size;
	return c;
}

void strobe_uw_cache_free(strobe_uw_cache *c)
{
	if (c)
		munmap(c, c->map_size);
}

void strobe_uw_invalidate(strobe_uw_cache *c)
{
	__atomic_fetch_add(&c->gen, 1, __ATOMIC_ACQ_REL);
}

void strobe_uw_unload_begin(strobe_uw_cache *c)
{
	__atomic_fetch_add(&c->unloading, 1, __ATOMIC_ACQ_REL);
	strobe_uw_invalidate(c);
}

void strobe_uw_unload_end(strobe_uw_cache *c)
{
	strobe_uw_invalidate(c);
	__atomic_fetch_sub(&c->unloading, 1, __ATOMIC_ACQ_REL);
}

uint32_t strobe_uw_slot(const strobe_uw_cache *c, uintptr_t pc)
{
	uint64_t h = (uint64_t)pc * 0x9E3779B97F4A7C15ULL;
	return (uint32_t)(h >> 40) & (c->nslots - 1);
}

static inline strobe_uw_entry *slot_of(strobe_uw_cache *c, uintptr_t pc)
{
	return &c->slots[strobe_uw_slot(c, pc)];
}

/* A seqlock read: false on a miss, a stale generation, or a read torn by a writer. */
static inline bool lookup(strobe_uw_cache *c, uintptr_t pc, uint32_t gen, strobe_uw_entry *out)
{
	strobe_uw_entry *e = slot_of(c, pc);
	uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s1 & 1)
		return false;
	out->pc = __atomic_load_n(&e->pc, __ATOMIC_RELAXED);
	out->gen = __atomic_load_n(&e->gen, __ATOMIC_RELAXED);
	out->cfa_off = __atomic_load_n(&e->cfa_off, __ATOMIC_RELAXED);
	out->bp_off = __atomic_load_n(&e->bp_off, __ATOMIC_RELAXED);
	out->kind = __atomic_load_n(&e->kind, __ATOMIC_RELAXED);
	out->cfa_reg = __atomic_load_n(&e->cfa_reg, __ATOMIC_RELAXED);
	out->bp_how = __atomic_load_n(&e->bp_how, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1 && out->pc == pc && out->gen == gen;
}

/* Replaces the slot's entry (direct-mapped: the newest learned address wins); a slot another
 * thread is writing is left to it. */
static void store(strobe_uw_cache *c, const strobe_uw_entry *in, uint32_t gen)
{
	strobe_uw_entry *e = slot_of(c, (uintptr_t)in->pc);
	uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
	if ((s & 1) || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
		return;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->pc, in->pc, __ATOMIC_RELAXED);
	__atomic_store_n(&e->gen, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&e->cfa_off, in->cfa_off, __ATOMIC_RELAXED);
	__atomic_store_n(&e->bp_off, in->bp_off, __ATOMIC_RELAXED);
	__atomic_store_n(&e->kind, in->kind, __ATOMIC_RELAXED);
	__atomic_store_n(&e->cfa_reg, in->cfa_reg, __ATOMIC_RELAXED);
	__atomic_store_n(&e->bp_how, in->bp_how, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* The stack words the rules point at: the thread's own stack, read as libgcc reads it. Not
 * instrumented: ASan has no business with saved registers and return addresses. */
__attribute__((no_sanitize("address"))) static inline uintptr_t word_at(uintptr_t a)
{
	return *(const uintptr_t *)a;
}

/* ---- the walk ------------------------------------------------------------------------------- */

__asm__(".text\n"
	".globl strobe_uw_backtrace\n"
	".hidden strobe_uw_backtrace\n"
	".type strobe_uw_backtrace, @function\n"
	"strobe_uw_backtrace:\n"
	"	.cfi_startproc\n"
	"	movq (%rsp), %rdx\n"  /* ra: where the caller resumes */
	"	leaq 8(%rsp), %rcx\n" /* the caller's rsp there (this stub's CFA) */
	"	movq %rbp, %r8\n"     /* the caller's rbp, untouched */
	"	jmp strobe_uw_walk_from\n"
	"	.cfi_endproc\n"
	".size strobe_uw_backtrace, .-strobe_uw_backtrace\n");

int strobe_uw_walk_from(strobe_uw_cache *c, strobe_uw_req *q, uintptr_t ra, uintptr_t sp,
			uintptr_t bp)
{
	q->truncated = false;
	if (__atomic_load_n(&c->unloading, __ATOMIC_ACQUIRE))
		return -1; /* a dlclose is under way: libgcc's tables are the truth */
	uint32_t gen = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
	uint32_t n = 0;
	bool skipping = true;
	for (unsigned steps = 0; steps < MAX_STEPS; steps++) {
		if (!ra)
			return (int)n;
		if (skipping && !(ra >= q->skip_lo && ra < q->skip_hi))
			skipping = false;
		if (!skipping) {
			if (n == q->max) {
				q->truncated = true;
				return (int)n;
			}
			q->pc[n++] = ra;
		}
		strobe_uw_entry e;
		if (!lookup(c, ra, gen, &e)) {
			if (!strobe_uw_rule(ra, &e))
				return -1;
			store(c, &e, gen);
			__atomic_fetch_add(&c->learned, 1, __ATOMIC_RELAXED);
		}
		if (e.kind == STROBE_UW_END)
			return (int)n;
		if (e.kind != STROBE_UW_STEP)
			return -1;
		uintptr_t cfa = (e.cfa_reg == STROBE_UW_CFA_BP ? bp : sp) + (uintptr_t)(intptr_t)e.cfa_off;
		/* a CFA below the frame or far above it is not a stack libgcc's tables describe
		 * the way this cache reduced them (a switched stack): let libgcc decide */
		if (cfa <= sp || cfa - sp > MAX_FRAME)
			return -1;
		if (e.bp_how == STROBE_UW_BP_AT_CFA)
			bp = word_at(cfa + (uintptr_t)(intptr_t)e.bp_off);
		ra = word_at(cfa - 8);
		sp = cfa;
	}
	return -1;
}
#endif
