// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of unwinding with unwind tables (--call-graph dwarf/auto), through the sampler's
 * offline interface: a sample whose registers and stack copy are this test's own, taken three
 * calls deep, with an empty frame-pointer chain, must come out as the whole chain of calls
 * (named by the symbolizer), and a stack slice too small to reach them must be counted as
 * truncated. The sample carries no frame-pointer chain: only the unwinder can find the callers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/perf_event.h>

#include "strobe/codec.h"
#include "strobe/sampler.h"

#if defined(__x86_64__)

static const strobe_sampler_layout L = {
	.id = {11, 22, 33},
	.prev_state_offset = 32, .prev_state_size = 8, .next_pid_offset = 56, .wakeup_pid_offset = 24};

typedef struct buf {
	uint8_t b[1 << 16];
	size_t len, start;
} buf;

static void put(buf *w, const void *p, size_t n)
{
	memcpy(w->b + w->len, p, n);
	w->len += n;
}
static void u64(buf *w, uint64_t v) { put(w, &v, 8); }
static void u32x2(buf *w, uint32_t a, uint32_t b)
{
	uint32_t v[2] = {a, b};
	put(w, v, 8);
}
static void begin(buf *w, uint32_t type, uint16_t misc)
{
	w->start = w->len;
	struct perf_event_header h = {.type = type, .misc = misc, .size = 0};
	put(w, &h, sizeof(h));
}
static void end(buf *w)
{
	while (w->len % 8)
		w->b[w->len++] = 0;
	struct perf_event_header *h = (void *)(w->b + w->start);
	h->size = (uint16_t)(w->len - w->start);
}

/* MMAP2 records for this process's executable file mappings, from /proc/self/maps. */
static void self_maps(buf *w, uint32_t pid)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, off;
		char perms[8];
		int n = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &a, &b, perms, &off, &n) < 4 ||
		    perms[2] != 'x')
			continue;
		char *path = line + n;
		path[strcspn(path, "\n")] = 0;
		if (path[0] != '/')
			continue;
		begin(w, PERF_RECORD_MMAP2, 0);
		u32x2(w, pid, pid);
		u64(w, a);
		u64(w, b - a);
		u64(w, off);
		u32x2(w, 0, 0);
		u64(w, 0);
		u64(w, 0);
		u32x2(w, 5, 2);
		put(w, path, strlen(path) + 1);
		while ((w->len - w->start) % 8)
			w->b[w->len++] = 0;
		u32x2(w, pid, pid); /* trailer */
		u64(w, 1);
		u32x2(w, 0, 0);
		u64(w, L.id[0]);
		end(w);
	}
	fclose(f);
}

#define STACK 8192
static uint64_t stack_top; /* end of the mapping holding this thread's stack */

/* The end of the /proc/self/maps mapping that holds `addr`. */
static uint64_t mapping_end(uint64_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[4096];
	unsigned long long a, b, end = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx", &a, &b) == 2 && addr >= a && addr < b)
			end = b;
	fclose(f);
	return end;
}
static uint64_t regs[17]; /* perf order: AX BX CX DX SI DI BP SP IP R8..R15 */
static uint8_t stack_copy[STACK];
static size_t stack_len;

/* Registers at this point and the stack above them. No sanitizer: the copy reads other frames'
 * redzones, as the kernel's does. */
__attribute__((noinline, no_sanitize_address)) static void
capture(void)
{
	uint64_t *r = regs;
	__asm__ volatile("mov %%rax, 0(%0)\n\tmov %%rbx, 8(%0)\n\tmov %%rcx, 16(%0)\n\t"
			 "mov %%rdx, 24(%0)\n\tmov %%rsi, 32(%0)\n\tmov %%rdi, 40(%0)\n\t"
			 "mov %%rbp, 48(%0)\n\tmov %%rsp, 56(%0)\n\tlea 0(%%rip), %%rax\n\t"
			 "mov %%rax, 64(%0)\n\tmov %%r8, 72(%0)\n\tmov %%r9, 80(%0)\n\t"
			 "mov %%r10, 88(%0)\n\tmov %%r11, 96(%0)\n\tmov %%r12, 104(%0)\n\t"
			 "mov %%r13, 112(%0)\n\tmov %%r14, 120(%0)\n\tmov %%r15, 128(%0)\n\t"
			 :
			 : "r"(r)
			 : "rax", "memory");
	const volatile uint8_t *sp = (const uint8_t *)(uintptr_t)regs[7];
	/* Never past the top of the stack's mapping (as the kernel's copy stops there too): with a
	 * small environment the top can be less than STACK bytes above these frames. */
	size_t n = stack_top > regs[7] && stack_top - regs[7] < STACK ? stack_top - regs[7] : STACK;
	for (size_t i = 0; i < n; i++)
		stack_copy[i] = sp[i];
	stack_len = n;
}

static volatile int sink;
__attribute__((noinline)) static void level3(void)
{
	capture();
	sink++;
}
__attribute__((noinline)) static void level2(void)
{
	level3();
	sink++;
}
__attribute__((noinline)) static void level1(void)
{
	level2();
	sink++;
}

/* A cpu-clock sample with the captured registers and `len` bytes of the stack copy, and an
 * empty user call chain (what --call-graph dwarf asks of the kernel). */
static void sample(buf *w, uint32_t pid, size_t len)
{
	begin(w, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	u64(w, L.id[0]);
	u64(w, regs[8]);
	u32x2(w, pid, pid);
	u64(w, 10);
	u32x2(w, 0, 0);
	u64(w, 10000000);
	u64(w, 0); /* callchain: nr 0 */
	u64(w, PERF_SAMPLE_REGS_ABI_64);
	put(w, regs, sizeof(regs));
	u64(w, len);
	put(w, stack_copy, len);
	u64(w, len); /* dyn_size */
	end(w);
}

static char *run(unsigned cg, size_t len, strobe_sampler_stats *st)
{
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 100, .kernel = true,
				 .call_graph = cg, .stack_size = (unsigned)len};
	strobe_sampler *s;
	assert_int_equal(strobe_sampler_open_offline(&o, &L, &s), 0);
	static buf w;
	w.len = 0;
	uint32_t pid = (uint32_t)getpid();
	self_maps(&w, pid);
	sample(&w, pid, len);
	const char *dir = getenv("STROBE_SEED_DIR"); /* a seed for fuzz_perf_records */
	if (dir) {
		char path[512];
		snprintf(path, sizeof(path), "%s/unwind-%u-%zu", dir, cg, len);
		FILE *f = fopen(path, "wb");
		if (f) {
			uint8_t mode = (uint8_t)(STROBE_EV_CPU | 16 | (cg << 6));
			fwrite(&mode, 1, 1, f);
			fwrite(w.b, 1, w.len, f);
			fclose(f);
		}
	}
	assert_int_equal(strobe_sampler_feed(s, w.b, w.len, INT64_MAX), 0);
	strobe_sampler_get_stats(s, st);
	strobe_sym_opts so = {.no_kernel = true};
	strobe_symbolizer *sym = strobe_symbolizer_new(&so);
	assert_non_null(sym);
	strobe_sampler_profile_opts po = {.sym = sym};
	strobe_err err;
	strobe_profile *p = strobe_sampler_profile(s, &po, &err);
	assert_non_null(p);
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	assert_int_equal(strobe_folded_write(f, p, strobe_type_index(p, "samples"), STROBE_GRAN_FUNCTIONS), 0);
	fclose(f);
	strobe_profile_free(p);
	strobe_symbolizer_free(sym);
	strobe_sampler_close(s);
	return out;
}

static void test_whole_chain(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	level1();
	strobe_sampler_stats st;
	char *out = run(STROBE_CG_DWARF, stack_len, &st);
	assert_non_null(strstr(out, "test_whole_chain;level1;level2;level3;capture 1"));
	assert_int_equal(st.unwound, 1);
	assert_int_equal(st.unwind_truncated, 0);
	assert_int_equal(st.unwind_complete, 1); /* up to _start */
	free(out);
	/* auto: the same (the empty frame-pointer chain adds nothing) */
	out = run(STROBE_CG_AUTO, stack_len, &st);
	assert_non_null(strstr(out, "level1;level2;level3;capture 1"));
	free(out);
}

static void test_truncated(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	level1();
	strobe_sampler_stats st;
	char *out = run(STROBE_CG_DWARF, 16, &st); /* not even capture's return address */
	assert_int_equal(st.unwind_truncated, 1);
	assert_null(strstr(out, "level1"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_chain),
		cmocka_unit_test(test_truncated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void)
{
	puts("SKIP test_unwind: unwinding with tables is implemented for x86-64 only");
	return 0;
}
#endif
