// SPDX-License-Identifier: Apache-2.0
/*
 * Loader and reader of the agent's in-kernel off-CPU aggregation (agent/offcpu.bpf.c, embedded
 * as a bpftool skeleton). Once per interval strobe_offcpu_collect drains the kernel's sums into
 * the sampler's aggregate, then rotates the stack maps:
 *
 *   Stack ids taken in generation g live in stack map g % 2. A sum read now was taken in this
 *   generation (cur) or the one before (cur - 1), both still in their maps; a thread off CPU
 *   since an older generation had its stacks copied here (`saved`) before that map was cleared.
 *   After the drain, the stacks of threads still off CPU from cur - 1 are saved, map (cur + 1) % 2
 *   (which is cur - 1's) is cleared, and the kernel is switched to generation cur + 1.
 *
 * Without the rotation the stack maps would only fill (the kernel never frees a stack id) and
 * new stacks would fail once full; clearing a map in use would lose the stacks of threads off
 * CPU right then. What is still lost (a thread that switches back in between the drain and the
 * save, a few microseconds) is counted as stacks_missing.
 *
 * libbpf's messages go to a buffer that ends up in the error returned, never to stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "strobe/clock.h"
#include "strobe/offcpu.h"
#include "bpf_drain.h"
#include "bpf_load.h"
#include "sampler_ext.h"
#include "bpf_msg.h"
#include "offcpu.h"
#include "offcpu.skel.h"
#include "offcpu_tables.h"

#define DEFAULT_ENTRIES 16384
#define MAX_ENTRIES (1u << 20)

typedef struct saved_stack {
	uint64_t id;
	uint32_t gen, n;
	uint64_t *ips;
} saved_stack;

struct strobe_offcpu {
	struct offcpu_bpf *skel;
	agent_bpf_progs progs;       /* its programs' fds (bpf_load.c: loaded by a child) */
	int links[3];                /* sched_switch, fork, exec attached (-1: not) */
	int fd_counts, fd_stacks[2];
	int threads;                 /* the task iterator off_threads' link (see collect; -1) */
	uint32_t max_entries;
	int ncpus;                   /* possible CPUs: the per-CPU counters' width */
	uint64_t sched_lo, sched_hi; /* __schedule's addresses, from /proc/kallsyms (0: unknown) */
	saved_stack *saved;          /* sorted by (gen, id) */
	size_t nsaved;
	uint64_t stacks_missing, entries;
	struct ob_key *keys;  /* scratch for one drain */
	struct ob_val *vals;  /* the values of keys, taken out in batches */
	bool no_batch;               /* the kernel refused a batch operation: one by one */
	otables *tables;      /* the table walk's mappings and rows (NULL: off) */
	char tables_off[256];        /* why the table walk did not load (empty: it did) */
};

/* libbpf's last warning, for the error message (libraries never print). */

/* Where __schedule is: kernel stacks are cut to start there (what is above it is the
 * tracepoint's machinery). Without privilege kallsyms shows zeros, and nothing is cut. */
static void find_schedule(strobe_offcpu *b)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		return;
	char line[512];
	bool next = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char t, name[256];
		if (sscanf(line, "%llx %c %255s", &a, &t, name) != 3)
			continue;
		if (next) {
			if (a > b->sched_lo)
				b->sched_hi = a;
			break;
		}
		if (strcmp(name, "__schedule") == 0 && a) {
			b->sched_lo = a;
			next = true;
		}
	}
	fclose(f);
	if (!b->sched_hi)
		b->sched_lo = 0;
}

/* Drops the kernel frames above __schedule (when __schedule is in the stack). */
static uint32_t cut_to_schedule(const strobe_offcpu *b, uint64_t *ips, uint32_t n)
{
	if (!b->sched_lo)
		return n;
	for (uint32_t i = 0; i < n && i < 8; i++) {
		if (ips[i] >= b->sched_lo && ips[i] < b->sched_hi) {
			if (i)
				memmove(ips, ips + i, (n - i) * sizeof(*ips));
			return n - i;
		}
	}
	return n;
}

/* After the tables' loader wrote the mappings of process tgid (on its thread): the program
 * rewalk over that process's threads (see offcpu.bpf.c), as an iterator for its pid alone. */
static void rewalk(void *ctx, uint32_t tgid)
{
	strobe_offcpu *b = ctx;
	union bpf_iter_link_info li;
	memset(&li, 0, sizeof(li));
	li.task.pid = tgid;
	LIBBPF_OPTS(bpf_link_create_opts, lo, .iter_info = &li, .iter_info_len = sizeof(li));
	int l = bpf_link_create(agent_bpf_prog_fd(&b->progs, b->skel->progs.rewalk), 0,
				BPF_TRACE_ITER, &lo);
	if (l < 0)
		return;
	int fd = bpf_iter_create(l);
	if (fd >= 0) {
		char buf[64];
		while (read(fd, buf, sizeof(buf)) > 0) /* it writes nothing: runs to the end */
			;
		close(fd);
	}
	close(l);
}

/* Opens and loads the programs, with the table walk when table_rows > 0. 0 or -errno. */
static int load(strobe_offcpu *b, const strobe_offcpu_opts *o, uint32_t table_rows)
{
	uint32_t n = b->max_entries;
	b->skel = offcpu_bpf__open();
	if (!b->skel)
		return -errno;
	b->skel->rodata->min_block_ns = o->min_block_ns > 0 ? (uint64_t)o->min_block_ns : 0;
	b->skel->rodata->filter_tgids = o->npids > 0;
	b->skel->rodata->kernel_stacks = o->kernel;
	b->skel->rodata->tables = table_rows > 0;
	/* the rows' map is an array, allocated whole at load */
	bpf_map__set_max_entries(b->skel->maps.urows, table_rows ? table_rows : 1);
	bpf_map__set_max_entries(b->skel->maps.counts, n);
	bpf_map__set_max_entries(b->skel->maps.stacks0, n / 2);
	bpf_map__set_max_entries(b->skel->maps.stacks1, n / 2);
	if (o->npids > 4096)
		bpf_map__set_max_entries(b->skel->maps.targets, o->npids * 2);
	/* the iterators are run by collect and the tables' loader, not attached */
	bpf_program__set_autoattach(b->skel->progs.off_threads, false);
	bpf_program__set_autoattach(b->skel->progs.rewalk, false);
	if (!table_rows)
		bpf_program__set_autoload(b->skel->progs.rewalk, false);
	return agent_bpf_load(b->skel->skeleton, &b->progs);
}

strobe_offcpu *strobe_offcpu_open(const strobe_offcpu_opts *o, strobe_err *err)
{
	if (agent_bpf_start("the eBPF off-CPU programs", err) < 0) {
		errno = ENOENT;
		return NULL;
	}
	strobe_offcpu *b = calloc(1, sizeof(*b));
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	uint32_t n = o->max_entries ? o->max_entries : DEFAULT_ENTRIES;
	if (n > MAX_ENTRIES)
		n = MAX_ENTRIES;
	if (n < 64)
		n = 64;
	b->max_entries = n;
	b->threads = b->links[0] = b->links[1] = b->links[2] = -1;
	b->keys = malloc(n * sizeof(*b->keys));
	b->vals = malloc(n * sizeof(*b->vals));
	int rc = b->keys && b->vals ? load(b, o, o->table_rows) : -ENOMEM;
	if (rc < 0 && rc != -EPERM && o->table_rows) {
		/* The table walk needs more of the kernel than the rest (bpf_loop, sleepable task
		 * iterators, bpf_copy_from_user_task): without it, frame pointers only. */
		snprintf(b->tables_off, sizeof(b->tables_off), "%s%s%s", strerror(-rc),
			 agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		agent_bpf_progs_close(&b->progs);
		offcpu_bpf__destroy(b->skel);
		b->skel = NULL;
		agent_bpf_msg()[0] = 0;
		rc = load(b, o, 0);
	}
	if (rc == 0) {
		b->threads = bpf_link_create(agent_bpf_prog_fd(&b->progs, b->skel->progs.off_threads),
					     0, BPF_TRACE_ITER, NULL);
		if (b->threads < 0)
			rc = -errno;
	}
	if (rc < 0) {
		strobe_errf(err, rc, "cannot load the eBPF off-CPU programs: %s%s%s%s", strerror(-rc),
			    rc == -EPERM ? " (needs root, or CAP_BPF with CAP_PERFMON)" : "",
			    agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		strobe_offcpu_close(b);
		errno = -rc;
		return NULL;
	}
	find_schedule(b);
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus > 4096) /* the counters are read into a stack array */
		b->ncpus = 0;
	b->fd_counts = bpf_map__fd(b->skel->maps.counts);
	b->fd_stacks[0] = bpf_map__fd(b->skel->maps.stacks0);
	b->fd_stacks[1] = bpf_map__fd(b->skel->maps.stacks1);
	int fd_targets = bpf_map__fd(b->skel->maps.targets);
	if (o->table_rows && !b->tables_off[0] &&
	    !(b->tables = otables_new(bpf_map__fd(b->skel->maps.urows), o->table_rows,
					     bpf_map__fd(b->skel->maps.umaps),
					     bpf_map__fd(b->skel->maps.uwant),
					     bpf_map__fd(b->skel->maps.uexec),
					     bpf_map__fd(b->skel->maps.ubins), o->proc_root))) {
		strobe_errf(err, -ENOMEM, "cannot load the eBPF off-CPU programs: out of memory");
		strobe_offcpu_close(b);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < o->npids; i++) {
		uint32_t tgid = (uint32_t)o->pids[i];
		uint8_t one = 1;
		bpf_map_update_elem(fd_targets, &tgid, &one, BPF_ANY);
		/* their tables before their first switch (children inherit them at fork) */
		if (b->tables)
			otables_load(b->tables, tgid);
	}
	if (b->tables) {
		int trc = otables_start(b->tables, bpf_map__fd(b->skel->maps.ureq), rewalk,
					       b);
		if (trc < 0) {
			strobe_errf(err, trc, "cannot start the unwind tables' loader: %s",
				    strerror(-trc));
			strobe_offcpu_close(b);
			errno = -trc;
			return NULL;
		}
	}
	return b;
}

int strobe_offcpu_attach(strobe_offcpu *b, strobe_err *err)
{
	if (b->links[0] >= 0)
		return 0;
	const struct bpf_program *p[3] = {b->skel->progs.on_switch, b->skel->progs.on_fork,
					  b->skel->progs.on_exec};
	for (int i = 0; i < 3; i++) {
		b->links[i] = agent_bpf_attach_raw_tp(agent_bpf_prog_fd(&b->progs, p[i]), NULL);
		if (b->links[i] < 0) {
			int rc = b->links[i];
			strobe_offcpu_detach(b);
			return strobe_errf(err, rc, "cannot attach the eBPF off-CPU programs to "
					   "sched_switch: %s", strerror(-rc));
		}
	}
	return 0;
}

void strobe_offcpu_detach(strobe_offcpu *b)
{
	for (int i = 0; i < 3; i++) {
		if (b->links[i] >= 0)
			close(b->links[i]);
		b->links[i] = -1;
	}
}



static void free_saved(saved_stack *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].ips);
	free(v);
}

static int saved_cmp(const void *a, const void *b)
{
	const saved_stack *x = a, *y = b;
	if (x->gen != y->gen)
		return x->gen < y->gen ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static const saved_stack *saved_find(const strobe_offcpu *b, uint32_t gen, uint64_t id)
{
	saved_stack k = {.gen = gen, .id = id};
	return b->nsaved ? bsearch(&k, b->saved, b->nsaved, sizeof(k), saved_cmp) : NULL;
}

/* The addresses of stack `id` of generation gen into ips (STROBE_OB_MAX_DEPTH); the count. */
static uint32_t stack_of(strobe_offcpu *b, uint32_t cur, uint32_t gen, uint64_t id, uint64_t *ips)
{
	if (id == 0)
		return 0;
	if (gen == cur || gen == cur - 1) {
		struct ob_stack st;
		if (bpf_map_lookup_elem(b->fd_stacks[gen & 1], &id, &st) < 0) {
			b->stacks_missing++;
			return 0;
		}
		uint32_t n = st.n < STROBE_OB_MAX_DEPTH ? (uint32_t)st.n : STROBE_OB_MAX_DEPTH;
		memcpy(ips, st.ips, n * sizeof(*ips));
		return n;
	}
	const saved_stack *s = saved_find(b, gen, id);
	if (!s) {
		b->stacks_missing++;
		return 0;
	}
	memcpy(ips, s->ips, s->n * sizeof(*ips));
	return s->n;
}

/* Adds one saved stack (from the map, or carried over from the old table). */
static int save_one(strobe_offcpu *b, saved_stack **v, size_t *n, size_t *cap, uint32_t cur,
		    uint32_t gen, uint64_t id)
{
	if (id == 0)
		return 0;
	for (size_t i = 0; i < *n; i++) /* few: threads off CPU for a whole interval */
		if ((*v)[i].gen == gen && (*v)[i].id == id)
			return 0;
	uint64_t ips[STROBE_OB_MAX_DEPTH] = {0};
	uint32_t cnt = stack_of(b, cur, gen, id, ips);
	if (!cnt)
		return 0;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		saved_stack *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	uint64_t *copy = malloc(cnt * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, ips, cnt * sizeof(*copy));
	(*v)[(*n)++] = (saved_stack){id, gen, cnt, copy};
	return 0;
}

int strobe_offcpu_collect(strobe_offcpu *b, strobe_sampler *s)
{
	uint32_t cur = b->skel->bss->generation;
	uint64_t kips[STROBE_OB_MAX_DEPTH], uips[STROBE_OB_MAX_DEPTH];
	int rc = 0;

	/* 1. The sums, each taken out with its value at once, so nothing the kernel adds
	 * meanwhile is lost (in batches: bpf_drain.h). */
	int64_t taken_ns = strobe_mono_ns();
	size_t nk = agent_map_take(b->fd_counts, b->keys, b->vals, sizeof(*b->keys),
				   sizeof(*b->vals), b->max_entries, &b->no_batch);
	sampler_read_sideband(s, taken_ns); /* the mappings the sums can be in (sampler_ext.h) */
	for (size_t i = 0; i < nk && rc == 0; i++) {
		struct ob_key *k = &b->keys[i];
		struct ob_val v = b->vals[i];
		b->entries++;
		uint32_t kn = cut_to_schedule(b, kips, stack_of(b, cur, k->gen, k->kstack, kips));
		uint32_t un = stack_of(b, cur, k->gen, k->ustack, uips);
		rc = sampler_add_offcpu(s, (int32_t)k->tgid, (int32_t)k->tid, kips, kn, uips, un,
					       (int64_t)v.off_ns, (int64_t)v.blocked_ns,
					       (int64_t)v.switches);
	}

	/* 2. The stacks of threads off CPU since cur - 1 or before, which a later drain needs:
	 * the switch-out records of all threads off CPU, from the task iterator. */
	saved_stack *nv = NULL;
	size_t nn = 0, cap = 0;
	int it = bpf_iter_create(b->threads);
	if (it < 0)
		rc = -errno;
	struct ob_start recs[256];
	size_t have = 0; /* bytes in recs */
	while (rc == 0) {
		ssize_t got = read(it, (char *)recs + have, sizeof(recs) - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)got;
		size_t n = have / sizeof(recs[0]);
		for (size_t i = 0; i < n && rc == 0; i++) {
			const struct ob_start *st = &recs[i];
			if (st->gen == cur)
				continue;
			rc = save_one(b, &nv, &nn, &cap, cur, st->gen, st->kstack);
			if (rc == 0)
				rc = save_one(b, &nv, &nn, &cap, cur, st->gen, st->ustack);
		}
		/* bpf_seq_write writes whole records, but a read may end inside one */
		memmove(recs, (char *)recs + n * sizeof(recs[0]), have - n * sizeof(recs[0]));
		have -= n * sizeof(recs[0]);
		if (got == 0)
			break;
	}
	if (it >= 0)
		close(it);
	if (rc < 0) {
		free_saved(nv, nn);
		return rc;
	}
	if (nn) /* (qsort of NULL, 0 is undefined) */
		qsort(nv, nn, sizeof(*nv), saved_cmp);
	free_saved(b->saved, b->nsaved);
	b->saved = nv;
	b->nsaved = nn;

	/* 3. Clear the map of cur - 1, which cur + 1 uses, then switch the kernel to it. */
	agent_map_clear(b->fd_stacks[(cur + 1) & 1], b->max_entries, &b->no_batch);
	__atomic_store_n(&b->skel->bss->generation, cur + 1, __ATOMIC_RELEASE);
	return 0;
}

void strobe_offcpu_get_stats(strobe_offcpu *b, strobe_offcpu_stats *st)
{
	uint64_t c[STROBE_OB_NCOUNTERS];
	agent_bpf_percpu_sum(bpf_map__fd(b->skel->maps.counters), b->ncpus, c, STROBE_OB_NCOUNTERS);
	*st = (strobe_offcpu_stats){
		.intervals = c[STROBE_OB_INTERVALS],
		.short_blocks = c[STROBE_OB_SHORT],
		.starts_full = c[STROBE_OB_STARTS_FULL],
		.counts_full = c[STROBE_OB_COUNTS_FULL],
		.stack_errors = c[STROBE_OB_STACK_ERRORS],
		.kstacks_reused = c[STROBE_OB_KCACHE_HITS],
		.ustacks_reused = c[STROBE_OB_UCACHE_HITS],
		.stacks_missing = b->stacks_missing,
		.entries = b->entries,
		.table_frames = c[STROBE_OB_TABLE_FRAMES],
		.fp_frames = c[STROBE_OB_FP_FRAMES],
		.table_stops = c[STROBE_OB_TABLE_STOPS],
		.no_maps = c[STROBE_OB_NO_MAPS],
		.rewalks = c[STROBE_OB_REWALKS],
		.user_ns = c[STROBE_OB_USER_NS],
		.prov_ns = c[STROBE_OB_PROV_NS],
	};
	if (b->tables)
		otables_get_stats(b->tables, &st->tables);
	memcpy(st->tables_off, b->tables_off, sizeof(st->tables_off));
}

int strobe_offcpu_table_maps(const strobe_offcpu *b, int fds[STROBE_TABLE_MAPS])
{
	if (!b->tables)
		return -ENOENT;
	fds[0] = bpf_map__fd(b->skel->maps.urows);
	fds[1] = bpf_map__fd(b->skel->maps.umaps);
	fds[2] = bpf_map__fd(b->skel->maps.uwant);
	fds[3] = bpf_map__fd(b->skel->maps.ureq);
	fds[4] = bpf_map__fd(b->skel->maps.uexec);
	fds[5] = bpf_map__fd(b->skel->maps.ubins);
	return 0;
}

void strobe_offcpu_close(strobe_offcpu *b)
{
	if (!b)
		return;
	otables_free(b->tables); /* first: its thread uses the maps and programs */
	strobe_offcpu_detach(b);
	if (b->threads >= 0)
		close(b->threads);
	agent_bpf_progs_close(&b->progs);
	offcpu_bpf__destroy(b->skel);
	free_saved(b->saved, b->nsaved);
	free(b->keys);
	free(b->vals);
	free(b);
}
