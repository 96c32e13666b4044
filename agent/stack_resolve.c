// SPDX-License-Identifier: Apache-2.0
/*
 * Stack resolution and unwinding (see stack_resolve.h): a sample's call chain, its user stack
 * walked with unwind tables where it carries a copy, or a stack summed in the kernel, into the
 * frame ids the aggregate keys stacks by; each user address looked up in its process's
 * mappings, which are read again from /proc when an address falls in none of them and they may
 * be behind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stack_resolve.h"
#include "strobe/clock.h"

int stack_resolver_init(stack_resolver *r, bool unwind, size_t cache_bytes)
{
	memset(r, 0, sizeof(*r));
	r->ids = malloc(STROBE_STACK_FRAMES * sizeof(*r->ids));
	if (!r->ids)
		return -ENOMEM;
	return unwind ? stack_resolver_add_unwinder(r, cache_bytes) : 0;
}

int stack_resolver_add_unwinder(stack_resolver *r, size_t cache_bytes)
{
	if (r->uw)
		return 0;
	r->uw = unwinder_new(cache_bytes);
	if (!r->upcs)
		r->upcs = malloc(STROBE_STACK_FRAMES * sizeof(*r->upcs));
	if (!r->uact)
		r->uact = malloc(STROBE_STACK_FRAMES * sizeof(*r->uact));
	if (r->uw && r->upcs && r->uact)
		return 0;
	unwinder_free(r->uw); /* (the arrays, if any, go with stack_resolver_free) */
	r->uw = NULL;
	return -ENOMEM;
}

void stack_resolver_free(stack_resolver *r)
{
	free(r->ids);
	unwinder_free(r->uw);
	free(r->upcs);
	free(r->uact);
	r->ids = NULL;
	r->uw = NULL;
	r->upcs = NULL;
	r->uact = NULL;
}

proc *stack_proc(stack_resolver *r, int32_t pid)
{
	proc *p = tracker_proc(r->tr, pid, true);
	if (p && !p->maps_read && !p->exited) {
		if (tracker_read_proc(r->tr, pid, strobe_mono_ns()) < 0)
			r->st->unknown_pid++;
		p = tracker_proc(r->tr, pid, false);
		if (p)
			p->maps_read = true;
	}
	return p;
}

/* One stack being put together: its process (looked up at its first user frame), whether its
 * user leaf has been met, whether /proc was read again for it, and how many ids are in r->ids. */
typedef struct stack_walk {
	int32_t pid;
	proc *p;
	bool user_seen, reread;
	bool pre_exec; /* summed before its exec since its fork: its frames are the forked image's */
	uint32_t n;
} stack_walk;

/* Whether an address of p in no mapping known for it is worth reading /proc/PID/maps again
 * for (see stack_resolve.h). */
static bool reread_due(const stack_resolver *r, const proc *p, bool leaf, int64_t now)
{
	int64_t since = now - p->rescan_ns;
	if (p->sideband_ns && p->sideband_ns > p->rescan_ns) /* (once a record: see rescan_ns) */
		return true;
	if (leaf && since > STACK_LEAF_RESCAN_NS)
		return true;
	return since > STACK_STALE_NS &&
	       (p->maps_changed || (r->held && pid_count_get(r->held, p->pid) != 0));
}

/* Interns one frame of w's process into r->ids. */
static void add_frame(stack_resolver *r, stack_walk *w, uint64_t ip, bool kernel, bool call)
{
	if (w->n >= STROBE_STACK_FRAMES)
		return;
	sampler_frame_key k = {.addr = ip, .call = call};
	if (kernel) {
		k.map = STROBE_MAP_KERNEL;
	} else {
		if (!w->p)
			w->p = stack_proc(r, w->pid);
		if (w->p && w->pre_exec && w->p->image == PROC_IMAGE_EXECD) {
			/* an image /proc no longer shows: nothing to read again */
			k.map = tracker_find_pre(w->p, ip);
			w->reread = true;
		} else {
			k.map = w->p ? tracker_find(w->p, ip) : STROBE_MAP_NONE;
		}
		bool leaf = !w->user_seen;
		w->user_seen = true;
		if (k.map == STROBE_MAP_NONE && w->p && !w->p->exited && !w->reread) {
			int64_t now = strobe_mono_ns();
			if (reread_due(r, w->p, leaf, now)) {
				w->reread = true;
				r->rereads++;
				int rc = tracker_read_proc(r->tr, w->pid, now);
				w->p = tracker_proc(r->tr, w->pid, false);
				if (rc == 0 && w->p)
					k.map = tracker_find(w->p, ip);
				else if (w->p) /* gone, most likely: not again at every stack */
					w->p->rescan_ns = now;
			}
		}
	}
	uint32_t id;
	if (strobe_itab_intern(r->frames, &k, sizeof(k), &id, NULL) == 0)
		r->ids[w->n++] = id;
}

static void unwind_time(stack_resolver *r, int64_t ns)
{
	uint64_t v = ns > 1 ? (uint64_t)ns : 1;
	unsigned lg = 63u - (unsigned)__builtin_clzll(v);
	unsigned b = lg < 3 ? lg * 8 : lg * 8 + (unsigned)((v >> (lg - 3)) & 7);
	r->uw_hist[b < UW_BUCKETS ? b : UW_BUCKETS - 1]++;
}

uint64_t stack_unwind_pct(const stack_resolver *r, double q)
{
	uint64_t total = 0, acc = 0;
	for (unsigned b = 0; b < UW_BUCKETS; b++)
		total += r->uw_hist[b];
	if (!total)
		return 0;
	for (unsigned b = 0; b < UW_BUCKETS; b++) {
		acc += r->uw_hist[b];
		if ((double)acc >= q * (double)total) {
			unsigned lg = b / 8, f = b % 8;
			return lg < 3 ? (1ull << lg) : (uint64_t)(8 + f) << (lg - 3);
		}
	}
	return 0;
}

void stack_unwind_stats(const stack_resolver *r, unwind_stats *us)
{
	*us = r->uw_st;
	if (r->uw)
		unwind_get_stats(r->uw, us);
}

void stack_resolver_trim(stack_resolver *r)
{
	if (!r->uw)
		return;
	unwind_get_stats(r->uw, &r->uw_st);
	unwinder_free(r->uw);
	r->uw = NULL;
}

/*
 * auto: the table walk wins when it reached the outermost frame or the frame limit; when it
 * stopped short, the frame-pointer chain continues it from the first return address both have
 * in common (the table walk's last frame), and when they have none the longer of the two wins.
 */
int stack_unwind_user(stack_resolver *r, int32_t pid, proc **p, const rec_sample *sm,
		      const uint64_t *fp, uint32_t nfp, uint32_t max)
{
	if (!sm->abi || !sm->stack_size || sm->tid == 0)
		return -1; /* a kernel thread, or no stack copied */
	if (!*p)
		*p = stack_proc(r, pid);
	if (!*p)
		return -1;
	unwind_sample us = {
		.pid = pid, .tid = (int32_t)sm->tid, .regs = sm->regs, .stack = sm->stack,
		.stack_len = sm->stack_dyn, .stack_full = sm->stack_dyn >= sm->stack_size};
	unsigned nd = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = unwind(r->uw, r->tr, *p, &us, r->upcs, r->uact, max, &nd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	unwind_time(r, (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec));
	if (rc < 0 || nd == 0) {
		r->st->unwind_failed++;
		if (r->call_graph == STROBE_CG_DWARF) { /* at least the sampled address */
			r->upcs[0] = sm->regs[8];
			r->uact[0] = true;
			return 1;
		}
		return -1;
	}
	r->st->unwound++;
	if (rc == STROBE_UNWIND_COMPLETE)
		r->st->unwind_complete++;
	else if (rc == STROBE_UNWIND_TRUNCATED)
		r->st->unwind_truncated++;
	if (r->call_graph != STROBE_CG_AUTO || rc == STROBE_UNWIND_COMPLETE ||
	    rc == STROBE_UNWIND_FULL)
		return (int)nd;
	uint64_t last = r->upcs[nd - 1];
	for (uint32_t j = 0; j < nfp; j++) {
		if (fp[j] != last)
			continue;
		if (j + 1 < nfp)
			r->st->unwind_fp_spliced++;
		for (uint32_t k = j + 1; k < nfp && nd < max; k++) {
			r->upcs[nd] = fp[k];
			r->uact[nd++] = false;
		}
		return (int)nd;
	}
	if (nfp > nd) {
		r->st->unwind_fp_kept++;
		return -1;
	}
	return (int)nd;
}

uint32_t stack_user_chain(const rec_sample *sm, uint64_t fp[STROBE_STACK_FRAMES])
{
	bool user = true;
	uint32_t n = 0;
	for (uint64_t i = 0; i < sm->nr && n < STROBE_STACK_FRAMES; i++) {
		uint64_t ip = sm->ips[i];
		if (ip >= (uint64_t)PERF_CONTEXT_MAX)
			user = ip == (uint64_t)PERF_CONTEXT_USER;
		else if (user && ip)
			fp[n++] = ip;
	}
	return n;
}

uint32_t stack_resolve_sample(stack_resolver *r, int32_t pid, const rec_sample *sm,
			      const rec_unwound *pre, uint32_t max_stack)
{
	enum { CTX_USER, CTX_KERNEL, CTX_OTHER } ctx = CTX_USER;
	stack_walk w = {.pid = pid};
	proc *p = NULL;
	bool first = true;
	uint32_t nfp = 0;
	uint64_t fp[STROBE_STACK_FRAMES]; /* the user part of the kernel's chain */
	for (uint64_t i = 0; i < sm->nr && w.n < STROBE_STACK_FRAMES; i++) {
		uint64_t ip = sm->ips[i];
		if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
			ctx = ip == (uint64_t)PERF_CONTEXT_KERNEL ? CTX_KERNEL
			      : ip == (uint64_t)PERF_CONTEXT_USER ? CTX_USER
								 : CTX_OTHER;
			continue;
		}
		if (ctx == CTX_OTHER || ip == 0)
			continue;
		if (ctx == CTX_KERNEL) {
			bool call = !first;
			first = false;
			if (r->kernel)
				add_frame(r, &w, ip, true, call);
		} else if (nfp < STROBE_STACK_FRAMES) {
			fp[nfp++] = ip;
		}
	}
	int nu = -1;
	if (pre) {
		nu = pre->nu;
		for (int i = 0; i < nu; i++) {
			memcpy(&r->upcs[i], pre->pcs + 8 * (size_t)i, 8);
			r->uact[i] = pre->act[i] != 0;
		}
	} else if (r->uw) {
		nu = stack_unwind_user(r, pid, &p, sm, fp, nfp, max_stack);
		w.p = p;
	}
	if (nu < 0) {
		for (uint32_t i = 0; i < nfp; i++) {
			add_frame(r, &w, fp[i], false, !first);
			first = false;
		}
	} else {
		for (int i = 0; i < nu; i++) {
			add_frame(r, &w, r->upcs[i], false,
				  first ? false : (i == 0 ? true : !r->uact[i]));
			first = false;
		}
	}
	return w.n;
}

uint32_t stack_resolve_summed(stack_resolver *r, int32_t pid, const uint64_t *kips, uint32_t nk,
			      const uint64_t *uips, const uint32_t *upy, uint32_t nu,
			      bool pre_exec)
{
	stack_walk w = {.pid = pid, .pre_exec = pre_exec};
	bool first = true;
	/* the leaf is where the thread was, the rest return addresses */
	for (uint32_t i = 0; i < nk && kips[i]; i++) {
		if (r->kernel)
			add_frame(r, &w, kips[i], true, !first);
		first = false;
	}
	for (uint32_t i = 0; i < nu && (uips[i] || (upy && upy[i])); i++) {
		if (upy && upy[i]) {
			sampler_frame_key k = {.addr = upy[i], .map = STROBE_MAP_PY};
			uint32_t id;
			if (w.n < STROBE_STACK_FRAMES &&
			    strobe_itab_intern(r->frames, &k, sizeof(k), &id, NULL) == 0)
				r->ids[w.n++] = id;
		} else {
			add_frame(r, &w, uips[i], false, !first);
		}
		first = false;
	}
	return w.n;
}
