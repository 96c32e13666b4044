/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fresh temporary directory per test, for the unit tests of code that keeps files (the store):
 * `dir` is made by setup() and removed with everything in it by teardown(), which the test
 * registers with cmocka_unit_test_setup_teardown. Define UNIT_TMPDIR_NAME (a short name for the
 * directory, so a leftover one says which test left it) before including this header.
 */
#ifndef STROBE_UNIT_TMPDIR_H
#define STROBE_UNIT_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

static char dir[256];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/strobe-test-" UNIT_TMPDIR_NAME "-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

#endif
