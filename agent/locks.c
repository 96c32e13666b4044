// SPDX-License-Identifier: Apache-2.0
/*
 * Loader and reader of the futex-wait program (agent/locks.bpf.c, embedded as a bpftool
 * skeleton), for the agent's --locks and `strobe record -e lock`. Once per interval (or round)
 * strobe_locks_collect drains the kernel's sums into the sampler's aggregate, then rotates the
 * stack maps: a sum and its stack are written together at the wait's end in generation g
 * (stack map g % 2), so a drain finds the stacks of its sums in the maps of the generation now
 * (cur) and, for a program that read the generation just before the last flip, of cur - 1; after
 * the drain the map of cur - 1 is cleared and the kernel switched to cur + 1.
 *
 * The table walk (unwind tables in the kernel) has its own loader thread over this object's
 * maps (offcpu_tables.c), as the off-CPU program's does over its own. libbpf's messages go to
 * the error returned, never to stderr.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "bpf_drain.h"
#include "bpf_load.h"
#include "bpf_msg.h"
#include "locks.h"
#include "locks.skel.h"
#include "offcpu_tables.h"
#include "sampler_ext.h"
#include "strobe/clock.h"
#include "strobe/locks.h"

#define DEFAULT_ENTRIES 16384
#define MAX_ENTRIES (1u << 20)

struct strobe_locks {
	struct locks_bpf *skel;
	int fd_counts, fd_stacks[2], fd_targets;
	uint32_t max_entries;
	int ncpus;
	uint64_t stacks_missing, entries;
	struct lk_key *keys; /* scratch for one drain */
	struct lk_val *vals; /* their values */
	bool no_batch;              /* the kernel refused a batch operation: one by one */
	agent_bpf_progs progs;         /* its programs' fds (bpf_load.c: loaded by a child) */
	int tp_pfd[6], tp_link[6];     /* futex, futex_waitv, futex_wait (enter, exit): the
					* last four where the kernel has them (-1: not attached) */
	int raw_link[2];               /* fork, exec (-1: not attached) */
	otables *tables;
	char tables_off[256];
};


static int load(strobe_locks *l, const strobe_locks_opts *o, uint32_t table_rows)
{
	uint32_t n = l->max_entries;
	l->skel = locks_bpf__open();
	if (!l->skel)
		return -errno;
	l->skel->rodata->min_wait_ns = o->min_wait_ns > 0 ? (uint64_t)o->min_wait_ns : 0;
	l->skel->rodata->filter_tgids = o->npids > 0;
	l->skel->rodata->tables = table_rows > 0 || o->share_tables;
	bpf_map__set_max_entries(l->skel->maps.urows, table_rows ? table_rows : 1);
	int rc = o->share_tables ? agent_bpf_share_tables(l->skel->maps.urows, l->skel->maps.umaps,
							  l->skel->maps.uwant, l->skel->maps.ureq,
							  l->skel->maps.uexec, l->skel->maps.ubins,
							  o->share_tables)
				 : 0;
	if (rc < 0)
		return rc;
	bpf_map__set_max_entries(l->skel->maps.counts, n);
	bpf_map__set_max_entries(l->skel->maps.stacks0, n / 2);
	bpf_map__set_max_entries(l->skel->maps.stacks1, n / 2);
	if (o->npids > 4096)
		bpf_map__set_max_entries(l->skel->maps.targets, o->npids * 2);
	/* the futex2 calls' tracepoints are attached only where the kernel has them */
	struct bpf_program *opt[] = {l->skel->progs.futex_waitv_enter,
				     l->skel->progs.futex_waitv_exit,
				     l->skel->progs.futex_wait_enter,
				     l->skel->progs.futex_wait_exit};
	for (size_t i = 0; i < 4; i++)
		bpf_program__set_autoattach(opt[i], false);
	return agent_bpf_load(l->skel->skeleton, &l->progs);
}

strobe_locks *strobe_locks_open(const strobe_locks_opts *o, strobe_err *err)
{
	if (agent_bpf_start("the eBPF futex-wait program", err) < 0) {
		errno = ENOENT;
		return NULL;
	}
	strobe_locks *l = calloc(1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	uint32_t n = o->max_entries ? o->max_entries : DEFAULT_ENTRIES;
	if (n > MAX_ENTRIES)
		n = MAX_ENTRIES;
	if (n < 64)
		n = 64;
	l->max_entries = n;
	for (int i = 0; i < 6; i++)
		l->tp_pfd[i] = l->tp_link[i] = -1;
	l->raw_link[0] = l->raw_link[1] = -1;
	l->keys = malloc(n * sizeof(*l->keys));
	l->vals = malloc(n * sizeof(*l->vals));
	int rc = l->keys && l->vals ? load(l, o, o->table_rows) : -ENOMEM;
	if (rc < 0 && rc != -EPERM && (o->table_rows || o->share_tables)) {
		/* without the table walk's kernel features: frame pointers only */
		snprintf(l->tables_off, sizeof(l->tables_off), "%s%s%s", strerror(-rc),
			 agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		agent_bpf_progs_close(&l->progs);
		locks_bpf__destroy(l->skel);
		l->skel = NULL;
		agent_bpf_msg()[0] = 0;
		strobe_locks_opts fp = *o;
		fp.share_tables = NULL;
		rc = load(l, &fp, 0);
	}
	if (rc < 0) {
		strobe_errf(err, rc, "cannot load the eBPF futex-wait program: %s%s%s%s",
			    strerror(-rc),
			    rc == -EPERM ? " (needs root, or CAP_BPF with CAP_PERFMON)" : "",
			    agent_bpf_msg()[0] ? ": " : "", agent_bpf_msg());
		strobe_locks_close(l);
		errno = -rc;
		return NULL;
	}
	l->ncpus = libbpf_num_possible_cpus();
	if (l->ncpus > 4096)
		l->ncpus = 0;
	l->fd_counts = bpf_map__fd(l->skel->maps.counts);
	l->fd_stacks[0] = bpf_map__fd(l->skel->maps.stacks0);
	l->fd_stacks[1] = bpf_map__fd(l->skel->maps.stacks1);
	l->fd_targets = bpf_map__fd(l->skel->maps.targets);
	if (o->table_rows && !o->share_tables && !l->tables_off[0] &&
	    !(l->tables = otables_new(bpf_map__fd(l->skel->maps.urows), o->table_rows,
					     bpf_map__fd(l->skel->maps.umaps),
					     bpf_map__fd(l->skel->maps.uwant),
					     bpf_map__fd(l->skel->maps.uexec),
					     bpf_map__fd(l->skel->maps.ubins), o->proc_root))) {
		strobe_errf(err, -ENOMEM, "cannot load the eBPF futex-wait program: out of memory");
		strobe_locks_close(l);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < o->npids; i++)
		strobe_locks_add_pid(l, o->pids[i]);
	if (l->tables && o->preload_ms > 0 && o->npids == 0)
		otables_preload(l->tables, o->preload_ms);
	if (l->tables) {
		int trc = otables_start(l->tables, bpf_map__fd(l->skel->maps.ureq), NULL, NULL);
		if (trc < 0) {
			strobe_errf(err, trc, "cannot start the unwind tables' loader: %s",
				    strerror(-trc));
			strobe_locks_close(l);
			errno = -trc;
			return NULL;
		}
	}
	return l;
}

int strobe_locks_add_pid(strobe_locks *l, pid_t pid)
{
	uint32_t tgid = (uint32_t)pid;
	uint8_t one = 1;
	if (bpf_map_update_elem(l->fd_targets, &tgid, &one, BPF_ANY) < 0)
		return -errno;
	/* its tables before its first wait (children inherit them at fork) */
	if (l->tables)
		otables_load(l->tables, tgid);
	return 0;
}

int strobe_locks_attach(strobe_locks *l, strobe_err *err)
{
	if (l->tp_pfd[0] >= 0)
		return 0;
	/* exit before entry in each pair: an entry without its exit would leave waits open */
	static const char *const tp[6] = {"sys_exit_futex",       "sys_enter_futex",
					  "sys_exit_futex_waitv", "sys_enter_futex_waitv",
					  "sys_exit_futex_wait",  "sys_enter_futex_wait"};
	const struct bpf_program *p[6] = {
		l->skel->progs.futex_exit,       l->skel->progs.futex_enter,
		l->skel->progs.futex_waitv_exit, l->skel->progs.futex_waitv_enter,
		l->skel->progs.futex_wait_exit,  l->skel->progs.futex_wait_enter};
	int rc = 0;
	for (int i = 0; i < 2 && rc == 0; i++)
		rc = agent_bpf_attach_tracepoint(agent_bpf_prog_fd(&l->progs, p[i]), "syscalls",
						 tp[i], &l->tp_pfd[i], &l->tp_link[i]);
	for (int i = 0; i < 2 && rc == 0; i++) {
		const struct bpf_program *r = i ? l->skel->progs.on_exec : l->skel->progs.on_fork;
		l->raw_link[i] = agent_bpf_attach_raw_tp(agent_bpf_prog_fd(&l->progs, r), NULL);
		if (l->raw_link[i] < 0)
			rc = l->raw_link[i];
	}
	if (rc < 0) {
		strobe_locks_detach(l);
		return strobe_errf(err, rc, "cannot attach the eBPF futex-wait program to "
				   "syscalls:sys_enter_futex: %s", strerror(-rc));
	}
	/* the futex2 calls where the kernel has them (a kernel without them is fine) */
	for (int i = 2; i < 6; i += 2) {
		if (agent_bpf_attach_tracepoint(agent_bpf_prog_fd(&l->progs, p[i]), "syscalls",
						tp[i], &l->tp_pfd[i], &l->tp_link[i]) == 0)
			agent_bpf_attach_tracepoint(agent_bpf_prog_fd(&l->progs, p[i + 1]),
						    "syscalls", tp[i + 1], &l->tp_pfd[i + 1],
						    &l->tp_link[i + 1]);
	}
	return 0;
}

void strobe_locks_detach(strobe_locks *l)
{
	for (int i = 0; i < 6; i++) {
		if (l->tp_link[i] >= 0)
			close(l->tp_link[i]);
		if (l->tp_pfd[i] >= 0)
			close(l->tp_pfd[i]);
		l->tp_link[i] = l->tp_pfd[i] = -1;
	}
	for (int i = 0; i < 2; i++) {
		if (l->raw_link[i] >= 0)
			close(l->raw_link[i]);
		l->raw_link[i] = -1;
	}
}

int strobe_locks_collect(strobe_locks *l, strobe_sampler *s)
{
	uint32_t cur = l->skel->bss->generation;
	uint64_t uips[STROBE_OB_MAX_DEPTH];
	int rc = 0;
	/* each sum taken out with its value at once, so nothing the kernel adds meanwhile is
	 * lost (in batches: bpf_drain.h) */
	int64_t taken_ns = strobe_mono_ns();
	size_t nk = agent_map_take(l->fd_counts, l->keys, l->vals, sizeof(*l->keys),
				   sizeof(*l->vals), l->max_entries, &l->no_batch);
	sampler_read_sideband(s, taken_ns); /* the mappings the sums can be in (sampler_ext.h) */
	for (size_t i = 0; i < nk && rc == 0; i++) {
		struct lk_key *k = &l->keys[i];
		struct lk_val v = l->vals[i];
		l->entries++;
		uint32_t un = 0;
		if (k->ustack && (k->gen == cur || k->gen == cur - 1)) {
			struct ob_stack st;
			if (bpf_map_lookup_elem(l->fd_stacks[k->gen & 1], &k->ustack, &st) == 0) {
				un = st.n < STROBE_OB_MAX_DEPTH ? (uint32_t)st.n : STROBE_OB_MAX_DEPTH;
				memcpy(uips, st.ips, un * sizeof(*uips));
			}
		}
		if (k->ustack && !un)
			l->stacks_missing++;
		rc = sampler_add_lock(s, (int32_t)k->tgid, (int32_t)k->tid, k->uaddr, uips, un,
					     (int64_t)v.waits, (int64_t)v.delay_ns);
	}
	/* clear the map of cur - 1, which cur + 1 uses, then switch the kernel to it */
	agent_map_clear(l->fd_stacks[(cur + 1) & 1], l->max_entries, &l->no_batch);
	__atomic_store_n(&l->skel->bss->generation, cur + 1, __ATOMIC_RELEASE);
	return rc;
}

void strobe_locks_get_stats(strobe_locks *l, strobe_locks_stats *st)
{
	uint64_t c[STROBE_LK_NCOUNTERS];
	agent_bpf_percpu_sum(bpf_map__fd(l->skel->maps.counters), l->ncpus, c, STROBE_LK_NCOUNTERS);
	*st = (strobe_locks_stats){
		.waits = c[STROBE_LK_WAITS],
		.not_slept = c[STROBE_LK_NOT_SLEPT],
		.short_waits = c[STROBE_LK_SHORT],
		.starts_full = c[STROBE_LK_STARTS_FULL],
		.counts_full = c[STROBE_LK_COUNTS_FULL],
		.stack_errors = c[STROBE_OB_STACK_ERRORS],
		.stacks_missing = l->stacks_missing,
		.entries = l->entries,
		.table_frames = c[STROBE_OB_TABLE_FRAMES],
		.fp_frames = c[STROBE_OB_FP_FRAMES],
		.no_maps = c[STROBE_OB_NO_MAPS],
	};
	memcpy(st->tables_off, l->tables_off, sizeof(st->tables_off));
	if (l->tables) {
		strobe_otables_stats ts;
		otables_get_stats(l->tables, &ts);
		st->procs_loaded = ts.procs_loaded;
		st->table_waits = ts.waits;
		st->table_wait_ns_sum = ts.wait_ns_sum;
		st->table_wait_ns_max = ts.wait_ns_max;
	}
}

void strobe_locks_close(strobe_locks *l)
{
	if (!l)
		return;
	otables_free(l->tables); /* first: its thread uses the maps */
	strobe_locks_detach(l);
	agent_bpf_progs_close(&l->progs);
	locks_bpf__destroy(l->skel);
	free(l->keys);
	free(l->vals);
	free(l);
}
