// SPDX-License-Identifier: Apache-2.0
/*
 * `perf script` text -> folded stacks, reproducing FlameGraph's stackcollapse-perf.pl exactly:
 * the same frame names, the same tidying (offsets stripped, C++ arguments cut, quotes dropped,
 * Java's leading L), the same annotations (_[k], _[j], _[i]), the same event filtering (the
 * first event type seen, unless one is given), the same --srcline handling and the same
 * byte-order sort of the output.
 *
 * The perl script's behaviour is defined by three regular expressions with Perl's backtracking
 * semantics; they are matched here by hand (event_line, event_period, stack_line), each written
 * to pick the same match Perl would, including on odd input, because the contract is byte-for-
 * byte equality.
 *
 * Speed comes from never doing the same work twice. A recording repeats the same few thousand
 * stack lines ("\t7f.. func+0x1a (/lib/x.so)") millions of times, and a line's frames depend
 * only on its text (and on whether the process is "java"), so each distinct line is parsed and
 * tidied once and remembered as a list of frame-name ids; a sample is then a short array of
 * ids, summed in an interning table keyed by those ids. Text is only built at the end, once per
 * distinct stack, for the sort. One pass over the buffer, no allocation per line.
 *
 * Limits, chosen as errors rather than silent truncation because a profile that is quietly
 * different from perl's is worse than none: a symbol longer than STROBE_MAX_NAME bytes or a
 * sample deeper than STROBE_MAX_DEPTH frames fails the whole input with "NAME:LINE: ...".
 * Counts are summed in 64 bits, saturating (perl would switch to floating point past 2^64).
 *
 * Not supported: --inline (it runs addr2line on every frame's binary, which a library that only
 * reads buffers cannot do); strobe_collapse returns -ENOTSUP for it. --context alone changes
 * nothing in perl either (it only refines --inline) and is accepted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/buf.h"
#include "strobe/codec.h"
#include "strobe/collapse.h"

static inline bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
static inline bool is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

typedef struct span {
	const char *p;
	size_t n;
} span;

/* Perl truth of a string: "" and "0" are false. */
static inline bool perl_true(span s) { return !(s.n == 0 || (s.n == 1 && s.p[0] == '0')); }

/* Perl's /^(\S.+?)\s+(\d+)\/ *(\d+)*\s+/ (space added to keep this comment closed): the shortest comm (two characters or more) followed by
 * whitespace, a pid, optional slashes and tid, and whitespace. Once comm's end is fixed the rest
 * has a single way to match, so trying ends from the shortest is Perl's order. */
static bool event_line(const char *l, size_t n, span *comm, span *pid, span *tid)
{
	if (n < 2 || is_ws(l[0]))
		return false;
	for (size_t k = 2; k < n; k++) {
		if (!is_ws(l[k]))
			continue;
		size_t i = k;
		while (i < n && is_ws(l[i]))
			i++;
		size_t d0 = i;
		while (i < n && is_digit(l[i]))
			i++;
		if (i == d0)
			continue;
		size_t d1 = i;
		while (i < n && l[i] == '/')
			i++;
		size_t t0 = i;
		while (i < n && is_digit(l[i]))
			i++;
		if (i < n && is_ws(l[i])) {
			*comm = (span){l, k};
			*pid = (span){l + d0, d1 - d0};
			*tid = (span){l + t0, i - t0};
			return true;
		}
	}
	return false;
}

/* /:\s*(\d+)*\s+(\S+):\s*$/ : the line ends in "EVENT:" (EVENT may hold colons), preceded by
 * whitespace, optionally a period, and a colon. Only the last colon before EVENT can start the
 * match (anything between must be whitespace and digits). */
static bool event_period(const char *l, size_t n, span *period, span *event)
{
	size_t end = n;
	while (end > 0 && is_ws(l[end - 1]))
		end--;
	if (end < 2 || l[end - 1] != ':')
		return false;
	size_t fc = end - 1, ts = fc;
	while (ts > 0 && !is_ws(l[ts - 1]))
		ts--;
	if (ts == fc || ts == 0)
		return false;
	size_t c = ts;
	while (c > 0 && l[c - 1] != ':')
		c--;
	if (c == 0)
		return false;
	size_t i = c; /* just after the colon */
	while (i < ts && is_ws(l[i]))
		i++;
	size_t d0 = i;
	while (i < ts && is_digit(l[i]))
		i++;
	size_t d1 = i;
	if (i == ts) { /* no whitespace after the digits: only "\s+" alone can match */
		if (d1 != d0)
			return false;
		/* all whitespace, non-empty (ts > c guaranteed as l[ts-1] is whitespace) */
		*period = (span){NULL, 0};
		*event = (span){l + ts, fc - ts};
		return true;
	}
	for (size_t j = i; j < ts; j++)
		if (!is_ws(l[j]))
			return false;
	*period = (span){l + d0, d1 - d0};
	*event = (span){l + ts, fc - ts};
	return true;
}

/* /^\s*(\w+)\s*(.+) \((.*)\)/ : pc, symbol, module. The symbol runs to the last " (" that has
 * a ")" after it, the module to the last ")". When no " (" follows the pc's whitespace, Perl
 * backtracks into the whitespace and then into the pc; so do we. */
static bool stack_line(const char *l, size_t n, span *pc, span *func, span *mod)
{
	size_t i = 0;
	while (i < n && is_ws(l[i]))
		i++;
	size_t pcs = i;
	while (i < n && is_word(l[i]))
		i++;
	size_t pce = i;
	if (pce == pcs)
		return false;
	while (i < n && is_ws(l[i]))
		i++;
	size_t s0 = i;
	const char *rp = NULL;
	for (size_t k = n; k-- > 0;)
		if (l[k] == ')') {
			rp = l + k;
			break;
		}
	if (!rp)
		return false;
	size_t P = (size_t)(rp - l), E = SIZE_MAX;
	for (size_t e = P >= 2 ? P - 2 + 1 : 0; e-- > 0;)
		if (l[e] == ' ' && l[e + 1] == '(') {
			E = e;
			break;
		}
	if (E == SIZE_MAX)
		return false;
	*mod = (span){l + E + 2, P - (E + 2)};
	if (E >= s0 + 1) {
		*pc = (span){l + pcs, pce - pcs};
		*func = (span){l + s0, E - s0};
	} else if (E >= pce + 1) {
		*pc = (span){l + pcs, pce - pcs};
		*func = (span){l + E - 1, 1};
	} else if (E == pce && pce >= pcs + 2) {
		*pc = (span){l + pcs, pce - 1 - pcs};
		*func = (span){l + pce - 1, 1};
	} else {
		return false;
	}
	return true;
}

static bool span_has(span s, const char *needle)
{
	size_t m = strlen(needle);
	if (m > s.n)
		return false;
	return memmem(s.p, s.n, needle, m) != NULL;
}

/* m:/tmp/perf-\d+\.map: */
static bool is_perf_map(span mod)
{
	const char *p = mod.p, *end = mod.p + mod.n;
	while ((p = memmem(p, (size_t)(end - p), "/tmp/perf-", 10))) {
		const char *d = p + 10, *q = d;
		while (q < end && is_digit(*q))
			q++;
		if (q > d && end - q >= 4 && memcmp(q, ".map", 4) == 0)
			return true;
		p++;
	}
	return false;
}

/* The most each text buffer (strobe_buf) holds: offsets into them are 32-bit (the line cache's
 * keys, --srcline's pend_off), and a stack line is at most 2 GiB (line_lookup). A buffer holds
 * memory once anything was added, even nothing, so an empty name still has an address. */
#define TEXT_MAX ((size_t)UINT32_MAX)

/* A growable array of uint32 (frame ids). */
typedef struct vec {
	uint32_t *p;
	size_t n, cap;
} vec;

static int vec_grow(vec *v, size_t more)
{
	if (more <= v->cap - v->n)
		return 0;
	size_t nc = v->cap ? v->cap * 2 : 256;
	while (nc - v->n < more)
		nc *= 2;
	uint32_t *np = realloc(v->p, nc * sizeof(*np));
	if (!np)
		return -ENOMEM;
	v->p = np;
	v->cap = nc;
	return 0;
}

static inline int vec_push(vec *v, uint32_t x)
{
	if (v->n == v->cap && vec_grow(v, 1) < 0)
		return -ENOMEM;
	v->p[v->n++] = x;
	return 0;
}

/* The line cache: one entry per distinct stack line (its text from the first non-blank) and
 * what it turned into: lfr[off] frames, ids lfr[off + 1 ...]. Entries sit in the open-
 * addressing table itself (16 bytes: page faults are a real share of the run time) and their
 * texts are copied into one dense arena, so a hit costs a table load and a compare against
 * memory that stays in cache. The java bit is part of the key: java processes tidy names
 * differently. Past 4 GiB of distinct line text, new lines are parsed without being cached. */
typedef struct line_ent {
	uint32_t key;  /* offset of the text in the key arena + 1; 0: empty slot */
	uint32_t hash;
	uint32_t len;  /* length | java << 31 */
	uint32_t off;
} line_ent;

/* memcmp for short keys without the call and its length dispatch. */
static inline bool same_bytes(const char *a, const char *b, size_t n)
{
	for (; n >= 8; a += 8, b += 8, n -= 8) {
		uint64_t x, y;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
	}
	for (; n; a++, b++, n--)
		if (*a != *b)
			return false;
	return true;
}

/* Two independent multiply lanes over 16 bytes a step: lines are hashed a million times,
 * so the hash's throughput matters more than anything else here. */
static inline uint32_t line_hash(const char *p, size_t n, bool java)
{
	uint64_t a = 0x9e3779b97f4a7c15ull ^ n ^ ((uint64_t)java << 63), b = 0xc2b2ae3d27d4eb4full;
	while (n >= 16) {
		uint64_t w1, w2;
		memcpy(&w1, p, 8);
		memcpy(&w2, p + 8, 8);
		a = (a ^ w1) * 0xff51afd7ed558ccdull;
		b = (b ^ w2) * 0xc4ceb9fe1a85ec53ull;
		a ^= a >> 31;
		b ^= b >> 29;
		p += 16;
		n -= 16;
	}
	uint64_t w1 = 0, w2 = 0;
	if (n > 8) {
		memcpy(&w1, p, 8);
		memcpy(&w2, p + 8, n - 8);
	} else {
		memcpy(&w1, p, n);
	}
	a = (a ^ w1) * 0xff51afd7ed558ccdull;
	b = (b ^ w2) * 0xc4ceb9fe1a85ec53ull;
	uint64_t h = a ^ (b >> 32) ^ (b << 32);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

struct strobe_collapser {
	strobe_collapse_opts o;
	bool kernel, jit;
	char *name;
	strobe_err *err;       /* of the current call */
	int rc;                /* first error, sticky */
	size_t lineno;
	strobe_buf carry;      /* a line split between two fed pieces */

	strobe_itab names;     /* tidied frame names and process names -> id */
	line_ent *lt;          /* the line cache, lt_mask + 1 slots, at most half full */
	strobe_buf lt_keys;    /* its texts */
	size_t lt_mask, lt_n;
	vec lfr;               /* frame counts and ids of all cached lines */
	vec nocache;           /* the same for one line, once the cache is full */

	vec cur_fr;            /* the current sample's frames, line after line, leaf first */
	vec grp;               /* where each line's frames start in cur_fr */
	vec key;               /* process name id, then frames root first */
	strobe_buf tmp;        /* one frame name being tidied */
	strobe_buf event;      /* the event type kept (once event_set) */
	bool event_set;
	bool have_pname;
	bool pname_java;
	uint32_t pname;        /* name id */
	uint64_t period;

	strobe_itab stacks;    /* key arrays -> id */
	uint64_t *counts;
	size_t counts_cap;

	/* --srcline: the frames of the last stack line wait for the lines after it. The first
	 * pend_need of its pend_ids.n frames each take one line (their tidied names are in
	 * pend_txt, starting at pend_off[i]); the rest are interned already. */
	vec pend_ids, pend_off;
	strobe_buf pend_txt;
	size_t pend_need, pend_next;
};
typedef struct strobe_collapser collapse;

/* The line that --srcline reads after a frame: perl takes the next line whatever it is, removes
 * every shortest "[...]", trims blanks at both ends and appends ":" and the rest to the frame
 * unless it is empty. At the end of input perl's <> gives undef, which appends nothing. */
static int append_srcline(collapse *c, const char *l, size_t n)
{
	size_t at = c->tmp.len;
	int r = strobe_buf_add(&c->tmp, ":", 1);
	for (size_t i = 0; i < n && !r; i++) {
		if (l[i] == '[') {
			const char *close = memchr(l + i + 1, ']', n - i - 1);
			if (close) {
				i = (size_t)(close - l);
				continue;
			}
		}
		r = strobe_buf_add(&c->tmp, l + i, 1);
	}
	if (r)
		return r;
	size_t s = at + 1, e = c->tmp.len;
	while (s < e && is_ws(c->tmp.p[s]))
		s++;
	while (e > s && is_ws(c->tmp.p[e - 1]))
		e--;
	if (s == e) {
		c->tmp.len = at;
		return 0;
	}
	memmove(c->tmp.p + at + 1, c->tmp.p + s, e - s);
	c->tmp.len = at + 1 + (e - s);
	return 0;
}

/* One "->" part of a symbol, tidied and annotated as perl's loop body does, interned; its id
 * goes to out. *unknown is perl's $is_unknown, which stays set for the rest of the line. */
static int add_func(collapse *c, span f, span pc, span mod, bool inlined, bool java,
		    bool *unknown, vec *out)
{
	strobe_buf *t = &c->tmp;
	strobe_buf_reset(t);
	int r;
	if (f.n == 9 && memcmp(f.p, "[unknown]", 9) == 0) {
		span name;
		if (!(mod.n == 9 && memcmp(mod.p, "[unknown]", 9) == 0)) {
			const char *slash = NULL;
			for (size_t i = mod.n; i-- > 0;)
				if (mod.p[i] == '/') {
					slash = mod.p + i;
					break;
				}
			name = slash ? (span){slash + 1, (size_t)(mod.p + mod.n - slash - 1)} : mod;
		} else {
			name = (span){"unknown", 7};
			*unknown = true;
		}
		if ((r = strobe_buf_add(t, "[", 1)) || (r = strobe_buf_add(t, name.p, name.n)))
			return r;
		if (c->o.addrs &&
		    ((r = strobe_buf_add(t, " <", 2)) || (r = strobe_buf_add(t, pc.p, pc.n)) ||
		     (r = strobe_buf_add(t, ">", 1))))
			return r;
		if ((r = strobe_buf_add(t, "]", 1)))
			return r;
	} else if ((r = strobe_buf_add(t, f.p, f.n))) {
		return r;
	}
	/* tidy_generic: s/;/:/g */
	for (char *s = t->p, *e = t->p + t->len; (s = memchr(s, ';', (size_t)(e - s)));)
		*s++ = ':';
	bool go_method = false;
	char *open = t->len ? memmem(t->p, t->len, ".(", 2) : NULL;
	if (open) {
		/* m/\.\(.*\)\./ : a ")." at or after two characters past the ".(" */
		for (size_t j = (size_t)(open - t->p) + 2; j + 1 < t->len; j++)
			if (t->p[j] == ')' && t->p[j + 1] == '.') {
				go_method = true;
				break;
			}
	}
	if (!go_method) {
		/* s/\((?!anonymous namespace\)).* // : cut from the first paren that does not open
		 * "(anonymous namespace)" */
		static const char anon[] = "anonymous namespace)";
		for (char *s = t->p, *e = t->p + t->len; (s = memchr(s, '(', (size_t)(e - s)));) {
			size_t i = (size_t)(s - t->p);
			if (t->len - i - 1 >= sizeof(anon) - 1 &&
			    memcmp(t->p + i + 1, anon, sizeof(anon) - 1) == 0) {
				s++;
				continue;
			}
			t->len = i;
			break;
		}
	}
	if (memchr(t->p, '"', t->len) || memchr(t->p, '\'', t->len)) { /* tr/"'//d */
		size_t w = 0;
		for (size_t i = 0; i < t->len; i++)
			if (t->p[i] != '"' && t->p[i] != '\'')
				t->p[w++] = t->p[i];
		t->len = w;
	}
	/* tidy_java: s/^L// if the name has a slash, for java processes */
	size_t skip = 0;
	if (java && t->len && t->p[0] == 'L' && memchr(t->p, '/', t->len))
		skip = 1;
	span name = {t->p + skip, t->len - skip};
	if (inlined) {
		if (!span_has(name, "_[i]") && (r = strobe_buf_add(t, "_[i]", 4)))
			return r;
	} else if (c->kernel && mod.n && (mod.p[0] == '[' ||
					  (mod.n >= 7 && memcmp(mod.p + mod.n - 7, "vmlinux", 7) == 0)) &&
		   !span_has(mod, "unknown")) {
		if ((r = strobe_buf_add(t, "_[k]", 4)))
			return r;
	} else if (c->jit && is_perf_map(mod)) {
		if (!span_has(name, "_[j]") && (r = strobe_buf_add(t, "_[j]", 4)))
			return r;
	}
	if (c->o.srcline && !*unknown) { /* waits for the next line */
		if ((r = vec_push(&c->pend_off, (uint32_t)c->pend_txt.len)) < 0 ||
		    (r = strobe_buf_add(&c->pend_txt, t->p + skip, t->len - skip)) < 0)
			return r;
		c->pend_need++;
		return vec_push(out, 0);
	}
	uint32_t id;
	if ((r = strobe_itab_intern(&c->names, t->p + skip, t->len - skip, &id, NULL)) < 0)
		return r;
	return vec_push(out, id);
}

/* A stack line's frames (leaf-most part first, as the line lists them) appended to out; none
 * for lines perl ignores. */
static int parse_stack_line(collapse *c, const char *l, size_t n, bool java, vec *out)
{
	span pc, func, mod;
	if (!stack_line(l, n, &pc, &func, &mod))
		return 0; /* perl warns "Unrecognized line" and goes on */
	/* s/\+0x[\da-f]+$// */
	size_t k = func.n;
	while (k > 0 && (is_digit(func.p[k - 1]) || (func.p[k - 1] >= 'a' && func.p[k - 1] <= 'f')))
		k--;
	if (k < func.n && k >= 3 && memcmp(func.p + k - 3, "+0x", 3) == 0)
		func.n = k - 3;
	if (func.n && func.p[0] == '(')
		return 0; /* process names */
	if (func.n > STROBE_MAX_NAME)
		return strobe_errf(c->err, -EINVAL, "%s:%zu: frame name of %zu bytes exceeds the "
				   "%u-byte limit", c->name, c->lineno, func.n, STROBE_MAX_NAME);
	/* split /\->/ drops trailing empty fields: strip trailing "->"s */
	while (func.n >= 2 && memcmp(func.p + func.n - 2, "->", 2) == 0)
		func.n -= 2;
	if (!func.n)
		return 0;
	const char *p = func.p, *end = func.p + func.n;
	bool unknown = false;
	size_t lineno = c->lineno, parts = 0;
	for (bool first = true;; first = false) {
		const char *a = memmem(p, (size_t)(end - p), "->", 2);
		if (++parts > STROBE_MAX_DEPTH)
			return strobe_errf(c->err, -EINVAL, "%s:%zu: stack deeper than %u frames",
					   c->name, lineno, STROBE_MAX_DEPTH);
		int r = add_func(c, (span){p, (size_t)((a ? a : end) - p)}, pc, mod, !first, java,
				 &unknown, out);
		if (r < 0)
			return r;
		if (!a)
			return 0;
		p = a + 2;
	}
}

static int lt_grow(collapse *c)
{
	size_t ns = c->lt ? (c->lt_mask + 1) * 2 : 4096;
	line_ent *t = calloc(ns, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; c->lt && i <= c->lt_mask; i++) {
		if (!c->lt[i].key)
			continue;
		size_t j = c->lt[i].hash & (ns - 1);
		while (t[j].key)
			j = (j + 1) & (ns - 1);
		t[j] = c->lt[i];
	}
	free(c->lt);
	c->lt = t;
	c->lt_mask = ns - 1;
	return 0;
}

/* The frames of stack line l: *fr points at the count, then the ids (parsed now if new). */
static int line_lookup(collapse *c, const char *l, size_t n, const uint32_t **fr)
{
	if (n > UINT32_MAX >> 1)
		return strobe_errf(c->err, -EINVAL, "%s:%zu: line of %zu bytes", c->name,
				   c->lineno, n);
	bool java = c->pname_java;
	uint32_t h = line_hash(l, n, java), len = (uint32_t)n | (uint32_t)java << 31;
	size_t i = h & c->lt_mask;
	for (line_ent *e; (e = &c->lt[i])->key; i = (i + 1) & c->lt_mask)
		if (e->hash == h && e->len == len && same_bytes(c->lt_keys.p + e->key - 1, l, n)) {
			*fr = c->lfr.p + e->off;
			return 0;
		}
	bool cache = c->lt_keys.len + n < UINT32_MAX && c->lfr.n < UINT32_MAX - STROBE_MAX_DEPTH;
	vec *out = cache ? &c->lfr : &c->nocache;
	if (!cache)
		out->n = 0;
	size_t off = out->n;
	int r;
	if ((r = vec_push(out, 0)) < 0 || (r = parse_stack_line(c, l, n, java, out)) < 0)
		return r;
	out->p[off] = (uint32_t)(out->n - off - 1);
	*fr = out->p + off;
	if (!cache)
		return 0;
	uint32_t key = (uint32_t)c->lt_keys.len + 1;
	if ((r = strobe_buf_add(&c->lt_keys, l, n)) < 0)
		return r;
	c->lt[i] = (line_ent){key, h, len, (uint32_t)off};
	if (++c->lt_n * 2 > c->lt_mask + 1)
		return lt_grow(c);
	return 0;
}

/* The pending frames of a --srcline stack line join the sample. */
static int pend_flush(collapse *c)
{
	size_t n = c->pend_ids.n;
	c->pend_ids.n = c->pend_need = c->pend_next = 0;
	if (n == 0)
		return 0;
	if (c->cur_fr.n + n > STROBE_MAX_DEPTH)
		return strobe_errf(c->err, -EINVAL, "%s:%zu: stack deeper than %u frames", c->name,
				   c->lineno, STROBE_MAX_DEPTH);
	int r = vec_grow(&c->cur_fr, n);
	if (r < 0)
		return r;
	memcpy(c->cur_fr.p + c->cur_fr.n, c->pend_ids.p, n * sizeof(uint32_t));
	c->cur_fr.n += n;
	return 0;
}

/* A line read by --srcline for the next pending frame, whatever the line is. */
static int on_srcline(collapse *c, const char *l, size_t n)
{
	size_t i = c->pend_next++;
	size_t from = c->pend_off.p[i],
	       to = i + 1 < c->pend_off.n ? c->pend_off.p[i + 1] : c->pend_txt.len;
	strobe_buf_reset(&c->tmp);
	int r;
	uint32_t id;
	if ((r = strobe_buf_add(&c->tmp, c->pend_txt.p + from, to - from)) < 0 ||
	    (r = append_srcline(c, l, n)) < 0 ||
	    (r = strobe_itab_intern(&c->names, c->tmp.p, c->tmp.len, &id, NULL)) < 0)
		return r;
	c->pend_ids.p[i] = id;
	return c->pend_next == c->pend_need ? pend_flush(c) : 0;
}

static int on_stack_line(collapse *c, const char *l, size_t n)
{
	if (!c->have_pname)
		return 0; /* perl: "ignore filtered samples" */
	int r;
	if ((r = vec_push(&c->grp, (uint32_t)c->cur_fr.n)) < 0)
		return r;
	if (c->o.srcline) { /* reads the lines after: nothing to cache */
		c->pend_ids.n = c->pend_off.n = c->pend_txt.len = c->pend_need = c->pend_next = 0;
		if ((r = parse_stack_line(c, l, n, c->pname_java, &c->pend_ids)) < 0)
			return r;
		if (c->pend_need == 0)
			r = pend_flush(c);
	} else {
		/* Leading blanks never change what the line means (\s* before the pc): leave
		 * them out of the cache key, so lines indented differently share an entry. */
		while (n && is_ws(*l))
			l++, n--;
		const uint32_t *fr = NULL;
		if ((r = line_lookup(c, l, n, &fr)) < 0)
			return r;
		uint32_t nf = fr[0];
		if (nf == 0)
			return 0; /* a line perl ignores */
		if (c->cur_fr.n + nf > STROBE_MAX_DEPTH)
			return strobe_errf(c->err, -EINVAL, "%s:%zu: stack deeper than %u frames",
					   c->name, c->lineno, STROBE_MAX_DEPTH);
		if ((r = vec_grow(&c->cur_fr, nf)) < 0)
			return r;
		uint32_t *to = c->cur_fr.p + c->cur_fr.n;
		for (uint32_t i = 0; i < nf; i++) /* mostly one frame: no memcpy call */
			to[i] = fr[i + 1];
		c->cur_fr.n += nf;
	}
	if (r == 0 && c->cur_fr.n > STROBE_MAX_DEPTH)
		return strobe_errf(c->err, -EINVAL, "%s:%zu: stack deeper than %u frames", c->name,
				   c->lineno, STROBE_MAX_DEPTH);
	return r;
}

static int on_event_line(collapse *c, span comm, span pid, span tid, const char *l, size_t n)
{
	span period, event;
	uint64_t per = 1; /* perl: `if (not $period) { $period = 1 }` */
	if (event_period(l, n, &period, &event)) {
		if (perl_true(period)) {
			per = 0; /* "00" is true in perl, and counts 0 */
			for (size_t i = 0; i < period.n; i++) {
				unsigned d = (unsigned)(period.p[i] - '0');
				per = per > (UINT64_MAX - d) / 10 ? UINT64_MAX : per * 10 + d;
			}
		}
		if (!c->event_set) {
			int r = strobe_buf_add(&c->event, event.p, event.n);
			if (r < 0)
				return r;
			c->event_set = true;
		} else if (event.n != c->event.len || memcmp(event.p, c->event.p, event.n) != 0) {
			return 0; /* another event type: filtered out, the previous name stays */
		}
	}
	c->period = per;
	/* perl: `if (not $tid) { $tid = $pid; $pid = "?" }`, so "swapper 0/0" is pid "?" */
	bool has_tid = perl_true(tid);
	span spid = has_tid ? pid : (span){"?", 1}, stid = has_tid ? tid : pid;
	strobe_buf *b = &c->tmp;
	strobe_buf_reset(b);
	int r = strobe_buf_add(b, comm.p, comm.n); /* COMM, COMM-PID or COMM-PID/TID */
	if (!r && (c->o.tid || c->o.pid) && !(r = strobe_buf_add(b, "-", 1)))
		r = strobe_buf_add(b, spid.p, spid.n);
	if (!r && c->o.tid && !(r = strobe_buf_add(b, "/", 1)))
		r = strobe_buf_add(b, stid.p, stid.n);
	if (r)
		return r;
	for (char *s = b->p, *e = b->p + b->len; (s = memchr(s, ' ', (size_t)(e - s)));)
		*s++ = '_';
	/* A false pname drops the sample (it cannot happen: comm has two characters at least). */
	c->have_pname = perl_true((span){b->p, b->len});
	/* Java names are tidied when the process name matches /^java/ (the script since 2017).
	 * FlameGraph's test vectors, our contract, were made just before that, when it took
	 * `eq "java"`, which --pid and --tid ("java-PID") never matched: so with those two the
	 * vectors keep the leading L, and so do we. Everywhere else this is today's script. */
	c->pname_java = !c->o.pid && !c->o.tid && b->len >= 4 && memcmp(b->p, "java", 4) == 0;
	return strobe_itab_intern(&c->names, b->p, b->len, &c->pname, NULL);
}

static int end_of_stack(collapse *c)
{
	int r = 0;
	if (c->have_pname) {
		vec *k = &c->key;
		k->n = 0;
		if ((r = vec_grow(k, c->cur_fr.n + 1)) < 0)
			return r;
		k->p[k->n++] = c->pname;
		/* perl unshifts each line's frames in turn: the last line's come first (it is
		 * the root end), each line's own frames in their order. */
		for (size_t g = c->grp.n; g-- > 0;) {
			size_t from = c->grp.p[g], to = g + 1 < c->grp.n ? c->grp.p[g + 1] : c->cur_fr.n;
			if (to > from)
				memcpy(k->p + k->n, c->cur_fr.p + from, (to - from) * sizeof(uint32_t));
			k->n += to - from;
		}
		uint32_t id;
		bool added;
		if ((r = strobe_itab_intern(&c->stacks, k->p, k->n * sizeof(uint32_t), &id,
					    &added)) < 0)
			return r;
		if (id >= c->counts_cap) {
			size_t nc = c->counts_cap ? c->counts_cap * 2 : 1024;
			uint64_t *cn = realloc(c->counts, nc * sizeof(*cn));
			if (!cn)
				return -ENOMEM;
			c->counts = cn;
			c->counts_cap = nc;
		}
		uint64_t prev = added ? 0 : c->counts[id];
		c->counts[id] = prev > UINT64_MAX - c->period ? UINT64_MAX : prev + c->period;
	}
	c->cur_fr.n = c->grp.n = 0;
	c->have_pname = false;
	return r;
}

typedef struct text {
	const char *p;
	size_t n;
	uint32_t id;
} text;

static int text_cmp(const void *a, const void *b)
{
	const text *x = a, *y = b;
	int r = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
	return r ? r : (x->n > y->n) - (x->n < y->n);
}

static inline size_t names_len(const collapse *c, uint32_t id)
{
	size_t n;
	strobe_itab_get(&c->names, id, &n);
	return n;
}

/* The distinct stacks as text, sorted as perl's `sort { $a cmp $b }` (bytes), emitted. */
static int emit_sorted(collapse *c, strobe_collapse_emit emit, void *ctx)
{
	uint32_t ns = c->stacks.n;
	size_t total = 0;
	for (uint32_t s = 0; s < ns; s++) {
		size_t kl;
		const uint32_t *k = strobe_itab_get(&c->stacks, s, &kl);
		kl /= sizeof(uint32_t);
		for (size_t i = 0; i < kl; i++)
			total += names_len(c, k[i]) + 1;
	}
	char *arena = malloc(total ? total : 1);
	text *t = malloc((ns ? ns : 1) * sizeof(*t));
	int r = 0;
	if (!arena || !t) {
		r = -ENOMEM;
		goto out;
	}
	char *w = arena;
	for (uint32_t s = 0; s < ns; s++) {
		size_t kl;
		const uint32_t *k = strobe_itab_get(&c->stacks, s, &kl);
		kl /= sizeof(uint32_t);
		t[s] = (text){w, 0, s};
		for (size_t i = 0; i < kl; i++) {
			size_t nl;
			const void *nm = strobe_itab_get(&c->names, k[i], &nl);
			if (i)
				*w++ = ';';
			memcpy(w, nm, nl);
			w += nl;
		}
		t[s].n = (size_t)(w - t[s].p);
	}
	qsort(t, ns, sizeof(*t), text_cmp);
	for (uint32_t s = 0; s < ns && !r; s++)
		r = emit(t[s].p, t[s].n, c->counts[t[s].id], ctx);
out:
	free(arena);
	free(t);
	return r;
}

static int on_line(collapse *c, const char *l, size_t n)
{
	c->lineno++;
	if (c->pend_need)
		return on_srcline(c, l, n);
	if (n == 0)
		return end_of_stack(c);
	if (l[0] == '#')
		return 0; /* comments, --header lines */
	span comm, pid, tid;
	if (!is_ws(l[0]) && event_line(l, n, &comm, &pid, &tid))
		return on_event_line(c, comm, pid, tid, l, n);
	return on_stack_line(c, l, n);
}

strobe_collapser *strobe_collapser_new(const char *name, const strobe_collapse_opts *o)
{
	collapse *c = calloc(1, sizeof(*c));
	if (c) {
		strobe_buf_init(&c->carry, TEXT_MAX);
		strobe_buf_init(&c->lt_keys, TEXT_MAX);
		strobe_buf_init(&c->tmp, TEXT_MAX);
		strobe_buf_init(&c->event, TEXT_MAX);
		strobe_buf_init(&c->pend_txt, TEXT_MAX);
	}
	if (!c || !(c->name = strdup(name ? name : "<input>")) || lt_grow(c) < 0) {
		strobe_collapser_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->o = *o;
	c->o.event_filter = NULL; /* copied below: the caller's string need not outlive us */
	c->kernel = o->kernel || o->all;
	c->jit = o->jit || o->all;
	if (o->event_filter && *o->event_filter) {
		if (strobe_buf_add(&c->event, o->event_filter, strlen(o->event_filter)) < 0) {
			strobe_collapser_free(c);
			errno = ENOMEM;
			return NULL;
		}
		c->event_set = true;
	}
	return c;
}

static int fail(collapse *c, int r)
{
	if (r == -ENOMEM)
		strobe_errf(c->err, r, "%s: out of memory", c->name);
	else if (r == -E2BIG) /* (only a text buffer says it) */
		strobe_errf(c->err, r, "%s:%zu: a line or a frame name past %zu bytes", c->name,
			    c->lineno, TEXT_MAX);
	return c->rc = r;
}

int strobe_collapser_feed(strobe_collapser *c, const char *in, size_t len, strobe_err *err)
{
	if (c->rc)
		return c->rc;
	c->err = err;
	if (c->o.inline_)
		return c->rc = strobe_errf(err, -ENOTSUP, "%s: --inline (addr2line on every frame) "
					   "is not supported", c->name);
	const char *p = in, *end = in + len;
	int r = 0;
	if (c->carry.len && len) { /* finish the line the last piece left open */
		const char *nl = memchr(p, '\n', len);
		if ((r = strobe_buf_add(&c->carry, p, (size_t)((nl ? nl : end) - p))) < 0)
			return fail(c, r);
		if (!nl)
			return 0;
		r = on_line(c, c->carry.p, c->carry.len);
		strobe_buf_reset(&c->carry);
		p = nl + 1;
	}
	while (p < end && !r) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			r = strobe_buf_add(&c->carry, p, (size_t)(end - p));
			break;
		}
		r = on_line(c, p, (size_t)(nl - p));
		p = nl + 1;
	}
	return r < 0 ? fail(c, r) : 0;
}

int strobe_collapser_finish(strobe_collapser *c, strobe_collapse_emit emit, void *ctx,
			    strobe_err *err)
{
	if (c->rc)
		return c->rc;
	c->err = err;
	int r = 0;
	if (c->carry.len) { /* a last line without a newline is still a line */
		r = on_line(c, c->carry.p, c->carry.len);
		strobe_buf_reset(&c->carry);
	}
	/* Like the perl script, a sample not followed by a blank line is not counted (nor are
	 * --srcline frames still waiting for their line). */
	if (!r)
		r = emit_sorted(c, emit, ctx);
	return r < 0 ? fail(c, r) : 0;
}

void strobe_collapser_free(strobe_collapser *c)
{
	if (!c)
		return;
	free(c->name);
	strobe_buf_free(&c->carry);
	free(c->lt);
	strobe_buf_free(&c->lt_keys);
	free(c->lfr.p);
	free(c->nocache.p);
	free(c->cur_fr.p);
	free(c->grp.p);
	free(c->key.p);
	strobe_buf_free(&c->tmp);
	strobe_buf_free(&c->event);
	free(c->counts);
	free(c->pend_ids.p);
	free(c->pend_off.p);
	strobe_buf_free(&c->pend_txt);
	strobe_itab_free(&c->names);
	strobe_itab_free(&c->stacks);
	free(c);
}

const char *strobe_collapser_event(const strobe_collapser *c, size_t *len)
{
	*len = c->event_set ? c->event.len : 0;
	return c->event_set ? c->event.p : NULL;
}

int strobe_collapse(const char *in, size_t len, const char *name, const strobe_collapse_opts *o,
		    strobe_collapse_emit emit, void *ctx, strobe_err *err)
{
	strobe_collapser *c = strobe_collapser_new(name, o);
	if (!c)
		return strobe_errf(err, -ENOMEM, "%s: out of memory", name);
	int r = strobe_collapser_feed(c, in, len, err);
	if (!r)
		r = strobe_collapser_finish(c, emit, ctx, err);
	strobe_collapser_free(c);
	return r;
}
