// SPDX-License-Identifier: Apache-2.0
/*
 * Loader and reader of the on-CPU sampling program (agent/oncpu.bpf.c, embedded as a bpftool
 * skeleton), for the agent's --on-cpu-mode bpf and `strobe record -e cpu`. The program runs on
 * a cpu-clock perf event per online CPU, opened here at the rate asked for.
 *
 * Draining without loss. The program sums into counts[g % 2] and keeps its stacks in
 * stacks[g % 2], g being `generation` as it read it on entry. strobe_oncpu_collect:
 *   1. switches the kernel to generation cur + 1;
 *   2. waits for every program run that may still be using cur (an RCU grace period: the
 *      kernel runs a perf-event program inside an RCU read-side section, and a syscall update
 *      of a map-of-maps returns only after synchronize_rcu(); `sync_fd` is such a map, of one
 *      slot, updated for that alone);
 *   3. reads counts[cur % 2] with its stacks from stacks[cur % 2], which no program writes any
 *      more, and clears both for generation cur + 2.
 * So no count is lost to the drain (delete-as-you-read would race with a program adding to the
 * element being deleted), and a count always finds its stacks. The cost is the grace period,
 * milliseconds, once per interval.
 *
 * Sizing: a sum per distinct (thread, stacks) in an interval, at most one per sample, so the
 * counts map is sized from freq x CPUs x interval (at least 1024, at most 1 << 18 entries). A
 * new key that finds the map full is counted (counts_full) and dropped; counts in it are kept.
 *
 * C SDK labels: a process that links the SDK publishes the TLS offset of its threads' label
 * blocks (agent/tls_labels.c finds it); once found it goes into the program's tlsprocs map,
 * and samples of its threads carry the block's labels (key `labels` -> tlsets[gen % 2], read
 * and cleared at the drain as the stacks are). Looked for when a process is first sampled
 * (strobe_oncpu_fresh), when it is added by pid, and for a sampled process never looked at
 * (record, which does not ask for fresh ones); a process whose SDK has not published yet (it
 * is starting) is looked at again at the next few drains. Children inherit the offset at fork
 * (the program copies it), an exec drops it.
 *
 * libbpf's messages go to a buffer that ends up in the error returned, never to stderr.
 */
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <linux/types.h>

#include "bpf_drain.h"
#include "bpf_load.h"
#include "bpf_msg.h"
#include "offcpu_tables.h"
#include "oncpu.h"
#include "oncpu.skel.h"
#include "perf.h"
#include "python_host.h"
#include "sampler_ext.h"
#include "stack_cap.h"
#include "stack_table.h"
#include "strobe/clock.h"
#include "strobe/oncpu.h"
#include "tls_labels_user.h"
#include "unwind.h"

#define MIN_ENTRIES 1024u
#define MAX_ENTRIES (1u << 18)
#define MAX_STACK_ENTRIES 16384u /* 1 KiB each, two maps */
#define MAX_TLS_ENTRIES 4096u    /* label blocks per interval: 528 bytes each, two maps */
#define TLS_SEEN 16384u          /* processes remembered as looked at (then forgotten at once) */
_Static_assert(STROBE_OC_COPY_NREGS == STROBE_UNWIND_NREGS, "the copies' registers are the unwinder's");
#define COPIES_RING (4u << 20)  /* bytes of copied samples between two collects */
#define TLS_RETRIES 5            /* drains a starting process's SDK gets to publish its offset */
#define FRESH_MAX 65536u         /* new processes kept between two strobe_oncpu_fresh calls */

/* A process looked at for the SDK's offset: tries left (0: done, found or not). */
typedef struct tls_seen {
	uint32_t tgid;
	uint8_t tries;
	uint8_t used;
	uint8_t found; /* its offset is in the program's map (counted once in tls_processes) */
} tls_seen;

struct strobe_oncpu {
	struct oncpu_bpf *skel;
	agent_bpf_progs progs;      /* its programs' fds (bpf_load.c: loaded by a child) */
	int fork_link, exec_link;   /* the fork and exec programs attached (-1: not) */
	int exit_link;              /* the exit program (with opts.fresh; -1: not) */
	int fd_counts[2], fd_stacks[2];
	int sync_fd, sync_inner;    /* see the top of this file */
	uint32_t max_entries, stack_entries;
	int ncpus;                  /* possible CPUs: the per-CPU counters' width */
	unsigned freq;              /* attached at (0: detached) */
	int64_t period_ns;
	int *pfds;                  /* the cpu-clock events: one per online CPU, or per target
				       thread with opts.per_task */
	int *links;                 /* their BPF links (-1: attached by the event's ioctl) */
	int nev, cev;
	pid_t *task_pids;           /* opts.per_task: the target processes (NULL: per CPU) */
	unsigned ntask_pids;
	bool on_exec;               /* opts.enable_on_exec */
	uint64_t entries, drains, collected;
	struct oc_key *keys; /* scratch for one drain */
	uint64_t *vals;             /* their counts */
	bool no_batch;              /* the kernel refused a batch operation: one by one */
	otables *tables;
	char tables_off[256];
	py_host *py;              /* Python frames (NULL: off), */
	pthread_mutex_t py_mu;      /* ... used by collect and the tables' loader thread */
	int fd_py[2];               /* the generations' Python stacks */
	uint64_t *pyips;            /* scratch for a merged stack: addresses, */
	uint32_t *pynames;          /* ... Python frames' names */
	struct py_stack pyst;
	int fd_tlsets[2], fd_tlsprocs;    /* the C SDK's label blocks, by generation; offsets */
	uint32_t tls_entries;
	tls_seen *tls;                    /* open addressing by tgid, TLS_SEEN slots */
	uint32_t ntls;
	uint64_t tls_processes;
	struct tls_block tlsb;     /* scratch for one block */
	stack_table stk;                  /* the drained generation's stacks (stack_table.h) */
	struct ring_buffer *fresh_rb;     /* the program's ring of new processes (NULL: none) */
	struct ring_buffer *copies_rb;    /* its copied samples (copy_unwalked; NULL: none) */
	strobe_sampler *copy_s;           /* where they go: the collect's sampler */
	uint64_t copies_unwound;
	pid_t *fresh;                     /* read from it: [fresh_at, nfresh) not handed out yet */
	unsigned nfresh, cfresh, fresh_at;
	uint64_t fresh_dropped;           /* read from it, not kept (out of memory, FRESH_MAX) */
	const char *proc_root;
};

/* The slot of tgid in the table of processes looked at (NULL: full, not there). */
static tls_seen *tls_slot(strobe_oncpu *b, uint32_t tgid, bool add)
{
	uint32_t i = (tgid * 2654435761u) & (TLS_SEEN - 1);
	for (uint32_t n = 0; n < TLS_SEEN; n++, i = (i + 1) & (TLS_SEEN - 1)) {
		if (b->tls[i].used && b->tls[i].tgid == tgid)
			return &b->tls[i];
		if (!b->tls[i].used) {
			if (!add)
				return NULL;
			if (b->ntls >= TLS_SEEN * 3 / 4) { /* a long-running host's churn: start over */
				memset(b->tls, 0, TLS_SEEN * sizeof(*b->tls));
				b->ntls = 0;
				i = (tgid * 2654435761u) & (TLS_SEEN - 1);
			}
			b->ntls++;
			b->tls[i] = (tls_seen){.tgid = tgid, .tries = TLS_RETRIES, .used = 1};
			return &b->tls[i];
		}
	}
	return NULL;
}

/* Looks for the SDK's TLS offset in process tgid (again: fresh after an exec), and when found
 * gives it to the program. */
static void tls_look(strobe_oncpu *b, uint32_t tgid, bool again, const char *proc_root)
{
	if (!b->tls)
		return;
	tls_seen *e = tls_slot(b, tgid, true);
	if (!e)
		return;
	if (again)
		e->tries = TLS_RETRIES;
	if (!e->tries)
		return;
	int64_t off = 0;
	strobe_err err = {{0}};
	int rc = tls_labels_offset(proc_root, (pid_t)tgid, &off, &err);
	/* only an SDK that has not published yet (-ENODATA: its constructor not run) is worth
	 * another look; a process without the symbol, or gone, is not */
	e->tries = rc == -ENODATA ? (uint8_t)(e->tries - 1) : 0;
	if (rc == 0) {
		struct tls_proc v = {.tls_offset = off};
		if (bpf_map_update_elem(b->fd_tlsprocs, &tgid, &v, BPF_ANY) == 0 && !e->found) {
			e->found = 1;
			b->tls_processes++;
		}
	}
}

static int on_fresh(void *ctx, void *data, size_t len);
static int on_copy(void *ctx, void *data, size_t len);

static uint32_t pow2_at_least(uint64_t n)
{
	uint32_t p = 1;
	while (p < n && p < (1u << 31))
		p <<= 1;
	return p;
}

static int load(strobe_oncpu *b, const strobe_oncpu_opts *o, uint32_t table_rows,
		const int *share)
{
	b->skel = oncpu_bpf__open();
	if (!b->skel)
		return -errno;
	b->skel->rodata->filter_tgids = o->npids > 0;
	b->skel->rodata->kernel_stacks = o->kernel;
	b->skel->rodata->per_thread = !o->no_tid;
	b->skel->rodata->announce_new = o->fresh;
	b->skel->rodata->ask_at_exec = o->ask_at_exec;
	b->skel->rodata->copy_unwalked = o->copy_unwalked && table_rows > 0;
	b->skel->rodata->copy_all = o->copy_all;
	/* ~220 copies of 18.5 KiB between two collects; a page when off */
	bpf_map__set_max_entries(b->skel->maps.copies, o->copy_unwalked && table_rows > 0
								? COPIES_RING : 4096);
	b->skel->rodata->tables = table_rows > 0 || share;
	bpf_map__set_max_entries(b->skel->maps.urows, table_rows ? table_rows : 1);
	/* a new process's frames by their files, before its mappings are in (the walk's only
	 * program that runs in the sampled task itself, where bpf_find_vma looks) */
	b->skel->rodata->by_file = b->skel->rodata->tables && !o->no_by_file &&
				   agent_bpf_has_find_vma();
	if (b->skel->rodata->by_file) /* 272 bytes a process, preallocated (an LRU map) */
		bpf_map__set_max_entries(b->skel->maps.ufiles, 4096);
	int rc = share ? agent_bpf_share_tables(b->skel->maps.urows, b->skel->maps.umaps,
						b->skel->maps.uwant, b->skel->maps.ureq,
						b->skel->maps.uexec, b->skel->maps.ubins, share)
		       : 0;
	if (rc < 0)
		return rc;
	bpf_map__set_max_entries(b->skel->maps.counts0, b->max_entries);
	bpf_map__set_max_entries(b->skel->maps.counts1, b->max_entries);
	bpf_map__set_max_entries(b->skel->maps.stacks0, b->stack_entries);
	bpf_map__set_max_entries(b->skel->maps.stacks1, b->stack_entries);
	bpf_map__set_max_entries(b->skel->maps.pystacks0, b->stack_entries);
	bpf_map__set_max_entries(b->skel->maps.pystacks1, b->stack_entries);
	bpf_map__set_max_entries(b->skel->maps.tlsets0, b->tls_entries);
	bpf_map__set_max_entries(b->skel->maps.tlsets1, b->tls_entries);
	if (o->npids > 4096)
		bpf_map__set_max_entries(b->skel->maps.targets, o->npids * 2);
	/* the sampling program is attached to the perf events by strobe_oncpu_attach */
	bpf_program__set_autoattach(b->skel->progs.on_sample, false);
	return agent_bpf_load(b->skel->skeleton, &b->progs);
}

#define PY_MERGED STROBE_STACK_FRAMES /* frames of a merged stack (the sampler's cap) */

/* A process whose mappings the tables' loader just read (at its exec, mostly): a Python one
 * gets its frames read from its next sample on, rather than from the next drain on. */
static void py_on_load(void *ctx, uint32_t tgid)
{
	strobe_oncpu *b = ctx;
	pthread_mutex_lock(&b->py_mu);
	py_see(b->py, tgid, true);
	pthread_mutex_unlock(&b->py_mu);
}

/* The Python processes running now, system-wide, before the first sample. */
static void py_preload(strobe_oncpu *b, const char *proc_root)
{
	DIR *d = opendir(proc_root ? proc_root : "/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(e->d_name, &end, 10);
		if (!*end && pid > 0 && pid <= 0x7fffffff)
			py_see(b->py, (uint32_t)pid, false);
	}
	if (d)
		closedir(d);
}

strobe_oncpu *strobe_oncpu_open(const strobe_oncpu_opts *o, strobe_err *err)
{
	if (agent_bpf_start("the eBPF on-CPU program", err) < 0) {
		errno = ENOENT;
		return NULL;
	}
	strobe_oncpu *b = calloc(1, sizeof(*b));
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	b->sync_fd = b->sync_inner = -1;
	b->fork_link = b->exec_link = b->exit_link = -1;
	pthread_mutex_init(&b->py_mu, NULL);
	int ncpu = perf_cpu_count();
	uint64_t want = o->max_entries;
	if (!want) {
		/* at most one new sum per sample; a quarter more for the unevenness of intervals */
		uint64_t per = (uint64_t)(o->freq ? o->freq : 99) * (uint64_t)(ncpu > 0 ? ncpu : 1) *
			       (o->interval_ms ? o->interval_ms : 10000) / 1000;
		want = pow2_at_least(per + per / 4);
		if (want < MIN_ENTRIES)
			want = MIN_ENTRIES;
	}
	if (want > MAX_ENTRIES)
		want = MAX_ENTRIES;
	if (want < 4)
		want = 4;
	b->max_entries = (uint32_t)want;
	b->stack_entries = b->max_entries < MAX_STACK_ENTRIES ? b->max_entries : MAX_STACK_ENTRIES;
	b->tls_entries = b->max_entries < MAX_TLS_ENTRIES ? b->max_entries : MAX_TLS_ENTRIES;
	b->proc_root = o->proc_root;
	if (o->per_task && o->npids) {
		if (!(b->task_pids = malloc(o->npids * sizeof(*b->task_pids)))) {
			strobe_oncpu_close(b);
			errno = ENOMEM;
			return NULL;
		}
		memcpy(b->task_pids, o->pids, o->npids * sizeof(*b->task_pids));
		b->ntask_pids = o->npids;
		b->on_exec = o->enable_on_exec;
	}
	b->tls = o->no_labels ? NULL : calloc(TLS_SEEN, sizeof(*b->tls));
	b->keys = malloc(b->max_entries * sizeof(*b->keys));
	b->vals = malloc(b->max_entries * sizeof(*b->vals));
	int rc = b->keys && b->vals ? load(b, o, o->table_rows, o->share_tables) : -ENOMEM;
	if (rc < 0 && rc != -EPERM && (o->table_rows || o->share_tables)) {
		/* without the table walk's kernel features: frame pointers only */
		snprintf(b->tables_off, sizeof(b->tables_off), "%s%s%s", strerror(-rc),
			 agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		agent_bpf_progs_close(&b->progs);
		oncpu_bpf__destroy(b->skel);
		b->skel = NULL;
		agent_bpf_msg()[0] = 0;
		rc = load(b, o, 0, NULL);
	}
	if (rc == 0) {
		b->sync_inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 4, 1, NULL);
		LIBBPF_OPTS(bpf_map_create_opts, mo, .inner_map_fd = b->sync_inner);
		b->sync_fd = b->sync_inner >= 0
				     ? bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, NULL, 4, 4, 1, &mo)
				     : -1;
		if (b->sync_fd < 0)
			rc = -errno;
	}
	if (rc < 0) {
		strobe_errf(err, rc, "cannot load the eBPF on-CPU program: %s%s%s%s", strerror(-rc),
			    rc == -EPERM ? " (needs root, or CAP_BPF with CAP_PERFMON)" : "",
			    agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		strobe_oncpu_close(b);
		errno = -rc;
		return NULL;
	}
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus > 4096)
		b->ncpus = 0;
	b->fd_counts[0] = bpf_map__fd(b->skel->maps.counts0);
	b->fd_counts[1] = bpf_map__fd(b->skel->maps.counts1);
	b->fd_stacks[0] = bpf_map__fd(b->skel->maps.stacks0);
	b->fd_stacks[1] = bpf_map__fd(b->skel->maps.stacks1);
	b->fd_py[0] = bpf_map__fd(b->skel->maps.pystacks0);
	b->fd_py[1] = bpf_map__fd(b->skel->maps.pystacks1);
	b->fd_tlsets[0] = bpf_map__fd(b->skel->maps.tlsets0);
	b->fd_tlsets[1] = bpf_map__fd(b->skel->maps.tlsets1);
	b->fd_tlsprocs = bpf_map__fd(b->skel->maps.tlsprocs);
	if (o->fresh && !(b->fresh_rb = ring_buffer__new(bpf_map__fd(b->skel->maps.fresh), on_fresh, b,
							  NULL))) {
		int e = errno;
		strobe_errf(err, -e, "cannot load the eBPF on-CPU program: its ring of new processes: %s",
			    strerror(e));
		strobe_oncpu_close(b);
		errno = e;
		return NULL;
	}
	if (o->copy_unwalked && b->skel->rodata->copy_unwalked &&
	    !(b->copies_rb = ring_buffer__new(bpf_map__fd(b->skel->maps.copies), on_copy, b, NULL))) {
		int e = errno;
		strobe_errf(err, -e, "cannot load the eBPF on-CPU program: its ring of copied "
			    "samples: %s", strerror(e));
		strobe_oncpu_close(b);
		errno = e;
		return NULL;
	}
	if (!o->no_python &&
	    (!(b->pyips = malloc(PY_MERGED * sizeof(*b->pyips))) ||
	     !(b->pynames = malloc(PY_MERGED * sizeof(*b->pynames))) ||
	     !(b->py = py_new(bpf_map__fd(b->skel->maps.pycfg), o->proc_root, o->note,
				     o->note_ctx)))) {
		strobe_errf(err, -ENOMEM, "cannot load the eBPF on-CPU program: out of memory");
		strobe_oncpu_close(b);
		errno = ENOMEM;
		return NULL;
	}
	if (o->table_rows && !o->share_tables && !b->tables_off[0] &&
	    !(b->tables = otables_new(bpf_map__fd(b->skel->maps.urows), o->table_rows,
				      bpf_map__fd(b->skel->maps.umaps),
				      bpf_map__fd(b->skel->maps.uwant),
				      bpf_map__fd(b->skel->maps.uexec),
				      bpf_map__fd(b->skel->maps.ubins), o->proc_root))) {
		strobe_errf(err, -ENOMEM, "cannot load the eBPF on-CPU program: out of memory");
		strobe_oncpu_close(b);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < o->npids; i++)
		strobe_oncpu_add_pid(b, o->pids[i]);
	if (b->tables && o->preload_ms > 0 && o->npids == 0)
		otables_preload(b->tables, o->preload_ms);
	if (b->py && o->npids == 0)
		py_preload(b, o->proc_root);
	if (b->tables) {
		int trc = otables_start(b->tables, bpf_map__fd(b->skel->maps.ureq),
					b->py ? py_on_load : NULL, b);
		if (trc < 0) {
			strobe_errf(err, trc, "cannot start the unwind tables' loader: %s",
				    strerror(-trc));
			strobe_oncpu_close(b);
			errno = -trc;
			return NULL;
		}
	}
	return b;
}

int strobe_oncpu_add_pid(strobe_oncpu *b, pid_t pid)
{
	uint32_t tgid = (uint32_t)pid;
	uint8_t one = 1;
	if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.targets), &tgid, &one, BPF_ANY) < 0)
		return -errno;
	if (b->tables) /* its tables before its first sample (children inherit them at fork) */
		otables_load(b->tables, tgid);
	tls_look(b, tgid, true, b->proc_root);
	if (b->py) {
		pthread_mutex_lock(&b->py_mu);
		py_see(b->py, tgid, true);
		pthread_mutex_unlock(&b->py_mu);
	}
	return 0;
}

void strobe_oncpu_exec(strobe_oncpu *b, pid_t pid)
{
	if (b->py)
		py_on_load(b, (uint32_t)pid);
}

/* Attaches the sampling program to one more cpu-clock event. */
static int attach_event(strobe_oncpu *b, struct perf_event_attr *a, pid_t pid, int cpu,
			strobe_err *err)
{
	if (b->nev == b->cev) {
		int nc = b->cev ? b->cev * 2 : 16;
		int *np = realloc(b->pfds, (size_t)nc * sizeof(*np));
		if (np)
			b->pfds = np;
		int *nl = np ? realloc(b->links, (size_t)nc * sizeof(*nl)) : NULL;
		if (!nl)
			return strobe_errf(err, -ENOMEM, "out of memory");
		b->links = nl;
		b->cev = nc;
	}
	int fd = perf_open(a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return fd == -ESRCH ? fd : perf_open_err(err, fd, "the cpu-clock event", pid);
	b->pfds[b->nev] = fd;
	int arc = agent_bpf_attach_perf(agent_bpf_prog_fd(&b->progs, b->skel->progs.on_sample), fd,
					&b->links[b->nev]);
	b->nev++;
	if (arc < 0 && pid == -1)
		return strobe_errf(err, arc, "cannot attach the eBPF on-CPU program to the "
				   "cpu-clock event of CPU %d: %s", cpu, strerror(-arc));
	if (arc < 0)
		return strobe_errf(err, arc, "cannot attach the eBPF on-CPU program to the "
				   "cpu-clock event of thread %d: %s", (int)pid, strerror(-arc));
	return 0;
}

typedef struct task_ctx {
	strobe_oncpu *b;
	struct perf_event_attr *a;
	strobe_err *err;
} task_ctx;

static int attach_task(void *ctx, pid_t tid)
{
	task_ctx *t = ctx;
	return attach_event(t->b, t->a, tid, -1, t->err);
}

int strobe_oncpu_attach(strobe_oncpu *b, unsigned freq, strobe_err *err)
{
	if (freq == 0)
		freq = 99;
	if (freq > 100000)
		freq = 100000;
	if (b->freq == freq)
		return 0;
	strobe_oncpu_detach(b);
	/* Period, not frequency, mode: a fixed period of CPU time is what each sample is worth,
	 * with no adjusting of the period by the kernel from one sample to the next.
	 * Per task (opts.per_task), the event's clock runs only while its thread runs, so a
	 * sample falls every period of the thread's own CPU time, as the perf path's per-thread
	 * events do. Per CPU, it runs on the wall clock, and a workload that runs and sleeps in
	 * a cycle close to the period is sampled at the same phase of its cycle each time: a
	 * thread burning 6 ms of every 10 took all of a recording's samples at 99 Hz and two
	 * others, 30 and 10 % of a CPU, none (agent_jit/record). System-wide there is no other
	 * way (perf -a and bcc's profile share it); for named processes there is. Children and
	 * threads to come inherit the events (and the program with them). */
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 1000000000ull / freq,
		.inherit = b->task_pids != NULL,
		.disabled = b->on_exec,
		.enable_on_exec = b->on_exec,
	};
	int rc = 0;
	agent_bpf_msg()[0] = 0;
	if (b->task_pids) {
		task_ctx t = {.b = b, .a = &a, .err = err};
		for (unsigned i = 0; i < b->ntask_pids && rc == 0; i++) {
			rc = perf_each_thread(b->proc_root, b->task_pids[i], b->on_exec, attach_task,
					      &t);
			if (rc == -ESRCH)
				rc = strobe_errf(err, rc, "no process %d", (int)b->task_pids[i]);
		}
	}
	int ncpu = b->task_pids ? 0 : perf_cpu_count();
	for (int c = 0; c < ncpu && rc == 0; c++)
		if (perf_cpu_online(c))
			rc = attach_event(b, &a, -1, c, err);
	if (rc == 0 && b->fork_link < 0) {
		b->fork_link = agent_bpf_attach_raw_tp(
			agent_bpf_prog_fd(&b->progs, b->skel->progs.on_fork), NULL);
		b->exec_link = b->fork_link < 0 ? b->fork_link
						: agent_bpf_attach_raw_tp(agent_bpf_prog_fd(
							  &b->progs, b->skel->progs.on_exec), NULL);
		int arc = b->fork_link < 0 ? b->fork_link : b->exec_link;
		if (arc < 0)
			rc = strobe_errf(err, arc, "cannot attach the eBPF on-CPU program's fork and "
					 "exec programs: %s", strerror(-arc));
	}
	if (rc == 0 && b->fresh_rb && b->exit_link < 0) {
		b->exit_link = agent_bpf_attach_raw_tp(
			agent_bpf_prog_fd(&b->progs, b->skel->progs.on_exit), NULL);
		if (b->exit_link < 0)
			rc = strobe_errf(err, b->exit_link, "cannot attach the eBPF on-CPU program's "
					 "exit program: %s", strerror(-b->exit_link));
	}
	if (rc < 0) {
		strobe_oncpu_detach(b);
		return rc;
	}
	b->freq = freq;
	b->period_ns = 1000000000ll / freq;
	return 0;
}

void strobe_oncpu_detach(strobe_oncpu *b)
{
	for (int i = 0; i < b->nev; i++) {
		if (b->links[i] >= 0)
			close(b->links[i]);
		close(b->pfds[i]); /* (detaches the program where the ioctl attached it) */
	}
	free(b->links);
	free(b->pfds);
	b->links = NULL;
	b->pfds = NULL;
	b->nev = b->cev = 0;
	b->freq = 0;
	if (b->fork_link >= 0)
		close(b->fork_link);
	if (b->exec_link >= 0)
		close(b->exec_link);
	if (b->exit_link >= 0)
		close(b->exit_link);
	b->fork_link = b->exec_link = b->exit_link = -1;
}

/* One stack taken out of the drained generation's map, kept in b->stk. */
static int keep_stack(void *ctx, const void *key, const void *val)
{
	strobe_oncpu *b = ctx;
	const struct ob_stack *st = val;
	uint64_t id;
	memcpy(&id, key, sizeof(id));
	uint32_t n = st->n < STROBE_OB_MAX_DEPTH ? (uint32_t)st->n : STROBE_OB_MAX_DEPTH;
	return id ? stack_table_add(&b->stk, id, (const uint64_t *)st->ips, n) : 0;
}

/* The addresses of stack id (0: none) into ips; how many. */
static uint32_t stack_of(strobe_oncpu *b, uint64_t id, uint64_t *ips)
{
	uint32_t n;
	const uint64_t *v = stack_table_get(&b->stk, id, &n);
	if (v)
		memcpy(ips, v, n * sizeof(*ips));
	return v ? n : 0;
}

/* The sampler's label set of the block under key id in map fd (0: none, or a block the
 * process made malformed: checked slot by slot, never trusted). */
static uint32_t labels_of(strobe_oncpu *b, strobe_sampler *s, int fd, uint64_t id)
{
	strobe_labelpair l[STROBE_TLS_SLOTS];
	if (bpf_map_lookup_elem(fd, &id, &b->tlsb) < 0)
		return 0;
	int n = tls_labels_decode(b->tlsb.slot, b->tlsb.nslots, l, STROBE_TLS_SLOTS);
	return n > 0 ? sampler_labelset(s, l, (unsigned)n) : 0;
}

int strobe_oncpu_collect(strobe_oncpu *b, strobe_sampler *s)
{
	uint32_t cur = b->skel->bss->generation, zero = 0;
	/* 1, 2: the kernel onto cur + 1, and every program run still on cur finished */
	int64_t taken_ns = strobe_mono_ns();
	__atomic_store_n(&b->skel->bss->generation, cur + 1, __ATOMIC_RELEASE);
	if (bpf_map_update_elem(b->sync_fd, &zero, &b->sync_inner, BPF_ANY) < 0)
		return -errno;
	b->drains++;
	if (b->py) {
		pthread_mutex_lock(&b->py_mu);
		py_drain(b->py);
	}
	/* 3. cur's sums, with no writer left */
	int fc = b->fd_counts[cur & 1], fs = b->fd_stacks[cur & 1];
	uint64_t kips[STROBE_OB_MAX_DEPTH], uips[STROBE_OB_MAX_DEPTH];
	size_t nk = agent_map_take(fc, b->keys, b->vals, sizeof(*b->keys), sizeof(*b->vals),
				   b->max_entries, &b->no_batch);
	/* ... and their stacks, all taken out in a few calls (batches of 64), the sums' ids answered
	 * from them: reading each sum's two stacks with a call each, then clearing the map, was
	 * most of the bpf() calls of a drain. Out of memory: the rest are cleared, their sums kept
	 * without them. */
	if (agent_map_take_each(fs, sizeof(uint64_t), sizeof(struct ob_stack), 64,
				b->stack_entries, keep_stack, b, &b->no_batch) < 0)
		agent_map_clear(fs, b->stack_entries, &b->no_batch);
	sampler_read_sideband(s, taken_ns); /* the mappings the sums can be in (sampler_ext.h) */
	int rc = 0;
	int64_t period = b->period_ns ? b->period_ns : 1000000000ll / 99;
	for (size_t i = 0; i < nk && rc == 0; i++) {
		const struct oc_key *k = &b->keys[i];
		uint64_t n = b->vals[i];
		if (n == 0)
			continue;
		b->entries++;
		b->collected += n;
		uint32_t lset = k->labels ? labels_of(b, s, b->fd_tlsets[cur & 1], k->labels) : 0;
		if (!k->labels && b->tls && !tls_slot(b, k->tgid, false))
			tls_look(b, k->tgid, false, b->proc_root); /* sampled, never looked at */
		uint32_t kn = stack_of(b, k->kstack, kips);
		uint32_t un = stack_of(b, k->ustack, uips);
		if (b->py && k->pystack &&
		    bpf_map_lookup_elem(b->fd_py[cur & 1], &k->pystack, &b->pyst) == 0) {
			/* Python frames in place of the interpreter's evaluation frames */
			uint32_t mn = py_merge(b->py, s, k->tgid, uips, un, &b->pyst, b->pyips,
						      b->pynames, PY_MERGED);
			rc = sampler_add_oncpu_image(s, (int32_t)k->tgid, (int32_t)k->tid, kips,
						     kn, b->pyips, b->pynames, mn, lset,
						     k->pre_exec != 0, (int64_t)n,
						     (int64_t)n * period);
			continue;
		}
		if (b->py) /* a Python process not seen yet (or an exec since) */
			py_see(b->py, k->tgid, false);
		rc = sampler_add_oncpu_image(s, (int32_t)k->tgid, (int32_t)k->tid, kips, kn,
					     uips, NULL, un, lset, k->pre_exec != 0, (int64_t)n,
					     (int64_t)n * period);
	}
	if (b->py)
		pthread_mutex_unlock(&b->py_mu);
	/* the copied samples, cur's and any of cur + 1's already in: their label blocks are in
	 * the generation's tlsets, cleared below for cur only */
	if (b->copies_rb && rc == 0) {
		b->copy_s = s;
		if (ring_buffer__consume(b->copies_rb) < 0)
			rc = -errno;
		b->copy_s = NULL;
	}
	stack_table_reset(&b->stk);
	if (b->py)
		agent_map_clear(b->fd_py[cur & 1], b->stack_entries, &b->no_batch);
	agent_map_clear(b->fd_tlsets[cur & 1], b->tls_entries, &b->no_batch);
	/* processes whose SDK had not published its offset yet: another look */
	for (uint32_t i = 0; b->tls && i < TLS_SEEN; i++)
		if (b->tls[i].used && b->tls[i].tries > 0 && b->tls[i].tries < TLS_RETRIES)
			tls_look(b, b->tls[i].tgid, false, b->proc_root);
	return rc;
}

void strobe_oncpu_get_stats(strobe_oncpu *b, strobe_oncpu_stats *st)
{
	uint64_t c[STROBE_OC_NCOUNTERS];
	agent_bpf_percpu_sum(bpf_map__fd(b->skel->maps.counters), b->ncpus, c, STROBE_OC_NCOUNTERS);
	*st = (strobe_oncpu_stats){
		.samples = c[STROBE_OC_SAMPLES],
		.idle = c[STROBE_OC_IDLE],
		.counts_full = c[STROBE_OC_COUNTS_FULL],
		.stack_errors = c[STROBE_OB_STACK_ERRORS],
		.user = c[STROBE_OC_USER],
		.user_prov = c[STROBE_OC_USER_PROV],
		.table_frames = c[STROBE_OB_TABLE_FRAMES],
		.fp_frames = c[STROBE_OB_FP_FRAMES],
		.table_stops = c[STROBE_OB_TABLE_STOPS],
		.file_rows = c[STROBE_OB_VMA_ROWS],
		.no_maps = c[STROBE_OB_NO_MAPS],
		.entries = b->entries,
		.drains = b->drains,
		.collected = b->collected,
		.max_entries = b->max_entries,
		.stack_entries = b->stack_entries,
		.freq = b->freq,
	};
	st->py_samples = c[STROBE_OC_PY];
	st->py_no_thread = c[STROBE_OC_PY_NO_THREAD];
	st->py_full = c[STROBE_OC_PY_FULL];
	st->tls_samples = c[STROBE_OC_TLS];
	st->tls_torn = c[STROBE_OC_TLS_TORN];
	st->tls_fault = c[STROBE_OC_TLS_FAULT];
	st->tls_full = c[STROBE_OC_TLS_FULL];
	st->tls_processes = b->tls_processes;
	st->fresh_lost = c[STROBE_OC_FRESH_LOST] + b->fresh_dropped;
	st->copied = c[STROBE_OC_COPIED];
	st->copy_full = c[STROBE_OC_COPY_FULL];
	st->copies_unwound = b->copies_unwound;
	st->samples += st->copied; /* (collected counts them when unwound) */
	if (b->py) {
		py_stats ps;
		pthread_mutex_lock(&b->py_mu);
		py_get_stats(b->py, &ps);
		pthread_mutex_unlock(&b->py_mu);
		st->py_processes = ps.processes;
		st->py_unknown = ps.unknown;
		st->py_named = ps.named;
		st->py_unnamed = ps.unnamed;
	}
	if (b->tables)
		otables_get_stats(b->tables, &st->tables);
	memcpy(st->tables_off, b->tables_off, sizeof(st->tables_off));
}

void strobe_oncpu_close(strobe_oncpu *b)
{
	if (!b)
		return;
	otables_free(b->tables); /* first: its thread uses the maps */
	ring_buffer__free(b->fresh_rb); /* (maps the ring) */
	ring_buffer__free(b->copies_rb);
	free(b->fresh);
	if (b->skel)
		strobe_oncpu_detach(b);
	agent_bpf_progs_close(&b->progs);
	oncpu_bpf__destroy(b->skel);
	if (b->sync_fd >= 0)
		close(b->sync_fd);
	if (b->sync_inner >= 0)
		close(b->sync_inner);
	free(b->keys);
	free(b->task_pids);
	free(b->vals);
	stack_table_free(&b->stk);
	free(b->tls);
	py_free(b->py);
	pthread_mutex_destroy(&b->py_mu);
	free(b->pyips);
	free(b->pynames);
	free(b);
}

/* One copied sample (struct oc_copy) into the collect's sampler, unwound there. */
static int on_copy(void *ctx, void *data, size_t len)
{
	strobe_oncpu *b = ctx;
	const struct oc_copy *c = data;
	if (len < sizeof(*c) || !b->copy_s)
		return 0;
	sampler_copy sc = {
		.pid = (int32_t)c->tgid, .tid = b->skel->rodata->per_thread ? (int32_t)c->tid : 0,
		.walk_tid = (int32_t)c->tid, .kips = (const uint64_t *)c->kips,
		.uips = (const uint64_t *)c->uips,
		.nk = c->nk < STROBE_OB_MAX_DEPTH ? c->nk : STROBE_OB_MAX_DEPTH,
		.nu = c->nu < STROBE_OB_MAX_DEPTH ? c->nu : STROBE_OB_MAX_DEPTH,
		.regs = (const uint64_t *)c->regs,
		.stack = c->stack,
		.stack_len = c->stack_len < STROBE_OC_COPY_STACK ? c->stack_len : STROBE_OC_COPY_STACK,
		.stack_size = STROBE_OC_COPY_STACK,
		.cpu_ns = b->period_ns ? b->period_ns : 1000000000ll / 99};
	sc.lset = c->labels ? labels_of(b, b->copy_s, b->fd_tlsets[c->gen & 1], c->labels) : 0;
	sc.pre_exec = c->pre_exec != 0;
	/* the unwinder made at the first copy (none may ever come: its tables cost memory);
	 * without one, the copy is added as walked */
	sampler_unwind_copies(b->copy_s);
	b->copies_unwound++;
	b->collected++;
	return sampler_add_oncpu_copy(b->copy_s, &sc) < 0 ? -ENOMEM : 0;
}

/* One new process from the program's ring, kept until strobe_oncpu_fresh hands it out. */
static int on_fresh(void *ctx, void *data, size_t len)
{
	strobe_oncpu *b = ctx;
	uint32_t tgid;
	if (len < sizeof(tgid))
		return 0;
	memcpy(&tgid, data, sizeof(tgid));
	if (b->nfresh == b->cfresh) {
		unsigned nc = b->cfresh ? b->cfresh * 2 : 256;
		pid_t *nf = nc <= FRESH_MAX ? realloc(b->fresh, nc * sizeof(*nf)) : NULL;
		if (!nf) {
			b->fresh_dropped++; /* (its identity is read at the export instead) */
			return 0;
		}
		b->fresh = nf;
		b->cfresh = nc;
	}
	b->fresh[b->nfresh++] = (pid_t)tgid;
	return 0;
}

unsigned strobe_oncpu_fresh(strobe_oncpu *b, pid_t *out, unsigned cap)
{
	if (!b->fresh_rb)
		return 0;
	if (b->fresh_at == b->nfresh) {
		/* all handed out: what the ring holds now (no system call when it is empty) */
		b->fresh_at = b->nfresh = 0;
		ring_buffer__consume(b->fresh_rb);
	}
	unsigned n = b->nfresh - b->fresh_at < cap ? b->nfresh - b->fresh_at : cap;
	if (n)
		memcpy(out, b->fresh + b->fresh_at, n * sizeof(*out));
	if (b->py && n) { /* its Python frames: looked for again at the next drain */
		pthread_mutex_lock(&b->py_mu);
		for (unsigned i = 0; i < n; i++)
			py_new_image(b->py, (uint32_t)out[i]);
		pthread_mutex_unlock(&b->py_mu);
	}
	b->fresh_at += n;
	return n;
}

int strobe_oncpu_fresh_fd(const strobe_oncpu *b)
{
	return b->fresh_rb ? ring_buffer__epoll_fd(b->fresh_rb) : -1;
}

void strobe_oncpu_fresh_labels(strobe_oncpu *b, const pid_t *pids, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		tls_look(b, (uint32_t)pids[i], true, b->proc_root); /* (again: it may have exec'd) */
}
