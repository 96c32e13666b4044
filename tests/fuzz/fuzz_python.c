// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for what agent/python.c decodes from a Python process's memory (untrusted:
 * any process can lay out its memory as it likes): a code object's location table
 * (py_line) and the _Py_DebugOffsets block (py_offsets_debug). Any bytes give a
 * line (the first line when the table says nothing) without reading past the table, and offsets
 * are either refused or within the bounds the eBPF walk relies on.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/python_host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	int32_t first, idx;
	memcpy(&first, data, 4);
	memcpy(&idx, data + 4, 4);
	/* a copy of its exact size, so ASan sees any read past the table */
	size_t n = size - 8;
	uint8_t *lt = malloc(n ? n : 1);
	if (!lt)
		return 0;
	memcpy(lt, data + 8, n);
	int64_t line = py_line(lt, n, first, idx);
	if (idx < 0 && line != first)
		abort();
	free(lt);
	py_offsets o;
	size_t dn = py_debug_offsets_len();
	if (size >= dn) {
		uint8_t *d = malloc(dn);
		if (!d)
			return 0;
		memcpy(d, data, dn);
		memcpy(d, "xdebugpy", 8); /* (past the cookie, to the checks that matter) */
		if (py_offsets_debug(d, dn, 13, &o) == 0 &&
		    (o.cfg.fr_code > 120 || o.cfg.fr_back > 120 || o.cfg.fr_instr > 120 ||
		     o.cfg.fr_flag > 127 || o.cfg.rt_interp_head >= 4096 || o.co_linetable >= 4096))
			abort();
		free(d);
	}
	return 0;
}
