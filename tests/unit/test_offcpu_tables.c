// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/offcpu_tables.c, which fills the eBPF off-CPU program's unwind tables:
 * maps made here as the program declares them (no program loaded), this process's own mappings
 * loaded into them and read back. Checked: the mappings are this process's executable ones,
 * sorted; libc's carries its rows, the same rows unwind_rows.c makes of the file, with a bias
 * that takes a libc function's address to its ELF address; a second load reuses the rows; a cap
 * too small leaves libc without rows (counted); a process gone is -ESRCH; the loader thread
 * loads a process asked for through uwant. BPF maps need root (or CAP_BPF): elsewhere it prints
 * SKIP with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <gnu/libc-version.h>
#include <cmocka.h>
#include <linux/types.h>

#include "../../agent/offcpu.h"
#include "../../agent/offcpu_tables.h"
#include "../../agent/unwind_rows.h"

typedef struct fds {
	int rows, maps, want, exec, ring, bins;
} fds;

static int make_maps(fds *f, uint32_t max_rows)
{
	LIBBPF_OPTS(bpf_map_create_opts, nopre, .map_flags = BPF_F_NO_PREALLOC);
	f->rows = bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_urows", 4, sizeof(struct ob_row),
				 max_rows, NULL);
	f->maps = bpf_map_create(BPF_MAP_TYPE_HASH, "t_umaps", 4, sizeof(struct ob_maps), 64,
				 &nopre);
	f->want = bpf_map_create(BPF_MAP_TYPE_HASH, "t_uwant", 4, 1, 64, NULL);
	f->exec = bpf_map_create(BPF_MAP_TYPE_HASH, "t_uexec", 4, 4, 64, NULL);
	f->ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "t_ureq", 0, 0, 4096, NULL);
	f->bins = bpf_map_create(BPF_MAP_TYPE_HASH, "t_ubins", sizeof(struct ob_bin_key),
				 sizeof(struct ob_bin), 64, &nopre);
	return f->rows >= 0 && f->maps >= 0 && f->want >= 0 && f->exec >= 0 && f->ring >= 0 &&
			       f->bins >= 0
		       ? 0
		       : -errno;
}

/* Maps for max_rows rows, and a otables over them. */
static otables *new_tables(fds *f, uint32_t max_rows)
{
	assert_int_equal(make_maps(f, max_rows), 0);
	otables *t = otables_new(f->rows, max_rows, f->maps, f->want, f->exec, f->bins, NULL);
	assert_non_null(t);
	return t;
}

static void close_maps(fds *f)
{
	close(f->rows);
	close(f->maps);
	close(f->want);
	close(f->exec);
	close(f->ring);
	close(f->bins);
}

/* The mapping of this process holding address a, from /proc/self/maps: its start, offset,
 * device (the kernel's encoding) and inode. */
static void self_mapping(uint64_t a, uint64_t *start, uint64_t *off, uint64_t *kdev,
			 uint64_t *ino)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[4352];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, o, ma, mi, in;
		if (sscanf(line, "%lx-%lx %*s %lx %lx:%lx %lu", &lo, &hi, &o, &ma, &mi, &in) == 6 &&
		    a >= lo && a < hi) {
			*start = lo;
			*off = o;
			*kdev = (ma << 20) | mi;
			*ino = in;
			found = true;
		}
	}
	fclose(f);
	assert_true(found);
}

/* The mapping of ms holding address a, or NULL. */
static const struct ob_map *mapping_of(const struct ob_maps *ms, uint64_t a)
{
	for (uint32_t i = 0; i < ms->n; i++)
		if (a >= ms->m[i].start && a < ms->m[i].end)
			return &ms->m[i];
	return NULL;
}

/* libc's path, from this process's mappings. */
static void libc_path(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[4352];
	out[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		if (p && strstr(p, "/libc.so")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(out, len, "%s", p);
			break;
		}
	}
	fclose(f);
}

static void test_load_self(void **state)
{
	(void)state;
	fds f;
	otables *t = new_tables(&f, 1u << 20);
	uint32_t me = (uint32_t)getpid();
	assert_int_equal(otables_load(t, me), 0);

	struct ob_maps ms;
	assert_int_equal(bpf_map_lookup_elem(f.maps, &me, &ms), 0);
	assert_true(ms.n >= 3); /* the test, libc, ld.so (and the vDSO) */
	for (uint32_t i = 1; i < ms.n; i++)
		assert_true(ms.m[i - 1].end <= ms.m[i].start);
	assert_true(ms.loaded_ns > 0);

	/* libc's rows, as unwind_rows.c makes them from the file */
	uint64_t fn = (uint64_t)(uintptr_t)&gnu_get_libc_version;
	const struct ob_map *m = mapping_of(&ms, fn);
	assert_non_null(m);
	assert_true(m->nrows > 1000);
	char path[4096];
	libc_path(path, sizeof(path));
	assert_true(path[0]);
	int fd = open(path, O_RDONLY);
	urows r;
	assert_int_equal(urows_build(fd, 1u << 24, &r), 0);
	close(fd);
	assert_int_equal(m->nrows, r.n);
	uint64_t rel = fn - m->bias; /* its ELF address */
	const struct ob_row *want = urows_find(&r, rel);
	assert_non_null(want);
	uint32_t k = m->row0 + (uint32_t)(want - r.rows);
	struct ob_row got;
	assert_int_equal(bpf_map_lookup_elem(f.rows, &k, &got), 0);
	assert_memory_equal(&got, want, sizeof(got));
	assert_true(got.pc <= rel);
	uint64_t text = r.load[0].p_vaddr; /* its executable segments' lowest address */
	for (unsigned i = 1; i < r.nload; i++)
		if (r.load[i].p_vaddr < text)
			text = r.load[i].p_vaddr;
	urows_free(&r);

	/* libc by its file (ubins), as the program finds it from the mapping at an address: the
	 * same rows, and the same bias from the mapping's start and offset */
	uint64_t start, off, kdev, ino;
	self_mapping(fn, &start, &off, &kdev, &ino);
	struct ob_bin_key bk = {.dev = kdev, .ino = ino};
	struct ob_bin bin;
	assert_int_equal(bpf_map_lookup_elem(f.bins, &bk, &bin), 0);
	assert_int_equal(bin.row0, m->row0);
	assert_int_equal(bin.nrows, m->nrows);
	assert_int_equal(bin.exec, 0);
	assert_true(bin.size > 0);
	assert_int_equal(start - off + (uint64_t)bin.adj, m->bias);
	assert_int_equal(bin.text, text);

	strobe_otables_stats st;
	otables_get_stats(t, &st);
	assert_int_equal(st.procs_loaded, 1);
	assert_true(st.binaries >= 2);
	assert_true(st.binaries_by_file >= 2); /* (libc and ld.so at least) */
	uint64_t rows = st.rows;
	uint32_t bins = st.binaries;

	/* again: the same binaries, no new rows */
	assert_int_equal(otables_load(t, me), 0);
	otables_get_stats(t, &st);
	assert_int_equal(st.procs_loaded, 2);
	assert_int_equal(st.rows, rows);
	assert_int_equal(st.binaries, bins);

	/* a process that is gone */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	assert_int_equal(otables_load(t, (uint32_t)child), -ESRCH);
	otables_free(t);
	close_maps(&f);
}

/* A cap on rows smaller than libc's: libc is mapped, without rows, and counted. */
static void test_rows_full(void **state)
{
	(void)state;
	fds f;
	otables *t = new_tables(&f, 2000);
	uint32_t me = (uint32_t)getpid();
	assert_int_equal(otables_load(t, me), 0);
	struct ob_maps ms;
	assert_int_equal(bpf_map_lookup_elem(f.maps, &me, &ms), 0);
	const struct ob_map *m = mapping_of(&ms, (uint64_t)(uintptr_t)&gnu_get_libc_version);
	assert_non_null(m);
	assert_int_equal(m->nrows, 0);
	strobe_otables_stats st;
	otables_get_stats(t, &st);
	assert_true(st.binaries_full >= 1);
	assert_true(st.rows <= 2000);
	otables_free(t);
	close_maps(&f);
}

/* The loader thread loads what uwant asks for (its scan, once a second) and takes it out. */
static void test_thread(void **state)
{
	(void)state;
	fds f;
	otables *t = new_tables(&f, 1u << 20);
	assert_int_equal(otables_start(t, f.ring, NULL, NULL), 0);
	uint32_t me = (uint32_t)getpid();
	uint8_t one = 1;
	assert_int_equal(bpf_map_update_elem(f.want, &me, &one, BPF_ANY), 0);
	struct ob_maps ms;
	int rc = -1;
	for (int i = 0; i < 60 && rc != 0; i++) { /* up to 3 s */
		usleep(50000);
		rc = bpf_map_lookup_elem(f.maps, &me, &ms);
	}
	assert_int_equal(rc, 0);
	assert_true(ms.n >= 3);
	usleep(50000);
	assert_int_not_equal(bpf_map_lookup_elem(f.want, &me, &one), 0); /* taken out */
	otables_free(t); /* stops the thread */
	close_maps(&f);
}

/* A binary over the size set is built by the builder thread, not the loader: the process is
 * loaded at once (that binary walked by frame pointers meanwhile) and read again with its rows
 * once they are in. */
static void test_builder(void **state)
{
	(void)state;
	fds f;
	otables *t = new_tables(&f, 1u << 20);
	otables_set_big_binary(t, 64 * 1024); /* libc, and most test binaries */
	assert_int_equal(otables_start(t, f.ring, NULL, NULL), 0);
	uint32_t me = (uint32_t)getpid();
	uint8_t one = 1;
	assert_int_equal(bpf_map_update_elem(f.want, &me, &one, BPF_ANY), 0);
	uint64_t fn = (uint64_t)(uintptr_t)&gnu_get_libc_version;
	struct ob_maps ms;
	const struct ob_map *m = NULL;
	for (int i = 0; i < 100 && !(m && m->nrows > 1000); i++) { /* up to 5 s */
		usleep(50000);
		m = bpf_map_lookup_elem(f.maps, &me, &ms) == 0 ? mapping_of(&ms, fn) : NULL;
	}
	assert_non_null(m);
	assert_true(m->nrows > 1000); /* libc's rows, in after the build */
	strobe_otables_stats st;
	otables_get_stats(t, &st);
	assert_true(st.binaries_async >= 1);
	assert_true(st.procs_loaded >= 2); /* at once, then again with the rows */
	otables_free(t); /* stops both threads */
	close_maps(&f);
}

int main(void)
{
	fds f;
	if (make_maps(&f, 16) < 0) {
		printf("SKIP test_offcpu_tables: cannot create BPF maps (%s): needs root or CAP_BPF\n",
		       strerror(errno));
		return 0;
	}
	close_maps(&f);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_self),
		cmocka_unit_test(test_rows_full),
		cmocka_unit_test(test_thread),
		cmocka_unit_test(test_builder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
