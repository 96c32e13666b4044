/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's state, shared by agent.c (the sampling thread: sampling, export, budget),
 * sender.c (the push thread) and admin.c (the admin HTTP server and on-demand captures).
 * Private to agent/.
 *
 * Locking: `mu` guards `st` (what /status and /metrics show); the sampling thread is the only
 * one that touches the sampler and the symbolizer; the spool has its own lock; requests from
 * signal handlers and the admin server are atomics the sampling thread polls.
 */
#ifndef STROBE_AGENT_IMPL_H
#define STROBE_AGENT_IMPL_H

#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>

#include "strobe/agent.h"
#include "strobe/sampler.h"
#include "strobe/clock.h" /* strobe_mono_ns, the sampler's clock */
#include "strobe/offcpu.h"
#include "strobe/locks.h"
#include "strobe/oncpu.h"
#include "preload.h"
#include "proc_cache.h"

typedef struct agent_status {
	int64_t started_unix;
	bool paused;
	unsigned freq_now;       /* the frequency the sampler runs at (budget may lower it) */
	bool offcpu_now;
	const char *offcpu_mode; /* "bpf" or "perf" while off-CPU is on, else "off" */
	char offcpu_why[256];    /* why auto chose perf ("" otherwise) */
	const char *oncpu_mode;  /* "bpf" or "perf" */
	char oncpu_why[256];     /* why auto chose perf ("" otherwise) */
	strobe_oncpu_stats oc;   /* the eBPF sampling program's counters */
	strobe_offcpu_stats ob;  /* the eBPF collection's counters */
	strobe_locks_stats lk;   /* the futex-wait program's counters (--locks) */
	char locks_why[256];     /* why --locks is off ("" otherwise) */
	preload_stats pl; /* the preloaded processes' channels */
	unsigned budget_level;   /* 0 = as configured; each step is one degradation */
	char budget_note[256];   /* what the budget did last, "" when nothing */
	double cpu_pct;          /* own CPU over the last interval, % of one core */
	double cpu_seconds;      /* own CPU since start */
	uint64_t rss_bytes;
	/* sampler, accumulated over sampler reopens */
	uint64_t samples, switches, lost, throttled;
	uint32_t processes, threads, mappings, frames;
	uint64_t processes_forgotten; /* exited, dropped from the sampler's tables */
	/* processes with samples at an export that had no name but "unknown" (gone before their
	 * identity was read, and never seen by the tracker), or no entry at all (dropped) */
	uint64_t processes_unnamed, processes_unlooked;
	uint64_t intervals, profiles, profile_bytes, export_errors, sampler_reopens;
	uint64_t sym_renewals;    /* the symbolizer's (--symbolizer-renew) */
	int64_t last_export_unix;
	/* sender */
	uint64_t pushes, push_failures, push_rejected, bytes_sent;
	/* --symbolize server's symbol uploads (sym_upload.c): sent, found on the server already,
	 * failed (offered again) */
	uint64_t symbols_uploaded, symbols_on_server, symbols_failed;
	int64_t last_push_unix;
	bool server_up;
	uint64_t retry_after;      /* 429/503 answers whose Retry-After the sender waited out */
	double retry_after_last_s; /* what the last one asked for */
	int64_t next_push_unix_ms; /* backing off: no push before this (0: not backing off) */
	bool next_push_by_server;  /* that wait is the server's Retry-After, not our backoff */
	char last_error[256];
	uint64_t captures;
} agent_status;

struct strobe_agent {
	const strobe_agent_opts *o;
	char host[256];
	strobe_sampler *s;
	strobe_sampler_opts so;
	strobe_offcpu *ob;      /* the eBPF off-CPU collection, once loaded */
	bool ob_failed;         /* it could not be loaded: perf from then on (auto) */
	bool ob_active;         /* the current sampler's off-CPU comes from it */
	strobe_locks *lk;       /* the futex-wait program (--locks) */
	bool lk_shares_ob;      /* ... walking with the off-CPU program's table maps and loader */
	strobe_oncpu *oc;       /* the eBPF on-CPU sampling program, once loaded */
	bool oc_failed;         /* it could not be loaded: perf from then on (auto) */
	bool oc_active;         /* the current sampler's on-CPU samples come from it */
	bool oc_shares_ob;      /* ... walking with the off-CPU program's table maps and loader */
	uint64_t oc_full_seen;  /* its counts_full at the last export (for the profiles' comment) */
	preload *pl;     /* heap and mutex profiles of preloaded processes; NULL: off */
	int64_t rss_checked_ns; /* when keep_resident_low last looked */
	int64_t bpf_stats_ns;   /* when publish_stats last read the eBPF programs' counters */
	uint64_t base_samples, base_switches, base_lost, base_throttled; /* of closed samplers */
	strobe_symbolizer *sym;
	int64_t sym_born_ns;
	strobe_spool *spool;
	regex_t comm_re;
	bool have_comm_re;
	regex_t *rule_re; /* 3 per rule (comm, exe, service); rule_has[i] says which are set */
	bool *rule_has;
	proc_cache procs;       /* each exported process's identity, by pid */

	atomic_int stop;        /* 1: stop requested */
	atomic_int want_pause;  /* 1 paused wanted, 0 running wanted */
	atomic_int capturing;   /* an on-demand capture is running */
	atomic_int sender_stop; /* 1: deliver what is left until sender_deadline_ns, then exit */
	int64_t sender_deadline_ns;
	pthread_t sender;
	bool sender_started;
	struct agent_symup *symup; /* symbol uploads (sym_upload.c); NULL: off */
	struct strobe_jvm_maps *jvm; /* JVM perf maps on request (jvm_perfmap.c); NULL: off */
	void *mhd; /* struct MHD_Daemon */
	unsigned admin_port;

	pthread_mutex_t mu;
	/* /status and /metrics ask the sampling loop for the eBPF counters as of now
	 * (agent_lock_fresh_stats):
	 * asked counts the requests, answered the last one publish_stats served (under mu) */
	atomic_uint stats_asked;
	unsigned stats_answered;
	pthread_cond_t stats_cv;
	/* wakes the sampling loop from its sleep (an eventfd, -1: none): stop, pause, resume and a
	 * /status or /metrics request write to it (agent_wake) */
	int wake_fd;
	int64_t fresh_ns; /* when the loop last took new processes from the on-CPU program */
	agent_status st;
};

void agent_log(strobe_agent *a, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void agent_set_error(strobe_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Wakes the sampling loop (async-signal-safe: the signal handlers' stop, pause and resume). */
void agent_wake(strobe_agent *a);

/* The start of an HTTP answer, for messages: a libcurl write callback (sender.c) keeping the
 * first 511 bytes NUL-terminated in an agent_resp and reading the rest away. */
typedef struct agent_resp {
	char buf[512];
	size_t len;
} agent_resp;
size_t agent_resp_keep(char *p, size_t size, size_t n, void *ctx);

int agent_sender_start(strobe_agent *a, strobe_err *err);
/* Locks a->mu with a->st holding the eBPF programs' counters as of now: asks the sampling loop,
 * which reads them at most once a second otherwise, wakes it (agent_wake) and waits for its
 * next publish, at most 600 ms (then a->st is as recent as it is). */
void agent_lock_fresh_stats(strobe_agent *a);
/* Lets the sender deliver for up to grace_ms more, then joins it. */
void agent_sender_finish(strobe_agent *a, int grace_ms);

/* Symbol uploads (sym_upload.c): a thread of their own; offer never blocks. */
typedef struct agent_symup agent_symup;
int agent_symup_start(strobe_agent *a);
void agent_symup_offer(strobe_agent *a, const char *build_id_hex, const char *path);
void agent_symup_stop(strobe_agent *a);

int agent_admin_start(strobe_agent *a, strobe_err *err);
void agent_admin_stop(strobe_agent *a);

#endif
