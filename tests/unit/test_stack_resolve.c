// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of stack resolution and unwinding (agent/stack_resolve.c), driven without a live
 * process: a tracker built here (mappings as MMAP2 records would give them), synthetic call
 * chains and stacks summed in the kernel, and a synthetic stack for the unwinder (frame-pointer
 * records through anonymous code, as test_unwind's JIT case).
 *
 *   - a call chain: kernel frames first (dropped unless asked for), the leaf an activation and
 *     every other frame a return address, frames of other contexts and zeros skipped, each user
 *     address in its mapping and an unmapped one in none;
 *   - the frame cap (STROBE_STACK_FRAMES) on a chain and on a summed stack;
 *   - summed stacks: Python frames in place of native ones, the leaf rule when kernel frames
 *     are not kept, and the lock form (no kernel part);
 *   - a user stack unwound when it was read (REC_UNWOUND), activations among return addresses;
 *   - --call-graph auto: the table walk continued by the frame-pointer chain from their common
 *     frame, the longer frame-pointer chain kept when they share none; dwarf keeping the sampled
 *     address when the walk fails;
 *   - re-reading /proc/PID/maps (a fake proc root) for an address in no known mapping: a caller
 *     after an exec whose libc no record has brought yet (the naming race of `strobe record`'s
 *     first samples), not again for a truly unmapped caller, the user leaf once a second, a
 *     process with a held record, never an exited one or one whose /proc entry is gone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#define UNIT_TMPDIR_NAME "stack"
#include "unit_tmpdir.h"

#include "../../agent/stack_resolve.h"
#include "strobe/clock.h"

#define EXE 0x400000ull
#define LIBC 0x7f0000000000ull
#define JIT 0x10000000ull

typedef struct fixture {
	tracker tr;
	strobe_itab frames;
	strobe_sampler_stats st;
	pid_count held;
	stack_resolver r;
} fixture;

static fixture *fx_new(bool unwind, unsigned call_graph, const char *proc_root)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(tracker_init(&f->tr), 0);
	f->tr.proc_root = proc_root; /* NULL: records only */
	f->frames.fixed = sizeof(sampler_frame_key);
	assert_int_equal(stack_resolver_init(&f->r, unwind, 0), 0);
	f->r.tr = &f->tr;
	f->r.frames = &f->frames;
	f->r.st = &f->st;
	f->r.held = &f->held;
	f->r.kernel = true;
	f->r.call_graph = call_graph;
	return f;
}

static void fx_free(fixture *f)
{
	stack_resolver_free(&f->r);
	pid_count_free(&f->held);
	strobe_itab_free(&f->frames);
	tracker_free(&f->tr);
	free(f);
}

/* Process pid as records give it: an exec, then its program's mapping (and libc's if asked). */
static void exec_proc(fixture *f, int32_t pid, bool with_libc)
{
	tracker_comm(&f->tr, pid, pid, "app", true);
	assert_int_equal(tracker_mmap(&f->tr, pid, EXE, 0x10000, 0, 8, 100, NULL, 0, "/fake/app"), 0);
	if (with_libc)
		assert_int_equal(tracker_mmap(&f->tr, pid, LIBC, 0x100000, 0, 8, 200, NULL, 0,
					      "/fake/libc.so.6"), 0);
}

static const sampler_frame_key *key(fixture *f, uint32_t i)
{
	const sampler_frame_key *k = strobe_itab_get(&f->frames, f->r.ids[i], NULL);
	assert_non_null(k);
	return k;
}

static const char *path_of(fixture *f, uint32_t i)
{
	uint32_t map = key(f, i)->map;
	if (map == STROBE_MAP_NONE)
		return "(none)";
	if (map == STROBE_MAP_KERNEL)
		return "(kernel)";
	return tracker_str(&f->tr, tracker_map(&f->tr, map)->path);
}

static void expect(fixture *f, uint32_t i, uint64_t addr, const char *path, bool call)
{
	assert_int_equal(key(f, i)->addr, addr);
	assert_string_equal(path_of(f, i), path);
	assert_int_equal(key(f, i)->call, call);
}

static void test_call_chain(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, NULL);
	exec_proc(f, 300, true);
	const uint64_t ips[] = {(uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000010, 0,
				0xffffffff81000020, (uint64_t)PERF_CONTEXT_USER, EXE + 0x100,
				LIBC + 0x2000, 0, 0x900000, (uint64_t)PERF_CONTEXT_GUEST, 0x1234,
				(uint64_t)PERF_CONTEXT_USER, EXE + 0x200};
	rec_sample sm = {.pid = 300, .tid = 300, .nr = sizeof(ips) / sizeof(ips[0]), .ips = ips};
	uint32_t n = stack_resolve_sample(&f->r, 300, &sm, NULL, STROBE_STACK_DEPTH);
	assert_int_equal(n, 6);
	expect(f, 0, 0xffffffff81000010, "(kernel)", false); /* the leaf ran */
	expect(f, 1, 0xffffffff81000020, "(kernel)", true);
	expect(f, 2, EXE + 0x100, "/fake/app", true);
	expect(f, 3, LIBC + 0x2000, "/fake/libc.so.6", true);
	expect(f, 4, 0x900000, "(none)", true);
	expect(f, 5, EXE + 0x200, "/fake/app", true); /* (the guest's 0x1234 left out) */
	/* Kernel frames not kept: the user leaf is the stack's leaf. The same frame twice is
	 * one id. */
	uint32_t first_user = f->r.ids[2];
	f->r.kernel = false;
	n = stack_resolve_sample(&f->r, 300, &sm, NULL, STROBE_STACK_DEPTH);
	assert_int_equal(n, 4);
	expect(f, 0, EXE + 0x100, "/fake/app", true); /* still after the kernel's part */
	assert_int_equal(f->r.ids[0], first_user);
	fx_free(f);
}

static void test_frame_cap(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, NULL);
	exec_proc(f, 300, false);
	enum { N = 300 };
	uint64_t ips[N + 1];
	ips[0] = (uint64_t)PERF_CONTEXT_USER;
	for (unsigned i = 1; i <= N; i++)
		ips[i] = EXE + 16 * i;
	rec_sample sm = {.pid = 300, .tid = 300, .nr = N + 1, .ips = ips};
	assert_int_equal(stack_resolve_sample(&f->r, 300, &sm, NULL, STROBE_STACK_DEPTH),
			 STROBE_STACK_FRAMES);
	expect(f, STROBE_STACK_FRAMES - 1, EXE + 16 * STROBE_STACK_FRAMES, "/fake/app", true);
	/* summed: kernel frames, then user ones with Python frames among them */
	uint64_t k[N], u[N];
	uint32_t py[N];
	for (unsigned i = 0; i < N; i++) {
		k[i] = 0xffffffff81000000 + i;
		u[i] = i % 2 ? EXE + i : 0;
		py[i] = i % 2 ? 0 : i + 1;
	}
	assert_int_equal(stack_resolve_summed(&f->r, 300, k, 100, u, py, N, false), STROBE_STACK_FRAMES);
	/* 100 kernel frames and the first 156 user ones: user 154 a Python frame, 155 native */
	assert_int_equal(key(f, STROBE_STACK_FRAMES - 2)->map, STROBE_MAP_PY);
	assert_int_equal(key(f, STROBE_STACK_FRAMES - 2)->addr, 155);
	expect(f, STROBE_STACK_FRAMES - 1, EXE + 155, "/fake/app", true);
	fx_free(f);
}

static void test_summed(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, NULL);
	exec_proc(f, 300, true);
	const uint64_t k[] = {0xffffffff81000010, 0xffffffff81000020, 0, 0xffffffff81000030};
	const uint64_t u[] = {EXE + 0x100, 0, LIBC + 0x10, 0, EXE + 0x300};
	const uint32_t py[] = {0, 42, 0, 0, 0};
	uint32_t n = stack_resolve_summed(&f->r, 300, k, 4, u, py, 5, false);
	assert_int_equal(n, 5); /* each list ends at its first zero */
	expect(f, 0, 0xffffffff81000010, "(kernel)", false);
	expect(f, 1, 0xffffffff81000020, "(kernel)", true);
	expect(f, 2, EXE + 0x100, "/fake/app", true);
	assert_int_equal(key(f, 3)->map, STROBE_MAP_PY);
	assert_int_equal(key(f, 3)->addr, 42);
	assert_int_equal(key(f, 3)->call, 0);
	expect(f, 4, LIBC + 0x10, "/fake/libc.so.6", true);
	/* without kernel frames the user leaf is still a return address (the thread was in the
	 * kernel); with no kernel part (the lock form) it is the leaf */
	f->r.kernel = false;
	n = stack_resolve_summed(&f->r, 300, k, 4, u, NULL, 5, false);
	assert_int_equal(n, 1);
	expect(f, 0, EXE + 0x100, "/fake/app", true);
	n = stack_resolve_summed(&f->r, 300, NULL, 0, u + 2, NULL, 3, false);
	assert_int_equal(n, 1);
	expect(f, 0, LIBC + 0x10, "/fake/libc.so.6", false);
	fx_free(f);
}

static void test_pre_unwound(void **state)
{
	fixture *f = fx_new(true, STROBE_CG_AUTO, NULL);
	exec_proc(f, 300, true);
	const uint64_t ips[] = {(uint64_t)PERF_CONTEXT_USER, EXE + 0x999};
	rec_sample sm = {.pid = 300, .tid = 300, .nr = 2, .ips = ips};
	const uint64_t pcs[] = {EXE + 0x100, LIBC + 0x200, EXE + 0x300};
	const uint8_t act[] = {1, 0, 1}; /* the third: a frame a signal interrupted */
	rec_unwound pre = {.nu = 3, .pcs = (const uint8_t *)pcs, .act = act};
	uint32_t n = stack_resolve_sample(&f->r, 300, &sm, &pre, STROBE_STACK_DEPTH);
	assert_int_equal(n, 3);
	expect(f, 0, EXE + 0x100, "/fake/app", false);
	expect(f, 1, LIBC + 0x200, "/fake/libc.so.6", true);
	expect(f, 2, EXE + 0x300, "/fake/app", false);
	/* below kernel frames the user leaf is where the thread entered the kernel: a return address */
	const uint64_t kips[] = {(uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000010,
				 (uint64_t)PERF_CONTEXT_USER, EXE + 0x999};
	rec_sample ksm = {.pid = 300, .tid = 300, .nr = 4, .ips = kips};
	assert_int_equal(stack_resolve_sample(&f->r, 300, &ksm, &pre, STROBE_STACK_DEPTH), 4);
	expect(f, 1, EXE + 0x100, "/fake/app", true);
	expect(f, 3, EXE + 0x300, "/fake/app", false);
	/* nu -1: the kernel's frame-pointer chain */
	pre.nu = -1;
	n = stack_resolve_sample(&f->r, 300, &sm, &pre, STROBE_STACK_DEPTH);
	assert_int_equal(n, 1);
	expect(f, 0, EXE + 0x999, "/fake/app", false);
	fx_free(f);
}

/* A synthetic stack through anonymous code (no tables): the unwinder follows its frame records
 * (saved frame pointer, return address) and stops where the chain ends. */
static uint64_t regs[STROBE_UNWIND_NREGS];
static uint8_t stack[512];
static void frame_at(unsigned off, uint64_t bp, uint64_t ra)
{
	memcpy(stack + off, &bp, 8);
	memcpy(stack + off + 8, &ra, 8);
}

static rec_sample jit_sample(const uint64_t *ips, uint64_t nr)
{
	const uint64_t sp = 0x7ffd0000;
	memset(regs, 0, sizeof(regs));
	memset(stack, 0, sizeof(stack));
	regs[7] = sp;
	regs[8] = JIT + 0x100;
	regs[6] = sp + 32;
	frame_at(32, sp + 96, JIT + 0x200);
	frame_at(96, sp + 160, JIT + 0x300);
	frame_at(160, 0, 0); /* the end of the chain: the walk stops, short of an outermost frame */
	return (rec_sample){.pid = 300, .tid = 300, .nr = nr, .ips = ips, .abi = 2,
			    .stack_size = sizeof(stack), .stack_dyn = 256, /* not full */
			    .stack = stack, .regs = {0}};
}

static uint32_t resolve_jit(fixture *f, const uint64_t *ips, uint64_t nr)
{
	rec_sample sm = jit_sample(ips, nr);
	memcpy(sm.regs, regs, sizeof(regs));
	return stack_resolve_sample(&f->r, 300, &sm, NULL, STROBE_STACK_DEPTH);
}

static void test_unwind_auto(void **state)
{
	fixture *f = fx_new(true, STROBE_CG_AUTO, NULL);
	exec_proc(f, 300, true);
	assert_int_equal(tracker_mmap(&f->tr, 300, JIT, 0x10000, 0, 0, 0, NULL, 0, "//anon"), 0);
	/* The kernel's chain shares the walk's last frame: continued from there. */
	const uint64_t a[] = {(uint64_t)PERF_CONTEXT_USER, JIT + 0x100, JIT + 0x300, EXE + 0x40,
			      LIBC + 0x80};
	assert_int_equal(resolve_jit(f, a, 5), 5);
	expect(f, 0, JIT + 0x100, "//anon", false);
	expect(f, 1, JIT + 0x200, "//anon", true);
	expect(f, 2, JIT + 0x300, "//anon", true);
	expect(f, 3, EXE + 0x40, "/fake/app", true);
	expect(f, 4, LIBC + 0x80, "/fake/libc.so.6", true);
	assert_int_equal(f->st.unwound, 1);
	assert_int_equal(f->st.unwind_fp_spliced, 1);
	assert_int_equal(f->st.unwind_complete, 0);
	/* None in common, and the kernel's chain is longer: it is kept. */
	const uint64_t b[] = {(uint64_t)PERF_CONTEXT_USER, EXE + 0x10, EXE + 0x20, EXE + 0x30,
			      EXE + 0x40};
	assert_int_equal(resolve_jit(f, b, 5), 4);
	expect(f, 0, EXE + 0x10, "/fake/app", false);
	expect(f, 3, EXE + 0x40, "/fake/app", true);
	assert_int_equal(f->st.unwind_fp_kept, 1);
	/* ... and when it is shorter, the walk wins. */
	assert_int_equal(resolve_jit(f, b, 2), 3);
	expect(f, 2, JIT + 0x300, "//anon", true);
	assert_int_equal(f->st.unwound, 3);
	assert_true(stack_unwind_pct(&f->r, 0.5) > 0); /* each walk was timed */
	fx_free(f);
}

/* A sample whose leaf is in no mapping and has no frame pointer: the walk fails. */
static uint32_t resolve_lost(fixture *f, const uint64_t *ips, uint64_t nr, uint32_t tid)
{
	rec_sample sm = jit_sample(ips, nr);
	memcpy(sm.regs, regs, sizeof(regs));
	sm.regs[8] = 0x20000000;
	sm.regs[6] = 0;
	sm.tid = tid;
	return stack_resolve_sample(&f->r, 300, &sm, NULL, STROBE_STACK_DEPTH);
}

static void test_unwind_dwarf_failed(void **state)
{
	fixture *f = fx_new(true, STROBE_CG_DWARF, NULL);
	exec_proc(f, 300, false);
	const uint64_t a[] = {(uint64_t)PERF_CONTEXT_USER, EXE + 0x40};
	assert_int_equal(resolve_lost(f, a, 2, 300), 1);
	expect(f, 0, 0x20000000, "(none)", false); /* the sampled address, kept */
	assert_int_equal(f->st.unwind_failed, 1);
	/* auto: the kernel's chain instead */
	f->r.call_graph = STROBE_CG_AUTO;
	assert_int_equal(resolve_lost(f, a, 2, 300), 1);
	expect(f, 0, EXE + 0x40, "/fake/app", false);
	assert_int_equal(f->st.unwind_failed, 2);
	/* A kernel thread's sample (tid 0) is not walked. */
	assert_int_equal(resolve_lost(f, a, 2, 0), 1);
	assert_int_equal(f->st.unwind_failed, 2);
	assert_int_equal(f->st.unwound, 0);
	fx_free(f);
}

/* PROC/pid/maps of the fake proc root: the program and libc. */
static void fake_maps(int pid)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%d", dir, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/maps", dir, pid);
	FILE *m = fopen(path, "w");
	assert_non_null(m);
	fprintf(m, "%llx-%llx r-xp 00000000 08:01 100 /fake/app\n", (unsigned long long)EXE,
		(unsigned long long)EXE + 0x10000);
	fprintf(m, "%llx-%llx r-xp 00000000 08:01 200 /fake/libc.so.6\n",
		(unsigned long long)LIBC, (unsigned long long)LIBC + 0x100000);
	fclose(m);
}

static uint32_t summed(fixture *f, int32_t pid, uint64_t leaf, uint64_t caller)
{
	const uint64_t u[] = {leaf, caller, EXE + 0x300};
	return stack_resolve_summed(&f->r, pid, NULL, 0, u, NULL, 3, false);
}

/* pid's maps were last read from its proc root ns ago (negative: later than now, so that no
 * time the test takes on a busy machine makes a read due). */
static void read_ago(fixture *f, int32_t pid, int64_t ns)
{
	proc *p = tracker_proc(&f->tr, pid, false);
	assert_non_null(p);
	p->rescan_ns = strobe_mono_ns() - ns;
}

#define LONG_AGO 3600000000000ll
#define NOT_YET (-60000000000ll)

static void test_reread(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, dir);
	fake_maps(4242);
	/* A command that has just exec'd: its program's MMAP2 processed, libc's still held (or
	 * not read yet) when a stack summed in the kernel names libc as a caller. */
	exec_proc(f, 4242, false);
	assert_int_equal(summed(f, 4242, EXE + 0x100, LIBC + 0x2000), 3);
	expect(f, 1, LIBC + 0x2000, "/fake/libc.so.6", true);
	assert_int_equal(f->r.rereads, 1);
	/* A caller truly in no mapping, with nothing that says the mappings are behind: not read
	 * again, however long ago they were read and however often it comes. */
	read_ago(f, 4242, LONG_AGO);
	for (int i = 0; i < 50; i++) {
		summed(f, 4242, EXE + 0x100, 0x900000);
		expect(f, 1, 0x900000, "(none)", true);
	}
	assert_int_equal(f->r.rereads, 1);
	/* The user leaf: at most once a second, and once per stack (not for its caller). */
	read_ago(f, 4242, NOT_YET);
	summed(f, 4242, 0x900000, EXE + 0x200);
	assert_int_equal(f->r.rereads, 1);
	read_ago(f, 4242, STACK_LEAF_RESCAN_NS + 1000000);
	summed(f, 4242, 0x900000, 0x900010);
	expect(f, 0, 0x900000, "(none)", false);
	assert_int_equal(f->r.rereads, 2);
	/* A record of the process that changes its mappings is held for its turn: a caller is
	 * looked for again, at most every STACK_STALE_NS. */
	assert_int_equal(pid_count_add(&f->held, 4242), 0);
	read_ago(f, 4242, NOT_YET);
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 2);
	read_ago(f, 4242, STACK_STALE_NS + 1000000);
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 3);
	pid_count_sub(&f->held, 4242);
	/* A record mapped code since the last read: the same. */
	read_ago(f, 4242, STACK_STALE_NS + 1000000);
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 3);
	assert_int_equal(tracker_mmap(&f->tr, 4242, 0x800000, 0x1000, 0, 8, 300, NULL, 0,
				      "/fake/plugin.so"), 0);
	read_ago(f, 4242, NOT_YET);
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 3);
	read_ago(f, 4242, STACK_STALE_NS + 1000000);
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 4);
	/* A record that changes its code read from the rings since the last read (held for its
	 * turn, sampler.c): a caller is looked for again at once, once per such record. */
	read_ago(f, 4242, 1000000); /* 1 ms: within STACK_STALE_NS */
	tracker_proc(&f->tr, 4242, false)->maps_changed = false;
	summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 4);
	tracker_proc(&f->tr, 4242, false)->sideband_ns = strobe_mono_ns();
	for (int i = 0; i < 5; i++)
		summed(f, 4242, EXE + 0x100, 0x900000);
	assert_int_equal(f->r.rereads, 5);
	/* An exited process is never read again. */
	tracker_exit(&f->tr, 4242, 4242);
	read_ago(f, 4242, LONG_AGO);
	tracker_proc(&f->tr, 4242, false)->maps_changed = true;
	summed(f, 4242, 0x900000, 0x900010);
	assert_int_equal(f->r.rereads, 5);
	/* A process whose /proc entry is gone: tried once, then not at every stack. */
	exec_proc(f, 4343, false);
	int64_t t0 = strobe_mono_ns();
	summed(f, 4343, EXE + 0x100, LIBC + 0x10);
	expect(f, 1, LIBC + 0x10, "(none)", true);
	assert_int_equal(f->r.rereads, 6);
	/* counted as a read, so the next is STACK_STALE_NS away */
	assert_true(tracker_proc(&f->tr, 4343, false)->rescan_ns >= t0);
	fx_free(f);
}

/* Records replayed after /proc/PID/maps was read (tracker_news): the exec, the fork and the
 * mappings they stand for are in what was read, and replaying them must not empty it. */
static void test_records_after_read(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, dir);
	fake_maps(4242); /* the program and libc */
	int64_t exec_ns = strobe_mono_ns();
	assert_int_equal(tracker_read_proc(&f->tr, 4242, strobe_mono_ns()), 0);
	const proc *p = tracker_proc(&f->tr, 4242, false);
	assert_int_equal(p->nvma, 2);
	assert_true(p->maps_ns >= exec_ns);
	/* records older than the read are not news; newer ones and untimed ones are */
	assert_false(tracker_news(&f->tr, 4242, exec_ns));
	assert_true(tracker_news(&f->tr, 4242, p->maps_ns + 1));
	assert_true(tracker_news(&f->tr, 4242, 0));
	assert_true(tracker_news(&f->tr, 4343, exec_ns)); /* never read */
	/* ... but one of a mapping known as it says still brings its build ID */
	assert_true(tracker_has_mapping(&f->tr, 4242, LIBC, 0x100000, 0, "/fake/libc.so.6"));
	assert_false(tracker_has_mapping(&f->tr, 4242, LIBC, 0x100000, 0x1000, "/fake/libc.so.6"));
	assert_false(tracker_has_mapping(&f->tr, 4242, LIBC, 0x80000, 0, "/fake/libc.so.6"));
	assert_false(tracker_has_mapping(&f->tr, 4242, LIBC, 0x100000, 0, "/fake/other.so"));
	assert_false(tracker_has_mapping(&f->tr, 4242, 0x900000, 0x1000, 0, "/fake/libc.so.6"));
	/* the fork that made it (of a parent with the program only), then its exec, both from
	 * before the read: libc stays known */
	exec_proc(f, 4000, false);
	assert_int_equal(tracker_fork(&f->tr, 4242, 4000, 4242, exec_ns), 0);
	assert_int_equal(tracker_proc(&f->tr, 4242, false)->nvma, 2);
	tracker_comm(&f->tr, 4242, 4242, "app", TRACKER_EXEC_READ);
	p = tracker_proc(&f->tr, 4242, false);
	assert_int_equal(p->nvma, 2);
	assert_false(p->sampled); /* a new image all the same: its identity is read again */
	assert_int_equal(summed(f, 4242, EXE + 0x100, LIBC + 0x2000), 3);
	expect(f, 1, LIBC + 0x2000, "/fake/libc.so.6", true);
	assert_int_equal(f->r.rereads, 0);
	/* an exec after the read: a new image, whose mappings follow */
	tracker_comm(&f->tr, 4242, 4242, "app", TRACKER_EXEC);
	assert_int_equal(tracker_proc(&f->tr, 4242, false)->nvma, 0);
	/* a fork after the read: the child takes its parent's mappings */
	assert_int_equal(tracker_read_proc(&f->tr, 4242, strobe_mono_ns()), 0);
	assert_int_equal(tracker_fork(&f->tr, 4242, 4000, 4242, strobe_mono_ns() + 1000000), 0);
	assert_int_equal(tracker_proc(&f->tr, 4242, false)->nvma, 1);
	/* a read cut short (the process gone) leaves the records to say what it was */
	assert_int_equal(tracker_read_proc(&f->tr, 4999, strobe_mono_ns()), -ENOENT);
	assert_true(tracker_news(&f->tr, 4999, exec_ns));
	fx_free(f);
}

/* A stack summed while a forked child still ran its parent's image, read after the child's exec:
 * named by the forked image (pre_exec), and by the new one otherwise; not after a second exec,
 * whose first image is gone; the forked image is dropped two forget passes after the exec. */
static void test_pre_exec_image(void **state)
{
	fixture *f = fx_new(false, STROBE_CG_FP, dir);
	const uint64_t OTHER = 0x700000;
	exec_proc(f, 500, true);
	assert_int_equal(tracker_fork(&f->tr, 501, 500, 501, 0), 0);
	const uint64_t u[] = {LIBC + 0x2000, EXE + 0x300};
	/* before the exec: the image now is the forked one, either way */
	assert_int_equal(stack_resolve_summed(&f->r, 501, NULL, 0, u, NULL, 2, true), 2);
	expect(f, 0, LIBC + 0x2000, "/fake/libc.so.6", false);
	tracker_comm(&f->tr, 501, 501, "other", TRACKER_EXEC);
	assert_int_equal(tracker_mmap(&f->tr, 501, OTHER, 0x10000, 0, 8, 300, NULL, 0, "/fake/other"),
			 0);
	/* after it: the forked image for a sum from before it */
	assert_int_equal(stack_resolve_summed(&f->r, 501, NULL, 0, u, NULL, 2, true), 2);
	expect(f, 0, LIBC + 0x2000, "/fake/libc.so.6", false);
	expect(f, 1, EXE + 0x300, "/fake/app", true);
	/* ... and the new image for one from after it */
	const uint64_t v[] = {OTHER + 0x100, LIBC + 0x2000};
	assert_int_equal(stack_resolve_summed(&f->r, 501, NULL, 0, v, NULL, 2, false), 2);
	expect(f, 0, OTHER + 0x100, "/fake/other", false);
	expect(f, 1, LIBC + 0x2000, "(none)", true);
	/* the forked image kept for two forget passes, then dropped */
	const proc *p = tracker_proc(&f->tr, 501, false);
	assert_int_equal(p->image, PROC_IMAGE_EXECD);
	assert_int_equal(p->pre_nvma, 2);
	assert_int_equal(tracker_forget(&f->tr), 0);
	assert_int_equal(tracker_forget(&f->tr), 0);
	assert_non_null(tracker_proc(&f->tr, 501, false)->pre_vma);
	assert_int_equal(tracker_forget(&f->tr), 0);
	assert_null(tracker_proc(&f->tr, 501, false)->pre_vma);
	/* a second exec: the forked image is not the one before it any more */
	assert_int_equal(tracker_fork(&f->tr, 502, 500, 502, 0), 0);
	tracker_comm(&f->tr, 502, 502, "sh", TRACKER_EXEC);
	tracker_comm(&f->tr, 502, 502, "other", TRACKER_EXEC);
	assert_int_equal(tracker_mmap(&f->tr, 502, OTHER, 0x10000, 0, 8, 300, NULL, 0, "/fake/other"),
			 0);
	assert_int_equal(tracker_proc(&f->tr, 502, false)->image, PROC_IMAGE_LATER);
	assert_int_equal(stack_resolve_summed(&f->r, 502, NULL, 0, u, NULL, 2, true), 2);
	expect(f, 0, LIBC + 0x2000, "(none)", false);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_chain),
		cmocka_unit_test(test_frame_cap),
		cmocka_unit_test(test_summed),
		cmocka_unit_test(test_pre_unwound),
		cmocka_unit_test(test_unwind_auto),
		cmocka_unit_test(test_unwind_dwarf_failed),
		cmocka_unit_test_setup_teardown(test_reread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_records_after_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pre_exec_image, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
