/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The user-space half of the Python stacks (agent/python.c, agent/python_offsets.c): finding
 * Python processes and their version, giving the on-CPU program their offsets (its pycfg map),
 * naming the code objects of the stacks it kept, and merging those frames into the native
 * stack in place of the interpreter's evaluation frames. Private to agent/.
 */
#ifndef STROBE_AGENT_PYTHON_HOST_H
#define STROBE_AGENT_PYTHON_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "python.h"

struct strobe_sampler;

/* One version's offsets: the program's part (cfg, runtime 0) and the naming's. */
typedef struct py_offsets {
	unsigned minor;
	const char *source; /* where they come from, for the log and docs */
	struct py_cfg cfg;
	uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable,
		co_code_adaptive;
	uint16_t ascii_size, compact_size; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
	uint16_t bytes_sval, var_size;     /* PyBytesObject.ob_sval, PyVarObject.ob_size */
	uint8_t instr_current;             /* the frame's instr points at the current one */
} py_offsets;

/* The table's entry for 3.minor: 0, or -ENOENT. */
int py_offsets_for(unsigned minor, py_offsets *o);
/* From the _Py_DebugOffsets at d (len bytes read from _PyRuntime) of a 3.minor: 0, -ENOENT
 * (not there), -ENOTSUP (a layout other than 3.13's, or free-threaded), -ERANGE (implausible). */
int py_offsets_debug(const uint8_t *d, size_t len, unsigned minor, py_offsets *o);
size_t py_debug_offsets_len(void);

/* The line of instruction idx (code units) of a code object whose location table (3.11+) is
 * lt[0..n) and first line first: first when the table says nothing. */
int64_t py_line(const uint8_t *lt, size_t n, int64_t first, int64_t idx);

typedef struct py_host py_host;

typedef struct py_stats {
	uint64_t processes;   /* Python processes whose frames are read */
	uint64_t unknown;     /* ... not, for an unknown version or offsets that did not fit */
	uint64_t named;       /* frames named (code objects read, or found in the cache) */
	uint64_t unnamed;     /* frames whose code object could not be read */
	uint64_t cached;      /* code objects in the cache now */
	uint64_t merged;      /* stacks merged */
} py_stats;

/* cfg_fd: the program's pycfg map. note(ctx, msg): what could not be named, once each. */
py_host *py_new(int cfg_fd, const char *proc_root,
			 void (*note)(void *ctx, const char *msg), void *ctx);
void py_free(py_host *py);
/* A drain begins: py_see looks at a process at most once in each. */
void py_drain(py_host *py);
/* Looks at process pid (again only when its executable changed): a Python process of a known
 * version gets its entry in pycfg. exec: its mappings were just read after an exec (or it was
 * just added): looked at even when it was already in this drain, before the exec. */
void py_see(py_host *py, uint32_t pid, bool exec);
/* Process pid has a new image (an exec, or a new process given its pid), as the caller learns of
 * every one (the on-CPU program's fresh ring): from the first call on, py_see looks again
 * at a process it knows only after this, or every PY_RECHECK_DRAINS drains, rather than with a
 * stat of its executable at every drain (a system call for each sampled process each interval:
 * a tenth of the agent's own CPU beside 200 busy processes). */
void py_new_image(py_host *py, uint32_t pid);
/* The merged user stack of pid, leaf first, into ips[0..cap) and names[0..cap) (0: ips[i] is a
 * native address; else a Python frame, sampler_py_name's id): Python frames in place of
 * the evaluation frames that ran them. Returns the length. */
uint32_t py_merge(py_host *py, struct strobe_sampler *s, uint32_t pid,
			 const uint64_t *uips, uint32_t nu, const struct py_stack *st,
			 uint64_t *ips, uint32_t *names, uint32_t cap);
void py_get_stats(const py_host *py, py_stats *st);

#endif
