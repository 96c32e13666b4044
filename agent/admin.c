// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's admin server (libmicrohttpd). It can stop profiling and read any process's stacks,
 * so it listens on loopback only, unless an admin token is configured (--admin-token-file,
 * "admin_token"); with a token, on any address, everything but /status, /metrics, /ready and
 * the index wants "Authorization: Bearer TOKEN" (compared in constant time; 401 otherwise):
 *
 *   GET  /status                 what it profiles, counters, its own CPU and RSS (JSON)
 *   GET  /ready                  200 "ok" once it serves (for probes)
 *   GET  /metrics                the same counters as Prometheus text
 *   POST /pause, POST /resume    the kill switch (answers once the sampling thread obeyed)
 *   GET  /debug/pprof/profile?pid=PID&seconds=N[&hz=HZ][&type=cpu|offcpu|wall]
 *                                a pprof of that process now, from a second sampler of its own
 *
 * One thread per connection, so a 30-second capture never holds up /status; one capture at a
 * time (a second gets 429).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "agent_impl.h"
#include "strobe/jvm_perfmap.h"
#include "strobe/codec.h"

typedef struct reply {
	unsigned status;
	char *body;
	size_t len;
	const char *ctype;
} reply;

static void reply_text(reply *r, unsigned status, const char *ctype, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reply_text(reply *r, unsigned status, const char *ctype, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	r->status = status;
	r->body = n >= 0 ? s : NULL;
	r->len = n >= 0 ? (size_t)n : 0;
	r->ctype = ctype;
}

static void reply_json(reply *r, unsigned status, json_t *j)
{
	r->status = status;
	r->body = json_dumps(j, JSON_INDENT(2));
	r->len = r->body ? strlen(r->body) : 0;
	r->ctype = "application/json";
	json_decref(j);
}

static void reply_err(reply *r, unsigned status, const char *msg)
{
	reply_json(r, status, json_pack("{s:s,s:i}", "error", msg, "status", (int)status));
}

/* Seconds until the sender's next push attempt, 0 when it is not backing off. */
static double backoff_left_s(const agent_status *st)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t left = st->next_push_unix_ms - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	return st->next_push_unix_ms && left > 0 ? (double)left / 1000 : 0;
}

static json_t *status_json(strobe_agent *a)
{
	agent_status st;
	agent_lock_fresh_stats(a); /* (locks a->mu) */
	st = a->st;
	pthread_mutex_unlock(&a->mu);
	strobe_spool_stats sp;
	strobe_spool_get_stats(a->spool, &sp);
	const strobe_agent_opts *o = a->o;
	json_t *targets = json_object();
	if (o->npids) {
		json_t *pids = json_array();
		for (unsigned i = 0; i < o->npids; i++)
			json_array_append_new(pids, json_integer(o->pids[i]));
		json_object_set_new(targets, "pids", pids);
	} else {
		json_object_set_new(targets, "all", json_true());
	}
	if (o->comm_re)
		json_object_set_new(targets, "comm", json_string(o->comm_re));
	if (o->cgroup)
		json_object_set_new(targets, "cgroup", json_string(o->cgroup));
	json_t *j = json_pack(
		"{s:s,s:s,s:s,s:I,s:o,"
		"s:{s:i,s:i,s:b,s:b,s:s,s:s,s:s,s:i,s:s,s:f,s:f},"
		"s:{s:I,s:I,s:I,s:I,s:i,s:i},"
		"s:{s:I,s:I,s:I,s:I,s:I,s:I},"
		"s:{s:I,s:I,s:I,s:I,s:b,s:I},"
		"s:{s:I,s:I,s:I,s:I,s:I,s:I,s:s?},"
		"s:{s:f,s:f,s:I},s:s,s:I}",
		"state", st.paused ? "paused" : "running", "server", o->server, "host", a->host,
		"started_unix", (json_int_t)st.started_unix, "targets", targets,
		"sampling", "frequency_hz", (int)st.freq_now, "configured_hz", (int)o->freq,
		"offcpu", st.offcpu_now, "offcpu_configured", o->offcpu, "offcpu_mode",
		st.offcpu_mode ? st.offcpu_mode : "off", "offcpu_mode_configured",
		strobe_offcpu_mode_name(o->offcpu_mode), "offcpu_fallback", st.offcpu_why,
		"budget_level",
		(int)st.budget_level, "budget_note", st.budget_note, "max_cpu_pct", o->max_cpu,
		"interval_s", (double)o->interval_s,
		"samples", "on_cpu", (json_int_t)st.samples, "off_cpu_intervals",
		(json_int_t)st.switches, "lost", (json_int_t)st.lost, "throttled",
		(json_int_t)st.throttled, "processes_tracked", (int)st.processes, "threads_tracked",
		(int)st.threads,
		"export", "intervals", (json_int_t)st.intervals, "profiles", (json_int_t)st.profiles,
		"profile_bytes", (json_int_t)st.profile_bytes, "errors", (json_int_t)st.export_errors,
		"last_unix", (json_int_t)st.last_export_unix, "sampler_reopens",
		(json_int_t)st.sampler_reopens,
		"push", "pushed", (json_int_t)st.pushes, "failed", (json_int_t)st.push_failures,
		"rejected", (json_int_t)st.push_rejected, "bytes_sent", (json_int_t)st.bytes_sent,
		"server_up", st.server_up, "last_unix", (json_int_t)st.last_push_unix,
		"spool", "items", (json_int_t)sp.items, "bytes", (json_int_t)sp.bytes, "max_bytes",
		(json_int_t)o->spool_max, "dropped", (json_int_t)sp.dropped, "dropped_bytes",
		(json_int_t)sp.dropped_bytes, "corrupt", (json_int_t)sp.corrupt, "dir", o->spool_dir,
		"self", "cpu_pct", st.cpu_pct, "cpu_seconds", st.cpu_seconds, "rss_bytes",
		(json_int_t)st.rss_bytes, "last_error", st.last_error, "captures",
		(json_int_t)st.captures);
	json_t *samples = j ? json_object_get(j, "samples") : NULL;
	if (samples) {
		json_object_set_new(samples, "processes_forgotten",
				    json_integer((json_int_t)st.processes_forgotten));
		json_object_set_new(samples, "processes_unnamed",
				    json_integer((json_int_t)st.processes_unnamed));
		json_object_set_new(samples, "processes_unlooked",
				    json_integer((json_int_t)st.processes_unlooked));
		json_object_set_new(samples, "mappings_tracked", json_integer(st.mappings));
		json_object_set_new(samples, "frames_tracked", json_integer(st.frames));
	}
	/* the symbolizer's renewals (--symbolizer-renew): tests wait for them */
	json_t *exp = j ? json_object_get(j, "export") : NULL;
	if (exp)
		json_object_set_new(exp, "symbolizer_renewals", json_integer((json_int_t)st.sym_renewals));
	/* the sender's back-off: how long until its next push, and whether the server asked */
	json_t *push = j ? json_object_get(j, "push") : NULL;
	double left = backoff_left_s(&st);
	if (push) {
		json_object_set_new(push, "symbols_uploaded", json_integer((json_int_t)st.symbols_uploaded));
		json_object_set_new(push, "symbols_on_server", json_integer((json_int_t)st.symbols_on_server));
		json_object_set_new(push, "symbols_failed", json_integer((json_int_t)st.symbols_failed));
		json_object_set_new(push, "retry_after", json_integer((json_int_t)st.retry_after));
		json_object_set_new(push, "retry_after_last_s", json_real(st.retry_after_last_s));
		json_object_set_new(push, "backoff_s", json_real(left));
		json_object_set_new(push, "backoff_reason",
				    json_string(left <= 0 ? "" : st.next_push_by_server ? "retry-after"
										       : "failure"));
	}
	if (j && a->jvm) {
		unsigned long asked, written;
		strobe_jvm_maps_counts(a->jvm, &asked, &written);
		json_object_set_new(j, "jvm_perfmaps",
				    json_pack("{s:I,s:I}", "asked", (json_int_t)asked, "written",
					      (json_int_t)written));
	}
	/* on-CPU samples: how they are collected, and the eBPF program's counters */
	if (j) {
		json_t *oc = json_pack(
			"{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:i}",
			"mode", st.oncpu_mode ? st.oncpu_mode : "perf", "mode_configured",
			strobe_offcpu_mode_name(o->oncpu_mode), "fallback", st.oncpu_why, "samples",
			(json_int_t)st.oc.samples, "idle", (json_int_t)st.oc.idle, "dropped_sums_full",
			(json_int_t)st.oc.counts_full, "stack_errors", (json_int_t)st.oc.stack_errors,
			"user_stacks", (json_int_t)st.oc.user, "user_stacks_without_maps",
			(json_int_t)st.oc.user_prov, "table_frames", (json_int_t)st.oc.table_frames,
			"fp_frames", (json_int_t)st.oc.fp_frames, "table_stops",
			(json_int_t)st.oc.table_stops, "walks_without_maps", (json_int_t)st.oc.no_maps,
			"rows_by_file", (json_int_t)st.oc.file_rows, "sums_read", (json_int_t)st.oc.entries, "drains", (json_int_t)st.oc.drains,
			"max_entries", (int)st.oc.max_entries, "stack_entries",
			(int)st.oc.stack_entries, "frequency_hz", (int)st.oc.freq);
		/* Python frames (agent/python.c) */
		json_t *py = oc ? json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "samples",
					    (json_int_t)st.oc.py_samples, "no_thread_state",
					    (json_int_t)st.oc.py_no_thread, "stacks_full",
					    (json_int_t)st.oc.py_full, "processes",
					    (json_int_t)st.oc.py_processes, "unknown_version",
					    (json_int_t)st.oc.py_unknown, "frames_named",
					    (json_int_t)st.oc.py_named, "frames_unreadable",
					    (json_int_t)st.oc.py_unnamed)
				  : NULL;
		if (py)
			json_object_set_new(oc, "python", py);
		/* the C SDK's per-thread labels (agent/tls_labels.bpf.h) */
		json_t *tl = oc ? json_pack("{s:I,s:I,s:I,s:I,s:I}", "samples",
					    (json_int_t)st.oc.tls_samples, "torn",
					    (json_int_t)st.oc.tls_torn, "faults",
					    (json_int_t)st.oc.tls_fault, "blocks_full",
					    (json_int_t)st.oc.tls_full, "processes",
					    (json_int_t)st.oc.tls_processes)
				  : NULL;
		if (tl)
			json_object_set_new(oc, "sdk_labels", tl);
		/* new processes whose notice did not fit the ring (read at the export instead) */
		if (oc)
			json_object_set_new(oc, "new_processes_unannounced",
					    json_integer((json_int_t)st.oc.fresh_lost));
		if (oc)
			json_object_set_new(j, "oncpu", oc);
	}
	if (j && o->offcpu)
		json_object_set_new(
			j, "offcpu_bpf",
			json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "intervals",
				  (json_int_t)st.ob.intervals, "sums_read", (json_int_t)st.ob.entries,
				  "short", (json_int_t)st.ob.short_blocks, "dropped_threads_full",
				  (json_int_t)st.ob.starts_full, "dropped_stacks_full",
				  (json_int_t)st.ob.counts_full, "stack_errors",
				  (json_int_t)st.ob.stack_errors, "stacks_missing",
				  (json_int_t)st.ob.stacks_missing, "kernel_stacks_reused",
				  (json_int_t)st.ob.kstacks_reused, "user_stacks_reused",
				  (json_int_t)st.ob.ustacks_reused));
	if (j && o->locks)
		json_object_set_new(
			j, "locks_bpf",
			json_pack("{s:b,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "on",
				  !st.locks_why[0], "why_off", st.locks_why, "waits",
				  (json_int_t)st.lk.waits, "not_slept", (json_int_t)st.lk.not_slept,
				  "sums_read", (json_int_t)st.lk.entries, "dropped_threads_full",
				  (json_int_t)st.lk.starts_full, "dropped_sums_full",
				  (json_int_t)st.lk.counts_full, "stack_errors",
				  (json_int_t)st.lk.stack_errors, "stacks_missing",
				  (json_int_t)st.lk.stacks_missing, "table_frames",
				  (json_int_t)st.lk.table_frames, "fp_frames",
				  (json_int_t)st.lk.fp_frames, "walks_without_maps",
				  (json_int_t)st.lk.no_maps));
	if (j && !o->no_preload)
		json_object_set_new(
			j, "preload",
			json_pack("{s:s,s:I,s:I,s:I,s:I,s:I}", "dir",
				  o->preload_dir ? o->preload_dir : "/dev/shm", "files",
				  (json_int_t)st.pl.files, "profiles", (json_int_t)st.pl.profiles,
				  "removed", (json_int_t)st.pl.removed, "refused",
				  (json_int_t)st.pl.refused, "dropped_samples",
				  (json_int_t)st.pl.dropped));
	json_t *ob = j && o->offcpu ? json_object_get(j, "offcpu_bpf") : NULL;
	if (ob)
		json_object_set_new(
			ob, "unwind_tables",
			json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:s,s:f}",
				  "frames",
				  (json_int_t)st.ob.table_frames, "fp_frames",
				  (json_int_t)st.ob.fp_frames, "stops", (json_int_t)st.ob.table_stops,
				  "walks_without_maps", (json_int_t)st.ob.no_maps, "walked_again",
				  (json_int_t)st.ob.rewalks, "processes",
				  (json_int_t)st.ob.tables.procs, "processes_loaded",
				  (json_int_t)st.ob.tables.procs_loaded, "binaries",
				  (json_int_t)st.ob.tables.binaries, "binaries_without_tables",
				  (json_int_t)st.ob.tables.binaries_none, "binaries_full",
				  (json_int_t)st.ob.tables.binaries_full, "binaries_built_apart",
				  (json_int_t)st.ob.tables.binaries_async, "rows",
				  (json_int_t)st.ob.tables.rows, "rows_max",
				  (json_int_t)st.ob.tables.rows_max, "build_seconds",
				  (double)st.ob.tables.build_ns / 1e9, "load_wait_ms_mean",
				  st.ob.tables.waits ? (double)st.ob.tables.wait_ns_sum / 1e6 /
							       (double)st.ob.tables.waits
						     : 0.0,
				  "load_wait_ms_max", (double)st.ob.tables.wait_ns_max / 1e6,
				  "not_loaded", st.ob.tables_off, "time_walked_without_pct",
				  st.ob.user_ns ? 100.0 * (double)st.ob.prov_ns / (double)st.ob.user_ns
						: 0.0));
	return j;
}

static void metrics(strobe_agent *a, reply *r)
{
	agent_status st;
	agent_lock_fresh_stats(a); /* (locks a->mu) */
	st = a->st;
	pthread_mutex_unlock(&a->mu);
	strobe_spool_stats sp;
	strobe_spool_get_stats(a->spool, &sp);
	reply_text(r, 200, "text/plain; version=0.0.4",
		   "# HELP strobe_agent_paused 1 while profiling is paused.\n"
		   "# TYPE strobe_agent_paused gauge\nstrobe_agent_paused %d\n"
		   "# HELP strobe_agent_frequency_hz On-CPU sampling frequency now.\n"
		   "# TYPE strobe_agent_frequency_hz gauge\nstrobe_agent_frequency_hz %u\n"
		   "# HELP strobe_agent_offcpu 1 while off-CPU collection is on.\n"
		   "# TYPE strobe_agent_offcpu gauge\nstrobe_agent_offcpu %d\n"
		   "# HELP strobe_agent_offcpu_bpf 1 while off-CPU time is summed in the kernel (eBPF).\n"
		   "# TYPE strobe_agent_offcpu_bpf gauge\nstrobe_agent_offcpu_bpf %d\n"
		   "# HELP strobe_agent_offcpu_bpf_dropped_total Off-CPU intervals or stacks the "
		   "kernel's full maps dropped.\n"
		   "# TYPE strobe_agent_offcpu_bpf_dropped_total counter\n"
		   "strobe_agent_offcpu_bpf_dropped_total %" PRIu64 "\n"
		   "# HELP strobe_agent_budget_level Degradation steps taken by the CPU budget.\n"
		   "# TYPE strobe_agent_budget_level gauge\nstrobe_agent_budget_level %u\n"
		   "# HELP strobe_agent_samples_total On-CPU samples taken.\n"
		   "# TYPE strobe_agent_samples_total counter\nstrobe_agent_samples_total %" PRIu64 "\n"
		   "# HELP strobe_agent_offcpu_intervals_total Off-CPU intervals recorded.\n"
		   "# TYPE strobe_agent_offcpu_intervals_total counter\n"
		   "strobe_agent_offcpu_intervals_total %" PRIu64 "\n"
		   "# HELP strobe_agent_lost_records_total Records the kernel dropped.\n"
		   "# TYPE strobe_agent_lost_records_total counter\n"
		   "strobe_agent_lost_records_total %" PRIu64 "\n"
		   "# HELP strobe_agent_profiles_total Profiles exported into the spool.\n"
		   "# TYPE strobe_agent_profiles_total counter\nstrobe_agent_profiles_total %" PRIu64 "\n"
		   "# HELP strobe_agent_pushes_total Profiles the server stored.\n"
		   "# TYPE strobe_agent_pushes_total counter\nstrobe_agent_pushes_total %" PRIu64 "\n"
		   "# HELP strobe_agent_push_failures_total Push attempts that failed (retried).\n"
		   "# TYPE strobe_agent_push_failures_total counter\n"
		   "strobe_agent_push_failures_total %" PRIu64 "\n"
		   "# HELP strobe_agent_push_rejected_total Profiles the server refused for good.\n"
		   "# TYPE strobe_agent_push_rejected_total counter\n"
		   "strobe_agent_push_rejected_total %" PRIu64 "\n"
		   "# HELP strobe_agent_push_retry_after_total 429/503 answers whose Retry-After the "
		   "sender waited out.\n"
		   "# TYPE strobe_agent_push_retry_after_total counter\n"
		   "strobe_agent_push_retry_after_total %" PRIu64 "\n"
		   "# HELP strobe_agent_push_backoff_seconds Seconds until the next push attempt "
		   "(backing off after a failure or a Retry-After).\n"
		   "# TYPE strobe_agent_push_backoff_seconds gauge\n"
		   "strobe_agent_push_backoff_seconds %.3f\n"
		   "# HELP strobe_agent_push_backoff_retry_after 1 while that wait is the server's "
		   "Retry-After.\n"
		   "# TYPE strobe_agent_push_backoff_retry_after gauge\n"
		   "strobe_agent_push_backoff_retry_after %d\n"
		   "# HELP strobe_agent_sent_bytes_total Bytes of profiles the server stored.\n"
		   "# TYPE strobe_agent_sent_bytes_total counter\n"
		   "strobe_agent_sent_bytes_total %" PRIu64 "\n"
		   "# HELP strobe_agent_spool_items Profiles waiting in the spool.\n"
		   "# TYPE strobe_agent_spool_items gauge\nstrobe_agent_spool_items %" PRIu64 "\n"
		   "# HELP strobe_agent_spool_bytes Bytes waiting in the spool.\n"
		   "# TYPE strobe_agent_spool_bytes gauge\nstrobe_agent_spool_bytes %" PRIu64 "\n"
		   "# HELP strobe_agent_spool_dropped_total Profiles dropped (spool full, oldest first).\n"
		   "# TYPE strobe_agent_spool_dropped_total counter\n"
		   "strobe_agent_spool_dropped_total %" PRIu64 "\n"
		   "# HELP strobe_agent_cpu_seconds_total The agent's own CPU time.\n"
		   "# TYPE strobe_agent_cpu_seconds_total counter\n"
		   "strobe_agent_cpu_seconds_total %.3f\n"
		   "# HELP strobe_agent_cpu_percent The agent's CPU over the last interval (%% of a core).\n"
		   "# TYPE strobe_agent_cpu_percent gauge\nstrobe_agent_cpu_percent %.4f\n"
		   "# HELP strobe_agent_resident_bytes The agent's resident memory.\n"
		   "# TYPE strobe_agent_resident_bytes gauge\nstrobe_agent_resident_bytes %" PRIu64 "\n",
		   st.paused, st.freq_now, st.offcpu_now,
		   st.offcpu_mode && strcmp(st.offcpu_mode, "bpf") == 0,
		   st.ob.starts_full + st.ob.counts_full + st.ob.stack_errors, st.budget_level, st.samples, st.switches,
		   st.lost, st.profiles, st.pushes, st.push_failures, st.push_rejected,
		   st.retry_after, backoff_left_s(&st),
		   backoff_left_s(&st) > 0 && st.next_push_by_server, st.bytes_sent,
		   sp.items, sp.bytes, sp.dropped, st.cpu_seconds, st.cpu_pct, st.rss_bytes);
}

static void set_pause(strobe_agent *a, bool pause, reply *r)
{
	if (pause)
		strobe_agent_pause(a);
	else
		strobe_agent_resume(a);
	/* answer once the sampling thread has acted (it polls every 100 ms) */
	bool done = false;
	for (int i = 0; i < 40 && !done; i++) {
		pthread_mutex_lock(&a->mu);
		done = a->st.paused == pause;
		pthread_mutex_unlock(&a->mu);
		if (!done)
			usleep(50000);
	}
	reply_json(r, done ? 200 : 503,
		   json_pack("{s:s}", "state", done ? (pause ? "paused" : "running") : "pending"));
}

static long num_arg(struct MHD_Connection *c, const char *name, long def, long lo, long hi,
		    bool *bad)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	if (!v)
		return def;
	char *end;
	long x = strtol(v, &end, 10);
	if (end == v || *end || x < lo || x > hi)
		*bad = true;
	return x;
}

static void capture(strobe_agent *a, struct MHD_Connection *c, reply *r)
{
	bool bad = false;
	long pid = num_arg(c, "pid", 0, 1, 0x7fffffff, &bad);
	long secs = num_arg(c, "seconds", 10, 1, 300, &bad);
	long hz = num_arg(c, "hz", 99, 1, 10000, &bad);
	const char *type = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "type");
	unsigned ev = STROBE_EV_CPU;
	if (type && strcmp(type, "offcpu") == 0)
		ev = STROBE_EV_OFFCPU;
	else if (type && strcmp(type, "wall") == 0)
		ev = STROBE_EV_CPU | STROBE_EV_OFFCPU;
	else if (type && strcmp(type, "cpu") != 0)
		bad = true;
	if (bad || pid <= 0) {
		reply_err(r, 400, "usage: /debug/pprof/profile?pid=PID&seconds=1..300[&hz=1..10000]"
				  "[&type=cpu|offcpu|wall]");
		return;
	}
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
		reply_err(r, 404, "no such process");
		return;
	}
	if (atomic_exchange(&a->capturing, 1)) {
		reply_err(r, 429, "a capture is already running; try again when it is done");
		return;
	}
	pid_t p = (pid_t)pid;
	strobe_sampler_opts so = {.events = ev, .freq = (unsigned)hz, .pids = &p, .npids = 1,
				  .kernel = a->o->kernel, .proc_root = a->o->proc_root};
	strobe_err err = {{0}};
	strobe_profile *prof = NULL;
	strobe_sampler *s = strobe_sampler_open(&so, &err);
	if (!s || strobe_sampler_enable(s, &err) < 0) {
		reply_err(r, 500, err.msg[0] ? err.msg : "cannot open the sampler");
		goto out;
	}
	agent_log(a, STROBE_LOG_INFO, "capture: pid %ld, %ld s at %ld Hz (%s)", pid, secs, hz,
		  type ? type : "cpu");
	int64_t end = strobe_mono_ns() + secs * 1000000000LL;
	while (strobe_mono_ns() < end && !atomic_load(&a->stop) && (kill(p, 0) == 0 || errno != ESRCH))
		if (strobe_sampler_poll(s, 100, &err) < 0)
			break;
	strobe_sampler_disable(s);
	strobe_sampler_drain(s, &err);
	strobe_symbolizer *sym = NULL;
	if (!a->o->no_symbolize) {
		strobe_sym_opts syo = {.no_kernel = !a->o->kernel, .no_dwarf = a->o->no_dwarf};
		sym = strobe_symbolizer_new(&syo);
	}
	strobe_sampler_profile_opts po = {.sym = sym, .per_thread = true, .release_objects = true,
					  .user_raw = a->o->symbolize_server};
	prof = strobe_sampler_profile(s, &po, &err);
	strobe_symbolizer_free(sym);
	uint8_t *pb = NULL;
	size_t len = 0;
	if (!prof || strobe_pprof_encode(prof, &pb, &len) < 0) {
		reply_err(r, 500, err.msg[0] ? err.msg : "cannot build the profile");
		goto out;
	}
	r->status = 200;
	r->body = (char *)pb;
	r->len = len;
	r->ctype = "application/octet-stream";
	pthread_mutex_lock(&a->mu);
	a->st.captures++;
	pthread_mutex_unlock(&a->mu);
out:
	strobe_profile_free(prof);
	strobe_sampler_close(s);
	atomic_store(&a->capturing, 0);
}

/* Compares every byte of the longer of the two, so the time taken says nothing about how much
 * of the token was right, nor (beyond a multiple of its length) how long it is. */
static bool same_token(const char *got, const char *want)
{
	size_t lg = strlen(got), lw = strlen(want), n = lg > lw ? lg : lw;
	volatile unsigned char d = lg != lw;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)((i < lg ? got[i] : 0) ^ (i < lw ? want[i] : 0));
	return d == 0;
}

/* What anyone who reaches the port may read: counters and health, no stacks, no controls. */
static bool open_endpoint(const char *url, bool get)
{
	return get && (strcmp(url, "/status") == 0 || strcmp(url, "/metrics") == 0 ||
		       strcmp(url, "/ready") == 0 || strcmp(url, "/") == 0);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	strobe_agent *a = cls;
	static int marker;
	if (!*con_cls) { /* headers only so far */
		*con_cls = &marker;
		return MHD_YES;
	}
	if (*upload_size) { /* bodies are not used: swallow them */
		*upload_size = 0;
		return MHD_YES;
	}
	reply r = {0};
	bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (a->o->admin_token && !open_endpoint(url, get) &&
	    !(auth && strncmp(auth, "Bearer ", 7) == 0 && same_token(auth + 7, a->o->admin_token)))
		reply_err(&r, 401, "this endpoint needs the admin token: Authorization: Bearer TOKEN "
				   "(--admin-token-file); /status, /metrics and /ready do not");
	else if (strcmp(url, "/status") == 0 && get)
		reply_json(&r, 200, status_json(a));
	else if (strcmp(url, "/metrics") == 0 && get)
		metrics(a, &r);
	else if (strcmp(url, "/ready") == 0 && get)
		reply_text(&r, 200, "text/plain", "ok\n");
	else if (strcmp(url, "/pause") == 0 && post)
		set_pause(a, true, &r);
	else if (strcmp(url, "/resume") == 0 && post)
		set_pause(a, false, &r);
	else if (strcmp(url, "/debug/pprof/profile") == 0 && get)
		capture(a, c, &r);
	else if (strcmp(url, "/") == 0 && get)
		reply_text(&r, 200, "text/plain",
			   "strobe agent admin: GET /status, GET /metrics, GET /ready, POST /pause, POST /resume, "
			   "GET /debug/pprof/profile?pid=PID&seconds=N[&hz=HZ][&type=cpu|offcpu|wall]\n");
	else if (strcmp(url, "/pause") == 0 || strcmp(url, "/resume") == 0)
		reply_err(&r, 405, "use POST");
	else
		reply_err(&r, 404, "no such endpoint (GET /status, /metrics, /debug/pprof/profile; "
				   "POST /pause, /resume)");
	if (!r.body) {
		r.body = strdup("");
		r.len = 0;
		if (!r.status)
			r.status = 500;
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(r.len, r.body,
								      MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(r.body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", r.ctype ? r.ctype : "text/plain");
	if (r.status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"strobe-agent\"");
	enum MHD_Result ret = MHD_queue_response(c, r.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The admin port can pause profiling and read any process's stacks. */
#define OFF_LOOPBACK                                                                           \
	"--admin %s: without an admin token the admin port is loopback-only (127.0.0.0/8 or "  \
	"[::1]): it can pause profiling and read any process's stacks. To listen there, give "  \
	"a token with --admin-token-file FILE (config \"admin_token\" or \"admin_token_file\")"

int agent_admin_start(strobe_agent *a, strobe_err *err)
{
	const char *spec = a->o->admin;
	char host[256];
	const char *colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof(host))
		return strobe_errf(err, -EINVAL, "--admin '%s': expected ADDRESS:PORT "
				   "(e.g. 127.0.0.1:4101)", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port < 0 || port > 65535)
		return strobe_errf(err, -EINVAL, "--admin '%s': bad port", spec);
	struct sockaddr_storage ss = {0};
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	const char *h = host;
	if (h[0] == '[') { /* [::1] */
		h++;
		char *rb = strchr(host, ']');
		if (rb)
			*rb = 0;
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
		if ((ntohl(s4->sin_addr.s_addr) >> 24) != 127 && !a->o->admin_token)
			return strobe_errf(err, -EINVAL, OFF_LOOPBACK, spec);
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
		if (!IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) && !a->o->admin_token)
			return strobe_errf(err, -EINVAL, OFF_LOOPBACK, spec);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		flags |= MHD_USE_IPv6;
	} else {
		return strobe_errf(err, -EINVAL, "--admin '%s': '%s' is not an IP address", spec, h);
	}
	struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, a,
						MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
						MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)400,
						MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_END);
	if (!d)
		return strobe_errf(err, -EADDRINUSE, "--admin %s: cannot listen there (in use?)", spec);
	a->mhd = d;
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	a->admin_port = di ? di->port : (unsigned)port;
	return 0;
}

void agent_admin_stop(strobe_agent *a)
{
	if (a->mhd)
		MHD_stop_daemon(a->mhd);
	a->mhd = NULL;
}
