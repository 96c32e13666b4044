// SPDX-License-Identifier: Apache-2.0
/*
 * Where CPython keeps what the Python stack walk reads, per version (x86-64, the default,
 * non-debug, GIL build). Two sources:
 *
 *   3.9 to 3.12: a table written from each version's headers (Include/internal/pycore_runtime.h,
 *     pycore_interp.h, pycore_frame.h, cpython/pystate.h, cpython/code.h, cpython/frameobject.h).
 *     The 3.11 entries are checked by tests/unit/test_python_offsets.c against the installed
 *     headers (offsetof, Debian's libpython3.11-dev); 3.9, 3.10 and 3.12 are not checked here
 *     (no such interpreter on Debian 12). Every entry is also checked against the process at
 *     discovery (python.c: the thread list's first entry must point back to its interpreter).
 *   3.13 and later: the interpreter's own _Py_DebugOffsets, at the start of _PyRuntime (cookie
 *     "xdebugpy"), read from the process (py_offsets_debug); its layout is 3.13's.
 *
 * Any other version is unknown: its processes keep native frames only, and the agent says so.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "python_host.h"

#define N STROBE_PY_NONE

static const py_offsets table[] = {
	{.minor = 9, .source = "table (CPython 3.9 headers)",
	 .cfg = {.kind = STROBE_PY_FRAMEOBJ, .minor = 9, .rt_interp_head = 32, .is_threads_head = 8,
		 .ts_next = 8, .ts_thread_id = 176, .ts_frame = 24, .cf_current = N, .fr_code = 32,
		 .fr_back = 24, .fr_instr = 104, .fr_flag = N},
	 .co_filename = 104, .co_name = 112, .co_qualname = N, .co_firstlineno = 40,
	 .co_linetable = N, .co_code_adaptive = N, .ascii_size = 48, .compact_size = 72,
	 .bytes_sval = 32, .var_size = 16},
	{.minor = 10, .source = "table (CPython 3.10 headers)",
	 .cfg = {.kind = STROBE_PY_FRAMEOBJ, .minor = 10, .rt_interp_head = 32, .is_threads_head = 8,
		 .ts_next = 8, .ts_thread_id = 176, .ts_frame = 24, .cf_current = N, .fr_code = 32,
		 .fr_back = 24, .fr_instr = 96, .fr_flag = N},
	 .co_filename = 104, .co_name = 112, .co_qualname = N, .co_firstlineno = 40,
	 .co_linetable = N, .co_code_adaptive = N, .ascii_size = 48, .compact_size = 72,
	 .bytes_sval = 32, .var_size = 16},
	{.minor = 11, .source = "table (CPython 3.11 headers; checked by test_python_offsets)",
	 .cfg = {.kind = STROBE_PY_ENTRYFLAG, .minor = 11, .rt_interp_head = 40,
		 .is_threads_head = 16, .ts_next = 8, .ts_thread_id = 152, .ts_frame = 56,
		 .cf_current = 8, .fr_code = 32, .fr_back = 48, .fr_instr = 56, .fr_flag = 68},
	 .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 72,
	 .co_linetable = 136, .co_code_adaptive = 184, .ascii_size = 48, .compact_size = 72,
	 .bytes_sval = 32, .var_size = 16},
	{.minor = 12, .source = "table (CPython 3.12 headers, not checked against a 3.12 here)",
	 .cfg = {.kind = STROBE_PY_SHIM, .minor = 12, .rt_interp_head = 48, .is_threads_head = 72,
		 .ts_next = 8, .ts_thread_id = 136, .ts_frame = 56, .cf_current = 0, .fr_code = 0,
		 .fr_back = 8, .fr_instr = 56, .fr_flag = 70},
	 .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 68,
	 .co_linetable = 136, .co_code_adaptive = 192, .ascii_size = 40, .compact_size = 56,
	 .bytes_sval = 32, .var_size = 16},
};

int py_offsets_for(unsigned minor, py_offsets *o)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (table[i].minor == minor) {
			*o = table[i];
			return 0;
		}
	}
	return -ENOENT;
}

/* _Py_DebugOffsets as 3.13 lays it out: 8-byte fields, each group led by its struct's size. */
enum {
	D_VERSION = 1, D_FREE_THREADED,
	D_RT = 3,         /* size, finalizing, interpreters_head */
	D_IS = D_RT + 3,  /* size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			     ceval_gil, gil_runtime_state, _enabled, _locked, _holder */
	D_TS = D_IS + 13, /* size, prev, next, interp, current_frame, thread_id, native_thread_id,
			     datastack_chunk, status */
	D_FR = D_TS + 9,  /* size, previous, executable, instr_ptr, localsplus, owner */
	D_CO = D_FR + 6,  /* size, filename, name, qualname, linetable, firstlineno, argcount,
			     localsplusnames, localspluskinds, co_code_adaptive */
	D_OB = D_CO + 10, /* pyobject: size, ob_type */
	D_TY = D_OB + 2,  /* type_object: size, tp_name, tp_repr, tp_flags */
	D_TU = D_TY + 4,  /* tuple: size, ob_item, ob_size */
	D_LI = D_TU + 3,  /* list: size, ob_item, ob_size */
	D_DI = D_LI + 3,  /* dict: size, ma_keys, ma_values */
	D_FL = D_DI + 3,  /* float: size, ob_fval */
	D_LO = D_FL + 2,  /* long: size, lv_tag, ob_digit */
	D_BY = D_LO + 3,  /* bytes: size, ob_size, ob_sval */
	D_UN = D_BY + 3,  /* unicode: size, state, length, asciiobject_size */
	D_END = D_UN + 4,
};

size_t py_debug_offsets_len(void)
{
	return D_END * 8;
}

int py_offsets_debug(const uint8_t *d, size_t len, unsigned minor, py_offsets *o)
{
	if (len < D_END * 8 || memcmp(d, "xdebugpy", 8) != 0)
		return -ENOENT;
	uint64_t v[D_END];
	memcpy(v, d, sizeof(v));
	/* the layout above is 3.13's; a later one may add fields anywhere */
	if (minor != 13 || ((v[D_VERSION] >> 24) & 0xff) != 3 ||
	    ((v[D_VERSION] >> 16) & 0xff) != minor || v[D_FREE_THREADED])
		return -ENOTSUP;
	const uint64_t need[] = {v[D_RT + 2], v[D_IS + 3], v[D_TS + 2], v[D_TS + 5], v[D_TS + 4],
				 v[D_FR + 1], v[D_FR + 2], v[D_FR + 3], v[D_FR + 5], v[D_CO + 1],
				 v[D_CO + 2], v[D_CO + 3], v[D_CO + 4], v[D_CO + 5], v[D_CO + 9],
				 v[D_UN + 3]};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (need[i] >= 4096)
			return -ERANGE;
	/* the frame fields must be in the walk's 128-byte window (python.bpf.h) */
	if (v[D_FR + 1] > 120 || v[D_FR + 2] > 120 || v[D_FR + 3] > 120 || v[D_FR + 5] > 127)
		return -ERANGE;
	*o = (py_offsets){
		.minor = minor,
		.source = "_Py_DebugOffsets (the interpreter's own)",
		.cfg = {.kind = STROBE_PY_SHIM, .minor = minor,
			.rt_interp_head = (uint16_t)v[D_RT + 2],
			.is_threads_head = (uint16_t)v[D_IS + 3], .ts_next = (uint16_t)v[D_TS + 2],
			.ts_thread_id = (uint16_t)v[D_TS + 5], .ts_frame = (uint16_t)v[D_TS + 4],
			.cf_current = N, .fr_code = (uint16_t)v[D_FR + 2],
			.fr_back = (uint16_t)v[D_FR + 1], .fr_instr = (uint16_t)v[D_FR + 3],
			.fr_flag = (uint16_t)v[D_FR + 5]},
		.co_filename = (uint16_t)v[D_CO + 1], .co_name = (uint16_t)v[D_CO + 2],
		.co_qualname = (uint16_t)v[D_CO + 3], .co_linetable = (uint16_t)v[D_CO + 4],
		.co_firstlineno = (uint16_t)v[D_CO + 5], .co_code_adaptive = (uint16_t)v[D_CO + 9],
		.ascii_size = (uint16_t)v[D_UN + 3], .compact_size = (uint16_t)(v[D_UN + 3] + 16),
		.bytes_sval = 32, .var_size = 16,
		.instr_current = 1,
	};
	return 0;
}
