/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The user-stack walk shared by the agent's eBPF programs (agent/offcpu.bpf.c for off-CPU time,
 * agent/locks.bpf.c for futex waits): included by each, so both walk user stacks the same way,
 * by the binaries' unwind tables where user space loaded them (maps urows and umaps, filled by
 * offcpu_tables.c when a program asks through ureq/uwant) and by frame pointers elsewhere, and
 * keep the stacks once each in the generation's stack map (stacks0/stacks1, rotated by user
 * space). Each object has its own copy of these maps and its own table loader.
 *
 * What an including program provides: its LICENSE and its programs; what it may use: the
 * settings `tables` and `filter_tgids`, `generation`, the maps below, count() on `counters`
 * (STROBE_OB_*), user_stack_key() with a struct ucache of its own per thread, and
 * ustack_on_fork()/ustack_on_exec() from its fork and exec programs.
 */
#ifndef STROBE_AGENT_USTACK_BPF_H
#define STROBE_AGENT_USTACK_BPF_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "offcpu.h"

/* The counters' map holds STROBE_OB_* and, for a program that defines a larger count before
 * including this, its own counters after them. */
#ifndef USTACK_NCOUNTERS
#define USTACK_NCOUNTERS STROBE_OB_NCOUNTERS
#endif

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

/* x86-64's saved user registers (elsewhere the program does not load, and auto falls back to
 * the perf path). */
struct pt_regs {
	unsigned long bp, sp, ip, orig_ax;
} __attribute__((preserve_access_index));

/* What a frame's mapping says of its file (find_row_by_file). */
struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));
struct inode {
	unsigned long i_ino;
	long long i_size;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));
struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));
struct vm_area_struct {
	unsigned long vm_start, vm_end, vm_pgoff, vm_flags;
	struct file *vm_file;
} __attribute__((preserve_access_index));
/* The executable's text (the ELF loader's start_code: its executable segments' lowest address,
 * end_code: their end) and file. */
struct mm_struct___strobe_exe {
	unsigned long start_code, end_code;
	struct file *exe_file;
} __attribute__((preserve_access_index));

#define PF_EXITING 0x00000004 /* include/linux/sched.h */
#define VM_EXEC 0x00000004    /* include/linux/mm.h */
#define USER_STACK_MAX (8ull << 20) /* a frame pointer this far above sp is not one */

/* Set by the loader before load. */
const volatile __u8 filter_tgids = 0; /* 1: only tgids in `targets` (and their children) */
const volatile __u8 tables = 0; /* 1: user stacks by unwind tables where loaded (see uwalk) */
/* 1: a frame of a process whose mappings are not loaded, or in none of them, has its row looked
 * up by its file (find_row_by_file); for walks of the current task, where bpf_find_vma loads */
const volatile __u8 by_file = 0;

/* Written by user space while running. */
__u32 generation = 0;

/* Counters (STROBE_OB_*), per CPU: one shared counter, incremented at every switch on every
 * CPU, kept a cache line bouncing between them. User space sums them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, USTACK_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");


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
	__type(value, struct ob_stack);
} stacks0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct ob_stack);
} stacks1 SEC(".maps");

/* The rows of a walk's first two steps, by address, kept in the thread's tcache from one
 * switch-out to the next in the same generation: a thread blocks again and again at the same
 * places, and a row found here costs no mapping or row search (most of a step). A row depends
 * only on the binary mapped at the address, which does not change under a thread but at exec
 * (on_exec forgets them) or when a library is unloaded and another loaded at the same address
 * within one interval. */
struct rowmemo {
	__u64 pc[2];
	struct ob_row row[2];
	__u32 valid; /* bit i: pc[i], row[i] hold */
	__u32 gen;   /* the generation they were found in */
};


/* What user_stack_key keeps of a thread's last walk (in the thread's task-local storage,
 * one per program): its user registers (ip, sp), where the walk's first two steps led and
 * the two frame records above, the stack's key, and the rows of the first two steps. */
struct ucache {
	__u64 uip, usp, ufr[8], ustack;
	__u32 ugen, uprov; /* uprov: ustack was walked without the process's mappings */
	struct rowmemo rows;
};

/* Room for one stack walk per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ob_stack);
} scratch SEC(".maps");

/* The unwind rows of every binary loaded (unwind_rows.h), each binary's a slice, and each
 * process's executable mappings with their slices; filled by user space (offcpu.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 20);
	__type(key, __u32);
	__type(value, struct ob_row);
} urows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 2 KiB a process, as they come */
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, struct ob_maps);
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

/* Every binary with rows, by its file (struct ob_bin); filled by user space as it loads them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct ob_bin_key);
	__type(value, struct ob_bin);
} ubins SEC(".maps");

/* What find_row_by_file learned of each process's mappings (struct ob_files); sized by the
 * loader where by_file is on. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ob_files);
} ufiles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ob_files);
} ufiles_new SEC(".maps");

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

static __always_inline void count_n(__u32 which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += n; /* this CPU's own: no other writer while the program runs */
}
static __always_inline void count(__u32 which) { count_n(which, 1); }

/* Keeps the n addresses in b once in the generation's stack map; returns their key. */
static __always_inline __u64 intern(struct ob_stack *b, __u32 n, __u32 gen)
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
	__u32 cfi;        /* ip was found by a table row's step (a return address for sure) */
	__u32 rnew;       /* rows found by this walk (for the thread's memo) */
	__u32 unruled;    /* the walk ended at a row it cannot follow (an expression's CFA) */
	__u32 vma_asked;  /* this walk called bpf_find_vma (once a run: find_row_by_file) */
	__u32 file_rows, file_misses; /* frames out of the mappings loaded (or with none loaded):
					 rows found by their file, or not */
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

#define MAPS_STEPS 7  /* a binary search over STROBE_OB_MAX_MAPS mappings */
#define ROWS_STEPS 23 /* ... over up to 1 << 22 rows (the loader's cap on urows) */

/* Asks user space for process tgid's mappings, once until it has loaded them. */
static __always_inline void ask_maps(__u32 tgid)
{
	__u8 one = 1;
	if (!bpf_map_lookup_elem(&uwant, &tgid) &&
	    bpf_map_update_elem(&uwant, &tgid, &one, BPF_NOEXIST) == 0) {
		struct ob_req q = {.ns = bpf_ktime_get_ns(), .tgid = tgid};
		bpf_ringbuf_output(&ureq, &q, sizeof(q), 0);
	}
}

static __always_inline void want_maps(struct uwalk *w)
{
	if (!w->asked)
		ask_maps(w->tgid);
	w->asked = 1;
}

/* The row at ELF address rel among rows [row0, row0 + nrows); kind FP when there is none. */
static __always_inline struct ob_row rows_find(__u32 row0, __u32 nrows, __u64 rel)
{
	struct ob_row none = {.kind = STROBE_OB_ROW_FP};
	if (!nrows || rel >= 0xffffffffull)
		return none;
	__u32 rlo = row0, rhi = row0 + nrows;
	for (int k = 0; k < ROWS_STEPS && rlo < rhi; k++) { /* the first row above rel */
		__u32 mid = rlo + (rhi - rlo) / 2;
		struct ob_row *r = bpf_map_lookup_elem(&urows, &mid);
		if (!r)
			return none;
		if (r->pc <= rel)
			rlo = mid + 1;
		else
			rhi = mid;
	}
	if (rlo == row0)
		return none;
	__u32 at = rlo - 1;
	struct ob_row *r = bpf_map_lookup_elem(&urows, &at);
	return r ? *r : none;
}

/* The executable mapping bpf_find_vma found at an address: its start, offset and file. */
struct vma_file {
	__u64 start, end, pgoff, ino, size;
	__u32 dev, found; /* found: 1 a mapping, 2 an executable one of a file */
};

static long vma_file_of(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct vma_file *v = ctx;
	v->found = 1;
	struct file *f = vma->vm_file;
	if (!f || !(vma->vm_flags & VM_EXEC))
		return 0;
	struct inode *in = f->f_inode;
	if (!in)
		return 0;
	struct super_block *sb = in->i_sb;
	if (!sb)
		return 0;
	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->pgoff = vma->vm_pgoff;
	v->ino = in->i_ino;
	v->size = (__u64)in->i_size;
	v->dev = sb->s_dev;
	v->found = 2;
	return 0;
}

/*
 * The row for pc by the file mapped there, for a process whose mappings user space has not
 * loaded (a new process's first milliseconds: the dynamic linker, the program's own start) or
 * loaded before this code was mapped (a library since), or whose mappings are more than its
 * table holds (STROBE_OB_MAX_MAPS). The binaries are mostly known already, mapped by other
 * processes (libc, ld.so, the program run before); their rows are in ubins by device and inode.
 *
 * The executable's own text is found from the process (mm's start_code, end_code, exe_file);
 * other files by bpf_find_vma, but only once per program run where interrupts are off (it
 * queues the mapping lock's release as per-CPU irq work, and a second call finds that busy):
 * what it found is kept in the process's ufiles, so each walk learns one mapping, and the next
 * walks of the process use what the earlier ones learned. ufiles is emptied when user space's
 * mappings of the process change (their loaded_ns), so what it holds is never older than them.
 * *mapped: pc is in some mapping (0: no code address at all).
 */
static __always_inline struct ob_row find_row_by_file(struct uwalk *w, struct ob_maps *ms,
						      __u64 pc, int *mapped)
{
	struct ob_row none = {.kind = STROBE_OB_ROW_FP};
	*mapped = 1;
	__u64 maps_ns = ms ? ms->loaded_ns : 0;
	struct ob_files *fs = bpf_map_lookup_elem(&ufiles, &w->tgid);
	if (fs && fs->maps_ns != maps_ns) {
		fs->n = 0;
		fs->maps_ns = maps_ns;
	}
	for (int i = 0; fs && i < STROBE_OB_FILE_SLOTS; i++) {
		struct ob_file *f = &fs->f[i];
		if (i < fs->n && pc >= f->start && pc < f->end && f->chk == ob_file_chk(f)) {
			count(STROBE_OB_VMA_ROWS);
			return rows_find(f->row0, f->nrows, pc - f->bias);
		}
	}
	/* The program's own text needs no lookup: the process says where it is, and which file */
	struct task_struct *t = bpf_get_current_task_btf();
	struct mm_struct___strobe_exe *mm = (struct mm_struct___strobe_exe *)t->mm;
	struct vma_file v = {0};
	__u64 bias;
	int exe = 0;
	if (mm) {
		__u64 lo = BPF_CORE_READ(mm, start_code), hi = BPF_CORE_READ(mm, end_code);
		if (pc >= lo && pc < hi) {
			struct inode *in = BPF_CORE_READ(mm, exe_file, f_inode);
			v.ino = BPF_CORE_READ(in, i_ino);
			v.size = (__u64)BPF_CORE_READ(in, i_size);
			v.dev = BPF_CORE_READ(in, i_sb, s_dev);
			v.start = lo;
			v.end = hi;
			exe = 1;
		}
	}
	if (!exe) {
		if (w->vma_asked)
			return none; /* (unknown here: frame pointers, as without the file) */
		w->vma_asked = 1;
		long rc = bpf_find_vma(t, pc, vma_file_of, &v, 0);
		if (rc < 0) { /* -EBUSY: the lock taken, or its release still queued */
			*mapped = rc != -2 /* -ENOENT: in no mapping */;
			return none;
		}
		*mapped = v.found != 0;
		if (v.found != 2)
			return none;
	}
	struct ob_bin_key k = {.dev = v.dev, .ino = v.ino};
	struct ob_bin *bin = bpf_map_lookup_elem(&ubins, &k);
	if (!bin || bin->size != v.size)
		return none; /* (not kept: its rows may come) */
	bias = exe ? v.start - bin->text : v.start - (v.pgoff << 12) + (__u64)bin->adj;
	if (bin->exec && bias)
		return none;
	if (!fs && !exe) {
		/* A new entry from a map: on the stack of the walk's bpf_loop callback, its 336
		 * bytes broke the off-CPU program's walks (which never run this: the frames of the
		 * first two steps went missing, on 6.18), the callback's frame and its caller's
		 * together past the 512 bytes a program has */
		__u32 zero = 0;
		struct ob_files *nf = bpf_map_lookup_elem(&ufiles_new, &zero);
		if (nf) {
			nf->maps_ns = maps_ns;
			nf->n = nf->next = 0;
			bpf_map_update_elem(&ufiles, &w->tgid, nf, BPF_ANY);
			fs = bpf_map_lookup_elem(&ufiles, &w->tgid);
		}
	}
	if (fs && !exe) {
		__u32 at = fs->next % STROBE_OB_FILE_SLOTS;
		struct ob_file slot = {.start = v.start, .end = v.end, .bias = bias,
				       .row0 = bin->row0, .nrows = bin->nrows};
		slot.chk = ob_file_chk(&slot);
		fs->f[at] = slot;
		fs->next = at + 1;
		if (fs->n < STROBE_OB_FILE_SLOTS)
			fs->n++;
	}
	count(STROBE_OB_VMA_ROWS);
	return rows_find(bin->row0, bin->nrows, pc - bias);
}

/* Counts a frame find_row_by_file was asked for: found a row (by_file_rows) or not. */
static __always_inline void file_seen(struct uwalk *w, struct ob_row r)
{
	if ((r.kind & STROBE_OB_ROW_KIND) == STROBE_OB_ROW_FP)
		w->file_misses++;
	else
		w->file_rows++;
}

/* The row for address pc of the walk's process; kind FP when there is none. */
static __always_inline struct ob_row find_row(struct uwalk *w, __u64 pc, int leaf)
{
	struct ob_row none = {.kind = STROBE_OB_ROW_FP};
	struct ob_maps *ms = bpf_map_lookup_elem(&umaps, &w->tgid);
	int mapped = 1;
	if (!ms) {
		if (!w->asked)
			count(STROBE_OB_NO_MAPS);
		want_maps(w);
		if (!by_file)
			return none;
		struct ob_row r = find_row_by_file(w, 0, pc, &mapped);
		w->outside = !mapped;
		file_seen(w, r);
		return r;
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
	struct ob_map *m = &ms->m[(lo - 1) & (STROBE_OB_MAX_MAPS - 1)];
	if (lo == 0 || pc >= m->end) {
		/* Code mapped since the mappings were read: ask again. For a leaf, which is surely
		 * code, soon: mappings read right after an exec have only the program and the
		 * dynamic linker, which then maps the libraries. The same for a return address a
		 * table row's step found (the program's own function called from libc's qsort,
		 * with libc mapped since: without this its samples stopped at libc until a leaf
		 * there asked). For one a frame-pointer step read, which may be whatever the
		 * register held, once a second. Meanwhile its file may say. */
		if (leaf)
			w->stale = 1;
		struct ob_row r = none;
		if (by_file) {
			r = find_row_by_file(w, ms, pc, &mapped);
			file_seen(w, r);
		}
		w->outside = !by_file || !mapped || (r.kind & STROBE_OB_ROW_KIND) == STROBE_OB_ROW_FP;
		/* (found by its file: asking again would read the same mappings, a process with
		 * more than the table holds at every walk) */
		if (w->outside &&
		    bpf_ktime_get_ns() - ms->loaded_ns > (leaf || w->cfi ? 10000000ull : 1000000000ull))
			want_maps(w);
		return r;
	}
	return rows_find(m->row0, m->nrows, pc - m->bias);
}

/* Reads user memory of the current task (task NULL), or of task from a sleepable program. */
static __always_inline long uread(void *dst, __u32 size, __u64 addr, struct task_struct *task)
{
	if (task)
		return bpf_copy_from_user_task(dst, size, (void *)addr, task, 0);
	return bpf_probe_read_user(dst, size, (void *)addr);
}

/* Adds the walk's current frame to b and steps to its caller: 0 to go on, 1 at the end. */
static __always_inline long ustep1(struct uwalk *w, struct ob_stack *b,
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
	struct ob_row r = {.kind = STROBE_OB_ROW_FP};
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
	if (kind == STROBE_OB_ROW_SP || kind == STROBE_OB_ROW_BP || kind == STROBE_OB_ROW_PLT) {
		__u64 cfa = (kind == STROBE_OB_ROW_BP ? bp : sp) + (__u64)(__s64)r.cfa_off;
		if (kind == STROBE_OB_ROW_PLT && (ip & 15) >= (__u64)(__u8)r.rbp_off8)
			cfa += 8; /* past the stub's push */
		if (cfa <= sp || cfa - sp > USER_STACK_MAX ||
		    uread(&ip, 8, cfa - 8, task) < 0 ||
		    ((r.kind & STROBE_OB_ROW_RBP) &&
		     uread(&bp, 8, cfa + 8 * (__s64)r.rbp_off8, task) < 0)) {
			count(STROBE_OB_TABLE_STOPS);
			return 1;
		}
		sp = cfa;
		w->cfi = 1;
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
		w->cfi = 0;
		if (tables)
			count(STROBE_OB_FP_FRAMES);
	} else {
		count(STROBE_OB_TABLE_STOPS);
		w->unruled = 1;
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

/* Whether the walk went without the process's mappings (or beyond them), and not wholly by
 * rows found by the frames' files: its frame-pointer steps there may have stopped short. */
static __always_inline int walked_blind(const struct uwalk *w)
{
	return tables && (!w->known || w->stale) && (w->file_misses || !w->file_rows);
}

/* ustep1 for bpf_loop (verified once, however many frames it runs for). */
static long ustep(__u64 idx, void *ctx)
{
	__u32 zero = 0;
	struct uwalk *w = bpf_map_lookup_elem(&uwalks, &zero);
	struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!w || !b)
		return 1;
	if (ustep1(w, b, NULL)) {
		w->end = 1;
		return 1;
	}
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
					    __u64 *leaf, struct ucache *c, __u32 *prov)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
	__u32 zero = 0;
	struct ob_stack *b = bpf_map_lookup_elem(&scratch, &zero);
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
	*prov = walked_blind(w);
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

/* From a fork program: with a pid filter, children of a target process are targets too (as
 * perf's inherit makes them in the other mode), and a new process has its parent's mappings
 * until it execs (most soon do). */
static __always_inline void ustack_on_fork(__u32 ptgid, __u32 ctgid)
{
	if (ptgid == ctgid)
		return; /* a new thread */
	if (filter_tgids) {
		if (!bpf_map_lookup_elem(&targets, &ptgid))
			return;
		__u8 one = 1;
		if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY) < 0)
			count(STROBE_OB_TARGETS_FULL);
	}
	struct ob_maps *pm = tables ? bpf_map_lookup_elem(&umaps, &ptgid) : 0;
	if (pm)
		bpf_map_update_elem(&umaps, &ctgid, pm, BPF_ANY);
}

/* From an exec program: an exec replaces every mapping, so the old ones are forgotten at once
 * (frame pointers until user space loads the new ones, which the next walk asks for), and so
 * are the rows the thread's walks remembered (c: its ucache, or NULL). */
static __always_inline void ustack_on_exec(__u32 tgid, struct ucache *c)
{
	if (!tables)
		return;
	__u32 *n = bpf_map_lookup_elem(&uexec, &tgid), one = 1;
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&uexec, &tgid, &one, BPF_ANY);
	bpf_map_delete_elem(&umaps, &tgid);
	if (by_file)
		bpf_map_delete_elem(&ufiles, &tgid);
	if (c)
		c->rows.valid = 0;
}

#endif
