// SPDX-License-Identifier: Apache-2.0
/*
 * A PGO workload where code layout and branch weights matter (bench/pgo.sh): three kernels over
 * generated input, each with the shape that profile-guided builds are for and that a single
 * dispatch loop (bench/pgo_vm.c) lacks.
 *
 *  - lz: an LZ77 compressor (hash chains, lazy matching) followed by a canonical Huffman coder
 *    (code lengths from a heap, then bit packing) over generated English-like text. The match
 *    loop's branches are skewed but data-dependent; the rare paths (long matches, window
 *    slides, chain limits) sit in the middle of the hot loop.
 *  - lex: a tokenizer for a JSON-like text whose if/else chain tests the rare cases first
 *    (escapes, unicode, comments, errors) and the common ones (letters, digits, spaces) last,
 *    as hand-written lexers often do: the compiler cannot know which arm is hot.
 *  - vm: a register machine whose opcodes are separate non-inlined handlers called through a
 *    table, each with a checked fast path and a cold slow path (overflow, bounds, traps), so the
 *    time spreads over many functions and their hot/cold split.
 *
 * Every kernel folds its results into one checksum, printed at the end: all builds of this file
 * must print the same one. Written for strobe's benchmark; sizes scale with the one argument.
 *   pgo_kernels [SCALE]    (default 200: about 1 s of CPU)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

/* ---- input ----------------------------------------------------------------------------------- */

static const char *const words[] = {
	"the", "of", "and", "to", "in", "profile", "sample", "branch", "layout", "compiler",
	"function", "block", "hot", "cold", "cache", "line", "weight", "loop", "call", "return",
	"a", "is", "that", "for", "it", "with", "as", "was", "on", "be", "by", "this", "from",
	"instruction", "discriminator", "optimisation", "frequency", "interpreter", "huffman",
};

static size_t gen_text(char *out, size_t n)
{
	size_t i = 0;
	while (i + 16 < n) {
		uint32_t r = next_rand();
		const char *w = words[r % (sizeof(words) / sizeof(words[0]))];
		size_t l = strlen(w);
		memcpy(out + i, w, l);
		i += l;
		out[i++] = (r >> 8) % 13 == 0 ? '.' : (r >> 8) % 7 == 0 ? ',' : ' ';
		if ((r >> 16) % 31 == 0)
			out[i++] = '\n';
	}
	return i;
}

/* ---- lz: LZ77 + Huffman ---------------------------------------------------------------------- */

#define WIN (1u << 15)
#define HBITS 14
#define MINM 3
#define MAXM 258
#define CHAIN 48

typedef struct { uint16_t len, dist; uint8_t lit; } token;

static uint32_t hash3(const uint8_t *p)
{
	return ((uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]) * 2654435761u >> (32 - HBITS);
}

static NOINLINE uint32_t longest_match(const uint8_t *buf, size_t pos, size_t end,
				       const int32_t *head, const int32_t *prev, uint32_t *dist)
{
	uint32_t best = 0;
	int32_t cand = head[hash3(buf + pos)];
	size_t lim = end - pos < MAXM ? end - pos : MAXM;
	for (int chain = 0; cand >= 0 && chain < CHAIN; chain++) {
		if (pos - (size_t)cand > WIN - MAXM)
			break;
		const uint8_t *a = buf + cand, *b = buf + pos;
		if (a[best] == b[best] && a[0] == b[0]) {
			uint32_t l = 1;
			while (l < lim && a[l] == b[l])
				l++;
			if (l > best) {
				best = l;
				*dist = (uint32_t)(pos - (size_t)cand);
				if (l == lim)
					break;
			}
		}
		cand = prev[cand & (WIN - 1)];
	}
	return best;
}

static NOINLINE size_t lz_parse(const uint8_t *buf, size_t n, token *out, int32_t *head,
				int32_t *prev)
{
	memset(head, 0xff, sizeof(int32_t) << HBITS);
	size_t nt = 0, pos = 0;
	while (pos + MINM <= n) {
		uint32_t dist = 0, len = longest_match(buf, pos, n, head, prev, &dist);
		/* lazy: a longer match one byte later wins over this one */
		if (len >= MINM && len < 32 && pos + 1 + MINM <= n) {
			uint32_t d2 = 0;
			uint32_t h = hash3(buf + pos);
			prev[pos & (WIN - 1)] = head[h];
			head[h] = (int32_t)pos;
			uint32_t l2 = longest_match(buf, pos + 1, n, head, prev, &d2);
			if (l2 > len + 1) {
				out[nt++] = (token){0, 0, buf[pos]};
				pos++;
				len = l2;
				dist = d2;
			} else {
				for (uint32_t k = 1; k < len; k++) {
					uint32_t hk = hash3(buf + pos + k);
					prev[(pos + k) & (WIN - 1)] = head[hk];
					head[hk] = (int32_t)(pos + k);
				}
				out[nt++] = (token){(uint16_t)len, (uint16_t)dist, 0};
				pos += len;
				continue;
			}
		}
		if (len >= MINM) {
			for (uint32_t k = 0; k < len && pos + k + MINM <= n; k++) {
				uint32_t hk = hash3(buf + pos + k);
				prev[(pos + k) & (WIN - 1)] = head[hk];
				head[hk] = (int32_t)(pos + k);
			}
			out[nt++] = (token){(uint16_t)len, (uint16_t)dist, 0};
			pos += len;
		} else {
			uint32_t h = hash3(buf + pos);
			prev[pos & (WIN - 1)] = head[h];
			head[h] = (int32_t)pos;
			out[nt++] = (token){0, 0, buf[pos]};
			pos++;
		}
	}
	while (pos < n)
		out[nt++] = (token){0, 0, buf[pos++]};
	return nt;
}

/* symbol of a token: literals 0-255, lengths 256 + a log bucket */
static unsigned sym_of(const token *t)
{
	if (!t->len)
		return t->lit;
	unsigned b = 0;
	for (unsigned l = t->len; l > 3; l >>= 1)
		b++;
	return 256 + b;
}

#define NSYM 272

static NOINLINE void huff_lengths(const uint64_t *freq, uint8_t *len)
{
	/* a binary heap of (weight, node); internal nodes numbered NSYM.. */
	uint64_t w[2 * NSYM];
	int parent[2 * NSYM], heap[2 * NSYM], hn = 0, nodes = NSYM;
	for (int i = 0; i < NSYM; i++) {
		w[i] = freq[i];
		parent[i] = -1;
		len[i] = 0;
		if (!freq[i])
			continue;
		int j = hn++;
		while (j && w[heap[(j - 1) / 2]] > w[i]) {
			heap[j] = heap[(j - 1) / 2];
			j = (j - 1) / 2;
		}
		heap[j] = i;
	}
	while (hn > 1) {
		int ab[2];
		for (int k = 0; k < 2; k++) {
			ab[k] = heap[0];
			int last = heap[--hn], j = 0;
			for (;;) {
				int c = 2 * j + 1;
				if (c >= hn)
					break;
				if (c + 1 < hn && w[heap[c + 1]] < w[heap[c]])
					c++;
				if (w[heap[c]] >= w[last])
					break;
				heap[j] = heap[c];
				j = c;
			}
			heap[j] = last;
		}
		int nn = nodes++;
		w[nn] = w[ab[0]] + w[ab[1]];
		parent[nn] = -1;
		parent[ab[0]] = parent[ab[1]] = nn;
		int j = hn++;
		while (j && w[heap[(j - 1) / 2]] > w[nn]) {
			heap[j] = heap[(j - 1) / 2];
			j = (j - 1) / 2;
		}
		heap[j] = nn;
	}
	for (int i = 0; i < NSYM; i++) {
		if (!freq[i])
			continue;
		unsigned d = 0;
		for (int x = i; parent[x] >= 0; x = parent[x])
			d++;
		len[i] = (uint8_t)(d > 15 ? 15 : d ? d : 1);
	}
}

static NOINLINE uint64_t huff_pack(const token *t, size_t nt, const uint8_t *len, uint8_t *out)
{
	uint32_t code[NSYM], next = 0;
	for (unsigned l = 1; l <= 15; l++) {
		for (unsigned s = 0; s < NSYM; s++)
			if (len[s] == l)
				code[s] = next++;
		next <<= 1;
	}
	uint64_t acc = 0, h = 0;
	unsigned bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < nt; i++) {
		unsigned s = sym_of(&t[i]);
		acc = acc << len[s] | code[s];
		bits += len[s];
		if (t[i].len) { /* extra bits: the distance */
			acc = acc << 15 | t[i].dist;
			bits += 15;
		}
		while (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	for (size_t i = 0; i < o; i += 61)
		h = mix(h, out[i]);
	return mix(h, o);
}

static uint64_t kernel_lz(int scale)
{
	size_t n = (size_t)scale * 36000;
	/* zeros past the text: hash3 reads up to 2 bytes beyond it */
	uint8_t *buf = calloc(1, n + 16), *packed = malloc(4 * n + 64);
	token *tok = malloc((n + 1) * sizeof(*tok));
	int32_t *head = malloc(sizeof(int32_t) << HBITS), *prev = malloc(sizeof(int32_t) * WIN);
	if (!buf || !packed || !tok || !head || !prev)
		exit(2);
	n = gen_text((char *)buf, n);
	size_t nt = lz_parse(buf, n, tok, head, prev);
	uint64_t freq[NSYM] = {0};
	for (size_t i = 0; i < nt; i++)
		freq[sym_of(&tok[i])]++;
	uint8_t len[NSYM];
	huff_lengths(freq, len);
	uint64_t h = huff_pack(tok, nt, len, packed);
	free(buf), free(packed), free(tok), free(head), free(prev);
	return mix(h, nt);
}

/* ---- lex: a tokenizer with the common cases last ------------------------------------------- */

static size_t gen_json(char *out, size_t n)
{
	size_t i = 0;
	while (i + 64 < n) {
		uint32_t r = next_rand();
		switch (r % 16) {
		case 0: i += (size_t)sprintf(out + i, "\"k\\n%u\": ", r >> 20); break;
		case 1: i += (size_t)sprintf(out + i, "/* c */ "); break;
		case 2: i += (size_t)sprintf(out + i, "\"\\u00e9t\\u00e9\", "); break;
		case 3: case 4: case 5: i += (size_t)sprintf(out + i, "%u.%u, ", r >> 12, r & 255); break;
		case 6: i += (size_t)sprintf(out + i, "[true, false, null], "); break;
		default: i += (size_t)sprintf(out + i, "{name: value%u, other: word}, ", r & 1023); break;
		}
		if (r % 97 == 0)
			out[i++] = '#'; /* a stray byte: an error token */
	}
	out[i] = 0;
	return i;
}

enum { T_STR, T_NUM, T_IDENT, T_PUNCT, T_ERR, T_KW };

static NOINLINE uint64_t lex(const char *s, size_t n, uint64_t seed)
{
	uint64_t counts[6] = {0}, h = seed; /* a seed per pass: else the passes are one call, CSEd */
	size_t i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c == '/' && s[i + 1] == '*') { /* comment */
			i += 2;
			while (i < n && !(s[i] == '*' && s[i + 1] == '/'))
				i++;
			i += 2;
		} else if (c == '"') { /* string with escapes */
			uint32_t sh = 0;
			for (i++; i < n && s[i] != '"'; i++) {
				if (s[i] == '\\') {
					i++;
					if (s[i] == 'u') {
						uint32_t u = 0;
						for (int k = 1; k <= 4; k++) {
							char d = s[i + k];
							u = u * 16 + (uint32_t)(d <= '9' ? d - '0' : (d | 32) - 'a' + 10);
						}
						sh = sh * 31 + u;
						i += 4;
					} else {
						sh = sh * 31 + (s[i] == 'n' ? '\n' : (unsigned char)s[i]);
					}
				} else {
					sh = sh * 31 + (unsigned char)s[i];
				}
			}
			i++;
			counts[T_STR]++;
			h = mix(h, sh);
		} else if (c == '#' || c >= 0x80) {
			counts[T_ERR]++;
			h = mix(h, i);
			i++;
		} else if (c >= '0' && c <= '9') {
			uint64_t v = 0;
			while (i < n && s[i] >= '0' && s[i] <= '9')
				v = v * 10 + (uint64_t)(s[i++] - '0');
			if (s[i] == '.') {
				i++;
				while (i < n && s[i] >= '0' && s[i] <= '9')
					v = v * 10 + (uint64_t)(s[i++] - '0');
			}
			counts[T_NUM]++;
			h = mix(h, v);
		} else if (c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':') {
			counts[T_PUNCT]++;
			h = h * 3 + c;
			i++;
		} else if ((c | 32) >= 'a' && (c | 32) <= 'z') {
			size_t st = i;
			uint32_t wh = 0;
			while (i < n && (((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') ||
					 (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
				wh = wh * 33 + (unsigned char)s[i++];
			size_t l = i - st;
			if ((l == 4 && !memcmp(s + st, "true", 4)) || (l == 5 && !memcmp(s + st, "false", 5)) ||
			    (l == 4 && !memcmp(s + st, "null", 4)))
				counts[T_KW]++;
			else
				counts[T_IDENT]++;
			h = mix(h, wh);
		} else {
			i++; /* space */
		}
	}
	for (int k = 0; k < 6; k++)
		h = mix(h, counts[k]);
	return h;
}

static uint64_t kernel_lex(int scale)
{
	size_t n = (size_t)scale * 100000;
	char *s = malloc(n + 80);
	if (!s)
		exit(2);
	n = gen_json(s, n);
	uint64_t h = 0;
	for (int r = 0; r < 8; r++)
		h = mix(h, lex(s, n, (uint64_t)r));
	free(s);
	return h;
}

/* ---- vm: a register machine with non-inlined handlers --------------------------------------- */

typedef struct vm {
	int64_t r[8];
	int64_t mem[256];
	uint64_t traps, steps;
	int pc;
} vm;

typedef struct insn { uint8_t op, a, b, c; int32_t imm; } insn;
typedef void (*handler)(vm *, const insn *);

static NOINLINE void trap(vm *m, int why)
{
	m->traps++;
	m->r[7] = (int64_t)((uint64_t)m->r[7] * 7 + (uint64_t)why); /* wraps, defined */
}

static NOINLINE void op_add(vm *m, const insn *i)
{
	int64_t x;
	if (__builtin_add_overflow(m->r[i->b], m->r[i->c], &x)) {
		trap(m, 1);
		x = 0;
	}
	m->r[i->a] = x;
	m->pc++;
}
static NOINLINE void op_addi(vm *m, const insn *i)
{
	int64_t x;
	if (__builtin_add_overflow(m->r[i->b], (int64_t)i->imm, &x)) {
		trap(m, 2);
		x = 0;
	}
	m->r[i->a] = x;
	m->pc++;
}
static NOINLINE void op_mul(vm *m, const insn *i)
{
	int64_t x;
	if (__builtin_mul_overflow(m->r[i->b], m->r[i->c], &x)) {
		trap(m, 3);
		x = m->r[i->b] ^ m->r[i->c];
	}
	m->r[i->a] = x & 0xffffffffff;
	m->pc++;
}
static NOINLINE void op_div(vm *m, const insn *i)
{
	int64_t d = m->r[i->c];
	if (d == 0 || (d == -1 && m->r[i->b] == INT64_MIN)) {
		trap(m, 4);
		m->r[i->a] = 0;
	} else {
		m->r[i->a] = m->r[i->b] / d;
	}
	m->pc++;
}
static NOINLINE void op_load(vm *m, const insn *i)
{
	int64_t a = m->r[i->b] + i->imm;
	if (a < 0 || a >= 256) {
		trap(m, 5);
		a &= 255;
	}
	m->r[i->a] = m->mem[a];
	m->pc++;
}
static NOINLINE void op_store(vm *m, const insn *i)
{
	int64_t a = m->r[i->b] + i->imm;
	if (a < 0 || a >= 256) {
		trap(m, 6);
		a &= 255;
	}
	m->mem[a] = m->r[i->a];
	m->pc++;
}
static NOINLINE void op_blt(vm *m, const insn *i)
{
	m->pc = m->r[i->a] < m->r[i->b] ? m->pc + i->imm : m->pc + 1;
}
static NOINLINE void op_xor(vm *m, const insn *i)
{
	m->r[i->a] = m->r[i->b] ^ (m->r[i->c] >> (i->imm & 31));
	m->pc++;
}
static NOINLINE void op_and(vm *m, const insn *i)
{
	m->r[i->a] = m->r[i->b] & (i->imm ? i->imm : m->r[i->c]);
	m->pc++;
}

enum { ADD, ADDI, MUL, DIV, LOAD, STORE, BLT, XOR, AND, HALT };
static const handler table[] = {op_add, op_addi, op_mul, op_div, op_load,
				op_store, op_blt, op_xor, op_and};

static NOINLINE void run(vm *m, const insn *code, int len)
{
	while (m->pc >= 0 && m->pc < len && code[m->pc].op != HALT) {
		table[code[m->pc].op](m, &code[m->pc]);
		m->steps++;
	}
}

static uint64_t kernel_vm(int scale)
{
	/* r0 = i, r1 = n, r2 = acc, r3 = tmp, r4 = address, r5 = step, r6 = divisor */
	const insn prog[] = {
		{ADDI, 0, 0, 0, 0},   {ADDI, 5, 5, 0, 1},	{ADDI, 2, 2, 0, 17},
		/* loop (pc 3) */
		{AND, 4, 0, 0, 255},  {LOAD, 3, 4, 0, 0},	{MUL, 3, 3, 2, 0},
		{ADD, 2, 2, 3, 0},    {XOR, 2, 2, 0, 7},	{AND, 6, 0, 0, 7},
		{DIV, 3, 2, 6, 0},    {ADD, 3, 3, 5, 0},	{STORE, 3, 4, 0, 0},
		{ADD, 0, 0, 5, 0},    {BLT, 0, 1, 0, -10},	{HALT, 0, 0, 0, 0},
	};
	vm m;
	memset(&m, 0, sizeof(m));
	for (int k = 0; k < 256; k++)
		m.mem[k] = (int64_t)(next_rand() % 1000);
	m.r[1] = (int64_t)scale * 40000;
	run(&m, prog, (int)(sizeof(prog) / sizeof(prog[0])));
	uint64_t h = mix(m.traps, m.steps);
	for (int k = 0; k < 8; k++)
		h = mix(h, (uint64_t)m.r[k]);
	return h;
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 200;
	if (scale < 1 || scale > 100000) {
		fprintf(stderr, "pgo_kernels: SCALE must be 1..100000\n");
		return 2;
	}
	uint64_t h = kernel_lz(scale);
	h = mix(h, kernel_lex(scale));
	h = mix(h, kernel_vm(scale));
	printf("%016llx\n", (unsigned long long)h);
	return 0;
}
