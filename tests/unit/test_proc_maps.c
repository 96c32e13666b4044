// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of /proc/PID/maps reading (lib/proc_maps.c): lines as the kernel writes them (a
 * file, a path with spaces and " (deleted)", anonymous memory, [vdso]), a line that is not one,
 * the proc root honoured (a fake root in a temporary directory), an overlong line skipped, a
 * callback's error returned, a missing process, and our own maps through "self".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include <cmocka.h>

#define UNIT_TMPDIR_NAME "proc-maps"
#include "strobe/proc_maps.h"
#include "unit_tmpdir.h"

static void test_parse_line(void **state)
{
	(void)state;
	strobe_maps_entry e;
	char l1[] = "7f0a1c000000-7f0a1c028000 r-xp 00002000 fd:01 1835017                    "
		    "/usr/lib/x86_64-linux-gnu/libc.so.6\n";
	assert_int_equal(strobe_maps_parse_line(l1, &e), 0);
	assert_true(e.start == 0x7f0a1c000000ull && e.end == 0x7f0a1c028000ull);
	assert_true(e.offset == 0x2000 && e.inode == 1835017);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 1);
	assert_string_equal(e.perms, "r-xp");
	assert_true(strobe_maps_exec(&e));
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	char l2[] = "00400000-00401000 r-xp 00000000 08:02 42 /tmp/my dir/a.out (deleted)\n";
	assert_int_equal(strobe_maps_parse_line(l2, &e), 0);
	assert_string_equal(e.path, "/tmp/my dir/a.out (deleted)");
	char l3[] = "7ffd5a7f0000-7ffd5a811000 rw-p 00000000 00:00 0\n";
	assert_int_equal(strobe_maps_parse_line(l3, &e), 0);
	assert_string_equal(e.path, "");
	assert_false(strobe_maps_exec(&e));
	char l4[] = "not a maps line\n", l5[] = "1000-2000 r-xp 0 08:01\n";
	assert_int_equal(strobe_maps_parse_line(l4, &e), -EINVAL);
	assert_int_equal(strobe_maps_parse_line(l5, &e), -EINVAL);
}

typedef struct seen {
	int n, stop_at;
	char paths[8][64];
	uint64_t vdso_start;
} seen;

static int collect(void *ctx, const strobe_maps_entry *e)
{
	seen *s = ctx;
	if (s->n == s->stop_at)
		return -E2BIG;
	if (s->n < 8)
		snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s", e->path);
	s->n++;
	return 0;
}

static void test_proc_root(void **state)
{
	(void)state;
	const char *root = dir;
	char pdir[300], file[320];
	snprintf(pdir, sizeof(pdir), "%s/1234", root);
	assert_int_equal(mkdir(pdir, 0755), 0);
	snprintf(file, sizeof(file), "%s/maps", pdir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fprintf(f, "00400000-00401000 r-xp 00000000 08:02 42 /bin/one\n");
	fprintf(f, "00500000-00501000 r-xp 00000000 08:02 43 /");
	for (int i = 0; i < 6000; i++)
		fputc('x', f);
	fprintf(f, "\ngarbage\n");
	fprintf(f, "00600000-00601000 r--p 00000000 08:02 44 /bin/two");
	fclose(f);
	seen s = {.stop_at = -1};
	assert_int_equal(strobe_proc_maps_read(root, 1234, collect, &s), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.paths[0], "/bin/one");
	assert_string_equal(s.paths[1], "/bin/two");
	/* a callback's error stops the walk */
	s = (seen){.stop_at = 1};
	assert_int_equal(strobe_proc_maps_read(root, 1234, collect, &s), -E2BIG);
	assert_int_equal(s.n, 1);
	/* a process that is not there */
	assert_int_equal(strobe_proc_maps_read(root, 99999, collect, &s), -ENOENT);
}

static int find_vdso(void *ctx, const strobe_maps_entry *e)
{
	seen *s = ctx;
	if (strcmp(e->path, "[vdso]") == 0)
		s->vdso_start = e->start;
	s->n++;
	return 0;
}

static void test_self(void **state)
{
	(void)state;
	seen s = {0};
	assert_int_equal(strobe_proc_maps_read(NULL, -1, find_vdso, &s), 0);
	assert_true(s.n > 3);
	uint64_t base = (uint64_t)getauxval(AT_SYSINFO_EHDR);
	if (base)
		assert_true(s.vdso_start == base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_line),
		cmocka_unit_test_setup_teardown(test_proc_root, setup, teardown),
		cmocka_unit_test(test_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
