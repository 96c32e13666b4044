// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's end of the preload library's channel (agent/preload.h): each interval, every
 * channel file in the directory is copied (strobe_heap_snap_read: a validated private copy, the
 * process never waits), compared with the copy of the interval before, and made into the
 * profiles of what happened since. Files are recognised by name (strobe-heap.PID[.N]) and
 * their process image by (pid, start time): a pid reused, or an exec that made a new file,
 * starts afresh.
 *
 * An image is over when its file says EXITED (written by the library's destructor, after the
 * program's exit handlers), when its pid is gone (killed: no destructor ran), or when a newer
 * file of the same pid exists (an exec: the old image's file stays RUNNING forever). Its last
 * interval is emitted, then the file is removed: nothing it counted is lost, and shared memory
 * does not fill with the files of finished processes.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strobe/heap_channel.h"
#include "preload.h"

#define MAX_FILES 4096u /* channel files followed at once; more wait for a later interval */

typedef struct chan {
	char *path;
	int32_t pid;
	uint64_t start_ns;
	strobe_heap_snap *prev; /* the copy of the interval before (the base of the deltas) */
	bool seen;              /* met in this collection */
	bool paused;            /* its paused flag as last written by us */
} chan;

struct preload {
	char *dir;
	chan *c;
	size_t n, cap;
	bool paused;
	strobe_symbolizer *sym; /* what namer was made for */
	strobe_sym_heap_namer *namer;
	preload_stats st;
};

preload *preload_new(const char *dir)
{
	preload *pl = calloc(1, sizeof(*pl));
	if (!pl)
		return NULL;
	if (!(pl->dir = strdup(dir && *dir ? dir : "/dev/shm"))) {
		free(pl);
		return NULL;
	}
	return pl;
}

static void chan_drop(preload *pl, size_t i)
{
	free(pl->c[i].path);
	strobe_heap_snap_free(pl->c[i].prev);
	pl->c[i] = pl->c[--pl->n];
}

void preload_free(preload *pl)
{
	if (!pl)
		return;
	while (pl->n)
		chan_drop(pl, pl->n - 1);
	free(pl->c);
	strobe_sym_heap_namer_free(pl->namer);
	free(pl->dir);
	free(pl);
}

static chan *chan_for(preload *pl, const char *path)
{
	for (size_t i = 0; i < pl->n; i++)
		if (strcmp(pl->c[i].path, path) == 0)
			return &pl->c[i];
	if (pl->n >= MAX_FILES)
		return NULL;
	if (pl->n == pl->cap) {
		size_t nc = pl->cap ? pl->cap * 2 : 16;
		chan *v = realloc(pl->c, nc * sizeof(*v));
		if (!v)
			return NULL;
		pl->c = v;
		pl->cap = nc;
	}
	char *p = strdup(path);
	if (!p)
		return NULL;
	pl->c[pl->n] = (chan){.path = p};
	return &pl->c[pl->n++];
}

/* Whether the image of c (its latest copy s) is over; see the top of the file. */
static bool finished(const preload *pl, const chan *c, const strobe_heap_snap *s)
{
	if (s->hdr.state == STROBE_HEAP_EXITED)
		return true;
	if (s->hdr.pid > 0 && kill(s->hdr.pid, 0) < 0 && errno == ESRCH)
		return true;
	for (size_t i = 0; i < pl->n; i++) {
		const chan *o = &pl->c[i];
		if (o != c && o->seen && o->pid == s->hdr.pid && o->start_ns > s->hdr.start_ns)
			return true; /* exec'd: the pid's newer image has a file of its own */
	}
	return false;
}

/* One process's profile of one kind since its previous copy; NULL when it has no samples. */
static strobe_profile *profile_of(preload *pl, const chan *c, const strobe_heap_snap *s,
				  enum strobe_heap_kind kind, int64_t now, int64_t interval)
{
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return NULL;
	strobe_heap_profile_opts o = {.kind = kind, .base = c->prev};
	if (pl->namer) {
		o.namer = strobe_sym_heap_name;
		o.build_id = strobe_sym_heap_build_id;
		o.namer_ctx = pl->namer;
	}
	strobe_err err = {{0}};
	if (strobe_heap_profile_add(p, s, &o, &err) < 0 || strobe_nsamples(p) == 0) {
		strobe_profile_free(p);
		return NULL;
	}
	/* the interval's profile, not the process's life */
	p->time_nanos = now - interval;
	p->duration_nanos = interval;
	return p;
}

int preload_collect(preload *pl, strobe_symbolizer *sym, int64_t now_unix_ns,
			   int64_t interval_ns, preload_emit emit, void *ctx)
{
	if (sym != pl->sym) { /* another symbolizer (a renewed one is the namer's to notice) */
		strobe_sym_heap_namer_free(pl->namer);
		pl->namer = sym ? strobe_sym_heap_namer_new(sym) : NULL;
		pl->sym = sym;
	}
	DIR *d = opendir(pl->dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	for (size_t i = 0; i < pl->n; i++)
		pl->c[i].seen = false;
	/* first the names, then the copies: finished() compares a file with its pid's others */
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "strobe-heap.", 12) != 0)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", pl->dir, e->d_name) >= (int)sizeof(path))
			continue;
		chan *c = chan_for(pl, path);
		if (c)
			c->seen = true;
	}
	closedir(d);
	int files = 0;
	uint64_t dropped = 0;
	for (size_t i = 0; i < pl->n;) {
		chan *c = &pl->c[i];
		if (!c->seen) { /* removed by someone else (strobe record's own directory?) */
			chan_drop(pl, i);
			continue;
		}
		strobe_heap_snap *s = NULL;
		strobe_err err = {{0}};
		if (strobe_heap_snap_read(c->path, &s, &err) < 0) {
			/* a file its process is still creating reads short: skipped this time */
			pl->st.refused++;
			i++;
			continue;
		}
		files++;
		dropped += s->hdr.dropped_stacks + s->hdr.dropped_live;
		if (c->pid != s->hdr.pid || c->start_ns != s->hdr.start_ns) { /* a new image */
			strobe_heap_snap_free(c->prev);
			c->prev = NULL;
			c->pid = s->hdr.pid;
			c->start_ns = s->hdr.start_ns;
			c->paused = false;
		}
		if (pl->paused != c->paused || pl->paused != (s->hdr.paused != 0)) {
			strobe_heap_set_paused(c->path, pl->paused);
			c->paused = pl->paused;
		}
		bool over = finished(pl, c, s);
		if (!pl->paused && emit) {
			static const struct {
				enum strobe_heap_kind kind;
				const char *name;
			} kinds[] = {{STROBE_HEAP_KIND_ALLOC, "memory"}, {STROBE_HEAP_KIND_LOCK, "mutex"}};
			for (size_t k = 0; k < 2; k++) {
				strobe_profile *p = profile_of(pl, c, s, kinds[k].kind, now_unix_ns,
							       interval_ns);
				if (p) {
					emit(ctx, (pid_t)s->hdr.pid, kinds[k].name,
					     s->hdr.service, s->hdr.exe, p);
					strobe_profile_free(p);
					pl->st.profiles++;
				}
			}
		}
		strobe_heap_snap_free(c->prev);
		c->prev = s;
		if (over) {
			if (unlink(c->path) == 0)
				pl->st.removed++;
			chan_drop(pl, i);
			continue;
		}
		i++;
	}
	pl->st.files = (uint64_t)files;
	pl->st.dropped = dropped;
	return files;
}

void preload_pause(preload *pl, bool paused)
{
	pl->paused = paused;
	for (size_t i = 0; i < pl->n; i++)
		if (strobe_heap_set_paused(pl->c[i].path, paused) == 0)
			pl->c[i].paused = paused;
}

void preload_get_stats(const preload *pl, preload_stats *st)
{
	*st = pl->st;
}
