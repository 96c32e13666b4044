// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of unwinding with unwind tables (--call-graph dwarf/auto), through the sampler's
 * offline interface: a sample whose registers and stack copy are this test's own, taken three
 * calls deep, with an empty frame-pointer chain, must come out as the whole chain of calls
 * (named by the symbolizer), and a stack slice too small to reach them must be counted as
 * truncated. The sample carries no frame-pointer chain: only the unwinder can find the callers.
 *
 * Then the unwinder itself (agent/unwind.h) over a tracker built here: the table cache (a binary
 * parsed once for two processes that map it, found by build ID for the second; eviction under a
 * budget and the same stack after re-parsing), and the walk on synthetic stacks whose frames are
 * known: a frame-pointer chain through JIT code (exact addresses, its end, a frame pointer that
 * goes down, a slice too small), a leaf in the vDSO, walked by the vDSO image's own CFI, and a
 * leaf at the program's entry point (nothing above it).
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

#include "fixtures.h"
#include <elf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/wait.h>

#include "strobe/codec.h"
#include "strobe/sampler.h"
#include "strobe/symbolize.h"

#include "../../agent/sampler_ext.h"
#include "../../agent/unwind.h"

#if defined(__x86_64__)

#include "perf_records.h"

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
/* Bytes of the stack copy reserved past what the kernel wrote (0: it filled the slice). */
static size_t sample_slack;

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
	u64(w, len + sample_slack);
	put(w, stack_copy, len);
	for (size_t i = 0; i < sample_slack; i++)
		w->b[w->len++] = 0;
	u64(w, len); /* dyn_size */
	end(w);
}

/* The exec of another program by pid at time t: its COMM record and the new image's mapping
 * (nothing of this test's code is in it). */
static void exec_other(buf *w, uint32_t pid, uint64_t t)
{
	begin(w, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	u32x2(w, pid, pid);
	char c[16] = "true";
	put(w, c, 16);
	u32x2(w, pid, pid); /* trailer */
	u64(w, t);
	u32x2(w, 0, 0);
	u64(w, L.id[0]);
	end(w);
	begin(w, PERF_RECORD_MMAP2, 0);
	u32x2(w, pid, pid);
	u64(w, 0x10000);
	u64(w, 0x1000);
	u64(w, 0);
	u32x2(w, 0, 0);
	u64(w, 0);
	u64(w, 0);
	u32x2(w, 5, 2);
	put(w, "/bin/true", 10);
	while ((w->len - w->start) % 8)
		w->b[w->len++] = 0;
	u32x2(w, pid, pid);
	u64(w, t + 1);
	u32x2(w, 0, 0);
	u64(w, L.id[0]);
	end(w);
}

/* How run() feeds the records: the mappings and the sample in one buffer (the sample waits
 * for its turn, behind its process's MMAP2 records), the mappings first and then the sample
 * alone (unwound on arrival), or the mappings first and then an exec of another program
 * followed by the sample in one buffer (the exec is held: the sample must wait for it), or the
 * mappings first and then a sample of another process, never met (it waits too). */
enum { FEED_ONE, FEED_SPLIT, FEED_EXEC, FEED_STRANGER };

static char *run_fed(unsigned cg, size_t len, strobe_sampler_stats *st, int how)
{
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 100, .kernel = true,
				 .call_graph = cg, .stack_size = (unsigned)len};
	strobe_sampler *s = strobe_sampler_open_offline(&o, &L);
	assert_non_null(s);
	static buf w;
	w.len = 0;
	uint32_t pid = (uint32_t)getpid();
	self_maps(&w, pid);
	if (how != FEED_ONE) {
		assert_int_equal(strobe_sampler_feed(s, w.b, w.len, INT64_MAX), 0);
		w.len = 0;
		if (how == FEED_EXEC)
			exec_other(&w, pid, 5);
	}
	sample(&w, how == FEED_STRANGER ? pid + 1000000 : pid, len);
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

static char *run(unsigned cg, size_t len, strobe_sampler_stats *st)
{
	return run_fed(cg, len, st, FEED_ONE);
}

/* A sample unwound as it arrives (no side-band record of its process held) comes out as the
 * same stack as one unwound at its turn; one that arrives behind a held exec of its process
 * waits and is resolved against the new image (which has none of these functions), as it
 * would have been at its turn: unwinding it on arrival, with the old mappings, would wrongly
 * give the whole chain. One of a process never met (its records not read yet) waits too. */
static void test_unwound_on_arrival(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	level1();
	strobe_sampler_stats st;
	char *out = run_fed(STROBE_CG_DWARF, stack_len, &st, FEED_ONE);
	assert_non_null(strstr(out, "test_unwound_on_arrival;level1;level2;level3;capture 1"));
	assert_int_equal(st.unwind_at_arrival, 0); /* its MMAP2 records were held with it */
	free(out);
	out = run_fed(STROBE_CG_DWARF, stack_len, &st, FEED_SPLIT);
	assert_non_null(strstr(out, "test_unwound_on_arrival;level1;level2;level3;capture 1"));
	assert_int_equal(st.unwind_at_arrival, 1);
	assert_int_equal(st.unwind_held, 0);
	assert_int_equal(st.unwound, 1);
	assert_int_equal(st.unwind_complete, 1);
	free(out);
	out = run_fed(STROBE_CG_AUTO, stack_len, &st, FEED_SPLIT);
	assert_non_null(strstr(out, "level1;level2;level3;capture 1"));
	assert_int_equal(st.unwind_at_arrival, 1);
	free(out);
	out = run_fed(STROBE_CG_DWARF, stack_len, &st, FEED_EXEC);
	assert_int_equal(st.unwind_at_arrival, 0);
	assert_null(strstr(out, "level1"));
	assert_int_equal(st.samples, 1);
	free(out);
	/* Held whole with a copy the kernel did not fill (a thread's stack ends first): kept
	 * trimmed to what was written, and still read as cut short, not as truncated. */
	sample_slack = 8192;
	out = run_fed(STROBE_CG_DWARF, stack_len, &st, FEED_ONE);
	sample_slack = 0;
	assert_non_null(strstr(out, "test_unwound_on_arrival;level1;level2;level3;capture 1"));
	assert_int_equal(st.unwind_at_arrival, 0);
	assert_int_equal(st.unwind_complete, 1);
	assert_int_equal(st.unwind_truncated, 0);
	free(out);
	out = run_fed(STROBE_CG_DWARF, stack_len, &st, FEED_STRANGER);
	assert_int_equal(st.unwind_at_arrival, 0);
	assert_int_equal(st.unwind_held, 1);
	assert_int_equal(st.samples, 1);
	free(out);
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

/* ---- the unwinder directly --------------------------------------------------------------- */

/* The tracker's mappings of pid: this process's executable file mappings, with none of their
 * build IDs (as /proc/PID/maps gives them), or with the kernel's build ID of each (as MMAP2
 * records carry them) under a path that does not exist here (as from another mount namespace):
 * then only the build ID can find their tables. */
static void track_self(tracker *t, int32_t pid, bool with_build_id)
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
		uint8_t id[STROBE_BUILD_ID_MAX];
		int l = with_build_id ? strobe_elf_build_id(path, id, sizeof(id)) : 0;
		char elsewhere[4200];
		snprintf(elsewhere, sizeof(elsewhere), "/nonexistent%s", path);
		assert_int_equal(tracker_mmap(t, pid, a, b - a, off, 0, 0, l > 0 ? id : NULL,
						     (uint8_t)(l > 0 ? l : 0),
						     with_build_id ? elsewhere : path), 0);
	}
	fclose(f);
}

static unsigned unwind_self(unwinder *u, tracker *t, int32_t pid, uint64_t *pcs,
			    int *rc)
{
	bool act[128];
	unsigned n = 0;
	unwind_sample sm = {.pid = pid, .tid = pid, .regs = regs, .stack = stack_copy,
				   .stack_len = stack_len};
	const proc *p = tracker_proc(t, pid, false);
	assert_non_null(p);
	*rc = unwind(u, t, p, &sm, pcs, act, 128, &n);
	assert_true(act[0]);
	for (unsigned i = 1; i < n; i++)
		assert_false(act[i]);
	return n;
}

/* Two processes mapping the same binaries: parsed once. The second knows them by build ID only
 * (its mappings are distinct tracker entries), so the cache is found by build ID. */
static void test_cache_shared(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	level1();
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	track_self(&t, 100, false);
	track_self(&t, -200, true); /* no such process: no /proc/PID/map_files either */
	unwinder *u = unwinder_new(0);
	assert_non_null(u);
	uint64_t a[128], b[128];
	int rc;
	unsigned na = unwind_self(u, &t, 100, a, &rc);
	assert_int_equal(rc, STROBE_UNWIND_COMPLETE);
	assert_true(na >= 6); /* capture level3 level2 level1 test ... main libc _start */
	assert_int_equal(a[0], regs[8]);
	unwind_stats s1, s2;
	unwind_get_stats(u, &s1);
	assert_true(s1.misses >= 2); /* this binary and libc at least */
	assert_int_equal(s1.binaries, s1.misses);
	assert_int_equal(s1.evictions, 0);
	unsigned nb = unwind_self(u, &t, -200, b, &rc);
	assert_int_equal(rc, STROBE_UNWIND_COMPLETE);
	assert_int_equal(nb, na);
	assert_memory_equal(a, b, na * sizeof(a[0]));
	unwind_get_stats(u, &s2);
	assert_int_equal(s2.misses, s1.misses); /* nothing parsed again */
	assert_true(s2.hits >= s1.hits + nb - 1);
	assert_int_equal(s2.binaries, s1.binaries);
	/* The same addresses again: stepped by the rules cached the first time (direct-mapped:
	 * two of them could share a slot), with the same result (above). */
	assert_true(s2.rule_hits >= s1.rule_hits + nb / 2);
	/* Without the rule cache, every frame through libdw: the same stack, no rule used. */
	unwinder *v = unwinder_new(0);
	assert_non_null(v);
	unwinder_set_rule_cache(v, false);
	unsigned nc = unwind_self(v, &t, 100, b, &rc);
	assert_int_equal(rc, STROBE_UNWIND_COMPLETE);
	assert_int_equal(nc, na);
	assert_memory_equal(a, b, na * sizeof(a[0]));
	nc = unwind_self(v, &t, 100, b, &rc);
	assert_int_equal(nc, na);
	assert_memory_equal(a, b, na * sizeof(a[0]));
	unwind_get_stats(v, &s2);
	assert_int_equal(s2.rule_hits, 0);
	unwinder_free(v);
	unwinder_free(u);
	tracker_free(&t);
}

/* A synthetic JIT stack (anonymous code, no tables): frames by the frame-pointer chain. */
#define JIT 0x10000000ull
static uint64_t syn_regs[17];
static uint8_t syn_stack[512];
static void syn_frame(uint64_t sp, unsigned off, uint64_t bp, uint64_t ra)
{
	(void)sp;
	memcpy(syn_stack + off, &bp, 8);
	memcpy(syn_stack + off + 8, &ra, 8);
}

static int syn_unwind(unwinder *u, tracker *t, size_t len, bool full, uint64_t *pcs,
		      unsigned *n)
{
	bool act[16];
	unwind_sample sm = {.pid = 300, .tid = 300, .regs = syn_regs, .stack = syn_stack,
				   .stack_len = len, .stack_full = full};
	return unwind(u, t, tracker_proc(t, 300, false), &sm, pcs, act, 16, n);
}

static void test_fp_chain(void **state)
{
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	assert_int_equal(tracker_mmap(&t, 300, JIT, 0x10000, 0, 0, 0, NULL, 0, "//anon"), 0);
	unwinder *u = unwinder_new(0);
	assert_non_null(u);
	const uint64_t sp = 0x7ffd0000;
	memset(syn_regs, 0, sizeof(syn_regs));
	memset(syn_stack, 0, sizeof(syn_stack));
	syn_regs[7] = sp;
	syn_regs[8] = JIT + 0x100;
	syn_regs[6] = sp + 32;
	syn_frame(sp, 32, sp + 96, JIT + 0x200);
	syn_frame(sp, 96, sp + 160, JIT + 0x300);
	syn_frame(sp, 160, 0, 0); /* the end of the chain */
	uint64_t pcs[16];
	unsigned n;
	int rc = syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n);
	assert_int_equal(rc, STROBE_UNWIND_STOPPED);
	assert_int_equal(n, 3);
	assert_int_equal(pcs[0], JIT + 0x100);
	assert_int_equal(pcs[1], JIT + 0x200);
	assert_int_equal(pcs[2], JIT + 0x300);
	/* A frame pointer that goes down the stack: the walk stops there. */
	syn_frame(sp, 96, sp + 40, JIT + 0x300);
	rc = syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n);
	assert_int_equal(rc, STROBE_UNWIND_STOPPED);
	assert_int_equal(n, 3);
	/* The second frame record past the copied slice, which was full: truncated. */
	syn_frame(sp, 96, sp + 160, JIT + 0x300);
	rc = syn_unwind(u, &t, 64, true, pcs, &n);
	assert_int_equal(rc, STROBE_UNWIND_TRUNCATED);
	assert_int_equal(n, 2);
	/* The same slice not full (the stack ends there): stopped, not truncated. */
	rc = syn_unwind(u, &t, 64, false, pcs, &n);
	assert_int_equal(rc, STROBE_UNWIND_STOPPED);
	/* A leaf in no mapping at all: nothing to say. */
	syn_regs[8] = 0x20000000;
	syn_regs[6] = 0;
	rc = syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n);
	assert_int_equal(rc, -ENOENT);
	assert_int_equal(n, 0);
	unwind_stats st;
	unwind_get_stats(u, &st);
	assert_int_equal(st.misses, 0); /* anonymous code: no binary */
	unwinder_free(u);
	tracker_free(&t);
}

/* The budget: binaries not used by the current unwind are dropped beyond it, and an unwind
 * after that parses them again and finds the same stack. */
static void test_cache_budget(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	level1();
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	track_self(&t, 100, false);
	assert_int_equal(tracker_mmap(&t, 300, JIT, 0x10000, 0, 0, 0, NULL, 0, "//anon"), 0);
	unwinder *u = unwinder_new(1); /* one byte: nothing fits */
	assert_non_null(u);
	uint64_t a[128], b[128];
	int rc;
	unsigned na = unwind_self(u, &t, 100, a, &rc);
	assert_int_equal(rc, STROBE_UNWIND_COMPLETE);
	unwind_stats s1, s2;
	unwind_get_stats(u, &s1);
	assert_true(s1.misses >= 2);
	assert_int_equal(s1.evictions, 0); /* all in use by that unwind */
	assert_true(s1.cache_bytes > 1);
	/* An unwind that uses none of them (JIT code): they all go. */
	memset(syn_regs, 0, sizeof(syn_regs));
	syn_regs[7] = 0x7ffd0000;
	syn_regs[8] = JIT + 0x100;
	uint64_t pcs[16];
	unsigned n;
	syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n);
	unwind_get_stats(u, &s2);
	assert_int_equal(s2.evictions, s1.misses);
	assert_int_equal(s2.binaries, 0);
	assert_int_equal(s2.cache_bytes, 0);
	assert_int_equal(s2.cache_bytes_peak, s1.cache_bytes_peak);
	/* Parsed again: the same stack. */
	unsigned nb = unwind_self(u, &t, 100, b, &rc);
	assert_int_equal(rc, STROBE_UNWIND_COMPLETE);
	assert_int_equal(nb, na);
	assert_memory_equal(a, b, na * sizeof(a[0]));
	unwind_get_stats(u, &s2);
	assert_int_equal(s2.misses, 2 * s1.misses);
	unwinder_free(u);
	tracker_free(&t);
}

/* A leaf at the first function of the vDSO (by its .eh_frame_hdr table), where nothing is pushed
 * yet: only the vDSO's own CFI says that the return address is at the stack pointer (the frame
 * pointer is 0, so no fallback could find it). */
static void test_vdso(void **state)
{
	const uint8_t *v = (const uint8_t *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!v)
		SKIP_CASE("no vDSO mapped in this process");
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)v;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(v + eh->e_phoff);
	const uint8_t *hdr = NULL;
	uint64_t size = 0;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = v + ph[i].p_vaddr;
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > size)
			size = ph[i].p_vaddr + ph[i].p_memsz;
	}
	assert_non_null(hdr);
	assert_int_equal(hdr[0], 1);
	assert_int_equal(hdr[3], 0x3b); /* table: datarel sdata4 pairs */
	int32_t loc;
	memcpy(&loc, hdr + 12, 4);
	uint64_t fn = (uint64_t)(uintptr_t)(hdr + loc);
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	assert_int_equal(tracker_mmap(&t, 300, (uint64_t)(uintptr_t)v, (size + 4095) & ~4095ull,
					     0, 0, 0, NULL, 0, "[vdso]"), 0);
	assert_int_equal(tracker_mmap(&t, 300, JIT, 0x10000, 0, 0, 0, NULL, 0, "//anon"), 0);
	unwinder *u = unwinder_new(0);
	assert_non_null(u);
	memset(syn_regs, 0, sizeof(syn_regs));
	memset(syn_stack, 0, sizeof(syn_stack));
	syn_regs[7] = 0x7ffd0000;
	syn_regs[8] = fn;
	uint64_t ra = JIT + 0x400;
	memcpy(syn_stack, &ra, 8);
	uint64_t pcs[16];
	unsigned n;
	syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n);
	assert_true(n >= 2);
	assert_int_equal(pcs[0], fn);
	assert_int_equal(pcs[1], JIT + 0x400);
	unwind_stats st;
	unwind_get_stats(u, &st);
	assert_int_equal(st.misses, 1);
	unwinder_free(u);
	tracker_free(&t);
}

/* ---- the stack beyond the copy, read from the process ------------------------------------ */

typedef struct snap {
	uint64_t regs[17];
	uint8_t stack[STACK];
	size_t len;
} snap;
static int to_parent[2], to_child[2];
static pid_t child = -1;
static snap child_snap; /* static: a local this large would move level3's frame */

/* In a child: registers and the stack taken in capture(), cut just past level3's return address
 * (so its callers lie beyond the copy), handed to the parent; then blocked in level3 until told. */
__attribute__((noinline)) static void child_level3(void)
{
	capture();
	snap *sn = &child_snap;
	memcpy(sn->regs, regs, sizeof(regs));
	memcpy(sn->stack, stack_copy, stack_len);
	/* level3 keeps its frame pointer (the tests are built with them): its return address is
	 * at frame + 8 */
	uint64_t ra_end = (uint64_t)(uintptr_t)__builtin_frame_address(0) + 16;
	sn->len = ra_end - regs[7];
	if (write(to_parent[1], sn, sizeof(*sn)) != (ssize_t)sizeof(*sn))
		_exit(1);
	char c;
	if (read(to_child[0], &c, 1) < 0)
		_exit(1);
	sink++;
}
__attribute__((noinline)) static void child_level2(void)
{
	child_level3();
	sink++;
}
__attribute__((noinline)) static void child_level1(void)
{
	child_level2();
	sink++;
}

static void test_extend(void **state)
{
	int here;
	stack_top = mapping_end((uint64_t)(uintptr_t)&here);
	assert_int_equal(pipe(to_parent), 0);
	assert_int_equal(pipe(to_child), 0);
	pid_t pid = child = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		child_level1();
		_exit(0);
	}
	static snap sn;
	size_t got = 0;
	while (got < sizeof(sn)) {
		ssize_t r = read(to_parent[0], (uint8_t *)&sn + got, sizeof(sn) - got);
		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_true(sn.len >= 64 && sn.len < 1024);
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	track_self(&t, pid, false); /* a fork: the same mappings */
	unwinder *u = unwinder_new(0);
	assert_non_null(u);
	uint64_t pcs[128];
	bool act[128];
	unsigned n;
	unwind_sample sm = {.pid = pid, .tid = pid, .regs = sn.regs, .stack = sn.stack,
				   .stack_len = sn.len, .stack_full = true};
	const proc *p = tracker_proc(&t, pid, false);
	/* Without the process to read (records only): truncated after capture and level3. */
	const char *root = t.proc_root;
	t.proc_root = NULL;
	assert_int_equal(unwind(u, &t, p, &sm, pcs, act, 128, &n), STROBE_UNWIND_TRUNCATED);
	assert_int_equal(n, 3); /* capture, level3, level2 (its return address was in the copy) */
	/* With it: the whole stack, level1 and the test's callers read from the child. */
	t.proc_root = root;
	assert_int_equal(unwind(u, &t, p, &sm, pcs, act, 128, &n), STROBE_UNWIND_COMPLETE);
	assert_true(n >= 6);
	unwind_stats st;
	unwind_get_stats(u, &st);
	assert_int_equal(st.extended, 1);
	assert_int_equal(st.ext_changed, 0);
	/* The last return address of the copy differs from the child's: it has returned past that
	 * frame since, what lies above may be another call's - refused. */
	uint64_t slot = sn.len - 8, w;
	memcpy(&w, sn.stack + slot, 8);
	w ^= 0x10;
	memcpy(sn.stack + slot, &w, 8);
	int rc = unwind(u, &t, p, &sm, pcs, act, 128, &n);
	assert_int_not_equal(rc, STROBE_UNWIND_COMPLETE);
	unwind_get_stats(u, &st);
	assert_int_equal(st.ext_changed, 1);
	/* The slot restored: extended again, through the /proc/PID/mem the unwinder kept open. */
	w ^= 0x10;
	memcpy(sn.stack + slot, &w, 8);
	assert_int_equal(unwind(u, &t, p, &sm, pcs, act, 128, &n), STROBE_UNWIND_COMPLETE);
	unwind_get_stats(u, &st);
	assert_int_equal(st.extended, 2);
	assert_int_equal(write(to_child[1], "x", 1), 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	child = -1;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The process gone: the kept fd reads nothing, the reopen fails, the stack stays cut. */
	rc = unwind(u, &t, p, &sm, pcs, act, 128, &n);
	assert_int_not_equal(rc, STROBE_UNWIND_COMPLETE);
	unwind_get_stats(u, &st);
	assert_int_equal(st.extended, 2);
	unwinder_free(u);
	tracker_free(&t);
}

/* Whatever failed, the child does not stay blocked (it holds the test's output open). */
static int end_child(void **state)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	for (int i = 0; i < 2; i++) {
		close(to_parent[i]);
		close(to_child[i]);
	}
	return 0;
}
/* A leaf at the program's entry point (a process sampled before its first instruction): the
 * stack pointer is at argc and nothing was pushed; the stack is the entry alone, complete. Taking
 * argc for a return address made "0x5;_start". */
static void test_entry_point(void **state)
{
	tracker t;
	assert_int_equal(tracker_init(&t), 0);
	track_self(&t, 300, false);
	unwinder *u = unwinder_new(0);
	assert_non_null(u);
	memset(syn_regs, 0, sizeof(syn_regs));
	memset(syn_stack, 0, sizeof(syn_stack));
	syn_regs[7] = 0x7ffd0000;
	syn_regs[8] = getauxval(AT_ENTRY);
	uint64_t argc = 5;
	memcpy(syn_stack, &argc, 8);
	uint64_t pcs[16];
	unsigned n;
	assert_int_equal(syn_unwind(u, &t, sizeof(syn_stack), false, pcs, &n),
			 STROBE_UNWIND_COMPLETE);
	assert_int_equal(n, 1);
	assert_int_equal(pcs[0], getauxval(AT_ENTRY));
	unwinder_free(u);
	tracker_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entry_point),
		cmocka_unit_test(test_whole_chain),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_unwound_on_arrival),
		cmocka_unit_test(test_cache_shared),
		cmocka_unit_test(test_cache_budget),
		cmocka_unit_test(test_fp_chain),
		cmocka_unit_test(test_vdso),
		cmocka_unit_test_teardown(test_extend, end_child),
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
