// SPDX-License-Identifier: Apache-2.0
/*
 * The process tracker (see proc.h): processes, threads and their executable mappings, from
 * /proc/PID/maps and from the kernel's MMAP2/COMM/FORK/EXIT records.
 *
 * A process's mappings are a sorted array of non-overlapping ranges: a new mapping replaces
 * whatever it overlaps (as mmap(MAP_FIXED) does in the kernel), which keeps dlopen/dlclose and
 * exec correct without tracking munmap (the kernel reports no unmaps).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "proc.h"
#include "strobe/proc_maps.h"

#define MAX_VMAS 65536 /* per process; /proc/PID/maps of a huge JVM stays well under */

static void drop_pre(proc *p)
{
	free(p->pre_vma);
	p->pre_vma = NULL;
	p->pre_nvma = 0;
}

static uint32_t intern_str(tracker *t, const char *s)
{
	uint32_t id;
	if (strobe_itab_intern(&t->strings, s, strlen(s) + 1, &id, NULL) < 0)
		return 0;
	return id;
}

int tracker_init(tracker *t)
{
	memset(t, 0, sizeof(*t));
	t->maps.fixed = sizeof(proc_map);
	t->pids.fixed = sizeof(int32_t);
	t->tids.fixed = sizeof(int32_t);
	t->proc_root = "/proc";
	uint32_t id;
	if (strobe_itab_intern(&t->strings, "", 1, &id, NULL) < 0)
		return -ENOMEM;
	/* Reserved map ids: 0 none, 1 the kernel. */
	proc_map m = {0};
	if (strobe_itab_intern(&t->maps, &m, sizeof(m), &id, NULL) < 0)
		return -ENOMEM;
	m.path = intern_str(t, "[kernel.kallsyms]");
	m.end = UINT64_MAX;
	if (strobe_itab_intern(&t->maps, &m, sizeof(m), &id, NULL) < 0 || id != STROBE_MAP_KERNEL)
		return -ENOMEM;
	return 0;
}

void tracker_free(tracker *t)
{
	for (uint32_t i = 0; i < t->pids.n; i++) {
		free(t->procs[i].vma);
		free(t->procs[i].pre_vma);
	}
	for (uint32_t i = 0; i < t->tids.n; i++)
		free(t->threads[i].stack);
	free(t->procs);
	free(t->threads);
	strobe_itab_free(&t->strings);
	strobe_itab_free(&t->maps);
	strobe_itab_free(&t->pids);
	strobe_itab_free(&t->tids);
	memset(t, 0, sizeof(*t));
}

proc *tracker_proc(tracker *t, int32_t pid, bool create)
{
	if (!create) {
		uint32_t i = strobe_itab_find(&t->pids, &pid, sizeof(pid));
		return i >= t->cprocs ? NULL : &t->procs[i]; /* also UINT32_MAX: absent */
	}
	/* Room first, so an interned pid always has an initialised slot. */
	if (t->pids.n + 1 > t->cprocs) {
		uint32_t nc = t->cprocs ? t->cprocs * 2 : 64;
		proc *np = realloc(t->procs, nc * sizeof(*np));
		if (!np)
			return NULL;
		t->procs = np;
		t->cprocs = nc;
	}
	uint32_t i;
	bool added;
	if (strobe_itab_intern(&t->pids, &pid, sizeof(pid), &i, &added) < 0)
		return NULL;
	if (added) {
		memset(&t->procs[i], 0, sizeof(t->procs[i]));
		t->procs[i].pid = pid;
	}
	return &t->procs[i];
}

proc_thread *tracker_thread(tracker *t, int32_t tid, int32_t pid, bool create)
{
	if (!create) {
		uint32_t i = strobe_itab_find(&t->tids, &tid, sizeof(tid));
		return i >= t->cthreads ? NULL : &t->threads[i];
	}
	if (t->tids.n + 1 > t->cthreads) {
		uint32_t nc = t->cthreads ? t->cthreads * 2 : 64;
		proc_thread *nt = realloc(t->threads, nc * sizeof(*nt));
		if (!nt)
			return NULL;
		t->threads = nt;
		t->cthreads = nc;
	}
	uint32_t i;
	bool added;
	if (strobe_itab_intern(&t->tids, &tid, sizeof(tid), &i, &added) < 0)
		return NULL;
	if (added) {
		memset(&t->threads[i], 0, sizeof(t->threads[i]));
		t->threads[i].tid = tid;
		t->threads[i].pid = pid;
	}
	if (pid > 0)
		t->threads[i].pid = pid;
	return &t->threads[i];
}

/* Inserts [start, end) -> map into p, cutting away whatever it overlaps. */
static int vma_insert(proc *p, uint64_t start, uint64_t end, uint32_t map)
{
	if (end <= start)
		return 0;
	/* Trim or split overlapping entries. At most one entry can be split in two. */
	proc_vma split = {0};
	bool have_split = false;
	uint32_t w = 0;
	for (uint32_t r = 0; r < p->nvma; r++) {
		proc_vma v = p->vma[r];
		if (v.end <= start || v.start >= end) {
			p->vma[w++] = v;
			continue;
		}
		if (v.start < start && v.end > end) {
			split = (proc_vma){end, v.end, v.map};
			have_split = true;
			v.end = start;
			p->vma[w++] = v;
		} else if (v.start < start) {
			v.end = start;
			p->vma[w++] = v;
		} else if (v.end > end) {
			v.start = end;
			p->vma[w++] = v;
		} /* else fully covered: dropped */
	}
	p->nvma = w;
	uint32_t need = p->nvma + 1 + have_split;
	if (need > MAX_VMAS)
		return -E2BIG;
	if (need > p->cvma) {
		uint32_t nc = p->cvma ? p->cvma * 2 : 16;
		while (nc < need)
			nc *= 2;
		proc_vma *nv = realloc(p->vma, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		p->vma = nv;
		p->cvma = nc;
	}
	proc_vma add[2] = {{start, end, map}, split};
	for (int k = 0; k < 1 + have_split; k++) {
		uint32_t pos = p->nvma;
		while (pos > 0 && p->vma[pos - 1].start > add[k].start) {
			p->vma[pos] = p->vma[pos - 1];
			pos--;
		}
		p->vma[pos] = add[k];
		p->nvma++;
	}
	return 0;
}

static bool is_anon_path(const char *path)
{
	return !*path || strcmp(path, "//anon") == 0 || strncmp(path, "[anon", 5) == 0 ||
	       strncmp(path, "/memfd:", 7) == 0 || strcmp(path, "[heap]") == 0 ||
	       strcmp(path, "[stack]") == 0;
}

int tracker_mmap(tracker *t, int32_t pid, uint64_t start, uint64_t len,
			uint64_t pgoff, uint64_t dev, uint64_t ino, const uint8_t *build_id,
			uint8_t build_id_len, const char *path)
{
	proc *p = tracker_proc(t, pid, true);
	if (!p)
		return -ENOMEM;
	proc_map m;
	memset(&m, 0, sizeof(m));
	m.start = start;
	m.end = start + len;
	m.pgoff = pgoff;
	m.dev = dev;
	m.ino = ino;
	m.anon = is_anon_path(path);
	if (m.anon) {
		/* JIT code: named per process from perf-PID.map; the range is what identifies it. */
		m.pid = pid;
		m.pgoff = 0;
		m.path = intern_str(t, *path ? path : "//anon");
	} else {
		m.path = intern_str(t, path);
	}
	if (build_id_len > STROBE_BUILD_ID_MAX)
		build_id_len = STROBE_BUILD_ID_MAX;
	if (build_id_len)
		memcpy(m.build_id, build_id, build_id_len);
	m.build_id_len = build_id_len;
	uint32_t id;
	if (strobe_itab_intern(&t->maps, &m, sizeof(m), &id, NULL) < 0)
		return -ENOMEM;
	p->maps_changed = true; /* (tracker_read_proc clears it after its own calls) */
	return vma_insert(p, m.start, m.end, id);
}

bool tracker_news(const tracker *t, int32_t pid, int64_t ns)
{
	const proc *p = tracker_proc((tracker *)t, pid, false);
	return !p || !p->maps_ns || !ns || ns >= p->maps_ns;
}

bool tracker_has_mapping(const tracker *t, int32_t pid, uint64_t start, uint64_t len,
			 uint64_t pgoff, const char *path)
{
	const proc *p = tracker_proc((tracker *)t, pid, false);
	uint32_t id = p ? tracker_find(p, start) : STROBE_MAP_NONE;
	if (id == STROBE_MAP_NONE || id == STROBE_MAP_KERNEL)
		return false;
	const proc_map *m = tracker_map(t, id);
	const char *mp = tracker_str(t, m->path);
	return m->start == start && m->end == start + len && m->pgoff == pgoff && mp &&
	       strcmp(mp, path) == 0;
}

void tracker_comm(tracker *t, int32_t pid, int32_t tid, const char *comm, unsigned how)
{
	bool exec = how != TRACKER_NAME;
	proc_thread *th = tracker_thread(t, tid, pid, true);
	if (th)
		snprintf(th->comm, sizeof(th->comm), "%s", comm);
	proc *p = tracker_proc(t, pid, true);
	if (!p)
		return;
	if (how == TRACKER_EXEC && p->image == PROC_IMAGE_FORKED) {
		/* the forked image, for the sums of its samples still to be read */
		drop_pre(p);
		p->pre_vma = p->vma;
		p->pre_nvma = p->nvma;
		p->vma = NULL;
		p->cvma = 0;
		p->image = PROC_IMAGE_EXECD;
		p->pre_age = 0;
	} else if (exec) {
		drop_pre(p);
		if (p->image != PROC_IMAGE_UNKNOWN)
			p->image = PROC_IMAGE_LATER;
	}
	if (how == TRACKER_EXEC) {
		/* A new image: the old mappings are gone, the new ones follow as MMAP2 records. */
		p->nvma = 0;
		p->maps_read = true; /* what follows is complete; no /proc read needed */
		p->maps_changed = true;
	}
	if (exec)
		p->sampled = false; /* a new identity to read at its first sample */
	if (pid == tid || exec)
		snprintf(p->comm, sizeof(p->comm), "%s", comm);
}

int tracker_fork(tracker *t, int32_t pid, int32_t ppid, int32_t tid, int64_t ns)
{
	if (pid == ppid) { /* a new thread */
		proc_thread *th = tracker_thread(t, tid, pid, true);
		proc *p = tracker_proc(t, pid, false);
		if (th && p && !th->comm[0])
			memcpy(th->comm, p->comm, sizeof(th->comm));
		if (th) {
			th->exited = false;
			th->exit_age = 0;
		}
		return th ? 0 : -ENOMEM;
	}
	bool news = tracker_news(t, pid, ns);
	proc *parent = tracker_proc(t, ppid, false);
	proc *child = tracker_proc(t, pid, true);
	if (!child)
		return -ENOMEM;
	parent = tracker_proc(t, ppid, false); /* the create may have moved it */
	child->exited = false;
	child->exit_age = 0;
	if (news) {
		child->nvma = 0;
		drop_pre(child);
		child->image = PROC_IMAGE_FORKED;
	}
	if (news && parent && parent->nvma) {
		child->vma = realloc(child->vma, parent->nvma * sizeof(proc_vma));
		if (!child->vma) {
			child->cvma = 0;
			return -ENOMEM;
		}
		memcpy(child->vma, parent->vma, parent->nvma * sizeof(proc_vma));
		child->nvma = child->cvma = parent->nvma;
		child->maps_read = parent->maps_read;
		memcpy(child->comm, parent->comm, sizeof(child->comm));
	}
	proc_thread *th = tracker_thread(t, tid, pid, true);
	if (th) {
		memcpy(th->comm, child->comm, sizeof(th->comm));
		th->exited = false; /* a tid used again */
		th->exit_age = 0;
	}
	return 0;
}

void tracker_exit(tracker *t, int32_t pid, int32_t tid)
{
	proc_thread *th = tracker_thread(t, tid, pid, false);
	if (th) {
		th->out = false;
		free(th->stack);
		th->stack = NULL;
		th->nstack = 0;
		th->exited = true;
	}
	if (pid == tid) {
		proc *p = tracker_proc(t, pid, false);
		if (p)
			p->exited = true;
	}
}

/* Whether an exited entry has had its pass of grace; counts the pass. */
static bool forget_now(bool exited, uint8_t *age)
{
	if (!exited)
		return false;
	if (*age >= 1)
		return true;
	(*age)++;
	return false;
}

int tracker_forget(tracker *t)
{
	/* The id tables are rebuilt with the survivors, in their order, so each survivor's new
	 * id is at most its old one and the arrays compact in place. Both tables are built
	 * before anything is changed, so running out of memory changes nothing. */
	strobe_itab np = {.fixed = sizeof(int32_t)}, nt = {.fixed = sizeof(int32_t)};
	bool *drop_p = calloc(t->pids.n + 1, 1), *drop_t = calloc(t->tids.n + 1, 1);
	int forgotten = 0;
	uint32_t id;
	if (!drop_p || !drop_t)
		goto oom;
	for (uint32_t i = 0; i < t->pids.n; i++) {
		proc *p = &t->procs[i];
		drop_p[i] = forget_now(p->exited, &p->exit_age);
		if (!drop_p[i] && strobe_itab_intern(&np, &p->pid, sizeof(p->pid), &id, NULL) < 0)
			goto oom;
	}
	for (uint32_t i = 0; i < t->tids.n; i++) {
		proc_thread *th = &t->threads[i];
		uint32_t pi = strobe_itab_find(&t->pids, &th->pid, sizeof(th->pid));
		/* a thread goes with its process, and on its own when it exited */
		drop_t[i] = forget_now(th->exited, &th->exit_age) || (pi < t->pids.n && drop_p[pi]);
		if (!drop_t[i] && strobe_itab_intern(&nt, &th->tid, sizeof(th->tid), &id, NULL) < 0)
			goto oom;
	}
	uint32_t w = 0;
	for (uint32_t i = 0; i < t->pids.n; i++) {
		if (drop_p[i]) {
			free(t->procs[i].vma);
			free(t->procs[i].pre_vma);
			forgotten++;
		} else {
			/* the forked image is needed until the sums of its samples are read: those
			 * of the interval of the exec and the next */
			if (t->procs[i].pre_vma && ++t->procs[i].pre_age > 2)
				drop_pre(&t->procs[i]);
			t->procs[w++] = t->procs[i];
		}
	}
	w = 0;
	for (uint32_t i = 0; i < t->tids.n; i++) {
		if (drop_t[i])
			free(t->threads[i].stack);
		else
			t->threads[w++] = t->threads[i];
	}
	strobe_itab_free(&t->pids);
	strobe_itab_free(&t->tids);
	t->pids = np;
	t->tids = nt;
	free(drop_p);
	free(drop_t);
	return forgotten;
oom:
	strobe_itab_free(&np);
	strobe_itab_free(&nt);
	free(drop_p);
	free(drop_t);
	return -ENOMEM;
}

static uint32_t find_in(const proc_vma *v, uint32_t n, uint64_t addr)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && v[lo].start <= addr && addr < v[lo].end)
		return v[lo].map;
	return STROBE_MAP_NONE;
}

uint32_t tracker_find(const proc *p, uint64_t addr)
{
	return find_in(p->vma, p->nvma, addr);
}

uint32_t tracker_find_pre(const proc *p, uint64_t addr)
{
	if (p->image == PROC_IMAGE_EXECD)
		return find_in(p->pre_vma, p->pre_nvma, addr);
	return find_in(p->vma, p->nvma, addr);
}

static void read_comm(const char *path, char *comm, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, (int)cap, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

typedef struct maps_ctx {
	tracker *t;
	int32_t pid;
} maps_ctx;

static int maps_entry(void *ctx, const strobe_maps_entry *e)
{
	maps_ctx *m = ctx;
	if (!strobe_maps_exec(e))
		return 0;
	/* "(deleted)" files are still named by the copy we can reach via map_files. */
	return tracker_mmap(m->t, m->pid, e->start, e->end - e->start, e->offset,
				   makedev(e->dev_major, e->dev_minor), e->inode, NULL, 0, e->path);
}

int tracker_read_proc(tracker *t, int32_t pid, int64_t now_ns)
{
	char path[64];
	if (!t->proc_root)
		return -ENOENT;
	FILE *f = strobe_proc_maps_open(t->proc_root, pid);
	if (!f)
		return -errno;
	proc *p = tracker_proc(t, pid, true);
	if (!p) {
		fclose(f);
		return -ENOMEM;
	}
	p->nvma = 0;
	p->maps_read = true;
	p->rescan_ns = now_ns;
	p->maps_ns = 0;
	maps_ctx m = {t, pid};
	int rc = strobe_proc_maps_walk(f, maps_entry, &m);
	snprintf(path, sizeof(path), "%s/%d/comm", t->proc_root, (int)pid);
	p = tracker_proc(t, pid, false);
	if (p) {
		p->maps_changed = false;
		p->maps_ns = rc == 0 ? now_ns : 0; /* (cut short: the records are needed) */
	}
	if (p && !p->comm[0])
		read_comm(path, p->comm, sizeof(p->comm));
	return rc;
}
