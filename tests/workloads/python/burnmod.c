// SPDX-License-Identifier: Apache-2.0
/*
 * A C extension for the mixed-stack test (tests/e2e/agent_python.sh/mixed), built by the test
 * against the installed Python.h: burn_c(n) spins n rounds in C, so the CPU is spent below a
 * Python caller in a C function the stack must show under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) static unsigned long burn_c(unsigned long n)
{
	volatile unsigned long x = 0;
	for (unsigned long i = 0; i < n; i++)
		x += i * i % 7;
	return x;
}

static PyObject *py_burn_c(PyObject *self, PyObject *arg)
{
	unsigned long n = PyLong_AsUnsignedLong(arg);
	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromUnsignedLong(burn_c(n));
}

static PyMethodDef methods[] = {{"burn_c", py_burn_c, METH_O, "spin n rounds in C"}, {0}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "burnmod", NULL, -1, methods};

PyMODINIT_FUNC PyInit_burnmod(void)
{
	return PyModule_Create(&mod);
}
