/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strobe agent: the always-on daemon. It samples every process on the host (or a selection)
 * with the sampler of `strobe record`, turns each process's samples into one pprof profile every
 * interval, labels it (service_name, host, pid, comm, exe, build_id and configured labels) and
 * ships it to a strobe server's push API.
 *
 * Threads: the sampling thread (strobe_agent_run's caller) owns the sampler and the symbolizer
 * and only ever writes finished profiles into the spool; a sender thread takes them out and
 * pushes them, retrying with exponential backoff and jitter, so sampling never waits on the
 * network; the admin HTTP server (libmicrohttpd, loopback only) answers /status, /metrics,
 * /pause, /resume and on-demand captures from its own threads.
 *
 * The pieces that carry policy are exported for the unit tests: the spool (bounded, on disk,
 * oldest dropped first), the backoff, the service-name detection and the config parser.
 *
 * The library never prints: every event goes to opts.log (one line, a level).
 */
#ifndef STROBE_AGENT_H
#define STROBE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <regex.h>
#include <sys/types.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { STROBE_LOG_ERROR, STROBE_LOG_WARN, STROBE_LOG_INFO, STROBE_LOG_DEBUG };
typedef void (*strobe_log_fn)(void *ctx, int level, const char *msg);
/* "error", "warn", "info", "debug" -> level, or -1. */
int strobe_log_level_parse(const char *s);
const char *strobe_log_level_name(int level);

/* ---- options and the config file ------------------------------------------------------------ */

/* Labels for the processes a rule matches (config "processes": [...]). */
typedef struct strobe_agent_rule {
	char *comm_re, *exe_re, *service_re; /* POSIX extended, unanchored; NULL = any */
	char *service_name;                  /* overrides the detected one when set */
	char **labels;                       /* "key=value" */
	unsigned nlabels;
} strobe_agent_rule;

/* How off-CPU time is collected: in the kernel by an eBPF program that sums blocked time per
 * stack (bpf), from a perf sample per context switch (perf), or bpf when it loads, else perf
 * (auto). */
enum { STROBE_OFFCPU_AUTO, STROBE_OFFCPU_BPF, STROBE_OFFCPU_PERF };
/* "auto", "bpf" or "perf" as STROBE_OFFCPU_*, or -EINVAL; and back. */
int strobe_offcpu_mode_parse(const char *s);
const char *strobe_offcpu_mode_name(unsigned mode);

typedef struct strobe_agent_opts {
	char *server;            /* base URL of the strobe server */
	char *tenant, *token;    /* X-Scope-OrgID, Bearer token; NULL = none */
	char *ca;                /* PEM CA certificates to verify an https server by; NULL = the
				    system's (verification is always on) */
	unsigned freq;           /* on-CPU Hz, default 19 */
	bool offcpu;             /* off-CPU collection too */
	unsigned offcpu_mode;    /* STROBE_OFFCPU_*: how (default auto) */
	unsigned offcpu_entries; /* bpf: map entries (threads off CPU, sums); default 16384 */
	unsigned oncpu_mode;     /* STROBE_OFFCPU_* names for on-CPU samples: summed in the kernel
				    by an eBPF program (bpf), perf samples unwound here (perf), or
				    bpf where it loads (auto, the default) */
	unsigned oncpu_entries;  /* bpf: sums per interval the kernel's map holds (0: sized from
				    the rate, the CPUs and the interval) */
	bool locks;              /* lock contention: futex waits summed by an eBPF program,
				    pushed as mutex:contentions / mutex:delay profiles */
	char *preload_dir;       /* where processes running with libstrobe-heap.so preloaded
				    keep their channel files (their STROBE_HEAP_DIR); NULL =
				    /dev/shm */
	bool no_preload;         /* do not collect those processes' heap and mutex profiles */
	pid_t *pids;             /* targets: these pids only (else every process) */
	unsigned npids;
	char *comm_re;           /* only processes whose comm matches */
	char *cgroup;            /* only processes in this cgroup (path prefix) */
	unsigned interval_s;     /* export interval, default 10 */
	char **labels;           /* static "key=value" labels on every profile */
	unsigned nlabels;
	strobe_agent_rule *rules;
	unsigned nrules;
	bool no_symbolize;       /* --no-symbolize: every frame raw, no symbolizer at all */
	/* --symbolize=server: user frames of files go raw with their build IDs (the server names
	 * them from its debug-info store); kernel and JIT frames are still named here, where
	 * kallsyms and perf maps are. Binaries are never opened for symbols. */
	bool symbolize_server;
	/* In server mode, binaries that kept their symbol table are sent once per build ID to the
	 * server's debug-info store (on by default; --no-upload-symbols, "upload_symbols": false). */
	bool no_upload_symbols;
	/* JVMs are asked for their perf map (HotSpot's Compiler.perfmap through its attach
	 * socket) when their JIT frames go unnamed; --no-jvm-attach, "jvm_attach": false: never. */
	bool no_jvm_attach;
	/* Python frames are read from CPython processes by the eBPF on-CPU program; --no-python,
	 * "python": false: native frames only (the interpreter's C functions). */
	bool no_python;
	bool no_dwarf;           /* name functions from symbol tables only (no lines/inlines);
				    the default (strobe_agent_opts_init) */
	bool kernel;             /* kernel frames (default true) */
	unsigned call_graph;     /* STROBE_CG_* of include/strobe/sampler.h, default auto */
	unsigned unwind_cache_mb;/* the unwinder's cache budget, default 16 (MiB) */
	unsigned unwind_table_mb;/* the eBPF off-CPU walk's unwind rows (kernel memory), default
				    8 (MiB); 0 = frame pointers only there */
	unsigned sym_renew_s;     /* --symbolizer-renew: seconds between renewals of the symbolizer
				    (what it holds of binaries and processes), default 1800 */
	double max_cpu;          /* percent of one core, default 1 */
	char *admin;             /* "127.0.0.1:PORT"; NULL = no admin server; off loopback only
				    with admin_token */
	char *admin_token;       /* when set, the admin endpoints that act or reveal profiles want
				    "Authorization: Bearer admin_token" (on any address) */
	char *spool_dir;         /* NULL = in memory only */
	uint64_t spool_max;      /* bytes, default 64 MiB */
	int log_level;           /* STROBE_LOG_*, default INFO */
	char *host;              /* host label; NULL = gethostname */
	char *proc_root;         /* "/proc" unless a test says otherwise */
	unsigned restart_procs;  /* reopen the sampler when it tracks this many live processes,
				    or 8 times as many mappings (exited processes are forgotten,
				    their mappings are not: this bounds the tracker's memory on
				    hosts with many short-lived processes); default 4096 */
	strobe_log_fn log;
	void *log_ctx;
} strobe_agent_opts;

/* Defaults (as documented in strobe agent --help). */
void strobe_agent_opts_init(strobe_agent_opts *o);
void strobe_agent_opts_free(strobe_agent_opts *o);
/* Reads a JSON config file into o (keys present override what o holds). -EINVAL with err naming
 * the file, the key and the problem; -errno when the file cannot be read. */
int strobe_agent_config_load(const char *path, strobe_agent_opts *o, strobe_err *err);
/* The same from a string (name is used in messages). */
int strobe_agent_config_parse(const char *text, size_t len, const char *name,
			      strobe_agent_opts *o, strobe_err *err);
/* Appends a "key=value" label after checking the key is a valid label name. */
int strobe_agent_add_label(char ***labels, unsigned *n, const char *kv, strobe_err *err);
/* Compiles a POSIX extended pattern of the config or the command line (REG_NOSUB), refusing
 * those whose compilation would cost too much (length, nested repetitions): 0, or -EINVAL with
 * *why saying what is wrong. */
int strobe_agent_regcomp(regex_t *re, const char *pattern, const char **why);

/* ---- the daemon ------------------------------------------------------------------------------ */

typedef struct strobe_agent strobe_agent;

/* Opens the sampler, the spool, the sender and the admin server. NULL + errno (EINVAL: an option
 * or the config is wrong), with the reason in err. */
strobe_agent *strobe_agent_new(const strobe_agent_opts *o, strobe_err *err);
/* Samples and exports until strobe_agent_stop; then exports the last interval, gives the sender
 * a few seconds to deliver, and returns (what is left stays in the spool). 0 or -errno. */
int strobe_agent_run(strobe_agent *a, strobe_err *err);
void strobe_agent_free(strobe_agent *a);
/* Async-signal-safe requests (atomic stores the sampling thread acts on). */
void strobe_agent_stop(strobe_agent *a);
void strobe_agent_pause(strobe_agent *a);
void strobe_agent_resume(strobe_agent *a);
/* The bound admin port (0 when there is no admin server). */
unsigned strobe_agent_admin_port(const strobe_agent *a);

/* ---- spool: a bounded queue of pushes, on disk ------------------------------------------------ */

typedef struct strobe_spool strobe_spool;
typedef struct strobe_spool_stats {
	uint64_t items, bytes;   /* queued now */
	uint64_t added, removed; /* removed: delivered (or rejected) */
	uint64_t dropped, dropped_bytes; /* oldest dropped to stay under the limit */
	uint64_t corrupt;        /* unreadable files found and deleted */
} strobe_spool_stats;

/* dir NULL: in memory only. An existing dir is scanned: its items are queued again (a restart
 * does not lose them); corrupt or foreign files are deleted and counted. */
strobe_spool *strobe_spool_open(const char *dir, uint64_t max_bytes, strobe_err *err);
void strobe_spool_close(strobe_spool *sp);
/* Queues one push (meta: the URL query, body: the pprof). When the spool would exceed its limit,
 * the oldest items are dropped first (an item larger than the limit is itself dropped). 0 or
 * -errno (a disk error; then the item is kept in memory). Thread-safe. */
int strobe_spool_add(strobe_spool *sp, const char *meta, const void *body, size_t len);
/* The oldest item (copies, malloc'd; free them) and its id; -ENOENT when empty, waiting up to
 * timeout_ms for one. Corrupt items are skipped (and counted). The item is then in flight: not
 * dropped to make room until strobe_spool_remove (delivered) or strobe_spool_release (not). */
int strobe_spool_peek(strobe_spool *sp, int timeout_ms, uint64_t *id, char **meta, void **body,
		      size_t *len);
/* Removes the item id (delivered); no-op when already dropped. */
void strobe_spool_remove(strobe_spool *sp, uint64_t id);
/* The push of item id failed: it stays queued, and may be dropped to make room again. */
void strobe_spool_release(strobe_spool *sp, uint64_t id);
void strobe_spool_get_stats(strobe_spool *sp, strobe_spool_stats *st);
/* Wakes every strobe_spool_peek and strobe_spool_sleep waiter (for shutdown). */
void strobe_spool_wake(strobe_spool *sp);
/* Sleeps timeout_ms, or until strobe_spool_wake: the sender's backoff. Profiles added meanwhile
 * do not end it (a sender backing off from a server that is down slept 50 ms at a time before:
 * twenty wakeups a second for as long as the server stayed down). */
void strobe_spool_sleep(strobe_spool *sp, int timeout_ms);

/* ---- backoff --------------------------------------------------------------------------------- */

typedef struct strobe_backoff {
	uint64_t base_ms, max_ms;
	unsigned attempt;
	uint64_t rng; /* xorshift state for the jitter */
} strobe_backoff;
void strobe_backoff_init(strobe_backoff *b, uint64_t base_ms, uint64_t max_ms, uint64_t seed);
/* The next wait: the capped exponential base * 2^attempt, jittered uniformly into
 * [half, full] of it; counts the attempt. */
uint64_t strobe_backoff_next(strobe_backoff *b);
void strobe_backoff_reset(strobe_backoff *b);

/* The wait a server asked for in a Retry-After header (RFC 9110: a number of seconds, or an HTTP
 * date), in ms from now_unix_ms, capped at STROBE_RETRY_AFTER_MAX_MS so that a wrong or hostile
 * value cannot stop an agent for good; -1 when it is neither, or says "now" or a time past. */
#define STROBE_RETRY_AFTER_MAX_MS (10 * 60 * 1000)
int64_t strobe_retry_after_ms(const char *value, int64_t now_unix_ms);

/* ---- what a process is ------------------------------------------------------------------------ */

typedef struct strobe_proc_info {
	char service[128];   /* service_name */
	char source[16];     /* where it came from: env, systemd, container, exe, comm, preload */
	char comm[16];
	char exe[256];       /* path of the executable ("" when unknown) */
	char build_id[41];   /* hex of the main executable's build ID ("" when none) */
	char cgroup[256];    /* the unified (or first) cgroup path */
} strobe_proc_info;

/* Reads ROOT/PID/{environ,cgroup,comm,exe} (root "/proc" normally; a test's synthetic tree
 * otherwise). service_name: STROBE_SERVICE, else PYROSCOPE_APPLICATION_NAME from the environment,
 * else the systemd unit (cgroup path ending in X.service -> X), else a container
 * (docker-ID.scope, /docker/ID, cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope ->
 * "container/ID12"), else the executable's file name, else comm. 0, or -errno when the process
 * does not exist. */
int strobe_proc_info_read(const char *root, pid_t pid, strobe_proc_info *out);

#ifdef __cplusplus
}
#endif
#endif
