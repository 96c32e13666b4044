// SPDX-License-Identifier: Apache-2.0
/*
 * The workload of bench/pgo.sh and tests/e2e/pgo.sh: a bytecode interpreter (a switch-dispatched
 * stack machine, the branchy hot loop of every scripting language) running four programs of
 * different shapes: a prime sieve (memory, compare-and-branch), a recursive Fibonacci (calls),
 * an FNV hash over generated text (tight arithmetic) and an insertion sort (data-dependent
 * branches). Their mix decides which opcode handlers are hot and which branches go which way,
 * which is what a profile tells the compiler and a plain -O2 build has to guess.
 *
 * Usage: pgo_vm [SCALE]   (default 20; runtime grows linearly). Prints one checksum line, the
 * same for every build of this file, so a rewritten binary can be checked for equal output.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op {
	OP_PUSH, OP_LOAD, OP_STORE, OP_ADD, OP_SUB, OP_MUL, OP_XOR, OP_AND, OP_SHR, OP_LT, OP_EQ,
	OP_JMP, OP_JZ, OP_JNZ, OP_CALL, OP_RET, OP_DUP, OP_POP, OP_ALOAD, OP_ASTORE, OP_SWAP,
	OP_MOD, OP_HALT, OP_NOP, OP_DIV, OP_OR, OP_SHL, OP_NEG, OP_GT, OP_NE, OP_OVER, OP_INC
};

typedef struct vm {
	int64_t stack[1024];
	int64_t vars[16];
	int64_t *mem;
	size_t memlen;
	int sp, fp;
	struct { int ret, fp; } frames[256];
	int nframes;
	uint64_t steps;
} vm;

/* Rarely taken: the error paths a profile marks cold. */
static void __attribute__((noinline)) vm_fault(const char *why, int pc)
{
	fprintf(stderr, "pgo_vm: %s at pc %d\n", why, pc);
	exit(3);
}

static inline int64_t pop(vm *m, int pc)
{
	if (m->sp <= 0)
		vm_fault("stack underflow", pc);
	return m->stack[--m->sp];
}

static inline void push(vm *m, int64_t v, int pc)
{
	if (m->sp >= 1024)
		vm_fault("stack overflow", pc);
	m->stack[m->sp++] = v;
}

int64_t vm_run(vm *m, const int32_t *code, int pc)
{
	for (;;) {
		m->steps++;
		int32_t op = code[pc], arg = code[pc + 1];
		pc += 2;
		int64_t a, b;
		switch (op) {
		case OP_PUSH: push(m, arg, pc); break;
		case OP_LOAD: push(m, m->vars[m->fp + arg], pc); break;
		case OP_STORE: m->vars[m->fp + arg] = pop(m, pc); break;
		case OP_ADD: b = pop(m, pc); a = pop(m, pc); push(m, a + b, pc); break;
		case OP_SUB: b = pop(m, pc); a = pop(m, pc); push(m, a - b, pc); break;
		case OP_MUL: b = pop(m, pc); a = pop(m, pc); push(m, (int64_t)((uint64_t)a * (uint64_t)b), pc); break;
		case OP_XOR: b = pop(m, pc); a = pop(m, pc); push(m, a ^ b, pc); break;
		case OP_AND: b = pop(m, pc); a = pop(m, pc); push(m, a & b, pc); break;
		case OP_OR: b = pop(m, pc); a = pop(m, pc); push(m, a | b, pc); break;
		case OP_SHR: b = pop(m, pc); a = pop(m, pc); push(m, (int64_t)((uint64_t)a >> (b & 63)), pc); break;
		case OP_SHL: b = pop(m, pc); a = pop(m, pc); push(m, (int64_t)((uint64_t)a << (b & 63)), pc); break;
		case OP_LT: b = pop(m, pc); a = pop(m, pc); push(m, a < b, pc); break;
		case OP_GT: b = pop(m, pc); a = pop(m, pc); push(m, a > b, pc); break;
		case OP_EQ: b = pop(m, pc); a = pop(m, pc); push(m, a == b, pc); break;
		case OP_NE: b = pop(m, pc); a = pop(m, pc); push(m, a != b, pc); break;
		case OP_MOD:
			b = pop(m, pc); a = pop(m, pc);
			if (b == 0)
				vm_fault("modulo by zero", pc);
			push(m, a % b, pc);
			break;
		case OP_DIV:
			b = pop(m, pc); a = pop(m, pc);
			if (b == 0)
				vm_fault("division by zero", pc);
			push(m, a / b, pc);
			break;
		case OP_NEG: push(m, -pop(m, pc), pc); break;
		case OP_JMP: pc = arg; break;
		case OP_JZ: if (pop(m, pc) == 0) pc = arg; break;
		case OP_JNZ: if (pop(m, pc) != 0) pc = arg; break;
		case OP_DUP: a = pop(m, pc); push(m, a, pc); push(m, a, pc); break;
		case OP_OVER: b = pop(m, pc); a = pop(m, pc); push(m, a, pc); push(m, b, pc); push(m, a, pc); break;
		case OP_SWAP: b = pop(m, pc); a = pop(m, pc); push(m, b, pc); push(m, a, pc); break;
		case OP_POP: (void)pop(m, pc); break;
		case OP_INC: m->vars[m->fp + arg]++; break;
		case OP_ALOAD:
			a = pop(m, pc);
			if (a < 0 || (size_t)a >= m->memlen)
				vm_fault("load out of bounds", pc);
			push(m, m->mem[a], pc);
			break;
		case OP_ASTORE:
			b = pop(m, pc); a = pop(m, pc);
			if (a < 0 || (size_t)a >= m->memlen)
				vm_fault("store out of bounds", pc);
			m->mem[a] = b;
			break;
		case OP_CALL:
			if (m->nframes >= 256)
				vm_fault("call depth", pc);
			m->frames[m->nframes].ret = pc;
			m->frames[m->nframes++].fp = m->fp;
			m->fp = (m->fp + 4) & 7; /* a sliding window of 4 locals, 16 slots */
			pc = arg;
			break;
		case OP_RET:
			if (m->nframes == 0)
				return pop(m, pc);
			m->nframes--;
			pc = m->frames[m->nframes].ret;
			m->fp = m->frames[m->nframes].fp;
			break;
		case OP_NOP: break;
		case OP_HALT: return m->sp ? pop(m, pc) : 0;
		default: vm_fault("bad opcode", pc);
		}
	}
}

/* A tiny assembler: programs as (op, arg) pairs with labels patched by index. */
typedef struct prog { int32_t c[512]; int n; } prog;
static int emit(prog *p, int op, int arg) { p->c[p->n] = op; p->c[p->n + 1] = arg; p->n += 2; return p->n - 2; }
static void patch(prog *p, int at, int target) { p->c[at + 1] = target; }

/* sieve of n: counts primes below n, memory 0..n-1 as flags */
static void build_sieve(prog *p, int n)
{
	/* v0 = i = 2 */
	emit(p, OP_PUSH, 2); emit(p, OP_STORE, 0);
	int outer = p->n;
	emit(p, OP_LOAD, 0); emit(p, OP_LOAD, 0); emit(p, OP_MUL, 0); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int jend = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 0); emit(p, OP_ALOAD, 0);
	int jskip = emit(p, OP_JNZ, 0);
	/* j = i*i */
	emit(p, OP_LOAD, 0); emit(p, OP_LOAD, 0); emit(p, OP_MUL, 0); emit(p, OP_STORE, 1);
	int inner = p->n;
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int jin = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, 1); emit(p, OP_ASTORE, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_LOAD, 0); emit(p, OP_ADD, 0); emit(p, OP_STORE, 1);
	emit(p, OP_JMP, inner);
	patch(p, jin, p->n);
	patch(p, jskip, p->n);
	emit(p, OP_INC, 0); emit(p, OP_JMP, outer);
	patch(p, jend, p->n);
	/* count zeros from 2 */
	emit(p, OP_PUSH, 0); emit(p, OP_STORE, 2); emit(p, OP_PUSH, 2); emit(p, OP_STORE, 0);
	int cnt = p->n;
	emit(p, OP_LOAD, 0); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int jc = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 0); emit(p, OP_ALOAD, 0);
	int jp = emit(p, OP_JNZ, 0);
	emit(p, OP_INC, 2);
	patch(p, jp, p->n);
	emit(p, OP_INC, 0); emit(p, OP_JMP, cnt);
	patch(p, jc, p->n);
	emit(p, OP_LOAD, 2); emit(p, OP_HALT, 0);
}

/* fib(n) recursively: arg on the stack, result on the stack */
static void build_fib(prog *p, int n)
{
	emit(p, OP_PUSH, n);
	int call = emit(p, OP_CALL, 0);
	emit(p, OP_HALT, 0);
	int fn = p->n;
	patch(p, call, fn);
	emit(p, OP_DUP, 0); emit(p, OP_PUSH, 2); emit(p, OP_LT, 0);
	int jbase = emit(p, OP_JNZ, 0);
	emit(p, OP_DUP, 0); emit(p, OP_PUSH, 1); emit(p, OP_SUB, 0);
	emit(p, OP_CALL, fn);
	emit(p, OP_SWAP, 0); emit(p, OP_PUSH, 2); emit(p, OP_SUB, 0);
	emit(p, OP_CALL, fn);
	emit(p, OP_ADD, 0);
	patch(p, jbase, p->n);
	emit(p, OP_RET, 0);
}

/* FNV-1a over mem[0..n) */
static void build_hash(prog *p, int n)
{
	emit(p, OP_PUSH, (int32_t)2166136261u); emit(p, OP_STORE, 1);
	emit(p, OP_PUSH, 0); emit(p, OP_STORE, 0);
	int loop = p->n;
	emit(p, OP_LOAD, 0); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int jend = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_LOAD, 0); emit(p, OP_ALOAD, 0); emit(p, OP_XOR, 0);
	emit(p, OP_PUSH, 16777619); emit(p, OP_MUL, 0);
	emit(p, OP_PUSH, 0x7fffffff); emit(p, OP_AND, 0); emit(p, OP_STORE, 1);
	emit(p, OP_INC, 0); emit(p, OP_JMP, loop);
	patch(p, jend, p->n);
	emit(p, OP_LOAD, 1); emit(p, OP_HALT, 0);
}

/* insertion sort of mem[0..n), then a checksum of mem[i]*i */
static void build_sort(prog *p, int n)
{
	emit(p, OP_PUSH, 1); emit(p, OP_STORE, 0);
	int outer = p->n;
	emit(p, OP_LOAD, 0); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int jend = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 0); emit(p, OP_ALOAD, 0); emit(p, OP_STORE, 2); /* key */
	emit(p, OP_LOAD, 0); emit(p, OP_PUSH, 1); emit(p, OP_SUB, 0); emit(p, OP_STORE, 1); /* j */
	int inner = p->n;
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, 0); emit(p, OP_LT, 0);
	int jdone = emit(p, OP_JNZ, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_ALOAD, 0); emit(p, OP_LOAD, 2); emit(p, OP_GT, 0);
	int jdone2 = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, 1); emit(p, OP_ADD, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_ALOAD, 0); emit(p, OP_ASTORE, 0);
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, 1); emit(p, OP_SUB, 0); emit(p, OP_STORE, 1);
	emit(p, OP_JMP, inner);
	patch(p, jdone, p->n);
	patch(p, jdone2, p->n);
	emit(p, OP_LOAD, 1); emit(p, OP_PUSH, 1); emit(p, OP_ADD, 0); emit(p, OP_LOAD, 2); emit(p, OP_ASTORE, 0);
	emit(p, OP_INC, 0); emit(p, OP_JMP, outer);
	patch(p, jend, p->n);
	emit(p, OP_PUSH, 0); emit(p, OP_STORE, 3); emit(p, OP_PUSH, 0); emit(p, OP_STORE, 0);
	int sum = p->n;
	emit(p, OP_LOAD, 0); emit(p, OP_PUSH, n); emit(p, OP_LT, 0);
	int js = emit(p, OP_JZ, 0);
	emit(p, OP_LOAD, 3); emit(p, OP_LOAD, 0); emit(p, OP_ALOAD, 0); emit(p, OP_LOAD, 0); emit(p, OP_MUL, 0);
	emit(p, OP_ADD, 0); emit(p, OP_PUSH, 0x7fffffff); emit(p, OP_AND, 0); emit(p, OP_STORE, 3);
	emit(p, OP_INC, 0); emit(p, OP_JMP, sum);
	patch(p, js, p->n);
	emit(p, OP_LOAD, 3); emit(p, OP_HALT, 0);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static int64_t run(const prog *p, int64_t *mem, size_t memlen, uint64_t *steps)
{
	vm *m = calloc(1, sizeof(*m));
	if (!m)
		exit(2);
	m->mem = mem;
	m->memlen = memlen;
	int64_t r = vm_run(m, p->c, 0);
	*steps += m->steps;
	free(m);
	return r;
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 20;
	if (scale < 1 || scale > 100000) {
		fprintf(stderr, "usage: pgo_vm [SCALE 1..100000]\n");
		return 2;
	}
	size_t memlen = 200000;
	int64_t *mem = calloc(memlen, sizeof(*mem));
	if (!mem)
		return 2;
	uint64_t steps = 0, sum = 0;
	for (int round = 0; round < scale; round++) {
		prog p;
		memset(mem, 0, memlen * sizeof(*mem));
		p.n = 0; build_sieve(&p, 150000);
		sum = sum * 31 + (uint64_t)run(&p, mem, memlen, &steps);
		p.n = 0; build_fib(&p, 20);
		sum = sum * 31 + (uint64_t)run(&p, mem, memlen, &steps);
		for (size_t i = 0; i < 60000; i++)
			mem[i] = (int64_t)(next_rand() % 251);
		p.n = 0; build_hash(&p, 60000);
		sum = sum * 31 + (uint64_t)run(&p, mem, memlen, &steps);
		for (size_t i = 0; i < 700; i++)
			mem[i] = (int64_t)(next_rand() % 100000);
		p.n = 0; build_sort(&p, 700);
		sum = sum * 31 + (uint64_t)run(&p, mem, memlen, &steps);
	}
	printf("pgo_vm: scale %d, %llu steps, checksum %016llx\n", scale, (unsigned long long)steps,
	       (unsigned long long)sum);
	free(mem);
	return 0;
}
