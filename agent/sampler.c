// SPDX-License-Identifier: Apache-2.0
/*
 * The sampler (see strobe/sampler.h): the wiring of its stages. It opens the perf events for a
 * set of targets (sampler_events.c), reads the per-CPU rings, orders the records by time
 * (record_order.c), decodes them (record_decode.c), keeps the process tracker current
 * (proc_table.c), resolves and unwinds stacks (stack_resolve.c, unwind.c), follows each thread's
 * off-CPU intervals (offcpu_state.c) and aggregates stacks with their on-CPU and off-CPU values
 * (sampler_agg.c); sampler_profile.c turns the aggregate into a profile.
 *
 * Ordering: each round takes every ring's head at once, reads every ring up to it, then
 * processes, in time order, only the records older than the round's start minus ORDER_NS: any
 * such record was in the rings when the heads were taken, so nothing older can still be waiting
 * in another CPU's ring (perf's "finished round" rule, with one moment for all rings). This is
 * what lets a sample be resolved against the mappings its process had then. With unwinding, a
 * sample's user stack is walked as soon as it is read, unless a side-band record that changes
 * its process's code (an mmap, an exec, the fork that made it) is held too, or its leaf is in
 * no mapping known yet: then it waits, with its stack copy (take_unwound). Only the walk moves
 * earlier; the frames are named at the sample's turn as before.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "sampler_events.h"
#include "sampler_state.h"

#define ORDER_NS 50000000 /* records this recent wait for the next round, in case some older one
			     is still being written */
#define MAX_PENDING (256u << 20) /* bytes of held records before processing is forced */

/* ---- the sampler's state, opening and closing ------------------------------------------------ */

/* The state every sampler has, events or not. */
static strobe_sampler *sampler_alloc(const strobe_sampler_opts *o)
{
	strobe_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->o = *o;
	if (!s->o.freq)
		s->o.freq = 99;
	if (s->o.freq > 100000)
		s->o.freq = 100000;
	if (!s->o.max_stack || s->o.max_stack > STROBE_STACK_DEPTH)
		s->o.max_stack = STROBE_STACK_DEPTH;
	s->period_ns = 1000000000 / s->o.freq;
	s->frames.fixed = sizeof(sampler_frame_key);
#ifndef __x86_64__
	if (s->o.call_graph == STROBE_CG_AUTO)
		s->o.call_graph = STROBE_CG_FP; /* the register layout is x86-64's only */
#endif
	agg_init(&s->agg);
	s->off = (offcpu_state){.tr = &s->tr, .agg = &s->agg, .st = &s->st,
				.min_block_ns = s->o.min_block_ns};
	sampler_events_init(&s->ev, &s->o);
	s->ev.clock_period_ns = (uint64_t)s->period_ns;
	s->dec = (rec_decoder){.kinds = &s->ev.kinds, .sample_type = s->ev.sample_type};
	int rc = tracker_init(&s->tr);
	if (o->proc_root)
		s->tr.proc_root = o->proc_root;
	uint32_t fid;
	sampler_frame_key none = {0};
	if (rc == 0)
		rc = strobe_itab_intern(&s->frames, &none, sizeof(none), &fid, NULL); /* id 0 */
	if (rc == 0 && o->npids) {
		s->pids = malloc(o->npids * sizeof(*s->pids));
		if (!s->pids)
			rc = -ENOMEM;
		else
			memcpy(s->pids, o->pids, o->npids * sizeof(*s->pids));
		s->o.pids = s->pids;
	}
	bool unwind = sampler_copies_stack(&s->o);
	if (unwind) {
		/* By default 16 KiB with on-CPU samples: 8 KiB (perf's default) leaves a fifth
		 * of the stacks of some common programs truncated (GNU sort's comparators hold
		 * 4 KB buffers); 8 KiB with switch-outs, which come at every context switch and
		 * whose deeper stacks can be read on from the blocked thread (unwind.c). */
		bool dflt = !s->o.stack_size;
		if (dflt)
			s->o.stack_size = 8192;
		s->o.stack_size &= ~7u;
		if (s->o.stack_size > 65000)
			s->o.stack_size = 65000 & ~7u;
		if (s->o.stack_size < 8)
			s->o.stack_size = 8;
		s->ev.stack_clock = dflt ? 16384 : s->o.stack_size;
	}
	int rrc = stack_resolver_init(&s->rs, unwind, s->o.unwind_cache_bytes);
	if (rc == 0)
		rc = rrc;
	s->rs.tr = &s->tr;
	s->rs.frames = &s->frames;
	s->rs.st = &s->st;
	s->rs.held = &s->held_sb;
	s->rs.kernel = s->o.kernel;
	s->rs.call_graph = s->o.call_graph;
	s->cpu_wide = o->all;
	if (rc < 0) {
		strobe_sampler_close(s);
		return NULL;
	}
	return s;
}

/* strobe_sampler_open's way out: NULL, with errno saying why. */
static strobe_sampler *open_failed(strobe_sampler *s, int rc)
{
	strobe_sampler_close(s);
	errno = -rc;
	return NULL;
}

strobe_sampler *strobe_sampler_open(const strobe_sampler_opts *o, strobe_err *err)
{
	if (!(o->events & (STROBE_EV_CPU | STROBE_EV_OFFCPU | STROBE_EV_LOCK)))
		return open_failed(NULL, strobe_errf(err, -EINVAL, "no event selected"));
	strobe_sampler_opts lo;
	if (!(o->events & (STROBE_EV_CPU | STROBE_EV_OFFCPU))) {
		/* Locks alone: the on-CPU events, at 1 Hz and frame pointers only, are there for
		 * their side-band records, which keep the mappings of processes that exit before
		 * their waits are read; their samples are in no lock profile. */
		lo = *o;
		lo.events = STROBE_EV_CPU | STROBE_EV_LOCK;
		lo.freq = 1;
		lo.call_graph = STROBE_CG_FP;
		o = &lo;
	}
#ifndef __x86_64__
	if (o->call_graph == STROBE_CG_DWARF)
		return open_failed(NULL, strobe_errf(err, -EOPNOTSUPP,
						     "unwinding with unwind tables is implemented "
						     "for x86-64 only: use frame pointers"));
#endif
	if (!o->all && o->npids == 0)
		return open_failed(NULL, strobe_errf(err, -EINVAL, "no target: system-wide, pids or "
							     "a command"));
	bool lock_only = o == &lo;
	/* Off-CPU summed elsewhere: no switch events; alone, the cpu-clock events for their
	 * side-band records (below). */
	strobe_sampler_opts xo;
	bool no_cpu_types = false;
	if (o->offcpu_external && !lock_only && (o->events & STROBE_EV_OFFCPU)) {
		xo = *o;
		xo.events &= ~(unsigned)STROBE_EV_OFFCPU;
		if (!(xo.events & STROBE_EV_CPU)) {
			xo.events |= STROBE_EV_CPU;
			xo.cpu_external = true;
			no_cpu_types = true;
		}
		o = &xo;
	}
	/* With cpu_external the cpu-clock events are there only for their side-band records: at
	 * 1 Hz, and with frame pointers unless switch-outs copy stacks. */
	bool ext = o->cpu_external && !lock_only && (o->events & STROBE_EV_CPU);
	if (ext && !(o->events & STROBE_EV_OFFCPU) && o->call_graph != STROBE_CG_FP) {
		if (o != &xo)
			xo = *o;
		xo.call_graph = STROBE_CG_FP;
		o = &xo;
	}
	strobe_sampler *s = sampler_alloc(o);
	if (!s)
		return open_failed(NULL, strobe_errf(err, -ENOMEM, "out of memory"));
	s->lock_only = lock_only;
	s->no_cpu_types = no_cpu_types;
	s->ext_offcpu = o == &xo && o->offcpu_external;
	if (ext)
		s->event_period_ns = s->ev.clock_period_ns = 1000000000;
	int rc = sampler_events_open(&s->ev, err);
	s->st.cpus = s->ev.nrings;
	if (rc < 0)
		return open_failed(s, rc);
	s->st.fds = s->ev.nfds;
	/* The targets' mappings now; what changes later arrives as records. */
	int64_t now = strobe_mono_ns();
	for (unsigned i = 0; i < o->npids && !o->enable_on_exec; i++)
		tracker_read_proc(&s->tr, o->pids[i], now);
	s->start_ns = s->ord.horizon_ns = now;
	s->start_real_ns = strobe_real_ns();
	return s;
}

void strobe_sampler_close(strobe_sampler *s)
{
	if (!s)
		return;
	sampler_events_close(&s->ev);
	free(s->pids);
	order_free(&s->ord);
	free(s->heads);
	pid_count_free(&s->held_sb);
	tracker_free(&s->tr);
	strobe_itab_free(&s->frames);
	strobe_itab_free(&s->pynames);
	agg_free(&s->agg);
	strobe_itab_free(&s->lsets);
	stack_resolver_free(&s->rs);
	free(s);
}

int strobe_sampler_enable(strobe_sampler *s, strobe_err *err)
{
	if (s->o.enable_on_exec)
		return 0; /* the kernel enables them at exec */
	int rc = sampler_events_ioctl(&s->ev, PERF_EVENT_IOC_ENABLE);
	s->enabled_ns = strobe_mono_ns();
	return rc < 0 ? strobe_errf(err, rc, "cannot enable the events: %s", strerror(-rc)) : 0;
}

int strobe_sampler_disable(strobe_sampler *s)
{
	return sampler_events_ioctl(&s->ev, PERF_EVENT_IOC_DISABLE);
}

/* ---- aggregation ----------------------------------------------------------------------------- */

static int add_stack(strobe_sampler *s, int32_t pid, int32_t tid, const uint32_t *frames,
		     uint32_t n, const int64_t v[NV])
{
	return agg_add(&s->agg, pid, tid, 0, 0, frames, n, v);
}

/* The keys the profile sets on every sample itself: an SDK label of the same name would make
 * a label set with a key twice. */
static bool own_label(const char *k)
{
	static const char *const own[] = {"pid", "tid", "process", "thread", "lock_addr"};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strcmp(k, own[i]) == 0)
			return true;
	return false;
}

uint32_t sampler_labelset(strobe_sampler *s, const strobe_labelpair *l, unsigned n)
{
	/* "key\0value\0" per pair; the SDK's slots bound a pair to 64 bytes, 8 of them */
	char buf[1024];
	size_t len = 0;
	for (unsigned i = 0; i < n; i++) {
		size_t kl = strlen(l[i].name), vl = strlen(l[i].value);
		if (!kl || own_label(l[i].name))
			continue;
		if (len + kl + vl + 2 > sizeof(buf))
			break; /* (not with the SDK's bounds) */
		memcpy(buf + len, l[i].name, kl + 1);
		memcpy(buf + len + kl + 1, l[i].value, vl + 1);
		len += kl + vl + 2;
	}
	uint32_t id;
	if (len == 0)
		return 0;
	if (s->lsets.n == 0 && strobe_itab_intern(&s->lsets, "", 1, &id, NULL) < 0)
		return 0; /* (id 0: none) */
	if (strobe_itab_intern(&s->lsets, buf, len, &id, NULL) < 0)
		return 0;
	return id;
}

/* A process's name (tid 0) or a thread's, from the tracker's proc root (the configured one, as
 * for the mappings); "?" when it cannot be read, so that it is not looked for again. */
static void read_comm(const strobe_sampler *s, int32_t pid, int32_t tid, char comm[16])
{
	char path[512];
	FILE *f = NULL;
	if (s->tr.proc_root) {
		if (tid)
			snprintf(path, sizeof(path), "%s/%d/task/%d/comm", s->tr.proc_root,
				 (int)pid, (int)tid);
		else
			snprintf(path, sizeof(path), "%s/%d/comm", s->tr.proc_root, (int)pid);
		f = fopen(path, "r");
	}
	if (f) {
		if (fgets(comm, 16, f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	if (!comm[0])
		comm[0] = '?', comm[1] = 0;
}

/* Makes sure a thread and its process have names: from the records seen, else from /proc. */
static proc_thread *thread_for(strobe_sampler *s, int32_t tid, int32_t pid)
{
	proc *p = tracker_proc(&s->tr, pid, true);
	if (p && !p->comm[0] && !s->offline)
		read_comm(s, pid, 0, p->comm);
	proc_thread *th = tracker_thread(&s->tr, tid, pid, true);
	if (th && !th->comm[0] && !s->offline)
		read_comm(s, pid, tid, th->comm);
	if (p && !p->sampled && !s->offline) {
		p->sampled = true;
		if (s->o.on_process)
			s->o.on_process(s->o.on_process_ctx, pid);
	}
	return th;
}

static void on_clock(strobe_sampler *s, const rec_sample *sm, const rec_unwound *pre)
{
	if (s->event_period_ns) /* cpu_external: the events are there for their side-band records */
		return;
	if (sm->tid == 0 && !s->o.keep_idle) {
		s->st.idle++;
		return;
	}
	s->st.samples++;
	uint32_t n = stack_resolve_sample(&s->rs, (int32_t)sm->pid, sm, pre, s->o.max_stack);
	thread_for(s, (int32_t)sm->tid, (int32_t)sm->pid);
	int64_t v[NV] = {0};
	v[V_SAMPLES] = 1;
	v[V_CPU_NS] = sm->period ? rec_ts(sm->period) : s->period_ns;
	add_stack(s, (int32_t)sm->pid, (int32_t)sm->tid, s->rs.ids, n, v);
}

/* A switch-out (sched_switch sample): the thread's stack then, and system-wide the thread
 * switching in (next_pid). The interval itself is offcpu_state.c's. */
static void on_switch(strobe_sampler *s, const rec_sample *sm, const rec_unwound *pre)
{
	int32_t tid = (int32_t)sm->tid, pid = (int32_t)sm->pid;
	if (tid != 0) {
		uint32_t n = stack_resolve_sample(&s->rs, pid, sm, pre, s->o.max_stack);
		proc_thread *th = thread_for(s, tid, pid);
		if (th)
			offcpu_switch_out(&s->off, th, s->rs.ids, n, rec_ts(sm->time),
					  offcpu_prev_state_blocked(rec_raw_u(
						  sm, s->ev.f_prev_state, s->ev.f_prev_state_size)));
	}
	if (s->cpu_wide) {
		int32_t next = (int32_t)rec_raw_u(sm, s->ev.f_next_pid, 4);
		if (next)
			offcpu_switch_in(&s->off, next, rec_ts(sm->time));
	}
}

int sampler_add_offcpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			      uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t off_ns,
			      int64_t blocked_ns, int64_t switches)
{
	s->ext_offcpu = true;
	/* As for a call chain: every frame but the very first is a return address; kernel frames
	 * only when asked for. */
	uint32_t n = stack_resolve_summed(&s->rs, pid, kips, nk, uips, NULL, nu, false);
	thread_for(s, tid, pid);
	int64_t v[NV] = {0};
	v[V_OFF_NS] = off_ns;
	v[V_BLOCKED_NS] = blocked_ns;
	v[V_RUNQ_NS] = off_ns - blocked_ns;
	v[V_SWITCHES] = switches;
	s->st.switches += (uint64_t)switches;
	return add_stack(s, pid, tid, s->rs.ids, n, v);
}

int sampler_add_oncpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			     uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t samples,
			     int64_t cpu_ns)
{
	return sampler_add_oncpu_py(s, pid, tid, kips, nk, uips, NULL, nu, samples, cpu_ns);
}

uint32_t sampler_py_name(strobe_sampler *s, const char *function, const char *file,
				int64_t line)
{
	char key[1100];
	size_t fl = strnlen(function, 512), sl = strnlen(file, 512);
	if (s->pynames.n >= (1u << 20)) {
		function = "[python: too many distinct frames]";
		fl = strlen(function);
		sl = 0;
		line = 0;
	}
	memcpy(key, function, fl);
	key[fl] = 0;
	memcpy(key + fl + 1, file, sl);
	key[fl + 1 + sl] = 0;
	memcpy(key + fl + sl + 2, &line, 8);
	uint32_t id;
	if (s->pynames.n == 0 && strobe_itab_intern(&s->pynames, "", 1, &id, NULL) < 0)
		return 0; /* (id 0: none) */
	if (strobe_itab_intern(&s->pynames, key, fl + sl + 10, &id, NULL) < 0)
		return 0;
	return id;
}

int sampler_add_oncpu_py(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
				uint32_t nk, const uint64_t *uips, const uint32_t *upy, uint32_t nu,
				int64_t samples, int64_t cpu_ns)
{
	return sampler_add_oncpu_lset(s, pid, tid, kips, nk, uips, upy, nu, 0, samples,
					     cpu_ns);
}

int sampler_add_oncpu_lset(strobe_sampler *s, int32_t pid, int32_t tid,
				  const uint64_t *kips, uint32_t nk, const uint64_t *uips,
				  const uint32_t *upy, uint32_t nu, uint32_t lset, int64_t samples,
				  int64_t cpu_ns)
{
	return sampler_add_oncpu_image(s, pid, tid, kips, nk, uips, upy, nu, lset, false,
				       samples, cpu_ns);
}

/* On-CPU samples of a stack resolved into s->rs.ids[0, n) into the aggregate. tid 0: summed
 * per process (named after its main thread). */
static int add_oncpu_ids(strobe_sampler *s, int32_t pid, int32_t tid, uint32_t n, uint32_t lset,
			 int64_t samples, int64_t cpu_ns)
{
	thread_for(s, tid ? tid : pid, pid);
	int64_t v[NV] = {0};
	v[V_SAMPLES] = samples;
	v[V_CPU_NS] = cpu_ns;
	s->st.samples += (uint64_t)samples;
	return agg_add(&s->agg, pid, tid, 0, lset < s->lsets.n ? lset : 0, s->rs.ids, n, v);
}

int sampler_add_oncpu_image(strobe_sampler *s, int32_t pid, int32_t tid,
				  const uint64_t *kips, uint32_t nk, const uint64_t *uips,
				  const uint32_t *upy, uint32_t nu, uint32_t lset, bool pre_exec,
				  int64_t samples, int64_t cpu_ns)
{
	/* as for an off-CPU sum: the leaf is where the thread was, the rest return addresses */
	uint32_t n = stack_resolve_summed(&s->rs, pid, kips, nk, uips, upy, nu, pre_exec);
	return add_oncpu_ids(s, pid, tid, n, lset, samples, cpu_ns);
}

int sampler_unwind_copies(strobe_sampler *s)
{
	int rc = stack_resolver_add_unwinder(&s->rs, s->o.unwind_cache_bytes);
	if (rc == 0)
		s->rs.call_graph = STROBE_CG_AUTO;
	return rc;
}

int sampler_add_oncpu_copy(strobe_sampler *s, const sampler_copy *c)
{
	/* (a copy from before an exec: unwound by the image now, it would be wrong; as walked) */
	if (!s->rs.uw || c->pre_exec)
		return sampler_add_oncpu_image(s, c->pid, c->tid, c->kips, c->nk, c->uips, NULL,
					       c->nu, c->lset, c->pre_exec, 1, c->cpu_ns);
	/* the call chain as a perf sample carries it: kernel part, then the user walk */
	uint64_t chain[2 + 2 * STROBE_STACK_DEPTH];
	uint32_t n = 0;
	chain[n++] = (uint64_t)PERF_CONTEXT_KERNEL;
	for (uint32_t i = 0; i < c->nk && i < STROBE_STACK_DEPTH; i++)
		chain[n++] = c->kips[i];
	chain[n++] = (uint64_t)PERF_CONTEXT_USER;
	for (uint32_t i = 0; i < c->nu && i < STROBE_STACK_DEPTH; i++)
		chain[n++] = c->uips[i];
	rec_sample sm = {.pid = (uint32_t)c->pid, .tid = (uint32_t)c->walk_tid, .nr = n,
			 .ips = chain, .abi = PERF_SAMPLE_REGS_ABI_64, .stack = c->stack,
			 .stack_size = c->stack_size, .stack_dyn = c->stack_len};
	memcpy(sm.regs, c->regs, sizeof(sm.regs));
	uint32_t nf = stack_resolve_sample(&s->rs, c->pid, &sm, NULL, s->o.max_stack);
	return add_oncpu_ids(s, c->pid, c->tid, nf, c->lset, 1, c->cpu_ns);
}

int sampler_add_lock(strobe_sampler *s, int32_t pid, int32_t tid, uint64_t lock,
			    const uint64_t *uips, uint32_t nu, int64_t waits, int64_t delay_ns)
{
	/* the leaf is where the wait's system call returns to; the rest are return addresses */
	uint32_t n = stack_resolve_summed(&s->rs, pid, NULL, 0, uips, NULL, nu, false);
	thread_for(s, tid, pid);
	int64_t v[NV] = {0};
	v[V_WAITS] = waits;
	v[V_DELAY_NS] = delay_ns;
	return agg_add(&s->agg, pid, tid, lock, 0, s->rs.ids, n, v);
}

static void on_wakeup(strobe_sampler *s, const rec_sample *sm)
{
	offcpu_wakeup(&s->off, (int32_t)rec_raw_u(sm, s->ev.f_wake_pid, 4), rec_ts(sm->time));
}

/* ---- the decoder's handlers ------------------------------------------------------------------ */

static void h_sample(void *ctx, int kind, const rec_sample *sm, const rec_unwound *pre)
{
	strobe_sampler *s = ctx;
	if (kind == EVK_CLOCK)
		on_clock(s, sm, pre);
	else if (kind == EVK_SWITCH)
		on_switch(s, sm, pre);
	else if (!pre)
		on_wakeup(s, sm);
}

static void h_mmap2(void *ctx, const rec_mmap2 *m)
{
	strobe_sampler *s = ctx;
	/* Not news: in what /proc said since, unless it brings the mapping's build ID */
	if (tracker_news(&s->tr, m->pid, s->rec_ns) ||
	    (m->build_id_len &&
	     tracker_has_mapping(&s->tr, m->pid, m->start, m->len, m->pgoff, m->path)))
		tracker_mmap(&s->tr, m->pid, m->start, m->len, m->pgoff, m->dev, m->ino,
			     m->build_id, m->build_id_len, m->path);
}

static void h_comm(void *ctx, int32_t pid, int32_t tid, const char *comm, bool exec)
{
	strobe_sampler *s = ctx;
	unsigned how = !exec ? TRACKER_NAME
		       : tracker_news(&s->tr, pid, s->rec_ns) ? TRACKER_EXEC : TRACKER_EXEC_READ;
	tracker_comm(&s->tr, pid, tid, comm, how);
}

static void h_fork(void *ctx, int32_t pid, int32_t ppid, int32_t tid)
{
	strobe_sampler *s = ctx;
	/* A new process starts with its parent's mappings: a parent we never sampled (a shell
	 * that predates recording) is read now, while it lives, so that the child has them.
	 * Without this a child that exec'd before its first sample was processed was looked up
	 * in the new image's mappings: the samples in execve (the old image's libc) had an
	 * unknown leaf. */
	if (pid != ppid && !s->offline) {
		proc *pp = tracker_proc(&s->tr, ppid, false);
		if (!pp || (!pp->maps_read && !pp->exited))
			stack_proc(&s->rs, ppid);
	}
	tracker_fork(&s->tr, pid, ppid, tid, s->rec_ns);
}

static void h_exit(void *ctx, int32_t pid, int32_t tid)
{
	strobe_sampler *s = ctx;
	tracker_exit(&s->tr, pid, tid);
}

static void h_switch_in(void *ctx, int32_t tid, int64_t time)
{
	strobe_sampler *s = ctx;
	offcpu_switch_in(&s->off, tid, time);
}

static const rec_handlers handlers = {
	.sample = h_sample, .mmap2 = h_mmap2, .comm = h_comm, .fork = h_fork, .exit = h_exit,
	.switch_in = h_switch_in,
};

static void process(strobe_sampler *s, const struct perf_event_header *h)
{
	rec_decode(&s->dec, h, &handlers, s);
}

/* ---- reading and ordering -------------------------------------------------------------------- */

static int64_t record_time(const strobe_sampler *s, const struct perf_event_header *h)
{
	return rec_time(&s->dec, h);
}

/* Counts a side-band record held (or, processed, no longer held) against the process whose
 * code it changes: its samples wait for their turn to be unwound. That is code mapped (MMAP2),
 * an exec (COMM with the exec flag) and a new process (FORK of another pid: it starts with its
 * parent's mappings, which its samples must not be read against from /proc meanwhile). A new
 * thread, a thread's new name, an exit and the parent of a fork change no mapping: counting
 * them held every sample of a process that starts threads, such as a thread pool, whole for a
 * round, with its 16 KiB stack copy. */
static void note_sideband(strobe_sampler *s, const struct perf_event_header *h, bool held)
{
	uint32_t v[2];
	size_t blen = h->size - sizeof(*h);
	if (blen < 8)
		return;
	memcpy(v, h + 1, 8); /* pid, and: tid (MMAP2, COMM) or ppid (FORK, EXIT) */
	if (!(h->type == PERF_RECORD_MMAP2 ||
	      (h->type == PERF_RECORD_COMM && (h->misc & PERF_RECORD_MISC_COMM_EXEC)) ||
	      (h->type == PERF_RECORD_FORK && v[0] != v[1])))
		return;
	if (held) {
		pid_count_add(&s->held_sb, (int32_t)v[0]);
		proc *p = tracker_proc(&s->tr, (int32_t)v[0], false);
		if (p)
			p->sideband_ns = strobe_mono_ns();
	} else {
		pid_count_sub(&s->held_sb, (int32_t)v[0]);
	}
}

static int take(const struct perf_event_header *h, void *ctx)
{
	strobe_sampler *s = ctx;
	switch (h->type) { /* counters need no ordering */
	case PERF_RECORD_LOST:
		if (h->size >= sizeof(*h) + 16) {
			uint64_t lost;
			memcpy(&lost, (const uint8_t *)(h + 1) + 8, 8);
			s->st.lost += lost;
		}
		return 0;
	case PERF_RECORD_LOST_SAMPLES:
		if (h->size >= sizeof(*h) + 8) {
			uint64_t lost;
			memcpy(&lost, h + 1, 8);
			s->st.lost += lost;
		}
		return 0;
	case PERF_RECORD_THROTTLE:
		s->st.throttled++;
		return 0;
	case PERF_RECORD_SAMPLE:
	case PERF_RECORD_MMAP2:
	case PERF_RECORD_COMM:
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
	case PERF_RECORD_SWITCH:
	case PERF_RECORD_SWITCH_CPU_WIDE:
		break;
	default:
		return 0;
	}
	uint8_t *d = order_hold(&s->ord, record_time(s, h), h->size);
	if (!d)
		return -ENOMEM;
	memcpy(d, h, h->size);
	note_sideband(s, h, true);
	return 0;
}

/*
 * A sample held for its turn, with its stack copy cut to what the kernel wrote in it (its
 * dyn_size: the copy stops at the top of the stack's mapping, a few KiB above a shallow main
 * thread, or at a page never touched) rather than the 16 KiB reserved: less to copy into the
 * arena and to move when it is compacted, and fewer fresh arena pages to fault in when a new
 * process's first samples all wait. A copy that was cut short keeps 8 bytes more than it
 * holds, so that it still reads as cut short.
 */
static int take_trimmed(strobe_sampler *s, const struct perf_event_header *h,
			const rec_sample *sm)
{
	size_t inner = (size_t)(sm->stack - (const uint8_t *)h); /* through the stack size */
	size_t keep = (sm->stack_dyn & ~(size_t)7) + 8;
	if (keep >= sm->stack_size) /* full, or nearly: nothing to cut */
		return take(h, s);
	size_t rest = h->size - inner - sm->stack_size; /* dyn_size and what follows */
	size_t len = inner + keep + rest;
	uint8_t *d = order_hold(&s->ord, rec_ts(sm->time), len);
	if (!d)
		return -ENOMEM;
	memcpy(d, h, inner);
	struct perf_event_header nh;
	memcpy(&nh, d, sizeof(nh));
	nh.size = (uint16_t)len;
	memcpy(d, &nh, sizeof(nh));
	uint64_t k = keep;
	memcpy(d + inner - 8, &k, 8);
	memcpy(d + inner, sm->stack, sm->stack_dyn);
	memset(d + inner + sm->stack_dyn, 0, keep - sm->stack_dyn);
	memcpy(d + inner + keep, sm->stack + sm->stack_size, rest);
	return 0;
}

/*
 * A sample as it is read from a ring: its user stack unwound now, when nothing its process has
 * done since can be waiting (no side-band record of that process held: read_rings takes every
 * ring's side-band records first), so that only the program counters wait for the sample's turn
 * instead of its 16 KiB stack copy, which was copied into the arena and moved once more at the
 * end of the round. Otherwise (a side-band record of its process waiting, or its leaf in no
 * mapping known yet) it is held (take_trimmed) and unwound at its turn.
 */
static int take_unwound(strobe_sampler *s, const struct perf_event_header *h)
{
	rec_sample sm;
	int kind = rec_sample_kind(&s->dec, h);
	if ((kind != EVK_CLOCK && kind != EVK_SWITCH) ||
	    !rec_parse_sample(h, s->ev.sample_type[kind], &sm) || !sm.abi || !sm.stack_size ||
	    sm.tid == 0)
		return take(h, s);
	if (pid_count_get(&s->held_sb, (int32_t)sm.pid) != 0)
		return take_trimmed(s, h, &sm);
	/* A process met for the first time has its mappings read now, while it lives. A leaf in
	 * none of its known mappings (its exec or mmap is in a record not read yet) is held, to be
	 * unwound at its turn, after that record. */
	proc *p = stack_proc(&s->rs, (int32_t)sm.pid);
	if (!p || tracker_find(p, sm.regs[8]) == STROBE_MAP_NONE) {
		s->st.unwind_held++;
		return take_trimmed(s, h, &sm);
	}
	size_t inner = (size_t)(sm.stack - (const uint8_t *)h); /* through the stack size */
	uint32_t max = s->o.max_stack;
	if (sizeof(*h) + inner + 8 + (size_t)max * 9 + 8 > 0xffff)
		return take(h, s);
	uint64_t fp[STROBE_STACK_FRAMES];
	uint32_t nfp = stack_user_chain(&sm, fp);
	int nu = stack_unwind_user(&s->rs, (int32_t)sm.pid, &p, &sm, fp, nfp, max);
	uint32_t n = nu > 0 ? (uint32_t)nu : 0;
	size_t len = sizeof(*h) + inner + 8 + (size_t)n * 8 + ((n + 7) & ~7u);
	uint8_t *d = order_hold(&s->ord, rec_ts(sm.time), len);
	if (!d)
		return -ENOMEM;
	struct perf_event_header o = {.type = REC_UNWOUND, .misc = 0, .size = (uint16_t)len};
	memcpy(d, &o, sizeof(o));
	uint8_t *in = d + sizeof(o);
	memcpy(in, h, inner);
	struct perf_event_header ih;
	memcpy(&ih, in, sizeof(ih));
	ih.size = (uint16_t)inner;
	memcpy(in, &ih, sizeof(ih));
	memset(in + inner - 8, 0, 8); /* no stack copy */
	uint8_t *a = in + inner;
	memcpy(a, &nu, 4);
	memcpy(a + 4, &n, 4);
	memcpy(a + 8, s->rs.upcs, (size_t)n * 8);
	for (uint32_t i = 0; i < n; i++)
		a[8 + (size_t)n * 8 + i] = s->rs.uact[i];
	memset(a + 8 + (size_t)n * 9, 0, ((n + 7) & ~7u) - n);
	s->st.unwind_at_arrival++;
	return 0;
}

static bool is_sideband(uint32_t type)
{
	return type == PERF_RECORD_MMAP2 || type == PERF_RECORD_COMM || type == PERF_RECORD_FORK ||
	       type == PERF_RECORD_EXIT;
}

/* Read_rings' first pass: the side-band records only. */
static int take_sideband(const struct perf_event_header *h, void *ctx)
{
	return is_sideband(h->type) ? take(h, ctx) : 0;
}

/* Its second pass: the rest. */
static int take_arrived(const struct perf_event_header *h, void *ctx)
{
	if (is_sideband(h->type))
		return 0;
	if (h->type == PERF_RECORD_SAMPLE)
		return take_unwound(ctx, h);
	return take(h, ctx);
}

static int read_rings(strobe_sampler *s);

/* Order's handler: each held record in its turn. Unwinding makes processing slow enough for the
 * rings to fill meanwhile (a stack copy per sample): they are emptied into the arena every
 * 10 ms. What they add is newer than the cutoff and waits. */
static void process_held(void *ctx, const struct perf_event_header *h)
{
	strobe_sampler *s = ctx;
	note_sideband(s, h, false);
	/* a side-band record's time, for the handlers: one /proc/PID/maps was read after is old */
	s->rec_ns = h->type == PERF_RECORD_MMAP2 || h->type == PERF_RECORD_COMM ||
				    h->type == PERF_RECORD_FORK
			    ? record_time(s, h)
			    : 0;
	process(s, h);
	s->rec_ns = 0;
	if (s->rs.uw && (++s->flushed & 63) == 0 && order_bytes(&s->ord) < MAX_PENDING) {
		int64_t now = strobe_mono_ns();
		if (now - s->drained_ns > 10000000) {
			read_rings(s);
			s->drained_ns = now;
		}
	}
}

/* Processes held records older than cutoff, in time order; keeps the rest. */
static void process_until(strobe_sampler *s, int64_t cutoff)
{
	s->flushed = 0;
	s->drained_ns = strobe_mono_ns();
	order_flush_until(&s->ord, cutoff, process_held, s);
}

/* Empties the rings into the arena. With unwinding, in two passes over what each ring holds
 * now: every side-band record first, then the samples, unwound as they come unless a side-band
 * record of their process is held (take_unwound). */
static int read_rings(strobe_sampler *s)
{
	if (s->ev.nrings > s->nheads) {
		uint64_t *nh = realloc(s->heads, s->ev.nrings * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		s->heads = nh;
		s->nheads = s->ev.nrings;
	}
	/* Every head first, in a tight loop, so that what is read is everything written up to one
	 * moment (strobe_sampler_poll's cutoff relies on it); and a sample read up to a head taken
	 * after another ring's side-band records had been peeked at could be of a process that
	 * exec'd or mapped code meanwhile, on that other CPU, and be unwound without knowing it. */
	for (unsigned i = 0; i < s->ev.nrings; i++)
		s->heads[i] = perf_ring_head(&s->ev.rings[i]);
	if (!s->rs.uw) {
		for (unsigned i = 0; i < s->ev.nrings; i++) {
			int rc = perf_ring_read_to(&s->ev.rings[i], s->heads[i], take, s);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	for (unsigned i = 0; i < s->ev.nrings; i++) {
		int rc = perf_ring_peek(&s->ev.rings[i], s->heads[i], take_sideband, s);
		if (rc < 0)
			return rc;
	}
	for (unsigned i = 0; i < s->ev.nrings; i++) {
		int rc = perf_ring_read_to(&s->ev.rings[i], s->heads[i], take_arrived, s);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* How long after enabling a whole-host sampler reads its rings at least every EARLY_POLL_MS:
 * the processes that predate it are met at their first sample, and their mappings read then,
 * from /proc; one that exits before its sample is read (a short job already running, waiting
 * for the ring's wake-up at half full: up to a second) would keep no mapping at all. */
#define EARLY_NS 1000000000
#define EARLY_POLL_MS 50

int strobe_sampler_poll(strobe_sampler *s, int timeout_ms, strobe_err *err)
{
	return sampler_poll_with(s, timeout_ms, NULL, 0, err);
}

int sampler_poll_with(strobe_sampler *s, int timeout_ms, struct pollfd *extra, unsigned n,
			     strobe_err *err)
{
	if (s->o.all && timeout_ms > EARLY_POLL_MS && s->enabled_ns &&
	    strobe_mono_ns() - s->enabled_ns < EARLY_NS)
		timeout_ms = EARLY_POLL_MS;
	int prc = sampler_events_poll(&s->ev, timeout_ms, extra, n);
	if (prc < 0)
		return strobe_errf(err, prc, "poll: %s", strerror(-prc));
	int64_t now = strobe_mono_ns();
	int rc = read_rings(s);
	if (rc < 0)
		return strobe_errf(err, rc, "reading the ring buffers: %s", strerror(-rc));
	/* Every ring was read up to heads taken after `now`: a record stamped before now - ORDER_NS
	 * was in them, unless the kernel took longer than that to write it (a virtual CPU stopped
	 * by its host in the middle: then it is processed late, and counted). Side-band records
	 * are processed as soon as that allows, so that the samples of a process that just exec'd
	 * or mapped code wait for them (whole, with their stack copies) as little as possible. */
	int64_t cutoff = now - ORDER_NS;
	if (order_bytes(&s->ord) > MAX_PENDING) /* rather than grow without bound */
		cutoff = now;
	process_until(s, cutoff);
	return 0;
}

void sampler_read_maps_now(strobe_sampler *s, int32_t pid)
{
	const proc *p = tracker_proc(&s->tr, pid, false);
	if (!s->offline && (!p || !p->maps_read))
		stack_proc(&s->rs, pid); /* (reads /proc/PID/maps when not read) */
}

int sampler_read_sideband(strobe_sampler *s, int64_t upto_ns)
{
	int rc = read_rings(s);
	/* Everything stamped before upto_ns was in the rings by now (the kernel writes a record
	 * as it happens; the sums were taken after upto_ns): a record that still comes later
	 * with an older time is handed on out of order, and counted late. */
	if (rc == 0 && upto_ns > s->ord.horizon_ns)
		process_until(s, upto_ns);
	return rc;
}

int strobe_sampler_drain(strobe_sampler *s, strobe_err *err)
{
	int rc = read_rings(s);
	if (rc < 0)
		return strobe_errf(err, rc, "reading the ring buffers: %s", strerror(-rc));
	int64_t now = strobe_mono_ns();
	process_until(s, now);
	s->ord.horizon_ns = now;
	return 0;
}

strobe_sampler *strobe_sampler_open_offline(const strobe_sampler_opts *o,
					    const strobe_sampler_layout *l)
{
	strobe_sampler *s = sampler_alloc(o);
	if (!s)
		return open_failed(NULL, -ENOMEM);
	s->offline = true;
	s->tr.proc_root = NULL;
	s->ev.f_prev_state = l->prev_state_offset;
	s->ev.f_prev_state_size = l->prev_state_size;
	s->ev.f_next_pid = l->next_pid_offset;
	s->ev.f_wake_pid = l->wakeup_pid_offset;
	static const int kinds[] = {EVK_CLOCK, EVK_SWITCH, EVK_WAKEUP};
	for (int i = 0; i < 3; i++) {
		if (event_kinds_add(&s->ev.kinds, l->id[i], kinds[i]) < 0)
			return open_failed(s, -ENOMEM);
	}
	s->start_ns = s->ord.horizon_ns = -1;
	return s;
}

/* One pass of strobe_sampler_feed over buf: fn on each record (copied so that the parser may
 * assume the ring's 8-byte alignment), the times of the first and last. -EINVAL at the first
 * record that cannot be one, after those before it. */
static int feed_pass(strobe_sampler *s, const uint8_t *p, size_t len,
		     int (*fn)(const struct perf_event_header *h, void *ctx), int64_t *first,
		     int64_t *last)
{
	while (len >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		memcpy(&h, p, sizeof(h));
		if (h.size < sizeof(h) || h.size > len || h.size % 8)
			return -EINVAL;
		uint64_t rec[65536 / 8];
		memcpy(rec, p, h.size);
		const struct perf_event_header *hp = (const void *)rec;
		int rc = fn(hp, s);
		if (rc < 0)
			return rc;
		int64_t t = record_time(s, hp);
		*first = t < *first ? t : *first;
		*last = t > *last ? t : *last;
		p += h.size;
		len -= h.size;
	}
	return len ? -EINVAL : 0;
}

int strobe_sampler_feed(strobe_sampler *s, const void *buf, size_t len, int64_t until)
{
	int64_t first = INT64_MAX, last = INT64_MIN;
	int rc;
	if (s->rs.uw) {
		/* As read_rings does with a ring: the side-band records first, then the samples,
		 * unwound on arrival where no side-band record of their process is held. */
		int64_t f1 = INT64_MAX, l1 = INT64_MIN;
		rc = feed_pass(s, buf, len, take_sideband, &f1, &l1);
		if (rc == 0 || rc == -EINVAL) {
			int rc2 = feed_pass(s, buf, len, take_arrived, &first, &last);
			if (rc == 0)
				rc = rc2;
		}
	} else {
		rc = feed_pass(s, buf, len, take, &first, &last);
	}
	if (rc < 0)
		return rc;
	if (last == INT64_MIN)
		return 0;
	if (s->start_ns < 0)
		s->start_ns = first;
	if (until != INT64_MAX) {
		process_until(s, until); /* the rest waits, as it would for a later ring read */
		return 0;
	}
	process_until(s, last < INT64_MAX ? last + 1 : INT64_MAX);
	s->ord.horizon_ns = last; /* "now" is the newest record fed */
	return 0;
}

void strobe_sampler_trim(strobe_sampler *s)
{
	/* Held records: none are left after a drain. */
	order_free(&s->ord);
	pid_count_clear(&s->held_sb);
	/* The unwinder: its sessions, decoded tables and mapped binaries. */
	stack_resolver_trim(&s->rs);
	/* Address ranges of every process seen: frames already name their mapping. */
	for (uint32_t i = 0; i < s->tr.pids.n; i++) {
		free(s->tr.procs[i].vma);
		free(s->tr.procs[i].pre_vma);
		s->tr.procs[i].vma = s->tr.procs[i].pre_vma = NULL;
		s->tr.procs[i].nvma = s->tr.procs[i].cvma = s->tr.procs[i].pre_nvma = 0;
	}
	malloc_trim(0);
}

void strobe_sampler_release_memory(strobe_sampler *s)
{
	unwinder_drop_pages(s->rs.uw);
	malloc_trim(0);
}

void strobe_sampler_get_stats(const strobe_sampler *s, strobe_sampler_stats *st)
{
	*st = s->st;
	unwind_stats us;
	stack_unwind_stats(&s->rs, &us);
	st->unwind_cache_bytes = us.cache_bytes_peak;
	st->unwind_cache_hits = us.hits;
	st->unwind_cache_misses = us.misses;
	st->unwind_cache_evictions = us.evictions;
	st->unwind_extended = us.extended;
	st->unwind_ext_changed = us.ext_changed;
	st->unwind_debug_frame = us.debug_frame_frames;
	st->unwind_rule_hits = us.rule_hits;
	st->unwind_ns_p50 = stack_unwind_pct(&s->rs, 0.5);
	st->unwind_ns_p99 = stack_unwind_pct(&s->rs, 0.99);
	st->processes = s->tr.pids.n;
	st->threads = s->tr.tids.n;
	st->mappings = s->tr.maps.n;
	st->frames = s->frames.n;
	st->late = s->ord.late;
}

tracker *sampler_tracker(strobe_sampler *s)
{
	return &s->tr;
}

void sampler_set_external_freq(strobe_sampler *s, unsigned freq)
{
	if (!s->o.cpu_external || !freq)
		return;
	s->o.freq = freq > 100000 ? 100000 : freq;
	s->period_ns = 1000000000 / s->o.freq;
}

void sampler_set_external_offcpu(strobe_sampler *s, bool on)
{
	s->ext_offcpu = on;
}

void sampler_event_attr(const strobe_sampler *s, struct perf_event_attr *a, int kind,
			       bool sideband, bool per_task, int tp_id)
{
	sampler_events_attr(&s->ev, a, kind, sideband, per_task, tp_id);
}

unsigned strobe_sampler_pids(const strobe_sampler *s, pid_t *out, unsigned cap)
{
	return agg_pids(&s->agg, out, cap, false);
}

unsigned sampler_lock_pids(const strobe_sampler *s, pid_t *out, unsigned cap)
{
	return agg_pids(&s->agg, out, cap, true);
}

/* Counts the off-CPU intervals still open up to the horizon (called before building a profile). */
void sampler_flush_open(strobe_sampler *s)
{
	offcpu_flush_open(&s->off, s->ord.horizon_ns);
}

void sampler_reset_agg(strobe_sampler *s)
{
	agg_reset(&s->agg);
	strobe_itab_free(&s->lsets);
	s->start_ns = s->ord.horizon_ns;
	s->start_real_ns = strobe_real_ns();
}

unsigned sampler_forget_exited(strobe_sampler *s)
{
	/* Nothing refers to a process or thread by id or pointer between intervals: the aggregate
	 * was just emptied, frames name mappings (kept), held records name pids. */
	int n = tracker_forget(&s->tr);
	return n > 0 ? (unsigned)n : 0;
}

int strobe_call_graph_parse(const char *name)
{
	static const char *const names[] = {[STROBE_CG_FP] = "fp", [STROBE_CG_DWARF] = "dwarf",
					    [STROBE_CG_AUTO] = "auto"};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (name && strcmp(name, names[i]) == 0)
			return i;
	return -EINVAL;
}
