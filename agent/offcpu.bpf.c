// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The agent's in-kernel off-CPU aggregation (loaded by agent/offcpu_bpf.c). Instead of one perf
 * sample with a call chain and a stack copy per context switch, which user space then has to
 * read and unwind (most of the cost of off-CPU profiling at tens of thousands of switches a
 * second), the kernel keeps the sums:
 *
 *   switch-out of a task (sched_switch, prev): its kernel and user stacks (frame-pointer
 *     walks, kept once each in a stack map keyed by their hash) and the time, in the task's
 *     own local storage (`tcache`: found through a slot in the task_struct, with no hash of
 *     its tid to compute and no bucket lock, and freed by the kernel with the task; the record
 *     is rewritten in place, out_ns = 0 meaning "on CPU");
 *   switch-in (sched_switch, next): the interval is added, with a count, to `counts` under
 *     (tgid, tid, generation, kernel stack, user stack); the part of it spent runnable, waiting
 *     on the run queue, is the scheduler's own (sched_info.last_queued, see on_switch), so no
 *     program runs at wake-ups.
 *
 * User space drains `counts` once per export interval. Stacks of generation g live in stack
 * map g % 2: user space flips the generation after each drain and clears the map it is about to
 * reuse, so stack maps never fill up with stacks of long ago (see offcpu_bpf.c). To save the
 * stacks of threads still off CPU before their map is cleared, user space reads the switch-out
 * records of all threads through a task iterator (off_threads), as task-local storage cannot be
 * walked from user space.
 *
 * User stacks are walked here, with no copy for user space to unwind: by the binaries' unwind
 * tables where the agent has loaded them (rows made from .eh_frame, one array for all binaries,
 * and each process's executable mappings: see offcpu_tables.c and ustep below), by frame
 * pointers elsewhere. The program asks for a process's tables through a ring buffer when it
 * meets one without; a stack walked before they were in is walked again once they are, if the
 * thread is still blocked (rewalk).
 *
 * The kernel's types are declared here with only the fields used, relocated by CO-RE against
 * the running kernel's BTF, so the build needs no vmlinux.h of the build machine's kernel.
 * Full maps and failed stack walks are counted, never silent.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "offcpu_bpf.h"

struct mm_struct;
struct sched_info {
	unsigned long long last_queued;
} __attribute__((preserve_access_index));
/* The run queue, for its clock, reached from the CFS run queue a fair-class task is queued on
 * (CONFIG_FAIR_GROUP_SCHED; the per-CPU `runqueues` itself is not in kallsyms without
 * CONFIG_KALLSYMS_ALL, so a __ksym of it does not load everywhere). */
struct rq {
	__u64 clock;
} __attribute__((preserve_access_index));
struct cfs_rq {
	struct rq *rq;
} __attribute__((preserve_access_index));
struct sched_entity {
	struct cfs_rq *cfs_rq;
} __attribute__((preserve_access_index));
struct task_struct {
	unsigned int flags;
	int pid;
	int tgid;
	unsigned int policy;
	struct sched_entity se;
	struct mm_struct *mm;
	struct sched_info sched_info;
} __attribute__((preserve_access_index));
#define SCHED_NORMAL 0 /* the fair class's policies (include/uapi/linux/sched.h) */
#define SCHED_BATCH 3
#define SCHED_IDLE 5

/* The task iterator's context (kernel/bpf/task_iter.c). */
struct seq_file;
struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));
struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

/* x86-64's saved user registers (elsewhere the program does not load, and auto falls back to
 * the perf path). */
struct pt_regs {
	unsigned long bp, sp, ip, orig_ax;
} __attribute__((preserve_access_index));

#define PF_EXITING 0x00000004 /* include/linux/sched.h */
#define USER_STACK_MAX (8ull << 20) /* a frame pointer this far above sp is not one */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load. */
const volatile __u64 min_block_ns = 0;
const volatile __u8 filter_tgids = 0; /* 1: only tgids in `targets` (and their children) */
const volatile __u8 kernel_stacks = 1;
const volatile __u8 tables = 0; /* 1: user stacks by unwind tables where loaded (see uwalk) */

/* Written by user space while running. */
__u32 generation = 0;

/* Counters (STROBE_OB_*), per CPU: one shared counter, incremented at every switch on every
 * CPU, kept a cache line bouncing between them. User space sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STROBE_OB_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct strobe_ob_key);
	__type(value, struct strobe_ob_val);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, __u8);
} targets SEC(".maps");

/* The stacks, by a 64-bit hash of their addresses. Not BPF_MAP_TYPE_STACK_TRACE: that map
 * keeps one stack per bucket of a 32-bit hash and fails (or, with BPF_F_REUSE_STACKID,
 * overwrites an id still in use) on a collision, which on a busy host with a few thousand
 * distinct stacks per interval lost a few percent of them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct strobe_ob_stack);
} stacks0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct strobe_ob_stack);
} stacks1 SEC(".maps");

/* A thread's state, kept in the task itself (task-local storage: found through a slot in the
 * task rather than a hash of its tid, and freed with it); see on_switch and user_stack_key.
 *   st: its last switch-out (out_ns 0: on CPU now);
 *   kernel: the kernel stack it last blocked in, and what it blocked from: the user address it
 *     entered the kernel from, its system call (orig_ax; -1 outside one) and whether it slept;
 *   user: its user registers (ip, sp) at its last user-stack walk, where the walk's first two
 *     steps led, the two frame records above, and the stack's key (see user_stack_key);
 *   rows: the rows its walk's first two steps used, by address (see struct rowmemo). */

/* The rows of a walk's first two steps, by address, kept in the thread's tcache from one
 * switch-out to the next in the same generation: a thread blocks again and again at the same
 * places, and a row found here costs no mapping or row search (most of a step). A row depends
 * only on the binary mapped at the address, which does not change under a thread but at exec
 * (on_exec forgets them) or when a library is unloaded and another loaded at the same address
 * within one interval. */
struct rowmemo {
	__u64 pc[2];
	struct strobe_ob_row row[2];
	__u32 valid; /* bit i: pc[i], row[i] hold */
	__u32 gen;   /* the generation they were found in */
};

struct tcache {
	struct strobe_ob_start st;
	__u64 ukey, sys, kkey;
	__u32 gen, blocked;
	__u64 uip, usp, ufr[8], ustack;
	__u32 ugen, uprov; /* uprov: ustack was walked without the process's mappings */
	struct rowmemo rows;
};
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tcache);
} tcache SEC(".maps");

/* Room for one stack walk per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strobe_ob_stack);
} scratch SEC(".maps");

/* The unwind rows of every binary loaded (unwind_rows.h), each binary's a slice, and each
 * process's executable mappings with their slices; filled by user space (offcpu_bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, struct strobe_ob_row);
} urows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 2 KiB a process, as they come */
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, struct strobe_ob_maps);
} umaps SEC(".maps");

/* Processes whose mappings user space should (re)load: none loaded yet, or an address in none
 * of them. User space takes them out as it loads them. Each new one is also sent through ureq,
 * which wakes user space's loader at once: a process that has just exec'd is walked by frame
 * pointers until its mappings are in, and most short-lived ones (a compiler's passes, gzip in a
 * pipeline) would be over before a periodic scan found them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} uwant SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} ureq SEC(".maps");

/* Execs by process, for user space to tell whether one happened while it read the mappings (it
 * then read the old image's, or wrote them after on_exec removed them: see offcpu_tables.c). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} uexec SEC(".maps");

/* The innermost kernel frames are this program and the tracepoint's BPF runner
 * (bpf_prog_..._on_switch, bpf_trace_run4), skipped; what else runs the tracepoint
 * (__traceiter_sched_switch when more than one program is attached) is cut in user space, which
 * starts the stack at __schedule as the perf path's sched_switch samples do. */
#define KERNEL_SKIP 2

static __always_inline void count_n(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += n; /* this CPU's own: no other writer while the program runs */
}
static __always_inline void count(__u32 which) { count_n(which, 1); }

/* Keeps the n addresses in b once in the generation's stack map; returns their key. */
static __always_inline __u64 intern(struct strobe_ob_stack *b, __u32 n, __u32 gen)
{
	/* FNV-1a over the addresses */
	__u64 h = 0xcbf29ce484222325ull;
	for (__u32 i = 0; i < STROBE_OB_MAX_DEPTH; i++) {
		if (i >= n)
			break;
		h ^= b->ips[i];
		h *= 0x100000001b3ull;
	}
	h |= 1; /* never 0, which means "no stack" */
	void *map = gen & 1 ? (void *)&stacks1 : (void *)&stacks0;
	if (bpf_map_lookup_elem(map, &h))
		return h; /* the usual case: a stack seen before */
	b->n = n;
	long rc = bpf_map_update_elem(map, &h, b, BPF_NOEXIST);
	if (rc < 0 && rc != -17 /* EEXIST: another CPU added it meanwhile */) {
		count(STROBE_OB_STACK_ERRORS);
		return 0;
	}
	return h;
}

/* The current task's kernel stack; 0 when there is none or the map is full. */
static __always_inline __u64 kernel_stack_key(void *ctx, __u32 gen)
{
	__u32 zero = 0;
	struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!b)
		return 0;
	long len = bpf_get_stack(ctx, b->ips, sizeof(b->ips), KERNEL_SKIP);
	return len > 0 ? intern(b, (__u32)len / 8, gen) : 0;
}

/*
 * The user-stack walk, one frame per call of ustep (run by bpf_loop, so the verifier checks a
 * frame once rather than every unrolled copy). A frame's address is looked up in the process's
 * mappings (umaps) and, when its binary has rows, in them (both binary searches); the row says
 * where the CFA is and where the return address and rbp were saved. Without a row (no mappings
 * loaded yet, JIT code, a binary without .eh_frame_hdr, tables off) the frame pointer is
 * followed instead, as frame-pointer builds (Go, most JITs) expect. Stack reads are
 * bpf_probe_read_user: a page not present fails the read (it cannot be faulted in here), and the
 * walk ends there.
 */
struct uwalk {
	__u64 ip, sp, bp; /* the frame being stepped */
	__u32 tgid, n;    /* n: addresses in the scratch stack */
	__u32 asked;      /* this walk asked user space for the mappings */
	__u32 known;      /* the process's mappings are loaded */
	__u32 stale;      /* ... but its leaf is in none of them */
	__u32 outside;    /* the address of the last find_row is in none of them */
	__u32 end;        /* the walk is over */
	__u32 rnew;       /* rows found by this walk (for the thread's memo) */
	struct rowmemo rows; /* the thread's, for the first two steps */
};

/* The walk's state, in a map rather than on the BPF stack: the verifier tracks every stack slot
 * of the caller while it checks bpf_loop's callback, frame after frame, and with the frame
 * count and the rows in those slots no two frames' states were alike, so it never finished;
 * what it reads from a map value it takes as any value, and checks the callback once. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uwalk);
} uwalks SEC(".maps");

/* The same for the re-walk (rewalk), which may sleep while it reads a stack: sched_switch then
 * runs on its CPU, and must not find its per-CPU state changed under it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct uwalk);
} uwalks_it SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct strobe_ob_stack);
} scratch_it SEC(".maps");

#define MAPS_STEPS 7  /* a binary search over STROBE_OB_MAX_MAPS mappings */
#define ROWS_STEPS 23 /* ... over up to 1 << 22 rows (the loader's cap on urows) */

static __always_inline void want_maps(struct uwalk *w)
{
	__u8 one = 1;
	if (!w->asked && !bpf_map_lookup_elem(&uwant, &w->tgid) &&
	    bpf_map_update_elem(&uwant, &w->tgid, &one, BPF_NOEXIST) == 0) {
		struct strobe_ob_req q = {.ns = bpf_ktime_get_ns(), .tgid = w->tgid};
		bpf_ringbuf_output(&ureq, &q, sizeof(q), 0);
	}
	w->asked = 1;
}

/* The row for address pc of the walk's process; kind FP when there is none. */
static __always_inline struct strobe_ob_row find_row(struct uwalk *w, __u64 pc, int leaf)
{
	struct strobe_ob_row none = {.kind = STROBE_OB_ROW_FP};
	struct strobe_ob_maps *ms = bpf_map_lookup_elem(&umaps, &w->tgid);
	if (!ms) {
		if (!w->asked)
			count(STROBE_OB_NO_MAPS);
		want_maps(w);
		return none;
	}
	w->known = 1;
	__u32 lo = 0, hi = ms->n < STROBE_OB_MAX_MAPS ? ms->n : STROBE_OB_MAX_MAPS;
	for (int k = 0; k < MAPS_STEPS && lo < hi; k++) { /* the first mapping starting above pc */
		__u32 mid = (lo + hi) / 2;
		if (ms->m[mid & (STROBE_OB_MAX_MAPS - 1)].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct strobe_ob_map *m = &ms->m[(lo - 1) & (STROBE_OB_MAX_MAPS - 1)];
	if (lo == 0 || pc >= m->end) {
		/* Code mapped since the mappings were read: ask again. For a leaf, which is surely
		 * code, soon: mappings read right after an exec have only the program and the
		 * dynamic linker, which then maps the libraries. For a return address, which may
		 * be what a frame-pointer step read from elsewhere, once a second. */
		if (bpf_ktime_get_ns() - ms->loaded_ns > (leaf ? 10000000ull : 1000000000ull))
			want_maps(w);
		w->outside = 1;
		if (leaf)
			w->stale = 1;
		return none;
	}
	__u64 rel = pc - m->bias;
	if (!m->nrows || rel >= 0xffffffffull)
		return none;
	__u32 r0 = m->row0, rlo = m->row0, rhi = m->row0 + m->nrows;
	for (int k = 0; k < ROWS_STEPS && rlo < rhi; k++) { /* the first row above rel */
		__u32 mid = rlo + (rhi - rlo) / 2;
		struct strobe_ob_row *r = bpf_map_lookup_elem(&urows, &mid);
		if (!r)
			return none;
		if (r->pc <= rel)
			rlo = mid + 1;
		else
			rhi = mid;
	}
	if (rlo == r0)
		return none;
	__u32 at = rlo - 1;
	struct strobe_ob_row *r = bpf_map_lookup_elem(&urows, &at);
	return r ? *r : none;
}

/* Reads user memory of the current task (task NULL), or of task from a sleepable program. */
static __always_inline long uread(void *dst, __u32 size, __u64 addr, struct task_struct *task)
{
	if (task)
		return bpf_copy_from_user_task(dst, size, (void *)addr, task, 0);
	return bpf_probe_read_user(dst, size, (void *)addr);
}

/* Adds the walk's current frame to b and steps to its caller: 0 to go on, 1 at the end. */
static __always_inline long ustep1(struct uwalk *w, struct strobe_ob_stack *b,
				   struct task_struct *task)
{
	__u32 n = w->n;
	if (n >= STROBE_OB_MAX_DEPTH)
		return 1;
	__u64 ip = w->ip, sp = w->sp, bp = w->bp;
	b->ips[n] = ip;
	w->n = n + 1;
	/* the leaf's address is where it is; a caller's is its return address, just past the
	 * call, which may be the first address of the next function's rows */
	struct strobe_ob_row r = {.kind = STROBE_OB_ROW_FP};
	__u64 pc = n == 0 ? ip : ip - 1;
	w->outside = 0;
	if (tables && n < 2 && (w->rows.valid & (1u << n)) && w->rows.pc[n & 1] == pc) {
		r = w->rows.row[n & 1];
		w->known = 1; /* (kept only from a walk that had the mappings) */
	} else if (tables) {
		r = find_row(w, pc, n == 0);
		if (n < 2 && w->known && !w->outside) {
			w->rows.pc[n & 1] = pc;
			w->rows.row[n & 1] = r;
			w->rows.valid |= 1u << n;
			w->rnew = 1;
		}
	}
	/* a return address in no executable mapping is not one (what a frame-pointer step read
	 * from a register that held something else); a leaf there is JIT code, or a library
	 * loaded since the mappings were read */
	if (w->outside && n > 0)
		return 1;
	__u32 kind = r.kind & STROBE_OB_ROW_KIND;
	if (kind == STROBE_OB_ROW_END)
		return 1;
	if (kind == STROBE_OB_ROW_SP || kind == STROBE_OB_ROW_BP) {
		__u64 cfa = (kind == STROBE_OB_ROW_SP ? sp : bp) + (__u64)(__s64)r.cfa_off;
		if (cfa <= sp || cfa - sp > USER_STACK_MAX ||
		    uread(&ip, 8, cfa - 8, task) < 0 ||
		    ((r.kind & STROBE_OB_ROW_RBP) &&
		     uread(&bp, 8, cfa + 8 * (__s64)r.rbp_off8, task) < 0)) {
			count(STROBE_OB_TABLE_STOPS);
			return 1;
		}
		sp = cfa;
		count(STROBE_OB_TABLE_FRAMES);
	} else if (kind == STROBE_OB_ROW_FP) {
		/* A frame pointer is 16-byte aligned (the call's push and the push of rbp) and
		 * points into the stack, above sp. A register that code without frame pointers
		 * left in rbp mostly fails this, and the walk ends there rather than adding frames
		 * of whatever the stack held (which differ from call to call and would make every
		 * stack a new one). */
		__u64 fr[2]; /* saved rbp, return address */
		if (bp < sp || bp - sp > USER_STACK_MAX || (bp & 15) ||
		    uread(fr, sizeof(fr), bp, task) < 0)
			return 1;
		sp = bp + 16;
		bp = fr[0];
		ip = fr[1];
		if (tables)
			count(STROBE_OB_FP_FRAMES);
	} else {
		count(STROBE_OB_TABLE_STOPS);
		return 1;
	}
	/* A return address is not a small number and is below the top of user space. Without the
	 * mappings, it is also taken not to be within 8 MiB above sp, in the stack (where a
	 * frame-pointer step that read garbage often lands); with them, the next step checks it is
	 * in one (a thread's stack can lie just below libc's code). */
	if (ip < 4096 || ip >= 0x800000000000ull ||
	    (!w->known && ip >= sp && ip - sp < USER_STACK_MAX))
		return 1;
	w->ip = ip;
	w->sp = sp;
	w->bp = bp;
	return 0;
}

/* ustep1 for bpf_loop (verified once, however many frames it runs for). */
static long ustep(__u64 idx, void *ctx)
{
	__u32 zero = 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks, &zero);
	struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!w || !b)
		return 1;
	if (ustep1(w, b, NULL)) {
		w->end = 1;
		return 1;
	}
	return 0;
}

/* ... and for rewalk, of another task's stack (ctx: a pointer to it). */
struct task_ref {
	struct task_struct *task;
};
static long ustep_task(__u64 idx, void *ctx)
{
	struct task_ref *x = ctx;
	__u32 zero = 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks_it, &zero);
	struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch_it, &zero);
	if (!w || !b || !x->task || ustep1(w, b, x->task))
		return 1;
	return 0;
}

/*
 * The task's user stack, from its saved user registers, walked by ustep. Not
 * bpf_get_stack(BPF_F_USER_STACK): the kernel's walk follows frame pointers only, and follows
 * the chain until a read faults, and every chain ends that way (the outermost frame's rbp is 0;
 * code without frame pointers, glibc, leaves any value there). A fault costs microseconds, more
 * in a virtual machine: it was two thirds of this program's time per switch. ustep stops,
 * without reading, at a frame pointer that is not above the stack pointer or is far from it.
 */
static __always_inline __u64 user_stack_key(struct task_struct *t, __u32 gen, __u64 *sys,
					    __u64 *leaf, struct tcache *c, __u32 *prov)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
	__u32 zero = 0;
	struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!r || !b)
		return 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks, &zero);
	if (!w)
		return 0;
	__u64 ip = r->ip, sp = r->sp, fp = r->bp;
	*w = (struct uwalk){.ip = ip, .sp = sp, .bp = fp, .tgid = t->tgid};
	if (c && c->rows.gen == gen)
		w->rows = c->rows;
	*sys = r->orig_ax;
	*leaf = ip;
	if (!ip)
		return 0;
	bpf_loop(2, ustep, NULL, 0);
	int end = w->end;
	if (c && w->rnew) {
		c->rows = w->rows;
		c->rows.gen = gen;
	}
	/*
	 * The shortcut: a thread that switches out again with the same ip and sp, whose first two
	 * steps (taken anyway as the walk's start) reach the same return address and then the same
	 * registers (ip, sp, bp), and for which the two frame records above those (saved rbp and
	 * return address at that bp, then at the saved rbp) hold the same values, as at its last
	 * walk in this generation, is taken to be in the same stack: its key is reused without
	 * walking the rest or hashing. It is wrong only when the thread returned above all those
	 * frames and came back down, through a different caller further up, to the very same stack
	 * addresses (callers of equal frame sizes at the same depth) and the same innermost frames.
	 * The frame records reach two frames further in code built with frame pointers, past the
	 * libc frames the steps go through (the e2e test agent_offcpu_bpf/alternate checks a
	 * thread alternating between two sites that differ five frames up); in code without any,
	 * the two steps are all there is. The leaf's rbp is not compared: code without frame
	 * pointers keeps anything there (a loop counter), and what of it the walk uses is in the
	 * registers after the steps.
	 */
	__u64 fr[8] = {0}; /* the steps: return address, then ip, sp, bp; then frame records */
	if (!end) {
		fr[0] = b->ips[1];
		fr[1] = w->ip;
		fr[2] = w->sp;
		fr[3] = w->bp;
	}
	__u64 f = end ? fp : w->bp, s2 = end ? sp : w->sp;
	if (f >= s2 && f - s2 <= USER_STACK_MAX && !(f & 15) &&
	    bpf_probe_read_user(fr + 4, 16, (void *)f) == 0) {
		if (!(fr[4] > f && fr[4] - s2 <= USER_STACK_MAX && !(fr[4] & 15) &&
		      bpf_probe_read_user(fr + 6, 16, (void *)fr[4]) == 0))
			fr[6] = fr[7] = 0;
	} else {
		fr[4] = fr[5] = 0;
	}
	/* (clang's BPF target has no memcmp; a loop here is unrolled into too many branches
	 * for the verifier) */
	if (c && c->ustack && c->ugen == gen && c->uip == ip && c->usp == sp &&
	    !(c->uprov && w->known && !w->stale) && /* walked without tables, which are in now */
	    !((c->ufr[0] ^ fr[0]) | (c->ufr[1] ^ fr[1]) | (c->ufr[2] ^ fr[2]) | (c->ufr[3] ^ fr[3]) |
	      (c->ufr[4] ^ fr[4]) | (c->ufr[5] ^ fr[5]) | (c->ufr[6] ^ fr[6]) |
	      (c->ufr[7] ^ fr[7]))) {
		count(STROBE_OB_UCACHE_HITS);
		*prov = c->uprov;
		return c->ustack;
	}
	if (!end)
		bpf_loop(STROBE_OB_MAX_DEPTH, ustep, NULL, 0);
	__u64 key = intern(b, w->n, gen);
	*prov = tables && (!w->known || w->stale);
	if (c) {
		c->uprov = *prov;
		c->uip = ip;
		c->usp = sp;
		c->ufr[0] = fr[0];
		c->ufr[1] = fr[1];
		c->ufr[2] = fr[2];
		c->ufr[3] = fr[3];
		c->ufr[4] = fr[4];
		c->ufr[5] = fr[5];
		c->ufr[6] = fr[6];
		c->ufr[7] = fr[7];
		c->ustack = key;
		c->ugen = gen;
	}
	return key;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	/* The arguments are BTF pointers the verifier trusts: their fields are read directly,
	 * where BPF_CORE_READ would call bpf_probe_read_kernel for each. */
	__u32 tid = prev->pid, tgid = prev->tgid;

	/* Switch-out of prev: this program runs in its context, so the stacks are its own. */
	/* An exiting thread is skipped: its last switch-out (TASK_DEAD) is never followed by a
	 * switch-in, so walking its stacks would be wasted. */
	if (tid != 0 && !(prev->flags & PF_EXITING) &&
	    (!filter_tgids || bpf_map_lookup_elem(&targets, &tgid))) {
		__u32 gen = generation;
		__u64 sys = 0, leaf = 0;
		__u32 prov = 0;
		struct tcache *t = bpf_task_storage_get(&tcache, prev, 0,
							BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t) { /* out of memory, or the storage busy on this CPU (a nested program) */
			count(STROBE_OB_STARTS_FULL);
			goto switch_in;
		}
		/* (kernel threads have no user stack, and so no kernel-stack cache below either) */
		struct tcache *c = t;
		struct strobe_ob_start st = {
			.out_ns = now,
			.tgid = tgid,
			.gen = gen,
			.ustack = prev->mm ? user_stack_key(prev, gen, &sys, &leaf, c, &prov) : 0,
			.blocked = !preempt,
		};
		if (prov)
			st.flags = STROBE_OB_START_PROV;
		/* Walking the kernel stack is most of this program's cost (the kernel's unwinder,
		 * about 1.5 us here), and a thread that blocks again from the same user stack in the
		 * same system call the same way blocks in the same kernel path nearly always (a
		 * pipe read, a futex wait). So it is walked once per interval (generation) for each
		 * such (thread, user address it entered the kernel from, system call, sleep or
		 * preemption) and reused for the switch-outs that match; kernel threads, with no
		 * user state to tell their waits apart, are walked every time. */
		if (kernel_stacks) {
			if (!st.ustack)
				c = 0;
			if (c && c->gen == gen && c->ukey == leaf && c->sys == sys &&
			    c->blocked == st.blocked && c->kkey) {
				st.kstack = c->kkey;
				count(STROBE_OB_KCACHE_HITS);
			} else {
				st.kstack = kernel_stack_key(ctx, gen);
				if (c) {
					c->ukey = leaf;
					c->sys = sys;
					c->kkey = st.kstack;
					c->gen = gen;
					c->blocked = st.blocked;
				}
			}
		}
		t->st = st;
	}

switch_in:;
	/* Switch-in of next. */
	__u32 ntid = next->pid;
	if (ntid == 0)
		return 0;
	struct tcache *nt = bpf_task_storage_get(&tcache, next, 0, 0);
	if (!nt || !nt->st.out_ns)
		return 0;
	struct strobe_ob_start *st = &nt->st;
	__u64 total = now > st->out_ns ? now - st->out_ns : 0;
	if (total < min_block_ns) {
		count(STROBE_OB_SHORT);
		st->out_ns = 0;
		return 0;
	}
	/*
	 * Of a sleep, the part after the wake-up, runnable but waiting for a CPU, is not blocked
	 * time. The scheduler keeps when the task was queued (sched_info.last_queued, set at the
	 * wake-up's enqueue from the run queue's clock; CONFIG_SCHED_INFO) and, right after this
	 * tracepoint, adds (rq clock - last_queued) to the task's run_delay: the same difference is
	 * taken here, on the clock it was taken with. This replaces a program on sched_wakeup that
	 * stamped the time of every wake-up on the host (a fifth of the programs' cost per switch).
	 * The run queue is reached through the fair class's run queue of the task, which is this
	 * CPU's for a fair task being switched in. Where that cannot be known (a real-time task,
	 * a kernel without group scheduling) or last_queued is 0 (not queued the usual way), the
	 * whole interval counts as blocked.
	 */
	__u64 blocked = 0;
	if (st->blocked) {
		__u64 queued = next->sched_info.last_queued, wait = 0, clock = 0;
		unsigned int pol = next->policy;
		if (queued && bpf_core_field_exists(struct cfs_rq, rq) &&
		    (pol == SCHED_NORMAL || pol == SCHED_BATCH || pol == SCHED_IDLE)) {
			/* direct loads: the verifier makes them fault-safe (no helper calls) */
			struct cfs_rq *cq = next->se.cfs_rq;
			struct rq *rq = cq ? cq->rq : 0;
			if (rq)
				clock = rq->clock;
		}
		if (clock > queued)
			wait = clock - queued;
		blocked = wait < total ? total - wait : 0;
	}
	struct strobe_ob_key k = {
		.tgid = st->tgid,
		.tid = ntid,
		.gen = st->gen,
		.kstack = st->kstack,
		.ustack = st->ustack,
	};
	st->out_ns = 0; /* on CPU now */
	struct strobe_ob_val *v = bpf_map_lookup_elem(&counts, &k);
	if (!v) {
		struct strobe_ob_val z = {0};
		long rc = bpf_map_update_elem(&counts, &k, &z, BPF_NOEXIST);
		if (rc < 0 && rc != -17 /* EEXIST: another CPU added it meanwhile */) {
			count(STROBE_OB_COUNTS_FULL);
			return 0;
		}
		if (!(v = bpf_map_lookup_elem(&counts, &k)))
			return 0; /* drained by user space in between: this one is lost */
	}
	/* Plain adds, not atomic ones (a locked add each): the key holds the thread's id, and a
	 * thread is switched in on one CPU at a time, so no other program writes this sum. */
	v->off_ns += total;
	v->blocked_ns += blocked;
	v->switches++;
	count(STROBE_OB_INTERVALS);
	if (k.ustack) {
		count_n(STROBE_OB_USER_NS, total);
		if (st->flags & STROBE_OB_START_PROV)
			count_n(STROBE_OB_PROV_NS, total);
	}
	return 0;
}

/* For user space, once per interval: the switch-out record of every thread now off CPU (see
 * the top of this file). */
SEC("iter/task")
int off_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	struct tcache *t = bpf_task_storage_get(&tcache, task, 0, 0);
	if (!t || !t->st.out_ns)
		return 0;
	struct strobe_ob_start st = t->st;
	bpf_seq_write(ctx->meta->seq, &st, sizeof(st));
	return 0;
}

/*
 * For user space's table loader, right after it loaded a process's mappings (offcpu_tables.c,
 * run for that process's threads only): each thread off CPU now whose user stack was walked
 * without them (a process blocks within microseconds of its exec, long before its tables can be
 * loaded, and that first block is often its longest: waiting for the other end of a pipe) has
 * it walked again, now by the tables, and its switch-out record takes the new stack, which the
 * switch-in then sums. The thread is still blocked where it was, so its stack is unchanged; the
 * record is rewritten only if it is still the same switch-out. Sleepable, to read another
 * task's stack (bpf_copy_from_user_task: it may fault pages in), with per-CPU state of its own.
 */
SEC("iter.s/task")
int rewalk(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task || !tables)
		return 0;
	struct tcache *t = bpf_task_storage_get(&tcache, task, 0, 0);
	__u32 gen = generation, zero = 0;
	/* (an older generation's stacks are being saved or gone: left as they are) */
	if (!t || !t->st.out_ns || !(t->st.flags & STROBE_OB_START_PROV) || t->st.gen != gen)
		return 0;
	__u64 out = t->st.out_ns;
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
	struct uwalk *w = bpf_map_lookup_elem(&uwalks_it, &zero);
	struct strobe_ob_stack *b = bpf_map_lookup_elem(&scratch_it, &zero);
	if (!r || !w || !b)
		return 0;
	*w = (struct uwalk){.ip = r->ip, .sp = r->sp, .bp = r->bp, .tgid = task->tgid};
	if (!w->ip)
		return 0;
	struct task_ref x = {.task = task};
	bpf_loop(STROBE_OB_MAX_DEPTH, ustep_task, &x, 0);
	if (!w->known || w->stale)
		return 0;
	__u64 key = intern(b, w->n, gen);
	if (key && t->st.out_ns == out) {
		t->st.ustack = key;
		t->st.flags &= ~STROBE_OB_START_PROV;
		count(STROBE_OB_REWALKS);
	}
	return 0;
}

/* With a pid filter, children of a target process are targets too (as perf's inherit makes
 * them in the other mode). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (ptgid == ctgid)
		return 0; /* a new thread */
	if (filter_tgids) {
		if (!bpf_map_lookup_elem(&targets, &ptgid))
			return 0;
		__u8 one = 1;
		if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY) < 0)
			count(STROBE_OB_TARGETS_FULL);
	}
	/* A new process has its parent's mappings until it execs (most soon do). */
	struct strobe_ob_maps *pm = tables ? bpf_map_lookup_elem(&umaps, &ptgid) : 0;
	if (pm)
		bpf_map_update_elem(&umaps, &ctgid, pm, BPF_ANY);
	return 0;
}

/* An exec replaces every mapping: the old ones are forgotten at once (frame pointers until user
 * space loads the new ones, which the next walk asks for). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	if (!tables)
		return 0;
	__u32 *n = bpf_map_lookup_elem(&uexec, &tgid), one = 1;
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&uexec, &tgid, &one, BPF_ANY);
	bpf_map_delete_elem(&umaps, &tgid);
	struct tcache *c = bpf_task_storage_get(&tcache, p, 0, 0);
	if (c)
		c->rows.valid = 0;
	return 0;
}
