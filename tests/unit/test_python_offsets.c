// SPDX-License-Identifier: Apache-2.0
/*
 * agent/python_offsets.c's table checked against the installed CPython headers (offsetof of
 * the very fields the eBPF walk and the naming read), for the versions whose development
 * headers are here (Debian 12: libpython3.11-dev, 3.11); and py_line's decoding of a
 * 3.11+ location table, and the _Py_DebugOffsets reader's refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/python_host.h"

/* (the Makefile adds pkg-config python3's include directory for this test) */
#if __has_include(<Python.h>)
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_MAJOR_VERSION == 3 && PY_MINOR_VERSION == 11
#define HAVE_PY311 1
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#endif
#endif

static void test_py311_table(void **state)
{
	(void)state;
#ifdef HAVE_PY311
	py_offsets o;
	assert_int_equal(py_offsets_for(11, &o), 0);
	assert_int_equal(o.cfg.kind, STROBE_PY_ENTRYFLAG);
	assert_int_equal(o.cfg.rt_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	assert_int_equal(o.cfg.is_threads_head, offsetof(PyInterpreterState, threads.head));
	assert_int_equal(o.cfg.ts_next, offsetof(PyThreadState, next));
	assert_int_equal(o.cfg.ts_thread_id, offsetof(PyThreadState, thread_id));
	assert_int_equal(o.cfg.ts_frame, offsetof(PyThreadState, cframe));
	assert_int_equal(o.cfg.cf_current, offsetof(_PyCFrame, current_frame));
	assert_int_equal(o.cfg.fr_code, offsetof(_PyInterpreterFrame, f_code));
	assert_int_equal(o.cfg.fr_back, offsetof(_PyInterpreterFrame, previous));
	assert_int_equal(o.cfg.fr_instr, offsetof(_PyInterpreterFrame, prev_instr));
	assert_int_equal(o.cfg.fr_flag, offsetof(_PyInterpreterFrame, is_entry));
	assert_int_equal(o.co_filename, offsetof(PyCodeObject, co_filename));
	assert_int_equal(o.co_name, offsetof(PyCodeObject, co_name));
	assert_int_equal(o.co_qualname, offsetof(PyCodeObject, co_qualname));
	assert_int_equal(o.co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	assert_int_equal(o.co_linetable, offsetof(PyCodeObject, co_linetable));
	assert_int_equal(o.co_code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
	assert_int_equal(o.ascii_size, sizeof(PyASCIIObject));
	assert_int_equal(o.compact_size, sizeof(PyCompactUnicodeObject));
	assert_int_equal(o.bytes_sval, offsetof(PyBytesObject, ob_sval));
	assert_int_equal(o.var_size, offsetof(PyVarObject, ob_size));
	/* the PyThreadState.interp the discovery check reads, and the walk's 128-byte window */
	assert_int_equal(16, offsetof(PyThreadState, interp));
	assert_true(offsetof(_PyInterpreterFrame, is_entry) < 128);
#else
	skip();
#endif
}

static void test_versions(void **state)
{
	(void)state;
	py_offsets o;
	for (unsigned m = 9; m <= 12; m++) {
		assert_int_equal(py_offsets_for(m, &o), 0);
		assert_int_equal(o.minor, m);
		/* every frame field the walk reads is in its window (python.bpf.h) */
		assert_true(o.cfg.fr_code <= 120 && o.cfg.fr_back <= 120 && o.cfg.fr_instr <= 124);
	}
	assert_int_equal(py_offsets_for(8, &o), -ENOENT);
	assert_int_equal(py_offsets_for(13, &o), -ENOENT); /* by _Py_DebugOffsets */
	uint8_t d[1024] = {0};
	size_t n = py_debug_offsets_len();
	assert_true(n <= sizeof(d));
	assert_int_equal(py_offsets_debug(d, n, 13, &o), -ENOENT); /* no cookie */
	memcpy(d, "xdebugpy", 8);
	uint64_t v = 0x030e00f0; /* 3.14: another layout */
	memcpy(d + 8, &v, 8);
	assert_int_equal(py_offsets_debug(d, n, 14, &o), -ENOTSUP);
	v = 0x030d00f0;
	memcpy(d + 8, &v, 8);
	uint64_t big = 1u << 20; /* an implausible offset */
	memcpy(d + 8 * 5, &big, 8);
	assert_int_equal(py_offsets_debug(d, n, 13, &o), -ERANGE);
	assert_int_equal(py_offsets_debug(d, n - 8, 13, &o), -ENOENT); /* short */
}

static void test_line(void **state)
{
	(void)state;
	const uint8_t lt[] = {
		0x80 | 13 << 3 | 0, 4,       /* 1 unit, no column: +2 */
		0x80 | 10 << 3 | 1, 3, 9,    /* 2 units, one-line form: +0 */
		0x80 | 11 << 3 | 0, 3, 9,    /* 1 unit: +1 */
		0x80 | 15 << 3 | 0,          /* 1 unit, no location */
		0x80 | 14 << 3 | 1, 3, 0, 1, 2, /* 2 units, long form: -1 */
		0x80 | 5 << 3 | 0, 7,        /* 1 unit, short form: +0 */
	};
	assert_int_equal(py_line(lt, sizeof(lt), 10, 0), 12);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 1), 12);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 2), 12);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 3), 13);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 4), 10); /* none: the def line */
	assert_int_equal(py_line(lt, sizeof(lt), 10, 5), 12);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 7), 12);
	assert_int_equal(py_line(lt, sizeof(lt), 10, 99), 10); /* past the end */
	assert_int_equal(py_line(lt, sizeof(lt), 10, -1), 10); /* not started */
	assert_int_equal(py_line(lt, 1, 10, 0), 10);           /* cut short */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_py311_table),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
