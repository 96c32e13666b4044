/* SPDX-License-Identifier: GPL-2.0 OR Apache-2.0 */
/*
 * The Python stack of a sampled thread, read in the on-CPU program (agent/oncpu.bpf.c includes
 * this after ustack.bpf.h) while the thread is stopped by the sampling interrupt, so the frame
 * chain it reads is the one the interpreter was running (the "consistent frames"); user
 * space reading it later would find the thread elsewhere. Layout and the user-space half:
 * agent/python.h, agent/python.c.
 *
 *   the thread state: _PyRuntime.interpreters.head (the main interpreter) -> its thread list,
 *     the entry whose thread_id (pthread_self) is the task's fsbase (glibc x86-64); at most
 *     STROBE_PY_MAX_THREADS looked at;
 *   the frames: the thread state's current frame (through _PyCFrame in 3.11 and 3.12), then the
 *     chain of callers, one bpf_loop step each, at most STROBE_PY_MAX_DEPTH kept (a step reads
 *     one 128-byte window of the frame: every field a version needs is in it);
 *   the stack: kept once per generation in pystacks[gen % 2] by a hash of its frames, its key
 *     returned (0: no Python stack: not a Python process, a thread with no thread state, a read
 *     that failed).
 * Every read is bpf_probe_read_user of the current task: a page not present ends the walk there.
 */
#ifndef STROBE_AGENT_PYTHON_BPF_H
#define STROBE_AGENT_PYTHON_BPF_H

#include "python.h"

/* The task's fsbase (x86-64's thread_struct), through a flavour of task_struct of this file's
 * own (the ___py suffix is dropped by CO-RE), ustack.bpf.h's having no `thread`. */
struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));
struct task_struct___py {
	struct thread_struct thread;
} __attribute__((preserve_access_index));

/* Python processes (tgid), filled by user space (python.c) when it first sees one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_cfg);
} pycfg SEC(".maps");

/* The Python stacks, by a hash of their frames, per generation as stacks0/stacks1; allocated
 * as they come (1 KiB each). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct py_stack);
} pystacks0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct py_stack);
} pystacks1 SEC(".maps");

/* One walk's state per CPU (too large for the BPF stack; and see uwalks in ustack.bpf.h on why
 * a bpf_loop callback's state is better in a map). */
struct pywalk {
	struct py_cfg c;
	__u64 frame;       /* the frame to read next (0: the end) */
	__u32 more;        /* the chain went on past the last frame kept */
	__u32 pad_;
	__u64 win[16];     /* the frame's first 128 bytes */
	struct py_stack st;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pywalk);
} pywalks SEC(".maps");

static __always_inline __u64 py_u64(struct pywalk *w, __u32 off)
{
	return w->win[(off >> 3) & 15];
}

/* One frame: kept (unless a 3.12+ shim, which marks the frame before it as an entry), and the
 * walk moved to its caller. 0 to go on, 1 at the end. */
static long py_step(__u64 idx, void *ctx)
{
	__u32 zero = 0;
	struct pywalk *w = bpf_map_lookup_elem(&pywalks, &zero);
	if (!w || !w->frame)
		return 1;
	if (bpf_probe_read_user(w->win, sizeof(w->win), (void *)w->frame) < 0) {
		w->frame = 0;
		return 1;
	}
	__u32 n = w->st.n;
	__u64 code = py_u64(w, w->c.fr_code);
	__u8 flag = 0;
	if (w->c.fr_flag != STROBE_PY_NONE)
		flag = ((__u8 *)w->win)[w->c.fr_flag & 127];
	__u64 instr;
	if (w->c.kind == STROBE_PY_FRAMEOBJ)
		instr = (__u64)((__u32 *)w->win)[(w->c.fr_instr >> 2) & 31];
	else
		instr = py_u64(w, w->c.fr_instr);
	w->frame = py_u64(w, w->c.fr_back);
	if (w->c.kind == STROBE_PY_SHIM && flag == 3 /* FRAME_OWNED_BY_CSTACK */) {
		if (n > 0 && n <= STROBE_PY_MAX_DEPTH)
			w->st.f[(n - 1) & (STROBE_PY_MAX_DEPTH - 1)].code |= 1;
		return 0;
	}
	if (n >= STROBE_PY_MAX_DEPTH) {
		w->more = 1;
		return 1;
	}
	if (!code) /* not a frame (a read of something else): the end */
		return 1;
	int entry = w->c.kind == STROBE_PY_FRAMEOBJ || (w->c.kind == STROBE_PY_ENTRYFLAG && flag);
	w->st.f[n & (STROBE_PY_MAX_DEPTH - 1)].code = code | (entry ? 1 : 0);
	w->st.f[n & (STROBE_PY_MAX_DEPTH - 1)].instr = instr;
	w->st.n = n + 1;
	return 0;
}

/* The key of the Python stack of task t (tgid's thread), 0 when none. */
static __always_inline __u64 py_stack_key(struct task_struct *t, __u32 tgid, __u32 gen)
{
	struct py_cfg *c = bpf_map_lookup_elem(&pycfg, &tgid);
	__u32 zero = 0;
	struct pywalk *w = bpf_map_lookup_elem(&pywalks, &zero);
	if (!c || !w)
		return 0;
	w->c = *c;
	__u64 fsbase = BPF_CORE_READ((struct task_struct___py *)t, thread.fsbase);
	__u64 interp = 0, ts = 0, tid = 0;
	if (bpf_probe_read_user(&interp, 8, (void *)(w->c.runtime + w->c.rt_interp_head)) < 0 ||
	    !interp ||
	    bpf_probe_read_user(&ts, 8, (void *)(interp + w->c.is_threads_head)) < 0)
		return 0;
	for (int i = 0; i < STROBE_PY_MAX_THREADS && ts; i++) {
		if (bpf_probe_read_user(&tid, 8, (void *)(ts + w->c.ts_thread_id)) < 0)
			return 0;
		if (tid == fsbase)
			break;
		if (bpf_probe_read_user(&ts, 8, (void *)(ts + w->c.ts_next)) < 0)
			return 0;
	}
	if (!ts || tid != fsbase) {
		count(STROBE_OC_PY_NO_THREAD);
		return 0;
	}
	__u64 f = 0;
	if (bpf_probe_read_user(&f, 8, (void *)(ts + w->c.ts_frame)) < 0)
		return 0;
	if (w->c.cf_current != STROBE_PY_NONE && f &&
	    bpf_probe_read_user(&f, 8, (void *)(f + w->c.cf_current)) < 0)
		return 0;
	if (!f)
		return 0; /* a thread state with no frame: in C code outside Python */
	w->frame = f;
	w->more = 0;
	w->st.n = 0;
	bpf_loop(2 * STROBE_PY_MAX_DEPTH, py_step, NULL, 0);
	__u32 n = w->st.n;
	if (!n)
		return 0;
	w->st.truncated = w->more;
	__u64 h = 0xcbf29ce484222325ull ^ w->more;
	for (__u32 i = 0; i < STROBE_PY_MAX_DEPTH; i++) {
		if (i >= n)
			break;
		h ^= w->st.f[i].code;
		h *= 0x100000001b3ull;
		h ^= w->st.f[i].instr;
		h *= 0x100000001b3ull;
	}
	h |= 1;
	void *map = gen & 1 ? (void *)&pystacks1 : (void *)&pystacks0;
	if (!bpf_map_lookup_elem(map, &h)) {
		long rc = bpf_map_update_elem(map, &h, &w->st, BPF_NOEXIST);
		if (rc < 0 && rc != -17 /* EEXIST */) {
			count(STROBE_OC_PY_FULL);
			return 0;
		}
	}
	count(STROBE_OC_PY);
	return h;
}

/* A forked child has its parent's interpreter at the same addresses; an exec has another. */
static __always_inline void py_on_fork(__u32 ptgid, __u32 ctgid)
{
	struct py_cfg *c;
	if (ptgid != ctgid && (c = bpf_map_lookup_elem(&pycfg, &ptgid)))
		bpf_map_update_elem(&pycfg, &ctgid, c, BPF_ANY);
}

static __always_inline void py_on_exec(__u32 tgid)
{
	bpf_map_delete_elem(&pycfg, &tgid);
}

#endif
