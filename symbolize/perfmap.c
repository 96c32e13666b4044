// SPDX-License-Identifier: Apache-2.0
/*
 * JIT symbols from /tmp/perf-PID.map (under opts.sysroot), the format every JIT that wants to be
 * profiled writes (V8/Node --perf-basic-prof, the JVM's perf-map-agent, LuaJIT, .NET, CPython
 * 3.12's -X perf): one "START SIZE name" line per compiled function, START and SIZE in hex
 * (with or without 0x), the name the rest of the line.
 *
 * The file only grows while the process runs, and code is compiled long after we first read
 * it, so a miss re-reads the file when it has changed (size, mtime or inode); the stat behind
 * that check runs at most every RECHECK_NS per process, so a stream of unnamed addresses does
 * not become a stream of syscalls. A JIT reuses freed code memory, so when two lines cover an
 * address the later line wins.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "strobe/clock.h"

#define RECHECK_NS 100000000ll /* 100 ms */

typedef struct perfmap {
	int32_t pid;
	sym_range *v; /* sorted by start; seq = line number */
	size_t n;
	bool exists;
	struct stat st;
	int64_t checked_ns;
} perfmap;

struct sym_perfmaps {
	strobe_itab ix; /* int32 pid -> index */
	perfmap *maps;
	uint32_t n, cap;
};

typedef struct pparse {
	strobe_symbolizer *s;
	sym_range *v;
	size_t n, cap;
	uint32_t line;
	int err;
} pparse;

static int perfmap_line(void *arg, const char *l, size_t len)
{
	pparse *ps = arg;
	ps->line++;
	const char *p = l, *e = l + len;
	uint64_t start, size;
	if (!sym_parse_hex(&p, e, &start) || p >= e || *p != ' ')
		return 0;
	while (p < e && *p == ' ')
		p++;
	if (!sym_parse_hex(&p, e, &size) || p >= e || *p != ' ' || !size)
		return 0;
	while (p < e && *p == ' ')
		p++;
	while (e > p && (e[-1] == '\r' || e[-1] == ' '))
		e--;
	if (p == e)
		return 0;
	if (ps->n == ps->cap) {
		if (ps->cap >= SYM_MAX_ENTRIES)
			return 1;
		size_t nc = ps->cap ? ps->cap * 2 : 256;
		sym_range *v = realloc(ps->v, nc * sizeof(*v));
		if (!v) {
			ps->err = -ENOMEM;
			return 1;
		}
		ps->v = v;
		ps->cap = nc;
	}
	const char *name = sym_intern(&ps->s->strings, p, (size_t)(e - p));
	if (!name) {
		ps->err = -ENOMEM;
		return 1;
	}
	uint64_t end = start + size < start ? UINT64_MAX : start + size;
	ps->v[ps->n++] = (sym_range){.start = start, .end = end, .name = name, .seq = ps->line};
	return 0;
}

static int cmp_start(const void *a, const void *b)
{
	const sym_range *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void perfmap_load(strobe_symbolizer *s, perfmap *m, const char *path)
{
	pparse ps = {.s = s};
	if (sym_read_lines(path, perfmap_line, &ps) < 0 || ps.err < 0) {
		free(ps.v); /* keep what the last good read gave */
		return;
	}
	free(m->v);
	if (ps.n) /* qsort wants a non-NULL base even for 0 elements */
		qsort(ps.v, ps.n, sizeof(*ps.v), cmp_start);
	/* Of several lines with one start, only the last written can be current. */
	size_t k = 0;
	for (size_t i = 0; i < ps.n; i++) {
		if (k && ps.v[k - 1].start == ps.v[i].start)
			k--;
		ps.v[k++] = ps.v[i];
	}
	m->v = ps.v;
	m->n = k;
}

static bool stat_changed(const perfmap *m, bool exists, const struct stat *st)
{
	if (exists != m->exists)
		return true;
	return exists && (st->st_size != m->st.st_size || st->st_ino != m->st.st_ino ||
			  st->st_mtim.tv_sec != m->st.st_mtim.tv_sec ||
			  st->st_mtim.tv_nsec != m->st.st_mtim.tv_nsec);
}

void sym_perfmaps_free(sym_perfmaps *pm)
{
	if (!pm)
		return;
	for (uint32_t i = 0; i < pm->n; i++)
		free(pm->maps[i].v);
	free(pm->maps);
	strobe_itab_free(&pm->ix);
	free(pm);
}

static void perfmaps_clear(sym_perfmaps *pm)
{
	for (uint32_t i = 0; i < pm->n; i++)
		free(pm->maps[i].v);
	pm->n = 0;
	strobe_itab_free(&pm->ix);
	pm->ix.fixed = sizeof(int32_t);
}

static perfmap *perfmap_get(strobe_symbolizer *s, pid_t pid)
{
	if (!s->perfmaps) {
		if (!(s->perfmaps = calloc(1, sizeof(*s->perfmaps))))
			return NULL;
		s->perfmaps->ix.fixed = sizeof(int32_t);
	}
	sym_perfmaps *pm = s->perfmaps;
	int32_t key = (int32_t)pid;
	uint32_t i = strobe_itab_find(&pm->ix, &key, sizeof(key));
	if (i != UINT32_MAX)
		return &pm->maps[i];
	/* Processes come and go: past the cap, start over (names stay pooled) rather than
	 * hold the maps of every process ever seen. */
	if (pm->n >= SYM_MAX_PERFMAPS)
		perfmaps_clear(pm);
	if (pm->n == pm->cap) {
		uint32_t nc = pm->cap ? pm->cap * 2 : 16;
		perfmap *v = realloc(pm->maps, nc * sizeof(*v));
		if (!v)
			return NULL;
		pm->maps = v;
		pm->cap = nc;
	}
	if (strobe_itab_intern(&pm->ix, &key, sizeof(key), &i, NULL) < 0 || i != pm->n)
		return NULL;
	perfmap *m = &pm->maps[pm->n++];
	memset(m, 0, sizeof(*m));
	m->pid = key;
	return m;
}

static char *perfmap_path(strobe_symbolizer *s, pid_t pid)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "/tmp/perf-%d.map", (int)pid);
	return sym_rooted(s, rel);
}

int strobe_sym_perfmap(strobe_symbolizer *s, pid_t pid, uint64_t addr, strobe_sym_frame *out)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (!s || pid <= 0)
		return 0;
	perfmap *m = perfmap_get(s, pid);
	if (!m)
		return 0;
	const sym_range *r = m->n ? sym_ranges_find(m->v, m->n, addr, NULL) : NULL;
	bool first = !m->checked_ns;
	if (!r && (first || strobe_mono_ns() - m->checked_ns >= RECHECK_NS)) {
		char *path = perfmap_path(s, pid);
		if (!path)
			return 0;
		m->checked_ns = strobe_mono_ns() | 1;
		struct stat st;
		bool exists = stat(path, &st) == 0;
		if (first || stat_changed(m, exists, &st)) {
			/* A file that went away keeps the names read from it: the process may
			 * have exited with samples still to name. */
			m->exists = exists;
			if (exists) {
				m->st = st;
				perfmap_load(s, m, path);
				r = m->n ? sym_ranges_find(m->v, m->n, addr, NULL) : NULL;
			}
		}
		free(path);
	}
	if (!r)
		return 0;
	if (out)
		out->function = r->name;
	return 1;
}

void strobe_sym_forget_pid(strobe_symbolizer *s, pid_t pid)
{
	if (!s || !s->perfmaps)
		return;
	int32_t key = (int32_t)pid;
	uint32_t i = strobe_itab_find(&s->perfmaps->ix, &key, sizeof(key));
	if (i == UINT32_MAX)
		return;
	/* The table has no deletion: empty the entry, it is reloaded if the pid comes back. */
	perfmap *m = &s->perfmaps->maps[i];
	free(m->v);
	memset(m, 0, sizeof(*m));
	m->pid = key;
}
