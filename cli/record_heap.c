// SPDX-License-Identifier: Apache-2.0
/*
 * strobe record -e heap|mutex: heap and lock-contention profiles of a command through
 * libstrobe-heap.so (preload/), with no perf_event and no root.
 *
 * The command runs with the library in LD_PRELOAD and STROBE_HEAP_DIR set to a private directory
 * where each process image it becomes (itself, its fork children, what they exec) writes its
 * channel file (include/strobe/heap_channel.h). The recorder only reads those files: at the end,
 * and with -i N every N seconds, it merges them into one profile (a pid label on every sample
 * when there were several processes), names the frames with strobe's symbolizer and writes it.
 * At exit it also lists, by stack, the sampled allocations each process still held when it
 * exited normally (the library's destructor runs after the program's exit handlers), leaving out
 * those made in the last tenth of the run: possible leaks.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "record_heap.h"
#include "strobe/heap_channel.h"
#include "strobe/symbolize.h"

#define MAX_FILES 4096 /* channel files read per round: a fork bomb does not exhaust us */

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The library: $STROBE_HEAP_LIB, else next to this binary. */
static int find_lib(char *out, size_t cap)
{
	const char *env = getenv("STROBE_HEAP_LIB");
	if (env && *env) {
		snprintf(out, cap, "%s", env);
		return access(out, R_OK) == 0 ? 0 : -errno;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -ENOENT;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	if (snprintf(out, cap, "%s/libstrobe-heap.so", self) >= (int)cap)
		return -ENAMETOOLONG;
	return access(out, R_OK) == 0 ? 0 : -errno;
}

/* ---- naming frames --------------------------------------------------------------------------- */

typedef struct namer_ctx {
	strobe_symbolizer *sym;
	struct { char *path; strobe_sym_object *obj; } cache[256];
	unsigned n;
} namer_ctx;

static int name_frame(void *vctx, const char *path, uint64_t offset, strobe_heap_frame *out,
		      int max)
{
	namer_ctx *c = vctx;
	strobe_sym_object *o = NULL;
	unsigned i;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->cache[i].path, path) == 0)
			break;
	if (i < c->n) {
		o = c->cache[i].obj;
	} else {
		if (strobe_sym_object_get(c->sym, path, 0, 0, 0, NULL, 0, &o) < 0)
			o = NULL;
		if (c->n < 256 && (c->cache[c->n].path = strdup(path)))
			c->cache[c->n++].obj = o;
	}
	if (!o)
		return 0;
	strobe_sym_frame fr[16];
	if (max > 16)
		max = 16;
	int n = strobe_sym_lookup(c->sym, o, offset, fr, max);
	for (int k = 0; k < n; k++)
		out[k] = (strobe_heap_frame){fr[k].function, fr[k].file, fr[k].line, fr[k].column,
					     fr[k].start_line};
	return n < 0 ? 0 : n;
}

static void namer_free(namer_ctx *c)
{
	for (unsigned i = 0; i < c->n; i++)
		free(c->cache[i].path);
	c->n = 0;
}

/* ---- reading the channel files --------------------------------------------------------------- */

typedef struct snaps {
	strobe_heap_snap **v;
	size_t n;
	uint64_t bad; /* files refused */
} snaps;

static void snaps_free(snaps *s)
{
	for (size_t i = 0; i < s->n; i++)
		strobe_heap_snap_free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int read_dir(const char *cmd, const char *dir, snaps *out, bool verbose)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	while ((e = readdir(d)) && out->n < MAX_FILES) {
		if (strncmp(e->d_name, "strobe-heap.", 12) != 0)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		strobe_err err = {{0}};
		strobe_heap_snap *s;
		if (strobe_heap_snap_read(path, &s, &err) < 0) {
			out->bad++;
			if (verbose)
				cli_err(cmd, "%s", err.msg);
			continue;
		}
		strobe_heap_snap **nv = realloc(out->v, (out->n + 1) * sizeof(*nv));
		if (!nv) {
			strobe_heap_snap_free(s);
			closedir(d);
			return -ENOMEM;
		}
		out->v = nv;
		out->v[out->n++] = s;
	}
	closedir(d);
	return 0;
}

static strobe_profile *build(const char *cmd, const snaps *s, enum strobe_heap_kind kind,
			     namer_ctx *nc)
{
	strobe_profile *p = strobe_profile_new();
	if (!p)
		return NULL;
	strobe_heap_profile_opts o = {.kind = kind, .namer = nc->sym ? name_frame : NULL,
				      .namer_ctx = nc, .pid_label = s->n > 1};
	for (size_t i = 0; i < s->n; i++) {
		strobe_err err = {{0}};
		if (strobe_heap_profile_add(p, s->v[i], &o, &err) < 0) {
			cli_err(cmd, "pid %d: %s", (int)s->v[i]->hdr.pid,
				err.msg[0] ? err.msg : "out of memory");
			strobe_profile_free(p);
			return NULL;
		}
	}
	if (p->ntypes == 0) { /* no process started the library: an empty profile of the kind */
		strobe_heap_snap empty = {.hdr.rate = 1};
		strobe_heap_profile_add(p, &empty, &o, NULL);
	}
	return p;
}

/* "out.pb.gz" + 3 -> "out.3.pb.gz" (the number before the first dot of the file name). */
static void numbered(char *buf, size_t cap, const char *path, unsigned n)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strchr(base, '.');
	if (!dot)
		dot = path + strlen(path);
	snprintf(buf, cap, "%.*s.%u%s", (int)(dot - path), path, n, dot);
}

static int write_profile(const char *cmd, const char *dir, const record_heap_opts *o,
			 const char *path, namer_ctx *nc, snaps *keep)
{
	snaps s = {0};
	int rc = read_dir(cmd, dir, &s, keep != NULL);
	if (rc < 0) {
		cli_err(cmd, "%s: %s", dir, strerror(-rc));
		return -1;
	}
	strobe_profile *p = build(cmd, &s, o->kind, nc);
	if (!p) {
		snaps_free(&s);
		return -1;
	}
	char note[512];
	int nn = snprintf(note, sizeof(note), "strobe record");
	for (int i = 1; i < o->argc && nn < (int)sizeof(note) - 1; i++)
		nn += snprintf(note + nn, sizeof(note) - (size_t)nn, " %s", o->argv[i]);
	strobe_profile_add_comment(p, note);
	uint64_t dropped = 0, dropped_live = 0;
	for (size_t i = 0; i < s.n; i++) {
		dropped += s.v[i]->hdr.dropped_stacks;
		dropped_live += s.v[i]->hdr.dropped_live;
	}
	if (dropped) {
		snprintf(note, sizeof(note), "samples lost (stack table full): %" PRIu64, dropped);
		strobe_profile_add_comment(p, note);
	}
	if (dropped_live) {
		snprintf(note, sizeof(note), "sampled allocations not tracked for in-use (live table "
					     "full): %" PRIu64, dropped_live);
		strobe_profile_add_comment(p, note);
	}
	int type = strobe_default_type_index(p);
	rc = cli_write_as(cmd, p, o->fmt, type, STROBE_GRAN_FUNCTIONS, path);
	strobe_profile_free(p);
	if (keep)
		*keep = s;
	else
		snaps_free(&s);
	return rc;
}

/* ---- the leak report ------------------------------------------------------------------------- */

static void print_frame(FILE *f, const strobe_heap_snap *s, uint64_t pc, namer_ctx *nc)
{
	/* the maps line covering pc, searched the way the profile builder does (last wins) */
	const char *best = NULL;
	unsigned long long bs = 0, be = 0, boff = 0;
	int bpos = 0;
	for (const char *line = s->maps; *line;) {
		const char *nl = strchr(line, '\n');
		unsigned long long a, b, off;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &a, &b, &off, &pos) >= 3 && pos &&
		    pc >= a && pc < b)
			best = line, bs = a, be = b, boff = off, bpos = pos;
		if (!nl)
			break;
		line = nl + 1;
	}
	(void)be;
	if (!best) {
		fprintf(f, "        0x%" PRIx64 "\n", pc);
		return;
	}
	char path[PATH_MAX];
	const char *pe = strchr(best + bpos, '\n');
	size_t pl = pe ? (size_t)(pe - (best + bpos)) : strlen(best + bpos);
	if (pl >= sizeof(path))
		pl = sizeof(path) - 1;
	memcpy(path, best + bpos, pl);
	path[pl] = 0;
	strobe_heap_frame fr[16];
	int n = nc->sym ? name_frame(nc, path, pc - 1 - bs + boff, fr, 16) : 0;
	if (n <= 0) {
		fprintf(f, "        %s+0x%llx\n", path, (unsigned long long)(pc - bs + boff));
		return;
	}
	for (int i = 0; i < n; i++) {
		fprintf(f, "        %s", fr[i].function ? fr[i].function : "??");
		if (fr[i].file)
			fprintf(f, " %s:%" PRId64, fr[i].file, fr[i].line);
		fputc('\n', f);
	}
}

static int report_leaks(const char *cmd, const snaps *s, const char *path, namer_ctx *nc)
{
	FILE *f = stderr;
	if (path && !(f = fopen(path, "w"))) {
		cli_err(cmd, "--leaks %s: %s", path, strerror(errno));
		return -1;
	}
	size_t total = 0;
	for (size_t i = 0; i < s->n; i++) {
		strobe_heap_leak *l;
		size_t n;
		if (strobe_heap_leaks(s->v[i], &l, &n) < 0)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (total == 0)
				fprintf(f, "strobe record: possible leaks: sampled allocations live at "
					   "exit and older than the last tenth of the run, by stack "
					   "(estimated objects and bytes):\n");
			const strobe_heap_stack *st = &s->v[i]->stacks[l[k].stack];
			fprintf(f, "leak %zu: %.0f bytes in %.0f objects (%" PRIu64 " sampled), pid %d\n",
				++total, l[k].space, l[k].objects, l[k].count, (int)s->v[i]->hdr.pid);
			for (uint32_t d = 0; d < st->depth && d < STROBE_HEAP_MAX_DEPTH; d++)
				print_frame(f, s->v[i], st->frames[d], nc);
		}
		free(l);
	}
	if (path) {
		if (total == 0)
			fprintf(f, "no possible leaks\n");
		fclose(f);
	}
	return 0;
}

/* ---- the command ----------------------------------------------------------------------------- */

int record_heap(const record_heap_opts *o)
{
	const char *cmd = "record";
	char lib[PATH_MAX];
	int lrc = find_lib(lib, sizeof(lib));
	if (lrc < 0) {
		cli_err(cmd, "cannot find libstrobe-heap.so (%s): build it (make) or set "
			     "STROBE_HEAP_LIB", lib[0] ? lib : strerror(-lrc));
		return 2;
	}
	const char *base = getenv("TMPDIR");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/strobe-heap.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : base && *base ? base : "/tmp");
	if (!mkdtemp(dir)) {
		cli_err(cmd, "cannot make a directory for the channel (%s): %s", dir, strerror(errno));
		return 2;
	}
	/* the environment the command inherits, and everything it execs */
	char *pre = NULL;
	const char *old = getenv("LD_PRELOAD");
	if (asprintf(&pre, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0) {
		rmdir(dir);
		return 2;
	}
	setenv("LD_PRELOAD", pre, 1);
	free(pre);
	setenv("STROBE_HEAP_DIR", dir, 1);
	if (o->kind == STROBE_HEAP_KIND_ALLOC)
		setenv("STROBE_LOCK_SAMPLE_NS", "0", 1); /* only what was asked for costs */
	else
		setenv("STROBE_HEAP_RATE", "0", 1);

	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	double t0 = now_s();
	pid_t child = fork();
	if (child == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		execvp(o->command[0], o->command);
		fprintf(stderr, "strobe record: cannot run '%s': %s\n", o->command[0],
			strerror(errno));
		_exit(127);
	}
	unsetenv("LD_PRELOAD"); /* not for this process's own children (none), but be tidy */
	if (child < 0) {
		cli_err(cmd, "cannot start '%s': %s", o->command[0], strerror(errno));
		rmdir(dir);
		return 2;
	}
	strobe_sym_opts syo = {.debug_dirs = o->debug_dirs, .no_kernel = true};
	namer_ctx nc = {0};
	if (o->symbolize && !(nc.sym = strobe_symbolizer_new(&syo)))
		cli_err(cmd, "cannot start the symbolizer (%s); writing raw addresses",
			strerror(errno));
	int status = 0, rc = 0;
	unsigned round = 0;
	double next = o->interval > 0 ? t0 + o->interval : 0;
	bool killed = false;
	for (;;) {
		pid_t w = waitpid(child, &status, WNOHANG);
		if (w == child)
			break;
		if (w < 0 && errno != EINTR)
			break;
		if (got_signal && !killed) {
			kill(child, got_signal); /* the command does not outlive its recording */
			killed = true;
		}
		double now = now_s();
		if (next && now >= next) {
			char path[PATH_MAX];
			numbered(path, sizeof(path), o->output, ++round);
			write_profile(cmd, dir, o, path, &nc, NULL);
			next += o->interval;
		}
		if (o->duration > 0 && now - t0 >= o->duration && !killed) {
			kill(child, SIGTERM);
			killed = true;
		}
		usleep(50000);
	}
	snaps s = {0};
	if (write_profile(cmd, dir, o, o->output, &nc, &s) < 0)
		rc = 2;
	if (rc == 0 && !o->no_leaks)
		report_leaks(cmd, &s, o->leaks_path, &nc);
	if (!o->quiet) {
		uint64_t stacks = 0, samples = 0, lost = 0;
		for (size_t i = 0; i < s.n; i++) {
			const strobe_heap_snap *sn = s.v[i];
			stacks += sn->nstacks;
			lost += sn->hdr.dropped_stacks;
			for (uint32_t k = 0; k < sn->nstacks; k++)
				samples += o->kind == STROBE_HEAP_KIND_ALLOC
						   ? sn->stacks[k].alloc_count
						   : sn->stacks[k].lock_count_milli / 1000;
		}
		fprintf(stderr, "strobe record: command %s after %.1f s: %" PRIu64 " %s, %" PRIu64
				" stacks, %" PRIu64 " lost, %zu process%s; wrote %s\n",
			WIFEXITED(status) ? "exited" : "was killed", now_s() - t0, samples,
			o->kind == STROBE_HEAP_KIND_ALLOC ? "sampled allocations" : "contentions",
			stacks, lost, s.n, s.n == 1 ? "" : "es", o->output);
		if (s.n == 0)
			fprintf(stderr, "strobe record: no process started the library (a static "
					"binary, or LD_PRELOAD dropped by a setuid program?)\n");
	}
	snaps_free(&s);
	/* the channel files are the recorder's alone: gone once read */
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (strncmp(e->d_name, "strobe-heap.", 12) == 0)
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
	namer_free(&nc);
	strobe_symbolizer_free(nc.sym);
	return rc;
}

bool record_heap_event(const char *name, record_heap_opts *o)
{
	if (strcmp(name, "heap") == 0 || strcmp(name, "alloc") == 0)
		o->kind = STROBE_HEAP_KIND_ALLOC;
	else if (strcmp(name, "mutex") == 0)
		o->kind = STROBE_HEAP_KIND_LOCK;
	else
		return false;
	return true;
}

int record_heap_run(const char *cmd, record_heap_opts *o, char **command, int ncommand,
		    bool other_target, const char *output, double duration, bool quiet,
		    bool symbolize, const char **debug_dirs, int argc, char **argv)
{
	if (other_target || ncommand == 0) {
		cli_err(cmd, "-e %s needs a command to run with the library preloaded (not -a or -p)",
			o->kind == STROBE_HEAP_KIND_ALLOC ? "heap" : "mutex");
		return 2;
	}
	strobe_format fmt = cli_format_for_path(output);
	if (fmt == STROBE_FMT_UNKNOWN || fmt == STROBE_FMT_PERF_SCRIPT) {
		cli_err(cmd, "-o %s: unknown output format (use .pb.gz, .svg, .folded, .json or "
			     ".speedscope.json)", output);
		return 2;
	}
	o->command = command;
	o->output = output;
	o->fmt = fmt;
	o->duration = duration;
	o->quiet = quiet;
	o->symbolize = symbolize;
	o->debug_dirs = debug_dirs;
	o->argc = argc;
	o->argv = argv;
	return record_heap(o);
}
