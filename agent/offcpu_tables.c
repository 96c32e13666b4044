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
 *
 * The loading runs on a thread of its own, woken by the program's requests (ring buffer ureq)
 * within a millisecond or so: a process that has just exec'd is walked by frame pointers until
 * its mappings are in, and the agent's sampling loop wakes only every 100-500 ms. Every second
 * it also scans uwant, for requests whose ring-buffer message was lost (the ring full). Map
 * updates are system calls, safe beside the program and the agent's other threads; the
 * statistics are read under a mutex.
 *
 * Idle, the thread wakes once a second (the uwant scan), not every 100 ms: it sleeps in an epoll
 * of the ring's own epoll fd, which a request wakes, and of an eventfd, which otables_free
 * writes to stop it at once. Exited processes are looked for (a bpf() call and a kill(pid, 0)
 * per process in umaps) every GC_NS while new processes are loaded, else every GC_IDLE_NS: with
 * nothing loaded the map cannot grow, and on a host of 200 long-running processes that walk
 * every 3 s was a fixed cost of its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "offcpu_tables.h"
#include "strobe/proc_maps.h"
#include "strobe/clock.h"
#include "unwind_rows.h"

#define MAX_BINS 65536
#define GC_NS 3000000000ll /* how often exited processes are looked for, after new loads */
#define GC_IDLE_NS 60000000000ll /* ... and with none (for the processes count alone) */
#define MAX_WANT 1024      /* processes taken from uwant per scan (its size) */
#define SCAN_NS 1000000000ll /* how often uwant is scanned (for messages lost) */

#define RECHECKS 7        /* a process read too early is read again up to this many times */
#define MAX_RECHECK 256
#define BIG_BIN (4ull << 20) /* a new binary this large has its rows built by the builder thread */
#define MAX_WAITING 256    /* processes read again once the builder is done */

typedef struct recheck {
	uint32_t tgid, tries;
	int64_t due;
} recheck;

/* A large binary's rows being built by the builder thread: its identity and an fd of its own,
 * then the rows (rc: urows_build's). */
typedef struct bjob {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	int fd;
	uint32_t room;
	int rc;
	urows lay;
	int64_t ns;
} bjob;

typedef struct obin {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
	uint32_t row0, nrows; /* nrows 0: no rows (frame pointers) */
	urows lay;     /* its executable segments, for the bias (rows freed) */
} obin;

struct otables {
	int fd_rows, fd_maps, fd_want, fd_exec, fd_bins;
	uint32_t max_rows, used_rows;
	obin *bins;
	uint32_t nbins, cbins;
	int64_t last_gc, last_scan;
	uint64_t loaded_at_gc; /* st.procs_loaded at the last gc */
	int ep, wake_fd;       /* the loader's sleep (see the top of this file); -1: none */
	strobe_otables_stats st;
	pthread_mutex_t mu;   /* st, for otables_get_stats */
	struct ring_buffer *rb;
	pthread_t thread;
	bool running;
	atomic_bool stop;
	uint32_t pending[MAX_WANT]; /* tgids from the ring, for the loop to load */
	int64_t pending_ns[MAX_WANT];
	unsigned npending;
	void (*on_load)(void *, uint32_t); /* after each load (see otables_start) */
	void *on_ctx;
	recheck recheck[MAX_RECHECK]; /* processes to read again (see load_one) */
	unsigned nrecheck;
	/* The builder thread: a large new binary's rows (cc1's 33 MB: 0.5 s) are built there,
	 * one at a time, while the loader goes on serving requests, the processes that map it
	 * walking it by frame pointers meanwhile; they are read again once its rows are in.
	 * Built on the loader, they held up every process that exec'd meanwhile. job: the one
	 * asked for or being built (busy), then done; bmu and bcond guard it. */
	pthread_t builder;
	bool builder_running;
	pthread_mutex_t bmu;
	pthread_cond_t bcond;
	bjob job;
	bool job_busy, job_done;
	uint64_t big_bin;              /* BIG_BIN, or otables_set_big_binary's */
	uint32_t waiting[MAX_WAITING]; /* loader-owned: processes to read again after a build */
	unsigned nwaiting;
	char proc_root[256];
};

otables *otables_new(int fd_rows, uint32_t max_rows, int fd_maps, int fd_want,
				   int fd_exec, int fd_bins, const char *proc_root)
{
	otables *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	snprintf(t->proc_root, sizeof(t->proc_root), "%s", proc_root ? proc_root : "/proc");
	t->fd_exec = fd_exec;
	t->fd_bins = fd_bins;
	t->fd_rows = fd_rows;
	t->fd_maps = fd_maps;
	t->fd_want = fd_want;
	t->max_rows = max_rows;
	t->st.rows_max = max_rows;
	t->last_gc = t->last_scan = strobe_mono_ns();
	t->ep = t->wake_fd = -1;
	t->job.fd = -1;
	t->big_bin = BIG_BIN;
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_init(&t->bmu, NULL);
	pthread_cond_init(&t->bcond, NULL);
	return t;
}

/* Wakes the loader thread from its sleep (a stop, or a build done). */
static void wake_loader(otables *t)
{
	if (t->wake_fd >= 0) {
		uint64_t one = 1;
		(void)!write(t->wake_fd, &one, sizeof(one));
	}
}

void otables_free(otables *t)
{
	if (!t)
		return;
	if (t->running) {
		atomic_store(&t->stop, true);
		wake_loader(t);
		pthread_join(t->thread, NULL);
	}
	if (t->builder_running) {
		atomic_store(&t->stop, true);
		pthread_mutex_lock(&t->bmu);
		pthread_cond_broadcast(&t->bcond);
		pthread_mutex_unlock(&t->bmu);
		pthread_join(t->builder, NULL);
	}
	if (t->job.fd >= 0) /* asked for, never built */
		close(t->job.fd);
	urows_free(&t->job.lay); /* built, never taken */
	pthread_cond_destroy(&t->bcond);
	pthread_mutex_destroy(&t->bmu);
	ring_buffer__free(t->rb);
	if (t->ep >= 0)
		close(t->ep);
	if (t->wake_fd >= 0)
		close(t->wake_fd);
	pthread_mutex_destroy(&t->mu);
	free(t->bins);
	free(t);
}

/* Writes a binary's rows into the map, from row0, a few thousand per system call. */
static int write_rows(otables *t, const urows *r, uint32_t row0)
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

/* Tells the program the binary's rows by its file (map ubins), for frames of processes whose
 * mappings are not loaded yet: when its executable segments share one offset - address
 * difference (else a mapping's bias depends on which it maps, which the program does not
 * look at). */
static void publish_bin(otables *t, const obin *b)
{
	if (t->fd_bins < 0 || !b->nrows || !b->lay.nload)
		return;
	int64_t adj = (int64_t)(b->lay.load[0].p_offset - b->lay.load[0].p_vaddr);
	uint64_t text = b->lay.load[0].p_vaddr;
	for (unsigned i = 1; i < b->lay.nload; i++) {
		if ((int64_t)(b->lay.load[i].p_offset - b->lay.load[i].p_vaddr) != adj)
			return;
		if (b->lay.load[i].p_vaddr < text)
			text = b->lay.load[i].p_vaddr;
	}
	/* the kernel's dev_t: 12 bits of major, 20 of minor */
	struct ob_bin_key k = {.dev = ((uint64_t)major((dev_t)b->dev) << 20) | minor((dev_t)b->dev),
			       .ino = b->ino};
	struct ob_bin v = {.size = b->size, .text = text, .adj = adj, .row0 = b->row0,
			   .nrows = b->nrows,
			   .exec = b->lay.e_type == ET_EXEC};
	if (bpf_map_update_elem(t->fd_bins, &k, &v, BPF_ANY) == 0)
		t->st.binaries_by_file++;
}

/* Registers a binary with the rows built for it (rc: urows_build's; lay freed, its segments
 * kept). NULL without memory. */
static obin *bin_add(otables *t, uint64_t dev, uint64_t ino, uint64_t size, int64_t mt, int rc,
		     urows *lay, int64_t build_ns)
{
	if (t->nbins == t->cbins) {
		if (t->cbins >= MAX_BINS) {
			urows_free(lay);
			return NULL;
		}
		uint32_t nc = t->cbins ? t->cbins * 2 : 64;
		obin *nb = realloc(t->bins, nc * sizeof(*nb));
		if (!nb) {
			urows_free(lay);
			return NULL;
		}
		t->bins = nb;
		t->cbins = nc;
	}
	obin *b = &t->bins[t->nbins++];
	*b = (obin){.dev = dev, .ino = ino, .size = size, .mtime_ns = mt, .lay = *lay};
	if (rc == -E2BIG || (rc == 0 && b->lay.n > t->max_rows - t->used_rows)) {
		t->st.binaries_full++;
	} else if (rc == 0 && b->lay.n && write_rows(t, &b->lay, t->used_rows) == 0) {
		b->row0 = t->used_rows;
		b->nrows = b->lay.n;
		t->used_rows += b->lay.n;
		t->st.rows = t->used_rows;
		t->st.binaries++;
		publish_bin(t, b);
	} else {
		t->st.binaries_none++;
	}
	urows_free(&b->lay); /* the segments stay */
	t->st.build_ns += build_ns;
	return b;
}

/* The entry of the binary open at fd (built now if new); NULL without memory, and for a large
 * new binary the builder thread takes (*deferred set: its rows come later). */
static obin *bin_of(otables *t, int fd, const struct stat *sb, bool *deferred)
{
	int64_t mt = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	for (uint32_t i = 0; i < t->nbins; i++) {
		obin *b = &t->bins[i];
		if (b->ino == (uint64_t)sb->st_ino && b->dev == (uint64_t)sb->st_dev &&
		    b->size == (uint64_t)sb->st_size && b->mtime_ns == mt)
			return b;
	}
	if (t->builder_running && (uint64_t)sb->st_size > t->big_bin) {
		pthread_mutex_lock(&t->bmu);
		bool take = !t->job_busy && !t->job_done;
		int jfd = take ? dup(fd) : -1;
		if (take && jfd >= 0) {
			t->job = (bjob){.dev = (uint64_t)sb->st_dev, .ino = (uint64_t)sb->st_ino,
					.size = (uint64_t)sb->st_size, .mtime_ns = mt, .fd = jfd,
					.room = t->max_rows - t->used_rows};
			t->job_busy = true;
			pthread_cond_signal(&t->bcond);
		}
		pthread_mutex_unlock(&t->bmu);
		/* the builder busy (with this binary or another): the process waits for it, read
		 * again after the build (asking the builder then); a dup that failed: built here */
		if (!take || jfd >= 0) {
			*deferred = true;
			return NULL;
		}
	}
	urows lay = {0};
	int64_t t0 = strobe_mono_ns();
	int rc = urows_build(fd, t->max_rows - t->used_rows, &lay);
	return bin_add(t, (uint64_t)sb->st_dev, (uint64_t)sb->st_ino, (uint64_t)sb->st_size, mt, rc,
		       &lay, strobe_mono_ns() - t0);
}

static void load_one(otables *t, uint32_t tgid, unsigned tries);

/* The builder thread: builds the rows of the job it is given, then wakes the loader. */
static void *builder(void *arg)
{
	otables *t = arg;
	pthread_mutex_lock(&t->bmu);
	for (;;) {
		while (!atomic_load(&t->stop) && !(t->job_busy && !t->job_done))
			pthread_cond_wait(&t->bcond, &t->bmu);
		if (atomic_load(&t->stop))
			break;
		bjob j = t->job;
		pthread_mutex_unlock(&t->bmu);
		int64_t t0 = strobe_mono_ns();
		j.rc = urows_build(j.fd, j.room, &j.lay);
		j.ns = strobe_mono_ns() - t0;
		close(j.fd);
		j.fd = -1;
		pthread_mutex_lock(&t->bmu);
		t->job = j;
		t->job_done = true;
		wake_loader(t);
	}
	pthread_mutex_unlock(&t->bmu);
	return NULL;
}

/* On the loader: a build done is registered and its waiting processes are read again. */
static void take_built(otables *t)
{
	pthread_mutex_lock(&t->bmu);
	bool done = t->job_done;
	bjob j = t->job;
	if (done) {
		t->job_done = t->job_busy = false;
		t->job.lay = (urows){0};
	}
	pthread_mutex_unlock(&t->bmu);
	if (!done)
		return;
	pthread_mutex_lock(&t->mu);
	bin_add(t, j.dev, j.ino, j.size, j.mtime_ns, j.rc, &j.lay, j.ns);
	t->st.binaries_async++;
	pthread_mutex_unlock(&t->mu);
	unsigned n = t->nwaiting;
	uint32_t w[MAX_WAITING];
	memcpy(w, t->waiting, n * sizeof(w[0]));
	t->nwaiting = 0;
	for (unsigned i = 0; i < n; i++)
		load_one(t, w[i], RECHECKS); /* (may wait for another build: listed again) */
}

static int map_cmp(const void *a, const void *b)
{
	const struct ob_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int load(otables *t, uint32_t tgid, bool *early, bool *deferred);
static int load_checked(otables *t, uint32_t tgid, bool *early, bool *deferred);

/* The process's exec count (map uexec; 0 = none seen). */
static uint32_t execs(const otables *t, uint32_t tgid)
{
	uint32_t n = 0;
	if (t->fd_exec >= 0)
		bpf_map_lookup_elem(t->fd_exec, &tgid, &n);
	return n;
}

int otables_load(otables *t, uint32_t tgid)
{
	bool early, deferred;
	return load_checked(t, tgid, &early, &deferred);
}

/* load, again while an exec came in between; early: see load. */
static int load_checked(otables *t, uint32_t tgid, bool *early, bool *deferred)
{
	pthread_mutex_lock(&t->mu);
	/* An exec while the mappings are read and written (the program's on_exec counts them)
	 * may leave the old image's mappings in the map, after on_exec removed what was there:
	 * then every address of the new image is in none of them, and its stacks end at the leaf
	 * until the program asks again. So they are read again until no exec came in between. */
	int rc = 0;
	for (int tries = 0; tries < 3; tries++) {
		uint32_t e0 = execs(t, tgid);
		rc = load(t, tgid, early, deferred);
		if (rc < 0 || execs(t, tgid) == e0)
			break;
		bpf_map_delete_elem(t->fd_maps, &tgid);
		t->st.exec_races++;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

/* What load's walk over a process's mappings fills. */
typedef struct load_walk {
	otables *t;
	uint32_t tgid;
	struct ob_maps *ms;
	unsigned nfiles;
	bool ldso;
	bool deferred; /* a binary's rows are being built by the builder thread */
} load_walk;

/* One mapping of the process: an executable one gets an entry, with its binary's rows when it is
 * a file that has them. */
static int load_map(void *ctx, const strobe_maps_entry *e)
{
	load_walk *w = ctx;
	struct ob_maps *ms = w->ms;
	if (!strobe_maps_exec(e) || e->end <= e->start || e->end > 0x800000000000ull)
		return 0;
	/* Beyond what the table holds, the binary is still loaded: the program finds such a
	 * frame's rows by its file (ubins) */
	struct ob_map spare, *m = ms->n < STROBE_OB_MAX_MAPS ? &ms->m[ms->n++] : &spare;
	*m = (struct ob_map){.start = e->start, .end = e->end};
	if (e->path[0] != '/' || !e->inode)
		return 0; /* anonymous (JIT), [vdso]: frame pointers */
	w->nfiles++;
	const char *base = strrchr(e->path, '/') + 1;
	if (strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld-musl", 7) == 0 ||
	    strcmp(base, "ld.so") == 0)
		w->ldso = true;
	/* Through the process's root (a container's files), and only the file the mapping is
	 * of: a binary replaced since it was mapped has other rows. */
	char path[4352];
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/root%s", w->t->proc_root, w->tgid, e->path);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat sb;
	if (fd < 0)
		return 0;
	obin *b = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_ino == e->inode
			  ? bin_of(w->t, fd, &sb, &w->deferred)
			  : NULL;
	close(fd);
	uint64_t bias;
	if (b && b->nrows && urows_bias(&b->lay, e->start, e->offset, &bias)) {
		m->bias = bias;
		m->row0 = b->row0;
		m->nrows = b->nrows;
	}
	return 0;
}

/* Loads the mappings of tgid; t->mu held (bins and st are shared with get_stats). */
static int load(otables *t, uint32_t tgid, bool *early, bool *deferred)
{
	*early = false;
	*deferred = false;
	struct ob_maps *ms = calloc(1, sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	FILE *f = strobe_proc_maps_open(t->proc_root, (int)tgid);
	if (!f) {
		int rc = errno == ENOENT ? -ESRCH : -errno;
		t->st.procs_failed++;
		if (rc != -ESRCH) {
			/* none: the program then asks again at most every 10 ms, not at every walk */
			ms->loaded_ns = (uint64_t)strobe_mono_ns();
			bpf_map_update_elem(t->fd_maps, &tgid, ms, BPF_ANY);
		}
		free(ms);
		return rc;
	}
	load_walk w = {.t = t, .tgid = tgid, .ms = ms};
	strobe_proc_maps_walk(f, load_map, &w); /* closes f */
	*deferred = w.deferred;
	unsigned nfiles = w.nfiles;
	bool ldso = w.ldso;
	/* The program and the dynamic linker alone: read right after an exec, before the linker
	 * mapped the libraries. The leaf of the next walk will be in none of these, and the program
	 * asks again then; but a process that blocks at once (in a pipeline) makes no next walk for
	 * as long as it blocks, so the loader reads it again shortly anyway (see loader). */
	*early = ldso && nfiles <= 2;
	qsort(ms->m, ms->n, sizeof(ms->m[0]), map_cmp); /* /proc lists them sorted already */
	/* Read early, they are marked as read 10 ms ago: the program asks again as soon as a walk
	 * meets code outside them (libc's, mapped since), rather than 10 ms after this read. */
	ms->loaded_ns = (uint64_t)strobe_mono_ns() - (*early ? 10000000ull : 0);
	int rc = bpf_map_update_elem(t->fd_maps, &tgid, ms, BPF_ANY) < 0 ? -errno : 0;
	free(ms);
	if (rc == 0)
		t->st.procs_loaded++;
	else
		t->st.procs_failed++;
	return rc;
}

/* Forgets the processes that have exited. */
static void gc(otables *t)
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

/* Loads a process the program asked for (a process gone meanwhile: nothing to load), takes
 * the request out, and has its threads' stacks walked without the mappings walked again. */
static void load_one(otables *t, uint32_t tgid, unsigned tries)
{
	bool early = false, deferred = false;
	int rc = load_checked(t, tgid, &early, &deferred);
	bpf_map_delete_elem(t->fd_want, &tgid);
	if (rc == 0 && t->on_load)
		t->on_load(t->on_ctx, tgid);
	/* read too early (see load): again in 2, 4, 8 ... 128 ms, up to RECHECKS times. The
	 * on-CPU program asks at each exec, which is nearly always before the dynamic linker
	 * mapped the libraries, about a millisecond later for a small program: the first look
	 * again soon, and one more read of a small maps file for most processes. */
	if (rc == 0 && early && tries < RECHECKS && t->nrecheck < MAX_RECHECK)
		t->recheck[t->nrecheck++] = (recheck){tgid, tries + 1,
						     strobe_mono_ns() + (2000000ll << tries)};
	/* a large binary of it being built: read again once its rows are in (take_built) */
	if (rc == 0 && deferred) {
		bool known = false;
		for (unsigned i = 0; i < t->nwaiting && !known; i++)
			known = t->waiting[i] == tgid;
		if (!known && t->nwaiting < MAX_WAITING)
			t->waiting[t->nwaiting++] = tgid;
	}
}

/* Loads the processes uwant holds (for messages the ring lost). */
static void scan(otables *t)
{
	uint32_t want[MAX_WANT], key, *prev = NULL;
	unsigned n = 0;
	while (n < MAX_WANT && bpf_map_get_next_key(t->fd_want, prev, &key) == 0) {
		want[n++] = key;
		prev = &want[n - 1];
	}
	for (unsigned i = 0; i < n && !atomic_load(&t->stop); i++)
		load_one(t, want[i], 0);
}

static int on_request(void *ctx, void *data, size_t len)
{
	otables *t = ctx;
	struct ob_req q;
	if (len < sizeof(q))
		return 0;
	memcpy(&q, data, sizeof(q));
	for (unsigned i = 0; i < t->npending; i++)
		if (t->pending[i] == q.tgid)
			return 0;
	if (t->npending < MAX_WANT) { /* else left in uwant, for the next scan */
		t->pending_ns[t->npending] = (int64_t)q.ns;
		t->pending[t->npending++] = q.tgid;
	}
	return 0;
}

static void *loader(void *arg)
{
	otables *t = arg;
	while (!atomic_load(&t->stop)) {
		/* until the next scan, or a recheck due sooner (without the epoll: 100 ms, the stop's
		 * latency) */
		int64_t now = strobe_mono_ns();
		int64_t wait_ms = t->ep < 0 ? 100 : (t->last_scan + SCAN_NS - now) / 1000000 + 1;
		for (unsigned i = 0; i < t->nrecheck; i++)
			if ((t->recheck[i].due - now) / 1000000 + 1 < wait_ms)
				wait_ms = (t->recheck[i].due - now) / 1000000 + 1;
		if (wait_ms < 0)
			wait_ms = 0;
		if (t->ep >= 0) {
			struct epoll_event ev[2];
			if (epoll_wait(t->ep, ev, 2, (int)wait_ms) > 0) {
				ring_buffer__consume(t->rb);
				uint64_t v; /* the eventfd: a stop, or a build done */
				(void)!read(t->wake_fd, &v, sizeof(v));
			}
		} else {
			ring_buffer__poll(t->rb, (int)wait_ms);
		}
		if (atomic_load(&t->stop))
			break;
		take_built(t);
		now = strobe_mono_ns();
		for (unsigned i = 0; i < t->nrecheck;) {
			if (t->recheck[i].due > now) {
				i++;
				continue;
			}
			recheck r = t->recheck[i];
			t->recheck[i] = t->recheck[--t->nrecheck];
			load_one(t, r.tgid, r.tries);
		}
		for (unsigned i = 0; i < t->npending; i++) {
			load_one(t, t->pending[i], 0);
			/* how long the process waited, from its first walk without them */
			int64_t lat = strobe_mono_ns() - t->pending_ns[i];
			pthread_mutex_lock(&t->mu);
			t->st.wait_ns_sum += lat;
			t->st.waits++;
			if (lat > t->st.wait_ns_max)
				t->st.wait_ns_max = lat;
			pthread_mutex_unlock(&t->mu);
		}
		t->npending = 0;
		now = strobe_mono_ns();
		if (now - t->last_scan > SCAN_NS) {
			t->last_scan = now;
			scan(t);
		}
		if (now - t->last_gc > GC_NS) {
			pthread_mutex_lock(&t->mu);
			if (t->st.procs_loaded != t->loaded_at_gc || now - t->last_gc > GC_IDLE_NS) {
				t->last_gc = now;
				t->loaded_at_gc = t->st.procs_loaded;
				gc(t);
			}
			pthread_mutex_unlock(&t->mu);
		}
	}
	return NULL;
}

void otables_preload(otables *t, unsigned ms)
{
	DIR *d = opendir(t->proc_root);
	if (!d)
		return;
	int64_t end = strobe_mono_ns() + (int64_t)ms * 1000000;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *rest;
		unsigned long pid = strtoul(e->d_name, &rest, 10);
		if (*rest || pid == 0 || pid > 0x7fffffff)
			continue;
		otables_load(t, (uint32_t)pid); /* kernel threads, gone: nothing */
		if (strobe_mono_ns() >= end)
			break;
	}
	closedir(d);
}

int otables_start(otables *t, int fd_ring, void (*on_load)(void *, uint32_t),
			 void *ctx)
{
	t->on_load = on_load;
	t->on_ctx = ctx;
	t->rb = ring_buffer__new(fd_ring, on_request, t, NULL);
	if (!t->rb)
		return -errno;
	/* the loader's sleep; without it (no eventfd or epoll) it polls the ring every 100 ms */
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t->ep = t->wake_fd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
	struct epoll_event er = {.events = EPOLLIN, .data.u32 = 0},
			   ew = {.events = EPOLLIN, .data.u32 = 1};
	if (t->ep >= 0 && (epoll_ctl(t->ep, EPOLL_CTL_ADD, ring_buffer__epoll_fd(t->rb), &er) < 0 ||
			   epoll_ctl(t->ep, EPOLL_CTL_ADD, t->wake_fd, &ew) < 0)) {
		close(t->ep);
		t->ep = -1;
	}
	/* the builder first: the loader hands it large binaries from its first load on (without
	 * it they are built on the loader) */
	t->builder_running = pthread_create(&t->builder, NULL, builder, t) == 0;
	int rc = pthread_create(&t->thread, NULL, loader, t);
	if (rc != 0)
		return -rc;
	t->running = true;
	return 0;
}

void otables_set_big_binary(otables *t, uint64_t bytes)
{
	t->big_bin = bytes;
}

void otables_get_stats(otables *t, strobe_otables_stats *st)
{
	pthread_mutex_lock(&t->mu);
	*st = t->st;
	pthread_mutex_unlock(&t->mu);
}
