/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPython frames read at sample time by the on-CPU eBPF program (agent/python.bpf.h, included by
 * agent/oncpu.bpf.c): the layout it shares with its user-space half (agent/python.c), plain
 * fixed-size types as both the BPF target and the host compile it. Private to agent/.
 *
 * Per Python process, user space puts a py_cfg in the program's `pycfg` map (where
 * _PyRuntime is, and the offsets of the interpreter's version: agent/python_offsets.c). At each
 * sample of such a process the program finds the sampled thread's PyThreadState (the
 * interpreter's thread list, matched on pthread_self, which on glibc x86-64 is the thread's
 * fsbase), walks its frame chain leaf first and keeps, per frame, the code object's address and
 * the instruction pointer, once per distinct stack in the generation's `pystacks` map (the key
 * goes in oc_key.pystack). Naming the code objects is user space's (python.c), at drain.
 */
#ifndef STROBE_AGENT_PYTHON_H
#define STROBE_AGENT_PYTHON_H

#include <linux/types.h>

#define STROBE_PY_MAX_DEPTH 64   /* Python frames kept per sample (the leaf's side) */
#define STROBE_PY_MAX_THREADS 64 /* thread states looked at for the sampled thread */
#define STROBE_PY_NONE 0xffff    /* an offset the version does not have */

/* How a version's frames are chained (py_cfg.kind). */
enum {
	STROBE_PY_FRAMEOBJ = 1, /* 3.9, 3.10: PyFrameObject, one C eval frame per Python frame */
	STROBE_PY_ENTRYFLAG,    /* 3.11: _PyInterpreterFrame, is_entry marks a C call's first */
	STROBE_PY_SHIM,         /* 3.12+: _PyInterpreterFrame, a C call pushes a shim frame
				   (owner FRAME_OWNED_BY_CSTACK) below its first */
};

struct py_cfg {
	__u64 runtime;             /* address of _PyRuntime in the process */
	__u32 kind, minor;
	/* offsets, in bytes */
	__u16 rt_interp_head;      /* _PyRuntimeState.interpreters.head */
	__u16 is_threads_head;     /* PyInterpreterState.threads.head (tstate_head) */
	__u16 ts_next;             /* PyThreadState.next */
	__u16 ts_thread_id;        /* PyThreadState.thread_id (pthread_self) */
	__u16 ts_frame;            /* PyThreadState.frame / cframe / current_frame */
	__u16 cf_current;          /* _PyCFrame.current_frame (NONE: ts_frame is the frame) */
	__u16 fr_code;             /* frame's code object (f_code / f_executable) */
	__u16 fr_back;             /* frame's caller (f_back / previous) */
	__u16 fr_instr;            /* f_lasti (int, FRAMEOBJ) / prev_instr / instr_ptr */
	__u16 fr_flag;             /* is_entry (ENTRYFLAG) / owner (SHIM), one byte */
};

/* A frame: the code object's address, its low bit set on a C call's first (entry) frame, and
 * the instruction pointer (FRAMEOBJ: f_lasti). */
struct py_frame {
	__u64 code, instr;
};

struct py_stack {
	__u32 n;         /* frames, leaf first */
	__u32 truncated; /* the chain went on past STROBE_PY_MAX_DEPTH */
	struct py_frame f[STROBE_PY_MAX_DEPTH];
};

#endif
