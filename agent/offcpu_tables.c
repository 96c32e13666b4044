// SPDX-License-Identifier: Apache-2.0
/*
 * Keeps the eBPF off-CPU program's unwind tables (see offcpu_tables.h): for each process the
 * program asks for, its executable mappings from /proc/PID/maps, and for each binary they map,
 * its rows (unwind_rows.c) once, in a slice of the rows' map shared by every process that maps
 * it (found again by device, inode, size and modification time).
 *
 * The rows' map is an array filled from the front and never compacted: a binary's rows stay
 * while the agent runs, as binaries come back (every new process maps libc again). When it is
 * full, binaries not loaded yet get no rows and their frames are walked by frame pointers,
 * counted as binaries_full; the cap is the agent's unwind_table_mb. A process's entry in umaps
 * is removed when it exits (checked every few seconds) and by the program itself at exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "offcpu_tables.h"
#include "sampler_impl.h"
#include "unwind_rows.h"

#define MAX_BINS 65536
#define GC_NS 3000000000ll /* how often exited processes are looked for */
#define MAX_WANT 1024      /* processes taken from uwant per poll (its size) */

typedef struct obin {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	uint32_t row0, nrows; /* nrows 0: no rows (frame pointers) */
	strobe_urows lay;     /* its executable segments, for the bias (rows freed) */
} obin;

struct strobe_otables {
	int fd_rows, fd_maps, fd_want;
	uint32_t max_rows, used_rows;
	obin *bins;
	uint32_t nbins, cbins;
	int64_t last_gc;
	strobe_otables_stats st;
};

strobe_otables *strobe_otables_new(int fd_rows, uint32_t max_rows, int fd_maps, int fd_want)
{
	strobe_otables *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->fd_rows = fd_rows;
	t->fd_maps = fd_maps;
	t->fd_want = fd_want;
	t->max_rows = max_rows;
	t->st.rows_max = max_rows;
	t->last_gc = strobe_mono_ns();
	return t;
}

void strobe_otables_free(strobe_otables *t)
{
	if (!t)
		return;
	free(t->bins);
	free(t);
}

/* Writes a binary's rows into the map, from row0, a few thousand per system call. */
static int write_rows(strobe_otables *t, const strobe_urows *r, uint32_t row0)
{
	enum { CHUNK = 4096 };
	uint32_t keys[CHUNK];
	for (uint32_t i = 0; i < r->n; i += CHUNK) {
		uint32_t cnt = r->n - i < CHUNK ? r->n - i : CHUNK;
		for (uint32_t k = 0; k < cnt; k++)
			keys[k] = row0 + i + k;
		if (bpf_map_update_batch(t->fd_rows, keys, &r->rows[i], &cnt, NULL) < 0)
			return -errno;
	}
	return 0;
}

/* The entry of the binary open at fd (built now if new); NULL without memory. */
static obin *bin_of(strobe_otables *t, int fd, const struct stat *sb)
{
	int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	for (uint32_t i = 0; i < t->nbins; i++) {
		obin *b = &t->bins[i];
		if (b->ino == (uint64_t)sb->st_ino && b->dev == (uint64_t)sb->st_dev &&
		    b->size == (uint64_t)sb->st_size && b->mtime_ns == mt)
			return b;
	}
	if (t->nbins == t->cbins) {
		if (t->cbins >= MAX_BINS)
			return NULL;
		uint32_t nc = t->cbins ? t->cbins * 2 : 64;
		obin *nb = realloc(t->bins, nc * sizeof(*nb));
		if (!nb)
			return NULL;
		t->bins = nb;
		t->cbins = nc;
	}
	obin *b = &t->bins[t->nbins++];
	*b = (obin){.dev = (uint64_t)sb->st_dev, .ino = (uint64_t)sb->st_ino,
		    .size = (uint64_t)sb->st_size, .mtime_ns = mt};
	int64_t t0 = strobe_mono_ns();
	uint32_t room = t->max_rows - t->used_rows;
	int rc = strobe_urows_build(fd, room, &b->lay);
	if (rc == -E2BIG) {
		t->st.binaries_full++;
	} else if (rc == 0 && b->lay.n && write_rows(t, &b->lay, t->used_rows) == 0) {
		b->row0 = t->used_rows;
		b->nrows = b->lay.n;
		t->used_rows += b->lay.n;
		t->st.rows = t->used_rows;
		t->st.binaries++;
	} else {
		t->st.binaries_none++;
	}
	strobe_urows_free(&b->lay); /* the segments stay */
	t->st.build_ns += strobe_mono_ns() - t0;
	return b;
}

static int map_cmp(const void *a, const void *b)
{
	const struct strobe_ob_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int strobe_otables_load(strobe_otables *t, uint32_t tgid)
{
	char path[4352];
	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/maps", tgid);
	struct strobe_ob_maps *ms = calloc(1, sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	FILE *f = fopen(path, "re");
	if (!f) {
		int rc = errno == ENOENT ? -ESRCH : -errno;
		t->st.procs_failed++;
		if (rc != -ESRCH) {
			/* none, so that the program asks again only once a second */
			ms->loaded_ns = (uint64_t)strobe_mono_ns();
			bpf_map_update_elem(t->fd_maps, &tgid, ms, BPF_ANY);
		}
		free(ms);
		return rc;
	}
	char line[4352];
	while (fgets(line, sizeof(line), f) && ms->n < STROBE_OB_MAX_MAPS) {
		unsigned long long start, end, off, ino;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &off, &ino,
			   &pos) < 5 || perms[2] != 'x' || end <= start || end > 0x800000000000ull)
			continue;
		struct strobe_ob_map *m = &ms->m[ms->n++];
		*m = (struct strobe_ob_map){.start = start, .end = end};
		char *name = line + pos;
		name[strcspn(name, "\n")] = 0;
		if (name[0] != '/' || !ino)
			continue; /* anonymous (JIT), [vdso]: frame pointers */
		/* Through the process's root (a container's files), and only the file the mapping
		 * is of: a binary replaced since it was mapped has other rows. */
		snprintf(path, sizeof(path), "/proc/%" PRIu32 "/root%s", tgid, name);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat sb;
		if (fd < 0)
			continue;
		obin *b = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_ino == ino
				  ? bin_of(t, fd, &sb)
				  : NULL;
		close(fd);
		uint64_t bias;
		if (b && b->nrows && strobe_urows_bias(&b->lay, start, off, &bias)) {
			m->bias = bias;
			m->row0 = b->row0;
			m->nrows = b->nrows;
		}
	}
	fclose(f);
	qsort(ms->m, ms->n, sizeof(ms->m[0]), map_cmp); /* /proc lists them sorted already */
	ms->loaded_ns = (uint64_t)strobe_mono_ns();
	int rc = bpf_map_update_elem(t->fd_maps, &tgid, ms, BPF_ANY) < 0 ? -errno : 0;
	free(ms);
	if (rc == 0)
		t->st.procs_loaded++;
	else
		t->st.procs_failed++;
	return rc;
}

/* Forgets the processes that have exited. */
static void gc(strobe_otables *t)
{
	uint32_t key, *prev = NULL, gone[256];
	unsigned ngone = 0, n = 0;
	while (bpf_map_get_next_key(t->fd_maps, prev, &key) == 0) {
		n++;
		if (kill((pid_t)key, 0) < 0 && errno == ESRCH && ngone < 256)
			gone[ngone++] = key;
		prev = &key;
	}
	for (unsigned i = 0; i < ngone; i++)
		bpf_map_delete_elem(t->fd_maps, &gone[i]);
	t->st.procs = n - ngone;
}

void strobe_otables_poll(strobe_otables *t, int64_t budget_ns)
{
	int64_t t0 = strobe_mono_ns();
	uint32_t want[MAX_WANT], key, *prev = NULL;
	unsigned n = 0;
	while (n < MAX_WANT && bpf_map_get_next_key(t->fd_want, prev, &key) == 0) {
		want[n++] = key;
		prev = &want[n - 1];
	}
	for (unsigned i = 0; i < n; i++) {
		if (strobe_mono_ns() - t0 > budget_ns)
			break; /* the rest stay asked for */
		int rc = strobe_otables_load(t, want[i]);
		(void)rc; /* a process gone meanwhile: nothing to load */
		bpf_map_delete_elem(t->fd_want, &want[i]);
	}
	if (strobe_mono_ns() - t->last_gc > GC_NS) {
		t->last_gc = strobe_mono_ns();
		gc(t);
	}
}

void strobe_otables_get_stats(const strobe_otables *t, strobe_otables_stats *st)
{
	*st = t->st;
}
