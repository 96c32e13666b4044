// SPDX-License-Identifier: Apache-2.0
/*
 * strobe agent's sampling thread: drives the sampler, and every interval turns each process's
 * samples into one labelled pprof profile and queues it in the spool (the sender thread pushes
 * it). It also keeps the agent inside its CPU budget: it measures its own CPU per interval and,
 * when over --max-cpu, reopens the sampler at half the frequency, then without off-CPU; when the
 * load allows (under half the budget for three intervals) it steps back the same way.
 *
 * The sampler is also reopened, at an interval boundary, when it has tracked many processes
 * (its process table only grows; on a host with many short-lived processes this bounds the
 * agent's memory) and the symbolizer is renewed every 30 minutes (its caches hold binaries that
 * may be long gone).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent_impl.h"
#include "proc_info.h"
#include "sampler_ext.h"
#include "strobe/buf.h"
#include "strobe/codec.h"
#include "strobe/jvm_perfmap.h"

#define PIDS_CAP 65536
#define PROC_RECHECK_NS (60LL * 1000000000)

static int64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void offer_symbols(void *ctx, const char *hex, const char *path)
{
	agent_symup_offer(ctx, hex, path);
}

static int jit_unnamed(void *ctx, pid_t pid)
{
	return strobe_jvm_maps_unnamed(ctx, pid);
}

/* Each JVM's first answer, once: named from now on, or why its Java frames stay unnamed. */
static void say_jvm(void *ctx, pid_t pid, bool failed, const char *msg)
{
	(void)pid;
	agent_log(ctx, failed ? STROBE_LOG_WARN : STROBE_LOG_INFO, "%s", msg);
}

/* The symbolizer, at start. The kernel's symbol table (reading and
 * sorting /proc/kallsyms: tens of ms) is loaded now rather than at the first kernel frame: at
 * 19 Hz on a host busy in user code that frame can come many seconds after the start, and the
 * load then lands in the middle of the steady state as a burst of the agent's CPU. */
static int new_symbolizer(strobe_agent *a)
{
	strobe_sym_opts syo = {.no_kernel = !a->so.kernel, .no_dwarf = a->o->no_dwarf};
	a->sym = strobe_symbolizer_new(&syo);
	a->sym_born_ns = strobe_mono_ns();
	if (!a->sym)
		return -errno;
	if (a->so.kernel)
		strobe_sym_kernel(a->sym, 0, NULL, NULL);
	return 0;
}

/* Every --symbolizer-renew seconds (default 30 min), before an interval's profiles are built,
 * so that no name handed out is held across it: what the symbolizer holds of binaries and
 * processes may be long gone. The kernel's table is kept (strobe_symbolizer_renew): rebuilding
 * it here was a transient of 3.3 MB, the agent's peak (issue 23: 15 MB in server mode). */
static void renew_symbolizer(strobe_agent *a, int64_t now)
{
	int64_t every = (int64_t)(a->o->sym_renew_s ? a->o->sym_renew_s : 1800) * 1000000000;
	if (!a->sym || now - a->sym_born_ns <= every)
		return;
	strobe_symbolizer_renew(a->sym);
	a->sym_born_ns = now;
	pthread_mutex_lock(&a->mu);
	a->st.sym_renewals++;
	pthread_mutex_unlock(&a->mu);
}

static uint64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The resident size above which the agent hands pages back between intervals too: 80 % of its
 * 30 MB goal (docs/agent.md). Unwinding a compiler's samples maps megabytes of libLLVM's and
 * cc1's unwind tables within one interval; at the interval's end they are handed back anyway
 * (strobe_sampler_release_memory), but a busy build can push the peak over the goal first. */
#define RSS_SOFT_CAP (24ull << 20)
#define RSS_CHECK_NS 1000000000LL /* at most once a second: a read of /proc/self/statm */

static void keep_resident_low(strobe_agent *a, int64_t now)
{
	if (!a->s || now - a->rss_checked_ns < RSS_CHECK_NS)
		return;
	a->rss_checked_ns = now;
	if (rss_bytes() > RSS_SOFT_CAP)
		strobe_sampler_release_memory(a->s);
}

/* ---- the sampler ----------------------------------------------------------------------------- */

/* An eBPF collection that did not load or attach: an error under --X-mode bpf (strict); else
 * said once in the log with the reason, kept for /status (why), and perf used from then on. */
static int bpf_fallback(strobe_agent *a, bool strict, const char *opt, int code, const char *msg,
			const char *what, const char *instead, bool *failed, char *why, size_t cap,
			strobe_err *err)
{
	if (strict)
		return strobe_errf(err, code < 0 ? code : -EINVAL, "%s bpf: %s", opt, msg);
	*failed = true;
	agent_log(a, STROBE_LOG_WARN, "%s is not available (%s); using %s", what, msg, instead);
	pthread_mutex_lock(&a->mu);
	snprintf(why, cap, "%.255s", msg);
	pthread_mutex_unlock(&a->mu);
	return 0;
}

/* Whether off-CPU goes through the eBPF collection now: loads it on first use. With --off-cpu-mode
 * bpf a failure is an error; with auto it is logged once and the perf path is used instead. */
static int use_bpf(strobe_agent *a, bool *bpf, strobe_err *err)
{
	*bpf = false;
	if (!(a->so.events & STROBE_EV_OFFCPU) || a->o->offcpu_mode == STROBE_OFFCPU_PERF ||
	    a->ob_failed)
		return 0;
	strobe_err e = {{0}};
	int code = 0;
	if (!a->ob) {
		strobe_offcpu_opts oo = {.pids = a->o->pids, .npids = a->o->npids,
					 .proc_root = a->o->proc_root, .kernel = a->so.kernel,
					 .max_entries = a->o->offcpu_entries,
					 /* 8 bytes a row (struct ob_row) */
					 .table_rows = a->o->call_graph == STROBE_CG_FP
							       ? 0
							       : a->o->unwind_table_mb << 17};
		if (!(a->ob = strobe_offcpu_open(&oo, &e))) {
			code = -errno;
		} else if (oo.table_rows) {
			strobe_offcpu_stats st;
			strobe_offcpu_get_stats(a->ob, &st);
			if (st.tables_off[0])
				agent_log(a, STROBE_LOG_WARN, "off-CPU: user stacks by frame pointers "
					  "only: the unwind-table walk did not load (%s)", st.tables_off);
		}
	}
	if (a->ob && (atomic_load(&a->want_pause) || (code = strobe_offcpu_attach(a->ob, &e)) == 0)) {
		*bpf = true;
		return 0;
	}
	if ((a->lk_shares_ob || a->oc_shares_ob) && a->ob) {
		strobe_offcpu_detach(a->ob); /* kept: its table loader serves --locks, on-CPU too */
	} else {
		strobe_offcpu_close(a->ob);
		a->ob = NULL;
	}
	return bpf_fallback(a, a->o->offcpu_mode == STROBE_OFFCPU_BPF, "--off-cpu-mode", code,
			    e.msg, "off-CPU: the eBPF collection",
			    "perf sched_switch samples, which cost far more per context switch",
			    &a->ob_failed, a->st.offcpu_why, sizeof(a->st.offcpu_why), err);
}

/* What the Python frames' reader could not name (an unknown interpreter version), once each. */
static void python_note(void *ctx, const char *msg)
{
	agent_log(ctx, STROBE_LOG_WARN, "on-CPU: %s", msg);
}

/* Whether on-CPU samples are summed in the kernel now (--on-cpu-mode): loads the program on
 * first use. With bpf a failure is an error; with auto it is logged once, with the reason, and
 * the perf path is used from then on. */
static int use_bpf_oncpu(strobe_agent *a, bool *bpf, strobe_err *err)
{
	*bpf = false;
	if (a->o->oncpu_mode == STROBE_OFFCPU_PERF || a->oc_failed)
		return 0;
	strobe_err e = {{0}};
	int code = 0;
	if (!a->oc) {
		int share[STROBE_TABLE_MAPS];
		strobe_oncpu_opts oo = {.pids = a->o->pids, .npids = a->o->npids,
					.proc_root = a->o->proc_root, .kernel = a->so.kernel,
					.freq = a->so.freq,
					.interval_ms = (a->o->interval_s ? a->o->interval_s : 10) * 1000,
					.max_entries = a->o->oncpu_entries,
					.no_python = a->o->no_python,
					.fresh = true, /* identities read while they run */
					.note = python_note, .note_ctx = a,
					.table_rows = a->o->call_graph == STROBE_CG_FP
							      ? 0
							      : a->o->unwind_table_mb << 17};
		/* with the off-CPU program's table walk loaded, its rows and loader serve both */
		if (oo.table_rows && a->ob && strobe_offcpu_table_maps(a->ob, share) == 0)
			oo.share_tables = share;
		if (!(a->oc = strobe_oncpu_open(&oo, &e))) {
			code = -errno;
		} else {
			a->oc_shares_ob = oo.share_tables != NULL;
			strobe_oncpu_stats st;
			strobe_oncpu_get_stats(a->oc, &st);
			if (oo.table_rows && st.tables_off[0])
				agent_log(a, STROBE_LOG_WARN, "on-CPU: user stacks by frame pointers "
					  "only: the unwind-table walk did not load (%s)", st.tables_off);
		}
	}
	if (a->oc && (atomic_load(&a->want_pause) ||
		      (code = strobe_oncpu_attach(a->oc, a->so.freq, &e)) == 0)) {
		*bpf = true;
		return 0;
	}
	strobe_oncpu_close(a->oc);
	a->oc = NULL;
	return bpf_fallback(a, a->o->oncpu_mode == STROBE_OFFCPU_BPF, "--on-cpu-mode", code, e.msg,
			    "on-CPU: the eBPF sampling program",
			    "perf samples with stack copies, unwound here", &a->oc_failed,
			    a->st.oncpu_why, sizeof(a->st.oncpu_why), err);
}

/* --locks: the futex-wait program, loaded once (attached unless paused). Where it cannot load
 * (no BTF, no privilege, no syscall tracepoints) the agent goes on without lock profiles and
 * says why, in the log and in /status. */
static void open_locks(strobe_agent *a)
{
	strobe_err e = {{0}};
	int share[STROBE_TABLE_MAPS];
	strobe_locks_opts lo = {.pids = a->o->pids, .npids = a->o->npids,
				.proc_root = a->o->proc_root,
				.table_rows = a->o->call_graph == STROBE_CG_FP
						      ? 0
						      : a->o->unwind_table_mb << 17};
	/* with the off-CPU program's table walk loaded, its rows and loader serve both */
	if (lo.table_rows && a->ob && strobe_offcpu_table_maps(a->ob, share) == 0)
		lo.share_tables = share;
	if ((a->lk = strobe_locks_open(&lo, &e)) &&
	    (atomic_load(&a->want_pause) || strobe_locks_attach(a->lk, &e) == 0)) {
		a->lk_shares_ob = lo.share_tables != NULL;
		strobe_locks_stats st;
		strobe_locks_get_stats(a->lk, &st);
		if (st.tables_off[0])
			agent_log(a, STROBE_LOG_WARN, "locks: user stacks by frame pointers only: the "
				  "unwind-table walk did not load (%s)", st.tables_off);
		return;
	}
	strobe_locks_close(a->lk);
	a->lk = NULL;
	agent_log(a, STROBE_LOG_ERROR, "locks: no lock profiles: %s", e.msg);
	pthread_mutex_lock(&a->mu);
	snprintf(a->st.locks_why, sizeof(a->st.locks_why), "%.255s", e.msg);
	pthread_mutex_unlock(&a->mu);
}

static void on_process(void *ctx, pid_t pid);

static int open_sampler(strobe_agent *a, strobe_err *err)
{
	strobe_sampler *s = NULL;
	bool bpf = false;
	int rc = use_bpf(a, &bpf, err);
	if (rc < 0)
		return rc;
	if (!bpf && a->ob) /* off-CPU turned off by the budget */
		strobe_offcpu_detach(a->ob);
	strobe_sampler_opts so = a->so;
	so.on_process = on_process;
	so.on_process_ctx = a;
	if (bpf)
		so.events &= ~(unsigned)STROBE_EV_OFFCPU; /* the kernel sums it instead */
	bool obpf = false;
	if ((rc = use_bpf_oncpu(a, &obpf, err)) < 0)
		return rc;
	so.cpu_external = obpf; /* the kernel sums on-CPU samples: the events for side-band only */
	if (!(s = strobe_sampler_open(&so, err)))
		return -errno;
	if (!atomic_load(&a->want_pause) && (rc = strobe_sampler_enable(s, err)) < 0) {
		strobe_sampler_close(s);
		return rc;
	}
	sampler_set_external_offcpu(s, bpf);
	a->s = s;
	a->ob_active = bpf;
	a->oc_active = obpf;
	pthread_mutex_lock(&a->mu);
	a->st.paused = atomic_load(&a->want_pause);
	a->st.freq_now = a->so.freq;
	a->st.offcpu_now = a->so.events & STROBE_EV_OFFCPU;
	a->st.offcpu_mode = !a->st.offcpu_now ? "off" : bpf ? "bpf" : "perf";
	a->st.oncpu_mode = obpf ? "bpf" : "perf";
	pthread_mutex_unlock(&a->mu);
	return 0;
}

static void close_sampler(strobe_agent *a)
{
	if (!a->s)
		return;
	strobe_sampler_stats st;
	strobe_sampler_get_stats(a->s, &st);
	a->base_samples += st.samples;
	a->base_switches += st.switches;
	a->base_lost += st.lost;
	a->base_throttled += st.throttled;
	strobe_sampler_close(a->s);
	a->s = NULL;
}

/* The eBPF programs' counters are read at most every BPF_STATS_NS (and right after each export):
 * a bpf() call each, and the sampling loop woke ten times a second at 99 Hz (it may still, with
 * the perf path); reading the on-CPU program's counters at every wakeup was a fifth of the
 * agent's own CPU beside 200 busy processes. A /status or /metrics request asks for them as of
 * now (agent_lock_fresh_stats), and wakes the loop to answer. */
#define BPF_STATS_NS 1000000000LL
#define FRESH_WAIT_MS 600 /* the longest agent_lock_fresh_stats waits for the loop */

void agent_lock_fresh_stats(strobe_agent *a)
{
	unsigned want = atomic_fetch_add(&a->stats_asked, 1) + 1;
	agent_wake(a);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)FRESH_WAIT_MS * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_mutex_lock(&a->mu);
	while ((int)(a->stats_answered - want) < 0)
		if (pthread_cond_timedwait(&a->stats_cv, &a->mu, &ts) == ETIMEDOUT)
			break;
}

static void publish_stats(strobe_agent *a)
{
	strobe_sampler_stats st = {0};
	if (a->s)
		strobe_sampler_get_stats(a->s, &st);
	int64_t now = strobe_mono_ns();
	unsigned asked = atomic_load(&a->stats_asked);
	bool bpf = now - a->bpf_stats_ns >= BPF_STATS_NS || asked != a->stats_answered;
	strobe_offcpu_stats ob = {0};
	strobe_locks_stats lk = {0};
	strobe_oncpu_stats oc = {0};
	if (bpf) {
		a->bpf_stats_ns = now;
		if (a->ob)
			strobe_offcpu_get_stats(a->ob, &ob);
		if (a->lk)
			strobe_locks_get_stats(a->lk, &lk);
		if (a->oc)
			strobe_oncpu_get_stats(a->oc, &oc);
	}
	pthread_mutex_lock(&a->mu);
	if (bpf) {
		a->st.ob = ob;
		a->st.lk = lk;
		a->st.oc = oc;
		a->stats_answered = asked;
		pthread_cond_broadcast(&a->stats_cv);
	}
	a->st.samples = a->base_samples + st.samples;
	/* counted in the kernel: live, not only once collected (and still while paused: none) */
	if (a->oc && a->st.oc.samples >= a->st.oc.collected)
		a->st.samples += a->st.oc.samples - a->st.oc.collected;
	a->st.switches = a->base_switches + st.switches;
	a->st.lost = a->base_lost + st.lost;
	a->st.throttled = a->base_throttled + st.throttled;
	a->st.processes = st.processes;
	a->st.threads = st.threads;
	a->st.mappings = st.mappings;
	a->st.frames = st.frames;
	pthread_mutex_unlock(&a->mu);
}

/* ---- what each process is -------------------------------------------------------------------- */

/* A process's identity (proc_entry), read from /proc when it is new to the agent or could have
 * changed: at each new image (fresh: the sampler's first sample of a process, or of its new
 * image after an exec, and the on-CPU program's), when the sampler saw it take another name,
 * and when its cgroup changed (a unit or container moving it), looked at every
 * PROC_RECHECK_NS. What else the identity holds (environment, executable and its build ID)
 * changes only with an exec: reading it all again every minute for every process (a 256 KiB
 * buffer for each environment, the executable's link and a stat of it) bought nothing. */
/* A process gone before its identity was read, named by its comm as the sampler's tracker saw
 * it ("unknown" until then). With the on-CPU program summing, the tracker learns a process from
 * the side-band records at the export, after the program told of the process: a name of
 * "unknown" is looked up again then (a process living a few ms was otherwise "unknown" for
 * good, and --comm filtered its samples out). */
static void name_gone(strobe_agent *a, pid_t pid, proc_entry *e)
{
	const proc *tp = a->s ? tracker_proc(sampler_tracker(a->s), pid, false) : NULL;
	const char *comm = tp && tp->comm[0] ? tp->comm : e->info.comm[0] ? NULL : "unknown";
	if (!comm)
		return;
	snprintf(e->info.comm, sizeof(e->info.comm), "%s", comm);
	snprintf(e->info.service, sizeof(e->info.service), "%s", comm);
	strcpy(e->info.source, "comm");
}

static proc_entry *proc_lookup(strobe_agent *a, pid_t pid, int64_t interval, bool fresh)
{
	proc_entry *e = proc_cache_find(&a->procs, pid);
	int64_t now = strobe_mono_ns();
	/* A pid reused (or a process that exec'd) since it was read: its name changed. */
	const proc *pr =
		e && a->s ? tracker_proc(sampler_tracker(a->s), pid, false) : NULL;
	bool renamed = pr && pr->comm[0] && strncmp(pr->comm, e->info.comm, sizeof(pr->comm)) != 0;
	if (e && !renamed && !fresh && !e->gone && now - e->read_ns >= PROC_RECHECK_NS) {
		char cg[sizeof(e->info.cgroup)];
		/* (gone meanwhile: named as it was) */
		if (proc_info_cgroup(a->o->proc_root, pid, cg, sizeof(cg)) < 0 ||
		    strcmp(cg, e->info.cgroup) == 0)
			e->read_ns = now;
	}
	if (e && !renamed && !fresh && (e->gone || now - e->read_ns < PROC_RECHECK_NS)) {
		e->seen_interval = interval;
		if (e->gone && strcmp(e->info.comm, "unknown") == 0)
			name_gone(a, pid, e); /* the sampler may know its name by now */
		return e;
	}
	if (!e && !(e = proc_cache_add(&a->procs, pid)))
		return NULL;
	e->read_ns = now;
	e->seen_interval = interval;
	e->gone = false;
	/* read aside: a process that exited meanwhile (or is exiting: its executable's link gone,
	 * its environment empty) keeps the identity read while it ran */
	strobe_proc_info pi;
	if (strobe_proc_info_read(a->o->proc_root, pid, &pi) == 0 && (pi.exe[0] || !e->info.exe[0])) {
		e->info = pi;
	} else {
		/* exited: name it from what the sampler saw, unless it was read before */
		if (!e->info.service[0] || strcmp(e->info.source, "comm") == 0)
			name_gone(a, pid, e);
		e->gone = true;
	}
	return e;
}

/* A process sampled for the first time: its identity is read now, while it runs (a process
 * shorter than an interval has left no environment to read by the interval's end). new_image:
 * the first sample of this image (the on-CPU program's fresh ring: a new process, an exec, a
 * pid reused, which it tells apart), read again even if known. */
static void seen_process(strobe_agent *a, pid_t pid, bool new_image)
{
	pthread_mutex_lock(&a->mu);
	int64_t interval = (int64_t)a->st.intervals + 1;
	pthread_mutex_unlock(&a->mu);
	proc_lookup(a, pid, interval, new_image);
}

/* The sampler's first sample of a process in its tables: a new image with the perf path (an exec
 * starts it over); with the on-CPU program summing, the sampler's tables are filled at the
 * export, where the program told of each new image already while it ran. */
static void on_process(void *ctx, pid_t pid)
{
	strobe_agent *a = ctx;
	seen_process(a, pid, !(a->oc && a->oc_active));
}

static void proc_prune(strobe_agent *a, int64_t interval)
{
	proc_cache_prune(&a->procs, interval - 6);
}

/* ---- the push's query string ----------------------------------------------------------------- */

/* The push's query string: a strobe_buf whose first failure sticks (later adds are skipped), so
 * that a query cut short is never sent. Its parts are bounded (the process's identity fields,
 * the configured labels): the cap only keeps that true. */
#define PUSH_QUERY_MAX (1u << 20)
typedef struct sbuf {
	strobe_buf b;
	int err;
} sbuf;

static void sb_init(sbuf *s)
{
	strobe_buf_init(&s->b, PUSH_QUERY_MAX);
	s->err = 0;
}
static void sb_add(sbuf *s, const char *t, size_t n)
{
	if (!s->err)
		s->err = strobe_buf_add(&s->b, t, n);
}
static void sb_str(sbuf *s, const char *t) { sb_add(s, t, strlen(t)); }
/* Percent-encoded for a URL query. */
static void sb_esc(sbuf *s, const char *t, size_t n)
{
	if (!s->err)
		s->err = strobe_buf_add_urlenc(&s->b, t, n);
}

/* One matcher key="value" of the labels={...} selector, itself percent-encoded. */
static void sb_label(sbuf *b, bool *first, const char *k, size_t kl, const char *v)
{
	if (!v || !*v)
		return;
	sbuf t;
	sb_init(&t);
	sb_str(&t, *first ? "" : ",");
	sb_add(&t, k, kl);
	sb_str(&t, "=\"");
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			sb_add(&t, "\\", 1);
		sb_add(&t, v, 1);
	}
	sb_str(&t, "\"");
	if (t.err)
		b->err = b->err ? b->err : t.err;
	else
		sb_esc(b, t.b.p, t.b.len);
	strobe_buf_free(&t.b);
	*first = false;
}

static bool rule_matches(strobe_agent *a, unsigned r, const strobe_proc_info *pi)
{
	const char *subj[3] = {pi->comm, pi->exe, pi->service};
	for (int j = 0; j < 3; j++)
		if (a->rule_has[r * 3 + j] && regexec(&a->rule_re[r * 3 + j], subj[j], 0, NULL, 0) != 0)
			return false;
	return true;
}

static char *push_query(strobe_agent *a, pid_t pid, const strobe_proc_info *pi, const char *name)
{
	const strobe_agent_opts *o = a->o;
	const char *service = pi->service;
	/* later rules win, as later lines of a config usually mean "more specific" */
	for (unsigned r = 0; r < o->nrules; r++)
		if (o->rules[r].service_name && rule_matches(a, r, pi))
			service = o->rules[r].service_name;
	sbuf b;
	sb_init(&b);
	sb_str(&b, "name=");
	sb_str(&b, name);
	sb_str(&b, "&service_name=");
	sb_esc(&b, service, strlen(service));
	sb_str(&b, "&labels=");
	sb_esc(&b, "{", 1);
	bool first = true;
	char num[16];
	snprintf(num, sizeof(num), "%d", (int)pid);
	sb_label(&b, &first, "host", 4, a->host);
	/* build_id stays a series label: a service runs one build per deployed version (two
	 * during a rollout), so it is bounded per service, and it is what a diff between
	 * versions selects on. */
	sb_label(&b, &first, "build_id", 8, pi->build_id);
	for (unsigned i = 0; i < o->nlabels; i++) {
		const char *eq = strchr(o->labels[i], '=');
		if (strncmp(o->labels[i], "service_name=", 13) != 0)
			sb_label(&b, &first, o->labels[i], (size_t)(eq - o->labels[i]), eq + 1);
	}
	for (unsigned r = 0; r < o->nrules; r++) {
		if (!rule_matches(a, r, pi))
			continue;
		for (unsigned i = 0; i < o->rules[r].nlabels; i++) {
			const char *kv = o->rules[r].labels[i], *eq = strchr(kv, '=');
			sb_label(&b, &first, kv, (size_t)(eq - kv), eq + 1);
		}
	}
	sb_esc(&b, "}", 1);
	/* The process's identity rides on its samples, not on the series: a series names a
	 * service, and one per process would grow without bound (pid reuse, restarts, forks).
	 * The server stores these with the points; selectors can still pick pid="123". */
	sb_str(&b, "&sample_labels=");
	sb_esc(&b, "{", 1);
	first = true;
	sb_label(&b, &first, "pid", 3, num);
	sb_label(&b, &first, "comm", 4, pi->comm);
	sb_label(&b, &first, "exe", 3, pi->exe);
	sb_esc(&b, "}", 1);
	if (b.err) {
		strobe_buf_free(&b.b);
		return NULL;
	}
	return strobe_buf_take(&b.b, NULL);
}

/* ---- export ---------------------------------------------------------------------------------- */

static bool wanted(strobe_agent *a, const strobe_proc_info *pi)
{
	if (a->have_comm_re && regexec(&a->comm_re, pi->comm, 0, NULL, 0) != 0)
		return false;
	if (a->o->cgroup) {
		size_t n = strlen(a->o->cgroup);
		while (n > 1 && a->o->cgroup[n - 1] == '/')
			n--;
		if (strncmp(pi->cgroup, a->o->cgroup, n) != 0 ||
		    (pi->cgroup[n] && pi->cgroup[n] != '/' && n > 1))
			return false;
	}
	return true;
}

/* The pushes' compression. Beside 200 busy processes a profile is about 500 bytes serialized,
 * which gzip shrinks by a tenth (87.7 % of it at libdeflate's level 6, 89.6 % at level 1) for
 * 12.4 us (9.8 us at level 1) a profile, most of it the compressor's setup for each call: 14 %
 * of the agent's own CPU there at level 1. So a profile under PUSH_GZIP_MIN goes as it
 * is (the push API takes a pprof gzipped or not) and a larger one at level 1, the fastest. */
#define PUSH_GZIP_MIN 4096
#define PUSH_GZIP_LEVEL 1

/* p's pprof for a push: gzipped when that is worth its CPU (PUSH_GZIP_MIN). 0/-errno. */
static int push_encode(const strobe_profile *p, uint8_t **out, size_t *len)
{
	int rc = strobe_pprof_encode_level(p, 0, out, len);
	if (rc < 0 || *len < PUSH_GZIP_MIN)
		return rc;
	uint8_t *gz;
	size_t gzlen;
	if ((rc = strobe_gzip_level(*out, *len, PUSH_GZIP_LEVEL, &gz, &gzlen)) < 0)
		return 0; /* (sent as it is) */
	free(*out);
	*out = gz;
	*len = gzlen;
	return 0;
}

typedef struct export_counts {
	uint64_t nprof, nbytes, errors;
} export_counts;

/* Encodes one process's profile and queues it for the sender (through the spool), under the
 * profile type `name` and the process's labels. p NULL: the export failed (err says why). */
static void queue_profile(strobe_agent *a, pid_t pid, const proc_entry *pe, const char *name,
			  strobe_profile *p, export_counts *ec, const strobe_err *err)
{
	uint8_t *pb = NULL;
	size_t len = 0;
	char *meta = NULL;
	if (!p || push_encode(p, &pb, &len) < 0 ||
	    !(meta = push_query(a, pid, &pe->info, name))) {
		ec->errors++;
		agent_log(a, STROBE_LOG_ERROR, "export of pid %d (%s) failed: %s", (int)pid, name,
			  err && err->msg[0] ? err->msg : "out of memory");
	} else {
		int rc = strobe_spool_add(a->spool, meta, pb, len);
		if (rc < 0)
			agent_log(a, STROBE_LOG_WARN, "spool: cannot write pid %d's profile to disk "
				  "(%s); kept in memory", (int)pid, strerror(-rc));
		ec->nprof++;
		ec->nbytes += len;
		agent_log(a, STROBE_LOG_DEBUG, "queued pid %d %s service %s (%s): %zu bytes",
			  (int)pid, name, pe->info.service, pe->info.source, len);
	}
	free(meta);
	free(pb);
}

typedef struct preload_ctx {
	strobe_agent *a;
	int64_t interval;
	export_counts *ec;
} preload_ctx;

/* A preloaded process's heap ("memory") or "mutex" profile: labelled and filtered as its CPU
 * profiles are (its identity was read while it ran, or is read now). A process that exited
 * before the agent read it is named by what its library read at its start: its service, and
 * its executable (for the --comm and --exe rules). */
static void emit_preload(void *ctx, pid_t pid, const char *name, const char *service,
			 const char *exe, strobe_profile *p)
{
	preload_ctx *pc = ctx;
	proc_entry *pe = proc_lookup(pc->a, pid, pc->interval, false);
	if (pe && pe->gone && !pe->info.exe[0] && exe[0]) {
		proc_info_clean(pe->info.exe, sizeof(pe->info.exe), exe, strlen(exe));
		if (strcmp(pe->info.comm, "unknown") == 0) {
			const char *base = strrchr(pe->info.exe, '/');
			const char *file = base ? base + 1 : pe->info.exe;
			proc_info_clean(pe->info.comm, sizeof(pe->info.comm), file, strlen(file));
			proc_info_clean(pe->info.service, sizeof(pe->info.service), pe->info.comm,
					strlen(pe->info.comm));
			strcpy(pe->info.source, "exe");
		}
	}
	if (pe && service[0] &&
	    (strcmp(pe->info.source, "exe") == 0 || strcmp(pe->info.source, "comm") == 0)) {
		proc_info_clean(pe->info.service, sizeof(pe->info.service), service, strlen(service));
		snprintf(pe->info.source, sizeof(pe->info.source), "preload");
	}
	if (pe && wanted(pc->a, &pe->info))
		queue_profile(pc->a, pid, pe, name, p, pc->ec, NULL);
}

static void export_interval(strobe_agent *a)
{
	if (!a->s)
		return;
	int64_t interval = (int64_t)a->st.intervals + 1;
	char oc_note[256] = "";
	if (a->oc && a->oc_active) {
		int rc = strobe_oncpu_collect(a->oc, a->s);
		if (rc < 0)
			agent_log(a, STROBE_LOG_ERROR, "on-CPU: reading the kernel's sums: %s",
				  strerror(-rc));
		strobe_oncpu_stats os;
		strobe_oncpu_get_stats(a->oc, &os);
		if (os.counts_full > a->oc_full_seen)
			snprintf(oc_note, sizeof(oc_note), "strobe: %" PRIu64 " on-CPU samples of this "
				 "interval (all processes) were dropped: the kernel's map of sums was "
				 "full (%" PRIu32 " entries; --on-cpu-entries)",
				 os.counts_full - a->oc_full_seen, os.max_entries);
		if (oc_note[0])
			agent_log(a, STROBE_LOG_WARN, "on-CPU: %s", oc_note + 8 /* "strobe: " */);
		a->oc_full_seen = os.counts_full;
	}
	if (a->ob && a->ob_active) {
		int rc = strobe_offcpu_collect(a->ob, a->s);
		if (rc < 0)
			agent_log(a, STROBE_LOG_ERROR, "off-CPU: reading the kernel's sums: %s",
				  strerror(-rc));
	}
	if (a->lk) {
		int rc = strobe_locks_collect(a->lk, a->s);
		if (rc < 0)
			agent_log(a, STROBE_LOG_ERROR, "locks: reading the kernel's sums: %s",
				  strerror(-rc));
	}
	pid_t *pids = malloc(PIDS_CAP * sizeof(*pids));
	unsigned n = pids ? strobe_sampler_pids(a->s, pids, PIDS_CAP) : 0;
	/* with --locks, the processes that have lock sums: only they get a lock profile */
	pid_t *lpids = a->lk ? malloc(PIDS_CAP * sizeof(*lpids)) : NULL;
	unsigned nl = lpids ? sampler_lock_pids(a->s, lpids, PIDS_CAP) : 0;
	export_counts ec = {0};
	uint64_t unnamed = 0, unlooked = 0;
	int64_t t0 = strobe_mono_ns();
	renew_symbolizer(a, t0);
	/* with --locks, each process's lock profile (Pyroscope's "mutex") after its CPU one */
	for (unsigned k = 0; k < (a->lk ? 2 * n : n); k++) {
		unsigned i = a->lk ? k / 2 : k;
		bool locks = a->lk && k % 2;
		if (locks) {
			unsigned j = 0;
			while (j < nl && lpids[j] != pids[i])
				j++;
			if (j == nl)
				continue;
		}
		proc_entry *pe = proc_lookup(a, pids[i], interval, false);
		if (!locks) {
			unlooked += !pe;
			unnamed += pe && strcmp(pe->info.comm, "unknown") == 0;
		}
		if (!pe || !wanted(a, &pe->info))
			continue;
		strobe_err err = {{0}};
		strobe_sampler_profile_opts po = {.sym = a->sym, .only_pid = pids[i], .locks = locks,
						  .user_raw = a->o->symbolize_server,
						  .raw_object = a->symup ? offer_symbols : NULL,
						  .raw_ctx = a,
						  .jit_unnamed = a->jvm ? jit_unnamed : NULL,
						  .jit_ctx = a->jvm};
		strobe_profile *p = strobe_sampler_profile(a->s, &po, &err);
		if (p && !locks && oc_note[0])
			strobe_profile_add_comment(p, oc_note);
		if (p && a->lk && strobe_nsamples(p) == 0) {
			strobe_profile_free(p); /* a process that only waited, or never did */
			continue;
		}
		queue_profile(a, pids[i], pe, locks ? "mutex" : "process_cpu", p, &ec, &err);
		strobe_profile_free(p);
	}
	free(pids);
	free(lpids);
	/* the heap and mutex profiles of the processes that run with libstrobe-heap.so */
	if (a->pl) {
		preload_ctx pc = {.a = a, .interval = interval, .ec = &ec};
		int rc = preload_collect(a->pl, a->sym, strobe_real_ns(),
						(int64_t)(a->o->interval_s ? a->o->interval_s : 10) *
							1000000000,
						emit_preload, &pc);
		if (rc < 0)
			agent_log(a, STROBE_LOG_WARN, "preload: %s: %s",
				  a->o->preload_dir ? a->o->preload_dir : "/dev/shm", strerror(-rc));
		preload_stats pst;
		preload_get_stats(a->pl, &pst);
		pthread_mutex_lock(&a->mu);
		a->st.pl = pst;
		pthread_mutex_unlock(&a->mu);
	}
	uint64_t nprof = ec.nprof, nbytes = ec.nbytes, errors = ec.errors;
	sampler_reset_agg(a->s);
	/* exited processes leave the sampler's tables: process churn does not grow them */
	unsigned forgotten = sampler_forget_exited(a->s);
	proc_prune(a, interval);
	/* what this interval's unwinds and exports touched: the goal is on resident memory */
	strobe_sampler_release_memory(a->s);
	pthread_mutex_lock(&a->mu);
	a->st.intervals++;
	a->st.profiles += nprof;
	a->st.profile_bytes += nbytes;
	a->st.export_errors += errors;
	a->st.processes_forgotten += forgotten;
	a->st.processes_unnamed += unnamed;
	a->st.processes_unlooked += unlooked;
	a->st.last_export_unix = time(NULL);
	pthread_mutex_unlock(&a->mu);
	agent_log(a, STROBE_LOG_DEBUG, "interval %" PRId64 ": %" PRIu64 " profiles, %" PRIu64
		  " bytes from %u processes in %.1f ms", interval, nprof, nbytes, n,
		  (double)(strobe_mono_ns() - t0) / 1e6);
}

/* ---- budget ---------------------------------------------------------------------------------- */

/* The agent's own CPU is judged once per interval. One interval a little over the budget is
 * not a trend (a push that met a slow server, a burst of new processes to read): a step down
 * needs two intervals in a row over the budget, or one over twice the budget. */
typedef struct budget {
	int64_t cpu0, wall0;
	int64_t born;  /* when the agent started (the warm-up's start) */
	unsigned over, under, seen;
	bool over_once;
	bool freq_only; /* the last step changed the frequency alone */
} budget;

/* The first intervals pay for warming up: every process on the host is read, and every
 * binary's symbol table loaded, once (measured: 10-40 % of a core for three intervals on a
 * 2-core host, then 1-2 %). Stepping the frequency down for that left the demo at 1-2 Hz long
 * after the warm-up was over (the way back up waits for three quiet intervals per step).
 * During the warm-up (the first WARMUP_INTERVALS judged intervals, within WARMUP_NS of the
 * start) only a cost over WARMUP_FACTOR times the budget steps down. */
#define WARMUP_INTERVALS 3
#define WARMUP_NS (30LL * 1000000000)
#define WARMUP_FACTOR 10

/* Returns true when the sampler must be reopened with a.so changed. */
static bool budget_step(strobe_agent *a, budget *b)
{
	int64_t cpu = cpu_ns(), wall = strobe_mono_ns();
	double pct = wall > b->wall0 ? 100.0 * (double)(cpu - b->cpu0) / (double)(wall - b->wall0) : 0;
	b->cpu0 = cpu;
	b->wall0 = wall;
	pthread_mutex_lock(&a->mu);
	a->st.cpu_pct = pct;
	a->st.cpu_seconds = (double)cpu / 1e9;
	a->st.rss_bytes = rss_bytes();
	pthread_mutex_unlock(&a->mu);
	if (b->seen++ == 0)
		return false; /* the first interval pays for startup (reading /proc): not a trend */
	double max = a->o->max_cpu;
	if (b->seen <= WARMUP_INTERVALS && wall - b->born < WARMUP_NS &&
	    pct <= WARMUP_FACTOR * max)
		return false;
	bool want_off = a->o->offcpu;
	char note[256] = "";
	bool change = false;
	unsigned freq0 = a->so.freq, events0 = a->so.events;
	if (pct > max && pct <= 2 * max && !b->over_once) {
		b->under = 0;
		b->over_once = true; /* noted; the next interval decides */
	} else if (pct > max) {
		b->under = 0;
		b->over_once = false;
		if (a->so.freq > 1) {
			unsigned f = a->so.freq / 2 ? a->so.freq / 2 : 1;
			snprintf(note, sizeof(note), "over budget (%.3g%% > %.3g%% CPU): frequency %u -> %u Hz",
				 pct, max, a->so.freq, f);
			a->so.freq = f;
			change = true;
		} else if (a->so.events & STROBE_EV_OFFCPU) {
			snprintf(note, sizeof(note), "over budget (%.3g%% > %.3g%% CPU) at %u Hz: off-CPU "
				 "collection turned off", pct, max, a->so.freq);
			a->so.events &= ~(unsigned)STROBE_EV_OFFCPU;
			change = true;
		} else if (b->over++ % 30 == 0) {
			agent_log(a, STROBE_LOG_WARN, "over budget (%.3g%% > %.3g%% CPU) with nothing "
				  "left to turn down (%u Hz, on-CPU only)", pct, max, a->so.freq);
		}
	} else if (pct < max / 2 && (a->so.freq < a->o->freq ||
				     (want_off && !(a->so.events & STROBE_EV_OFFCPU)))) {
		if (++b->under >= 3) {
			b->under = 0;
			if (want_off && !(a->so.events & STROBE_EV_OFFCPU)) {
				snprintf(note, sizeof(note), "load allows (%.3g%% < %.3g%% CPU): off-CPU "
					 "collection back on", pct, max / 2);
				a->so.events |= STROBE_EV_OFFCPU;
			} else {
				unsigned f = a->so.freq * 2 > a->o->freq ? a->o->freq : a->so.freq * 2;
				snprintf(note, sizeof(note), "load allows (%.3g%% < %.3g%% CPU): frequency "
					 "%u -> %u Hz", pct, max / 2, a->so.freq, f);
				a->so.freq = f;
			}
			change = true;
		}
	} else {
		b->under = 0;
	}
	if (pct <= max)
		b->over_once = false;
	if (change) {
		agent_log(a, STROBE_LOG_WARN, "budget: %s", note);
		pthread_mutex_lock(&a->mu);
		snprintf(a->st.budget_note, sizeof(a->st.budget_note), "%s", note);
		unsigned level = 0;
		for (unsigned f = a->so.freq; f < a->o->freq; f *= 2)
			level++;
		if (a->o->offcpu && !(a->so.events & STROBE_EV_OFFCPU))
			level++;
		a->st.budget_level = level;
		pthread_mutex_unlock(&a->mu);
	}
	b->freq_only = change && a->so.events == events0 && a->so.freq != freq0;
	return change;
}

/* A budget step that changed the frequency alone, applied to the eBPF on-CPU program's events
 * in place: reopening the sampler reads every process's /proc files again, which on a host of
 * hundreds of processes cost more CPU than the step saved (with 170 new processes a second,
 * three steps of reopening took the agent from 0.4 % to 1.5-3.7 % of a core against its 1 %
 * budget). False when the sampler must be reopened after all. */
static bool budget_retune(strobe_agent *a, const budget *b)
{
	if (!b->freq_only || !a->s || !a->oc || !a->oc_active)
		return false;
	if (!atomic_load(&a->want_pause)) { /* (paused: resuming attaches at a->so.freq) */
		strobe_err e = {{0}};
		if (strobe_oncpu_attach(a->oc, a->so.freq, &e) < 0) {
			agent_log(a, STROBE_LOG_WARN, "on-CPU: %s (reopening the sampler)", e.msg);
			return false;
		}
	}
	sampler_set_external_freq(a->s, a->so.freq);
	pthread_mutex_lock(&a->mu);
	a->st.freq_now = a->so.freq;
	pthread_mutex_unlock(&a->mu);
	return true;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

/* strobe_agent_new's way out: NULL, with errno saying why (EINVAL: an option or the config). */
static strobe_agent *agent_new_failed(strobe_agent *a, int rc)
{
	strobe_agent_free(a);
	errno = -rc;
	return NULL;
}

strobe_agent *strobe_agent_new(const strobe_agent_opts *o, strobe_err *err)
{
	if (!o->server || !*o->server)
		return agent_new_failed(NULL, strobe_errf(err, -EINVAL, "no server URL (--server or "
							  "\"server\" in the config)"));
	/* The CA file is checked now, by name: a typo would otherwise show only as pushes that
	 * fail and are retried for ever. */
	if (o->ca) {
		FILE *f = fopen(o->ca, "rb");
		if (!f)
			return agent_new_failed(NULL, strobe_errf(err, -EINVAL, "--ca %s: %s", o->ca,
								  strerror(errno)));
		char head[1 << 16];
		size_t n = fread(head, 1, sizeof(head) - 1, f);
		fclose(f);
		head[n] = 0;
		if (!strstr(head, "-----BEGIN CERTIFICATE-----"))
			return agent_new_failed(NULL, strobe_errf(err, -EINVAL, "--ca %s: not a PEM file "
								  "of CA certificates (-----BEGIN "
								  "CERTIFICATE-----)", o->ca));
	}
	strobe_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return agent_new_failed(NULL, -ENOMEM);
	a->o = o;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->stats_cv, NULL);
	/* (none: the loop wakes every 100-500 ms to see stop, pause and /status requests) */
	a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int rc = 0;
	if (o->host)
		snprintf(a->host, sizeof(a->host), "%s", o->host);
	else if (gethostname(a->host, sizeof(a->host) - 1) < 0)
		strcpy(a->host, "unknown");
	if (o->comm_re) {
		const char *why;
		if (strobe_agent_regcomp(&a->comm_re, o->comm_re, &why) < 0) {
			rc = strobe_errf(err, -EINVAL, "--comm '%s': %s", o->comm_re, why);
			goto fail;
		}
		a->have_comm_re = true;
	}
	if (o->nrules) {
		a->rule_re = calloc(o->nrules * 3, sizeof(*a->rule_re));
		a->rule_has = calloc(o->nrules * 3, sizeof(*a->rule_has));
		if (!a->rule_re || !a->rule_has) {
			rc = -ENOMEM;
			goto fail;
		}
		for (unsigned r = 0; r < o->nrules; r++) {
			const char *re[3] = {o->rules[r].comm_re, o->rules[r].exe_re, o->rules[r].service_re};
			for (int j = 0; j < 3; j++) {
				if (!re[j])
					continue;
				const char *why;
				if (strobe_agent_regcomp(&a->rule_re[r * 3 + j], re[j], &why) < 0) {
					rc = strobe_errf(err, -EINVAL, "processes[%u]: '%s': %s", r, re[j],
							 why);
					goto fail;
				}
				a->rule_has[r * 3 + j] = true;
			}
		}
	}
	a->spool = strobe_spool_open(o->spool_dir, o->spool_max, err);
	if (!a->spool) {
		rc = errno ? -errno : -EIO;
		goto fail;
	}
	strobe_spool_stats sps;
	strobe_spool_get_stats(a->spool, &sps);
	if (sps.items || sps.corrupt)
		agent_log(a, STROBE_LOG_INFO, "spool %s: %" PRIu64 " profiles (%" PRIu64 " bytes) from "
			  "before, %" PRIu64 " corrupt files deleted", o->spool_dir, sps.items, sps.bytes,
			  sps.corrupt);
	a->so = (strobe_sampler_opts){
		.events = STROBE_EV_CPU | (o->offcpu ? STROBE_EV_OFFCPU : 0),
		.freq = o->freq ? o->freq : 19,
		.all = o->npids == 0,
		.pids = o->pids,
		.npids = o->npids,
		.kernel = o->kernel,
		.call_graph = o->call_graph,
		.unwind_cache_bytes = (size_t)o->unwind_cache_mb << 20,
		.proc_root = o->proc_root,
	};
	a->st.started_unix = time(NULL);
	if ((rc = open_sampler(a, err)) < 0)
		goto fail;
	if (o->locks)
		open_locks(a);
	if (!o->no_preload && !(a->pl = preload_new(o->preload_dir)))
		agent_log(a, STROBE_LOG_WARN, "no heap or mutex profiles of preloaded processes: %s",
			  strerror(errno));
	if (!o->no_symbolize) {
		if (new_symbolizer(a) < 0)
			agent_log(a, STROBE_LOG_WARN, "cannot start the symbolizer (%s): sending raw "
				  "addresses", strerror(errno));
	}
	if ((rc = agent_sender_start(a, err)) < 0)
		goto fail;
	if (o->symbolize_server && !o->no_upload_symbols && agent_symup_start(a) < 0)
		agent_log(a, STROBE_LOG_WARN, "cannot start the symbol uploads: %s (frames of "
			  "unstripped binaries stay addresses)", strerror(errno));
	if (a->sym && !o->no_jvm_attach &&
	    !(a->jvm = strobe_jvm_maps_new(o->proc_root, 0, say_jvm, a)))
		agent_log(a, STROBE_LOG_WARN, "cannot start the JVM perf-map requests: %s (compiled "
			  "Java frames stay unnamed unless the JVM writes a perf map itself)",
			  strerror(errno));
	if (o->admin && (rc = agent_admin_start(a, err)) < 0)
		goto fail;
	return a;
fail:
	return agent_new_failed(a, rc);
}

void strobe_agent_free(strobe_agent *a)
{
	if (!a)
		return;
	agent_admin_stop(a);
	agent_symup_stop(a);
	strobe_jvm_maps_free(a->jvm);
	if (a->sender_started)
		agent_sender_finish(a, 0);
	close_sampler(a);
	strobe_oncpu_close(a->oc);
	strobe_offcpu_close(a->ob);
	strobe_locks_close(a->lk);
	preload_free(a->pl);
	strobe_symbolizer_free(a->sym);
	strobe_spool_close(a->spool);
	if (a->have_comm_re)
		regfree(&a->comm_re);
	for (unsigned i = 0; a->rule_has && i < a->o->nrules * 3; i++)
		if (a->rule_has[i])
			regfree(&a->rule_re[i]);
	free(a->rule_re);
	free(a->rule_has);
	if (a->wake_fd >= 0)
		close(a->wake_fd);
	proc_cache_free(&a->procs);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->stats_cv);
	free(a);
}

static void apply_pause(strobe_agent *a)
{
	bool want = atomic_load(&a->want_pause);
	pthread_mutex_lock(&a->mu);
	bool is = a->st.paused;
	pthread_mutex_unlock(&a->mu);
	if (want == is)
		return;
	strobe_err err = {{0}};
	if (a->s) {
		if (want)
			strobe_sampler_disable(a->s);
		else if (strobe_sampler_enable(a->s, &err) < 0) {
			agent_log(a, STROBE_LOG_ERROR, "resume: %s", err.msg);
			return;
		}
	}
	if (a->ob && a->ob_active) {
		if (want)
			strobe_offcpu_detach(a->ob);
		else if (strobe_offcpu_attach(a->ob, &err) < 0)
			agent_log(a, STROBE_LOG_ERROR, "resume: %s", err.msg);
	}
	if (a->oc && a->oc_active) {
		if (want)
			strobe_oncpu_detach(a->oc);
		else if (strobe_oncpu_attach(a->oc, a->so.freq, &err) < 0)
			agent_log(a, STROBE_LOG_ERROR, "resume: %s", err.msg);
	}
	if (a->lk) {
		if (want)
			strobe_locks_detach(a->lk);
		else if (strobe_locks_attach(a->lk, &err) < 0)
			agent_log(a, STROBE_LOG_ERROR, "resume: %s", err.msg);
	}
	if (a->pl) /* the preloaded processes stop (or go on) sampling themselves */
		preload_pause(a->pl, want);
	pthread_mutex_lock(&a->mu);
	a->st.paused = want;
	pthread_mutex_unlock(&a->mu);
	agent_log(a, STROBE_LOG_INFO, want ? "paused: no sampling until resumed"
					   : "resumed: sampling at %u Hz", a->so.freq);
}

/* How long the loop may sleep when no ring reaches its wakeup watermark: about ten samples
 * per CPU (100 ms at 99 Hz, 500 ms at the default 19 Hz), never past the interval's end. Each
 * wakeup costs a context switch and a pass over the rings; at 19 Hz ten a second were a
 * sizeable part of the agent's own CPU. Pause, resume and stop wait at most this long.
 *
 * With the samples summed in the kernel (on-CPU, and off-CPU unless it is perf's) the rings
 * carry only side-band records and nothing needs a look until the export, a new process (the
 * on-CPU program's ring of them wakes the loop: fresh_fd) or a request (agent_wake): the loop
 * sleeps until one of them. Ten wake-ups a second, most of them to find nothing new, were a
 * quarter of the agent's own CPU beside 200 busy processes. New processes wake it at most every
 * FRESH_GAP_NS, so that a host starting hundreds a second does not wake it as often. */
#define FRESH_GAP_NS 100000000LL

static bool sleeps_long(const strobe_agent *a)
{
	return a->wake_fd >= 0 && a->oc && a->oc_active &&
	       (a->ob_active || !(a->so.events & STROBE_EV_OFFCPU));
}

static int poll_ms(const strobe_agent *a, int64_t next, int64_t now)
{
	unsigned hz = a->so.freq ? a->so.freq : 99;
	int64_t ms = 10000 / hz;
	ms = ms < 100 ? 100 : ms > 500 ? 500 : ms;
	if (a->oc_active)
		ms = 100; /* processes new to the kernel's sums are read while they run (fresh) */
	int64_t left = (next - now) / 1000000 + 1;
	if (sleeps_long(a)) {
		ms = left;
		if (now - a->fresh_ns < FRESH_GAP_NS) /* (fresh_fd left out of the poll meanwhile) */
			ms = (a->fresh_ns + FRESH_GAP_NS - now) / 1000000 + 1;
	}
	if (left < ms)
		ms = left > 1 ? left : 1;
	return (int)ms;
}

/* One sleep of the loop and what woke it: the sampler's rings, a request, new processes. */
static void wait_and_read(strobe_agent *a, int64_t next)
{
	int64_t now = strobe_mono_ns();
	struct pollfd ex[2];
	unsigned nex = 0;
	if (a->wake_fd >= 0)
		ex[nex++] = (struct pollfd){.fd = a->wake_fd, .events = POLLIN};
	int ffd = a->oc && a->oc_active ? strobe_oncpu_fresh_fd(a->oc) : -1;
	if (ffd >= 0 && sleeps_long(a) && now - a->fresh_ns >= FRESH_GAP_NS)
		ex[nex++] = (struct pollfd){.fd = ffd, .events = POLLIN};
	strobe_err pe = {{0}};
	if (sampler_poll_with(a->s, poll_ms(a, next, now), ex, nex, &pe) < 0 && pe.msg[0]) {
		agent_log(a, STROBE_LOG_ERROR, "sampler: %s", pe.msg);
		usleep(100000);
	}
	uint64_t v;
	if (a->wake_fd >= 0 && (ex[0].revents & POLLIN) && read(a->wake_fd, &v, sizeof(v)) < 0)
		v = 0; /* (EAGAIN: read by an earlier wake-up) */
	if (a->oc && a->oc_active) {
		/* processes the kernel sampled for the first time: their identity now, while
		 * they run (as the sampler's first sample of one does); no system call when
		 * there are none */
		pid_t fresh[256];
		unsigned nf;
		do {
			nf = strobe_oncpu_fresh(a->oc, fresh, 256);
			for (unsigned i = 0; i < nf; i++) {
				seen_process(a, fresh[i], true);
				/* Until the first export: the processes that ran before the
				 * sampler's records began have their mappings only from /proc,
				 * which a short job has left by the export (all its frames left
				 * unnamed: a fifth of a busy host's first interval). Later ones
				 * are told by their records, and read there if not. */
				if (a->st.intervals == 0)
					sampler_read_maps_now(a->s, fresh[i]);
			}
			strobe_oncpu_fresh_labels(a->oc, fresh, nf);
			if (nf)
				a->fresh_ns = strobe_mono_ns();
		} while (nf == 256);
	}
}

int strobe_agent_run(strobe_agent *a, strobe_err *err)
{
	const int64_t iv = (int64_t)(a->o->interval_s ? a->o->interval_s : 10) * 1000000000;
	int64_t next = strobe_mono_ns() + iv;
	budget b = {.cpu0 = cpu_ns(), .wall0 = strobe_mono_ns(), .born = strobe_mono_ns()};
	agent_log(a, STROBE_LOG_INFO, "profiling %s at %u Hz%s%s%s, every %u s to %s (host %s)",
		  a->o->npids ? "the given pids" : "every process", a->so.freq,
		  a->o->offcpu ? " with off-CPU from " : "",
		  a->o->offcpu ? (a->ob_active ? "eBPF" : "perf") : "",
		  a->lk ? ", lock contention from eBPF" : "", a->o->interval_s,
		  a->o->server, a->host);
	int rc = 0;
	while (!atomic_load(&a->stop)) {
		apply_pause(a);
		if (a->s)
			wait_and_read(a, next);
		else
			usleep(100000);
		publish_stats(a);
		int64_t now = strobe_mono_ns();
		keep_resident_low(a, now);
		if (now < next)
			continue;
		next = now - next > iv ? now + iv : next + iv;
		export_interval(a);
		a->bpf_stats_ns = 0; /* the counters after the drain, at the next publish */
		bool reopen = budget_step(a, &b) && !budget_retune(a, &b);
		strobe_sampler_stats st = {0};
		if (a->s)
			strobe_sampler_get_stats(a->s, &st);
		/* Exited processes are forgotten after each interval, but the mappings they had
		 * stay interned (frames name them; an exec'd process's libraries sit at new
		 * addresses each time): churn grows that table by a few entries per process, so
		 * it is bounded too, at 8 per process of the process bound (~200 bytes each with
		 * their frames). */
		if (!reopen && a->s && (st.processes > a->o->restart_procs ||
					st.mappings > 8 * a->o->restart_procs)) {
			agent_log(a, STROBE_LOG_INFO, "sampler: %u processes, %u mappings tracked, "
				  "starting afresh to bound memory", st.processes, st.mappings);
			reopen = true;
		}
		if (reopen || !a->s) {
			close_sampler(a);
			strobe_err oe = {{0}};
			if (open_sampler(a, &oe) < 0)
				agent_log(a, STROBE_LOG_ERROR, "sampler: %s (retrying next interval)", oe.msg);
			pthread_mutex_lock(&a->mu);
			a->st.sampler_reopens++;
			pthread_mutex_unlock(&a->mu);
			/* Opening the sampler (an event per CPU, the BPF maps, reading /proc) is a
			 * one-off: the next interval is judged on the new rate's steady cost only. */
			b.cpu0 = cpu_ns();
			b.wall0 = strobe_mono_ns();
		}
	}
	/* Clean stop: the last interval goes to the spool, and the sender gets a moment. */
	agent_log(a, STROBE_LOG_INFO, "stopping: exporting the last interval");
	if (a->s) {
		strobe_sampler_disable(a->s);
		strobe_err de = {{0}};
		if (strobe_sampler_drain(a->s, &de) < 0)
			agent_log(a, STROBE_LOG_WARN, "sampler: %s", de.msg);
		export_interval(a);
	}
	a->bpf_stats_ns = 0;
	publish_stats(a);
	agent_sender_finish(a, 5000);
	strobe_spool_stats sps;
	strobe_spool_get_stats(a->spool, &sps);
	if (sps.items)
		agent_log(a, STROBE_LOG_WARN, "%" PRIu64 " profiles not delivered%s", sps.items,
			  a->o->spool_dir ? " (kept in the spool for the next start)" : " (lost: no --spool)");
	(void)err;
	return rc;
}
