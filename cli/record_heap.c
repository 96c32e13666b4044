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
#include "strobe/clock.h"
#include "strobe/heap_channel.h"
#include "strobe/symbolize.h"

#define MAX_FILES 4096 /* channel files read per round: a fork bomb does not exhaust us */

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static double now_s(void)
{
	return (double)strobe_mono_ns() / 1e9;
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

/* ---- the recording's state ------------------------------------------------------------------ */

/* One possible leak, formatted when its process was read, sorted with all others at the end. */
typedef struct leak_text {
	double space;
	char *text;
} leak_text;

typedef struct rec {
	const char *cmd;
	const record_heap_opts *o;
	const char *dir;
	strobe_symbolizer *sym;   /* NULL: --no-symbolize */
	strobe_sym_heap_namer *nm; /* names frames through sym */
	/* Processes already gone are folded in here and their files removed, so that a command
	 * that runs thousands of short processes (a build) keeps a handful of files, not one per
	 * process, in shared memory. */
	strobe_profile *done;
	leak_text *leaks;
	size_t nleaks;
	size_t files_seen;      /* channel files met (folded or live): > 1 -> pid labels */
	size_t processes;       /* folded */
	uint64_t samples, dropped, dropped_live;
	bool oom;
} rec;

typedef struct snaps {
	strobe_heap_snap **v;
	size_t n;
	char **path;
} snaps;

static void snaps_free(snaps *s)
{
	for (size_t i = 0; i < s->n; i++) {
		strobe_heap_snap_free(s->v[i]);
		free(s->path[i]);
	}
	free(s->v);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* ---- the leak report ------------------------------------------------------------------------- */

static void print_frame(FILE *f, const strobe_heap_snap *s, uint64_t pc, strobe_sym_heap_namer *nm)
{
	/* the maps line covering pc, searched the way the profile builder does (last wins) */
	const char *best = NULL;
	unsigned long long bs = 0, boff = 0;
	int bpos = 0;
	for (const char *line = s->maps; *line;) {
		const char *nl = strchr(line, '\n');
		unsigned long long a, b, off;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &a, &b, &off, &pos) >= 3 && pos &&
		    pc >= a && pc < b)
			best = line, bs = a, boff = off, bpos = pos;
		if (!nl)
			break;
		line = nl + 1;
	}
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
	int n = nm ? strobe_sym_heap_name(nm, path, pc - 1 - bs + boff, fr, 16) : 0;
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

/* Formats the possible leaks of one process into r->leaks. */
static void collect_leaks(rec *r, const strobe_heap_snap *s)
{
	strobe_heap_leak *l;
	size_t n;
	if (r->o->kind != STROBE_HEAP_KIND_ALLOC || r->o->no_leaks ||
	    strobe_heap_leaks(s, &l, &n) < 0)
		return;
	for (size_t k = 0; k < n; k++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		if (!f)
			break;
		const strobe_heap_stack *st = &s->stacks[l[k].stack];
		fprintf(f, "%.0f bytes in %.0f objects (%" PRIu64 " sampled), pid %d\n", l[k].space,
			l[k].objects, l[k].count, (int)s->hdr.pid);
		for (uint32_t d = 0; d < st->depth && d < STROBE_HEAP_MAX_DEPTH; d++)
			print_frame(f, s, st->frames[d], r->nm);
		fclose(f);
		leak_text *nl = realloc(r->leaks, (r->nleaks + 1) * sizeof(*nl));
		if (!nl) {
			free(text);
			break;
		}
		r->leaks = nl;
		r->leaks[r->nleaks++] = (leak_text){l[k].space, text};
	}
	free(l);
}

static int by_space(const void *a, const void *b)
{
	const leak_text *x = a, *y = b;
	return x->space > y->space ? -1 : x->space < y->space;
}

static void report_leaks(rec *r)
{
	const char *path = r->o->leaks_path;
	FILE *f = stderr;
	if (path && !(f = fopen(path, "w"))) {
		cli_err(r->cmd, "--leaks %s: %s", path, strerror(errno));
		return;
	}
	if (r->nleaks)
		qsort(r->leaks, r->nleaks, sizeof(*r->leaks), by_space);
	if (r->nleaks)
		fprintf(f, "strobe record: possible leaks: sampled allocations live at exit and older "
			   "than the last tenth of the run, by stack (estimated objects and bytes):\n");
	for (size_t i = 0; i < r->nleaks; i++)
		fprintf(f, "leak %zu: %s", i + 1, r->leaks[i].text);
	if (path) {
		if (!r->nleaks)
			fprintf(f, "no possible leaks\n");
		fclose(f);
	}
}

/* ---- reading the channel files --------------------------------------------------------------- */

static void count(rec *r, const strobe_heap_snap *s)
{
	r->dropped += s->hdr.dropped_stacks;
	r->dropped_live += s->hdr.dropped_live;
	for (uint32_t k = 0; k < s->nstacks; k++)
		r->samples += r->o->kind == STROBE_HEAP_KIND_ALLOC ? s->stacks[k].alloc_count
								  : s->stacks[k].lock_count_milli / 1000;
}

static int add_snap(rec *r, strobe_profile *p, const strobe_heap_snap *s)
{
	strobe_heap_profile_opts po = {.kind = r->o->kind,
				       .namer = r->nm ? strobe_sym_heap_name : NULL,
				       .build_id = r->nm ? strobe_sym_heap_build_id : NULL,
				       .namer_ctx = r->nm, .pid_label = r->files_seen > 1,
				       .labels = r->o->labels, .nlabels = r->o->nlabels};
	strobe_err err = {{0}};
	int rc = strobe_heap_profile_add(p, s, &po, &err);
	if (rc < 0)
		cli_err(r->cmd, "pid %d: %s", (int)s->hdr.pid, err.msg[0] ? err.msg : strerror(-rc));
	return rc;
}

/* Whether a file's process image is over: exited, or gone without exiting (killed). A RUNNING
 * file whose pid lives may be an image that exec'd: its pid's newer file is the live one, and
 * it waits for the end. */
static bool finished(const strobe_heap_snap *s)
{
	if (s->hdr.state == STROBE_HEAP_EXITED)
		return true;
	return s->hdr.pid > 0 && kill(s->hdr.pid, 0) < 0 && errno == ESRCH;
}

/* Reads every channel file. With fold, those of finished processes go into r->done (their
 * leaks formatted) and are removed, the others into *live; without, all into *live. Files a
 * writer is still creating are skipped quietly unless final. */
static int scan(rec *r, snaps *live, bool fold, bool final)
{
	DIR *d = opendir(r->dir);
	if (!d)
		return -errno;
	struct dirent *e;
	snaps all = {0};
	while ((e = readdir(d)) && all.n < MAX_FILES) {
		if (strncmp(e->d_name, "strobe-heap.", 12) != 0)
			continue;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", r->dir, e->d_name);
		strobe_err err = {{0}};
		strobe_heap_snap *s;
		if (strobe_heap_snap_read(path, &s, &err) < 0) {
			if (final)
				cli_err(r->cmd, "%s", err.msg);
			continue;
		}
		strobe_heap_snap **nv = realloc(all.v, (all.n + 1) * sizeof(*nv));
		char **np = nv ? realloc(all.path, (all.n + 1) * sizeof(*np)) : NULL;
		if (nv)
			all.v = nv;
		if (np)
			all.path = np;
		if (!nv || !np || !(all.path[all.n] = strdup(path))) {
			strobe_heap_snap_free(s);
			closedir(d);
			snaps_free(&all);
			return -ENOMEM;
		}
		all.v[all.n++] = s;
	}
	closedir(d);
	/* files seen so far: the folded ones and these */
	if (r->processes + all.n > r->files_seen)
		r->files_seen = r->processes + all.n;
	/* fold only beside another file, so that labels are decided before anything is folded:
	 * the last process of a single-process command is read at the end, unlabelled */
	fold = fold && all.n > 1;
	for (size_t i = 0; i < all.n; i++) {
		strobe_heap_snap *s = all.v[i];
		if (fold && finished(s)) {
			if (!r->done && !(r->done = strobe_profile_new())) {
				r->oom = true;
				fold = false;
			} else if (add_snap(r, r->done, s) == 0) {
				collect_leaks(r, s);
				count(r, s);
				r->processes++;
				unlink(all.path[i]);
				strobe_heap_snap_free(s);
				free(all.path[i]);
				continue;
			}
		}
		strobe_heap_snap **nv = realloc(live->v, (live->n + 1) * sizeof(*nv));
		char **np = nv ? realloc(live->path, (live->n + 1) * sizeof(*np)) : NULL;
		if (nv)
			live->v = nv;
		if (np)
			live->path = np;
		if (!nv || !np) {
			strobe_heap_snap_free(s);
			free(all.path[i]);
			r->oom = true;
			continue;
		}
		live->v[live->n] = s;
		live->path[live->n++] = all.path[i];
	}
	free(all.v);
	free(all.path);
	return 0;
}

/* The profile of everything so far: the folded processes and the live files. */
static strobe_profile *profile_now(rec *r, const snaps *live)
{
	strobe_profile *p = r->done ? strobe_profile_clone(r->done) : strobe_profile_new();
	if (!p)
		return NULL;
	for (size_t i = 0; i < live->n; i++)
		if (add_snap(r, p, live->v[i]) < 0) {
			strobe_profile_free(p);
			return NULL;
		}
	if (p->ntypes == 0) { /* no process started the library: an empty profile of the kind */
		strobe_heap_snap empty = {.hdr.rate = 1};
		strobe_heap_profile_opts po = {.kind = r->o->kind};
		strobe_heap_profile_add(p, &empty, &po, NULL);
	}
	char note[512];
	int nn = snprintf(note, sizeof(note), "strobe record");
	for (int i = 1; i < r->o->argc && nn < (int)sizeof(note) - 1; i++)
		nn += snprintf(note + nn, sizeof(note) - (size_t)nn, " %s", r->o->argv[i]);
	strobe_profile_add_comment(p, note);
	uint64_t dropped = r->dropped, dropped_live = r->dropped_live;
	for (size_t i = 0; i < live->n; i++) {
		dropped += live->v[i]->hdr.dropped_stacks;
		dropped_live += live->v[i]->hdr.dropped_live;
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

static int write_now(rec *r, const snaps *live, const char *path)
{
	strobe_profile *p = profile_now(r, live);
	if (!p) {
		cli_err(r->cmd, "cannot build the profile: %s", strerror(ENOMEM));
		return -1;
	}
	int rc = cli_write_as(r->cmd, p, r->o->fmt, strobe_default_type_index(p),
			      STROBE_GRAN_FUNCTIONS, path);
	strobe_profile_free(p);
	return rc;
}

/* ---- the command ----------------------------------------------------------------------------- */

int record_heap(const record_heap_opts *o)
{
	const char *cmd = "record";
	char lib[PATH_MAX] = "";
	int lrc = find_lib(lib, sizeof(lib));
	if (lrc < 0) {
		cli_err(cmd, "cannot find libstrobe-heap.so (%s: %s): build it (make) or set "
			     "STROBE_HEAP_LIB", lib[0] ? lib : "next to strobe", strerror(-lrc));
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
	char *saved = old ? strdup(old) : NULL;
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
	/* this process's own environment as it was */
	if (saved)
		setenv("LD_PRELOAD", saved, 1);
	else
		unsetenv("LD_PRELOAD");
	free(saved);
	if (child < 0) {
		cli_err(cmd, "cannot start '%s': %s", o->command[0], strerror(errno));
		rmdir(dir);
		return 2;
	}
	rec r = {.cmd = cmd, .o = o, .dir = dir};
	strobe_sym_opts syo = {.debug_dirs = o->debug_dirs, .no_kernel = true};
	if (o->symbolize && (!(r.sym = strobe_symbolizer_new(&syo)) ||
			     !(r.nm = strobe_sym_heap_namer_new(r.sym))))
		cli_err(cmd, "cannot start the symbolizer (%s); writing raw addresses",
			strerror(errno));
	int status = 0, rc = 0;
	unsigned round = 0;
	double next = o->interval > 0 ? t0 + o->interval : 0, next_scan = t0 + 0.5;
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
		bool interval = next && now >= next;
		if (interval || now >= next_scan) {
			snaps live = {0};
			scan(&r, &live, true, false);
			if (interval) {
				char path[PATH_MAX];
				numbered(path, sizeof(path), o->output, ++round);
				write_now(&r, &live, path);
				next += o->interval;
			}
			snaps_free(&live);
			next_scan = now + 0.5;
		}
		if (o->duration > 0 && now - t0 >= o->duration && !killed) {
			kill(child, SIGTERM);
			killed = true;
		}
		usleep(50000);
	}
	snaps live = {0};
	scan(&r, &live, false, true);
	if (write_now(&r, &live, o->output) < 0)
		rc = 2;
	for (size_t i = 0; i < live.n; i++) {
		collect_leaks(&r, live.v[i]);
		count(&r, live.v[i]);
	}
	if (rc == 0 && !o->no_leaks && o->kind == STROBE_HEAP_KIND_ALLOC)
		report_leaks(&r);
	size_t procs = r.processes + live.n;
	if (!o->quiet) {
		fprintf(stderr, "strobe record: command %s after %.1f s: %" PRIu64 " %s, %" PRIu64
				" lost, %zu process%s; wrote %s\n",
			WIFEXITED(status) ? "exited" : "was killed", now_s() - t0, r.samples,
			o->kind == STROBE_HEAP_KIND_ALLOC ? "sampled allocations" : "contentions",
			r.dropped, procs, procs == 1 ? "" : "es", o->output);
		if (procs == 0)
			fprintf(stderr, "strobe record: no process started the library (a static "
					"binary, or LD_PRELOAD dropped by a setuid program?)\n");
	}
	if (r.oom)
		cli_err(cmd, "out of memory while reading the channel: the profile may miss processes");
	snaps_free(&live);
	for (size_t i = 0; i < r.nleaks; i++)
		free(r.leaks[i].text);
	free(r.leaks);
	strobe_profile_free(r.done);
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
	strobe_sym_heap_namer_free(r.nm);
	strobe_symbolizer_free(r.sym);
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
