// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's options table (see agent_options.h) and the one place a value is checked and
 * stored, whether it came from a flag or from the config file.
 */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/agent_options.h"
#include "strobe/sampler.h"

#define OFF(f) offsetof(strobe_agent_opts, f)

/* In the order of `strobe agent --help`; hidden ones (help NULL) anywhere. */
const strobe_agent_option strobe_agent_options[] = {
	{.flag = "server", .short_flag = 's', .key = "server", .type = STROBE_AOT_STR, .off = OFF(server),
	 .metavar = "URL",
	 .help = "the strobe server, e.g. http://127.0.0.1:4100 (required here\n"
		 "or in the config)"},
	{.flag = "config", .short_flag = 'c', .no_key = "it names the config file itself",
	 .type = STROBE_AOT_NONE, .metavar = "FILE",
	 .help = "JSON config (see examples/agent.json); flags override it"},
	{.flag = "freq", .short_flag = 'F', .key = "frequency", .type = STROBE_AOT_UINT, .off = OFF(freq),
	 .min = 1, .max = 10000, .has_default = true, .dflt = 19, .metavar = "HZ",
	 .help = "on-CPU samples per second (default 19)"},
	{.flag = "on-cpu-mode", .key = "oncpu_mode", .type = STROBE_AOT_MODE, .off = OFF(oncpu_mode),
	 .metavar = "MODE",
	 .help = "bpf (summed in the kernel by an eBPF program on the sampling\n"
		 "event, stacks walked there: no stack copies), perf (a sample\n"
		 "with a stack copy each, unwound here), or auto (default: bpf\n"
		 "when it loads, else perf)"},
	{.flag = "on-cpu-entries", .key = "oncpu_entries", .type = STROBE_AOT_UINT,
	 .off = OFF(oncpu_entries), .min = 4, .max = 1 << 18, .has_default = true, .dflt = 0,
	 .metavar = "N",
	 .help = "bpf: sums per interval the kernel's map holds (default: from\n"
		 "the rate, the CPUs and the interval); what does not fit is\n"
		 "counted"},
	{.flag = "offcpu", .key = "offcpu", .type = STROBE_AOT_BOOL, .off = OFF(offcpu), .implied = "true",
	 .has_default = true, .dflt = 0,
	 .help = "also record off-CPU time (blocked / run queue, from sched_switch)"},
	{.flag = "off-cpu-mode", .key = "offcpu_mode", .type = STROBE_AOT_MODE, .off = OFF(offcpu_mode),
	 .metavar = "MODE",
	 .help = "bpf (summed in the kernel by an eBPF program: cheap; user stacks\n"
		 "by frame pointers only), perf (a sample per context switch), or\n"
		 "auto (default: bpf when it loads, else perf)"},
	{.flag = "off-cpu-entries", .key = "offcpu_entries", .type = STROBE_AOT_UINT,
	 .off = OFF(offcpu_entries), .min = 64, .max = 1 << 20, .has_default = true, .dflt = 0,
	 .metavar = "N",
	 .help = "bpf: sums and stacks per interval the kernel's\n"
		 "maps hold (default 16384); what does not fit is counted"},
	{.flag = "preload-dir", .key = "preload_dir", .type = STROBE_AOT_STR, .off = OFF(preload_dir),
	 .metavar = "DIR",
	 .help = "where processes run with libstrobe-heap.so preloaded keep their\n"
		 "channel files (their STROBE_HEAP_DIR; default /dev/shm): their\n"
		 "heap and mutex profiles are collected each interval"},
	{.flag = "no-preload", .key = "preload", .type = STROBE_AOT_BOOL, .off = OFF(no_preload),
	 .inverted = true, .implied = "false", .has_default = true, .dflt = 1,
	 .help = "do not collect them"},
	{.flag = "locks", .key = "locks", .type = STROBE_AOT_BOOL, .off = OFF(locks), .implied = "true",
	 .has_default = true, .dflt = 0,
	 .help = "also record lock contention: futex waits summed in the kernel\n"
		 "by an eBPF program, by waiter stack and lock address, pushed\n"
		 "as mutex:contentions and mutex:delay profiles"},
	{.flag = "pid", .short_flag = 'p', .key = "targets.pids", .type = STROBE_AOT_PIDS,
	 .off = OFF(pids), .min = 1, .max = 0x7fffffff, .metavar = "PID[,PID]",
	 .help = "only these processes (and their children)"},
	{.flag = "comm", .key = "targets.comm", .type = STROBE_AOT_REGEX, .off = OFF(comm_re),
	 .metavar = "REGEX", .help = "only processes whose name (comm) matches"},
	{.flag = "cgroup", .key = "targets.cgroup", .type = STROBE_AOT_STR, .off = OFF(cgroup),
	 .metavar = "PATH",
	 .help = "only processes in this cgroup (e.g. /system.slice/nginx.service)"},
	{.flag = "interval", .short_flag = 'i', .key = "interval", .type = STROBE_AOT_UINT,
	 .off = OFF(interval_s), .min = 1, .max = 3600, .has_default = true, .dflt = 10,
	 .metavar = "SEC", .help = "export interval (default 10)"},
	{.flag = "label", .short_flag = 'l', .key = "labels", .type = STROBE_AOT_LABELS,
	 .off = OFF(labels), .metavar = "KEY=VALUE",
	 .help = "a label on every profile (repeatable)"},
	{.flag = "symbolize", .key = "symbolize", .type = STROBE_AOT_SYMBOLIZE, .metavar = "MODE",
	 .help = "where frames are named: local (default: here, from the\n"
		 "binaries' symbol tables), server (user frames go as addresses\n"
		 "with build IDs and the server names them from its debug-info\n"
		 "store; kernel and JIT frames are named here), none (every\n"
		 "frame raw; the same as --no-symbolize). In server mode a\n"
		 "binary that kept its symbol table is sent once per build ID\n"
		 "to the server's debug-info store, after asking whether it\n"
		 "has it"},
	{.flag = "no-upload-symbols", .key = "upload_symbols", .type = STROBE_AOT_BOOL,
	 .off = OFF(no_upload_symbols), .inverted = true, .implied = "false",
	 .has_default = true, .dflt = 1, .help = "server mode without sending any binary"},
	{.flag = "no-symbolize", .no_key = "it is \"symbolize\": \"none\" (or false)",
	 .type = STROBE_AOT_SYMBOLIZE, .implied = "none",
	 .help = "send raw addresses and build IDs (the server names them)"},
	{.flag = "no-jvm-attach", .key = "jvm_attach", .type = STROBE_AOT_BOOL, .off = OFF(no_jvm_attach),
	 .inverted = true, .implied = "false", .has_default = true, .dflt = 1,
	 .help = "do not ask JVMs for their perf map (by default a JVM whose\n"
		 "compiled Java frames go unnamed is asked, through its attach\n"
		 "socket, as `jcmd PID Compiler.perfmap` would: JDK 17+)"},
	{.flag = "no-python", .key = "python", .type = STROBE_AOT_BOOL, .off = OFF(no_python),
	 .inverted = true, .implied = "false", .has_default = true, .dflt = 1,
	 .help = "native frames only in CPython processes (by default the eBPF\n"
		 "on-CPU mode reads their Python frames: docs/python.md)"},
	/* Symbol tables only by default: DWARF (lines, inlined frames) of every binary on a host
	 * costs tens of MB that an always-on daemon should not hold. */
	{.flag = "dwarf", .key = "dwarf", .type = STROBE_AOT_BOOL, .off = OFF(no_dwarf), .inverted = true,
	 .implied = "true", .has_default = true, .dflt = 0,
	 .help = "also read DWARF: file:line and inlined frames (costs memory:\n"
		 "tens of MB on a busy host); default: symbol tables only"},
	{.flag = "no-dwarf", .no_key = "it is \"dwarf\": false", .type = STROBE_AOT_BOOL,
	 .off = OFF(no_dwarf), .inverted = true, .implied = "false"},
	{.flag = "user", .key = "kernel", .type = STROBE_AOT_BOOL, .off = OFF(kernel), .implied = "false",
	 .has_default = true, .dflt = 1, .help = "user frames only (no kernel frames)"},
	{.flag = "call-graph", .key = "call_graph", .type = STROBE_AOT_CALL_GRAPH, .off = OFF(call_graph),
	 .has_default = true, .dflt = STROBE_CG_AUTO, .metavar = "MODE",
	 .help = "how user stacks are walked: fp (frame pointers), dwarf (unwind\n"
		 "tables), auto (tables completed by frame pointers; default)"},
	/* Smaller than the recorder's 64: the agent's memory is part of its budget, and an
	 * evicted process's tables are only re-read at its next sample. */
	{.flag = "unwind-cache", .key = "unwind_cache_mb", .type = STROBE_AOT_UINT,
	 .off = OFF(unwind_cache_mb), .min = 1, .max = 1 << 20, .has_default = true, .dflt = 16,
	 .metavar = "MIB", .help = "memory budget of the unwinder's caches (default 16)"},
	{.flag = "unwind-table", .key = "unwind_table_mb", .type = STROBE_AOT_UINT,
	 .off = OFF(unwind_table_mb), .min = 0, .max = 32, .has_default = true, .dflt = 8,
	 .metavar = "MIB",
	 .help = "kernel memory for the eBPF off-CPU walk's unwind tables\n"
		 "(default 8, at most 32; 0: frame pointers only there)"},
	/* How often the agent drops what its symbolizer learnt of binaries and processes (their
	 * symbol tables, perf maps, names: they may be long gone). A real option because tests and
	 * benchmarks need the renewal within seconds, to measure the agent across one. */
	{.flag = "symbolizer-renew", .key = "symbolizer_renew_s", .type = STROBE_AOT_UINT,
	 .off = OFF(sym_renew_s), .min = 1, .max = 7 * 86400, .has_default = true, .dflt = 1800,
	 .metavar = "SEC",
	 .help = "renew the symbolizer every SEC seconds (default 1800): forget\n"
		 "the binaries and perf maps it holds; the kernel's table stays"},
	{.flag = "max-cpu", .key = "max_cpu", .type = STROBE_AOT_DOUBLE, .off = OFF(max_cpu),
	 .min = 0.0001, .max = 100, .has_default = true, .dflt = 1, .metavar = "PCT",
	 .help = "CPU budget in percent of one core (default 1): above it the\n"
		 "agent halves its frequency, then turns off-CPU off"},
	{.flag = "admin", .key = "admin", .type = STROBE_AOT_STR, .off = OFF(admin),
	 .metavar = "ADDR:PORT",
	 .help = "admin HTTP server (GET /status, /metrics, /ready,\n"
		 "/debug/pprof/profile; POST /pause, /resume); loopback only\n"
		 "unless an admin token is set"},
	{.flag = "admin-token-file", .key = "admin_token_file", .type = STROBE_AOT_TOKEN_FILE,
	 .off = OFF(admin_token), .metavar = "FILE",
	 .help = "the admin token (first line; the file must be mode 600):\n"
		 "then all but /status, /metrics and /ready want\n"
		 "Authorization: Bearer TOKEN, and --admin may be off loopback"},
	{.flag = "spool", .key = "spool.dir", .type = STROBE_AOT_STR, .off = OFF(spool_dir),
	 .metavar = "DIR", .help = "keep unsent profiles on disk here (default: in memory)"},
	{.flag = "spool-max", .key = "spool.max_bytes", .type = STROBE_AOT_BYTES, .off = OFF(spool_max),
	 .min = 4096, .max = 1e12, .has_default = true, .dflt = 64u << 20, .metavar = "BYTES",
	 .help = "spool limit (default 64M; K, M, G suffixes); oldest dropped first"},
	{.flag = "host", .key = "host", .type = STROBE_AOT_STR, .off = OFF(host), .metavar = "NAME",
	 .help = "host label (default: the host name)"},
	{.flag = "tenant", .key = "tenant", .type = STROBE_AOT_STR, .off = OFF(tenant), .metavar = "ID",
	 .help = "X-Scope-OrgID of the pushes"},
	{.flag = "token", .key = "token", .type = STROBE_AOT_STR, .off = OFF(token), .metavar = "TOKEN",
	 .help = "Authorization: Bearer TOKEN (visible in ps; prefer:)"},
	{.flag = "token-file", .key = "token_file", .type = STROBE_AOT_TOKEN_FILE, .off = OFF(token),
	 .metavar = "FILE", .help = "the token from FILE (mode 600), its first line"},
	{.flag = "ca", .key = "ca", .type = STROBE_AOT_STR, .off = OFF(ca), .metavar = "FILE",
	 .help = "https: verify the server's certificate with these PEM CA\n"
		 "certificates (default: the system's); always verified, and a\n"
		 "failed check is retried like any failed push"},
	{.flag = "log-level", .key = "log_level", .type = STROBE_AOT_LOG_LEVEL, .off = OFF(log_level),
	 .has_default = true, .dflt = STROBE_LOG_INFO, .metavar = "LEVEL",
	 .help = "error, warn, info (default) or debug"},
	{.flag = "help", .short_flag = 'h', .no_key = "it prints this text", .type = STROBE_AOT_NONE},
	/* Config only: a secret on the command line is visible in ps (--admin-token-file is the
	 * flag), and process rules are structured. */
	{.key = "admin_token", .type = STROBE_AOT_NONEMPTY, .off = OFF(admin_token)},
	{.key = "processes", .type = STROBE_AOT_RULES},
};
const unsigned strobe_agent_noptions = sizeof(strobe_agent_options) /
				       sizeof(strobe_agent_options[0]);

const strobe_agent_option *strobe_agent_option_by_key(const char *key)
{
	for (unsigned i = 0; i < strobe_agent_noptions; i++)
		if (strobe_agent_options[i].key && strcmp(strobe_agent_options[i].key, key) == 0)
			return &strobe_agent_options[i];
	return NULL;
}

const strobe_agent_option *strobe_agent_option_by_flag(const char *flag)
{
	for (unsigned i = 0; i < strobe_agent_noptions; i++)
		if (strobe_agent_options[i].flag && strcmp(strobe_agent_options[i].flag, flag) == 0)
			return &strobe_agent_options[i];
	return NULL;
}

void strobe_agent_opts_init(strobe_agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (unsigned i = 0; i < strobe_agent_noptions; i++) {
		const strobe_agent_option *e = &strobe_agent_options[i];
		if (!e->has_default)
			continue;
		char *f = (char *)o + e->off;
		switch (e->type) {
		case STROBE_AOT_UINT: case STROBE_AOT_MODE: case STROBE_AOT_CALL_GRAPH:
			*(unsigned *)f = (unsigned)e->dflt;
			break;
		case STROBE_AOT_LOG_LEVEL: *(int *)f = (int)e->dflt; break;
		case STROBE_AOT_DOUBLE: *(double *)f = e->dflt; break;
		case STROBE_AOT_BYTES: *(uint64_t *)f = (uint64_t)e->dflt; break;
		case STROBE_AOT_BOOL: *(bool *)f = e->inverted ? e->dflt == 0 : e->dflt != 0; break;
		default: break;
		}
	}
	/* Not options: how many live processes make the agent reopen its sampler. */
	o->restart_procs = 4096;
}

static int set_string(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static int why(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *const mode_names = "expected \"auto\", \"bpf\" or \"perf\"";

int strobe_agent_option_set(const strobe_agent_option *e, const strobe_agent_value *v,
			    strobe_agent_opts *o, char *msg, size_t len)
{
	char *f = (char *)o + e->off;
	bool num = v->kind == STROBE_AV_NUM, str = v->kind == STROBE_AV_STR;
	switch (e->type) {
	case STROBE_AOT_NONE:
	case STROBE_AOT_RULES:
		return 0; /* the caller's */
	case STROBE_AOT_STR:
	case STROBE_AOT_NONEMPTY:
	case STROBE_AOT_REGEX:
		if (!str)
			return why(msg, len, "expected a string");
		if (e->type == STROBE_AOT_NONEMPTY && !*v->s)
			return why(msg, len, "must not be empty");
		if (e->type == STROBE_AOT_REGEX) {
			regex_t re;
			const char *w;
			if (strobe_agent_regcomp(&re, v->s, &w) < 0)
				return why(msg, len, "%s", w);
			regfree(&re);
		}
		return set_string((char **)f, v->s);
	case STROBE_AOT_TOKEN_FILE: {
		if (!str)
			return why(msg, len, "expected a string");
		strobe_err e2 = {{0}};
		char *tok = NULL;
		int rc = strobe_token_file_read(v->s, &tok, &e2);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			return why(msg, len, "%s", e2.msg);
		free(*(char **)f);
		*(char **)f = tok;
		return 0;
	}
	case STROBE_AOT_UINT:
	case STROBE_AOT_DOUBLE:
	case STROBE_AOT_BYTES:
	case STROBE_AOT_PIDS:
		if (!num)
			return why(msg, len, "expected a number");
		if (!(v->d >= e->min && v->d <= e->max))
			return why(msg, len, "%g is out of range [%g, %g]", v->d, e->min, e->max);
		if (e->type != STROBE_AOT_DOUBLE && e->type != STROBE_AOT_BYTES && v->d != floor(v->d))
			return why(msg, len, "%g is not a whole number", v->d);
		if (e->type == STROBE_AOT_UINT) {
			*(unsigned *)f = (unsigned)v->d;
		} else if (e->type == STROBE_AOT_DOUBLE) {
			*(double *)f = v->d;
		} else if (e->type == STROBE_AOT_BYTES) {
			*(uint64_t *)f = (uint64_t)v->d;
		} else {
			pid_t *np = realloc(o->pids, (o->npids + 1) * sizeof(*np));
			if (!np)
				return -ENOMEM;
			o->pids = np;
			o->pids[o->npids++] = (pid_t)v->d;
		}
		return 0;
	case STROBE_AOT_BOOL:
		if (v->kind != STROBE_AV_BOOL)
			return why(msg, len, "expected true or false");
		*(bool *)f = e->inverted ? !v->b : v->b;
		return 0;
	case STROBE_AOT_MODE: {
		int m = str ? strobe_offcpu_mode_parse(v->s) : -1;
		if (m < 0)
			return why(msg, len, "%s", mode_names);
		*(unsigned *)f = (unsigned)m;
		return 0;
	}
	case STROBE_AOT_CALL_GRAPH: {
		int cg = str ? strobe_call_graph_parse(v->s) : -EINVAL;
		if (cg < 0)
			return why(msg, len, "expected \"fp\", \"dwarf\" or \"auto\"");
		*(unsigned *)f = (unsigned)cg;
		return 0;
	}
	case STROBE_AOT_LOG_LEVEL: {
		int l = str ? strobe_log_level_parse(v->s) : -1;
		if (l < 0)
			return why(msg, len, "expected \"error\", \"warn\", \"info\" or \"debug\"");
		*(int *)f = l;
		return 0;
	}
	case STROBE_AOT_SYMBOLIZE:
		if (v->kind == STROBE_AV_BOOL)
			o->no_symbolize = !v->b, o->symbolize_server = false;
		else if (str && strcmp(v->s, "local") == 0)
			o->no_symbolize = false, o->symbolize_server = false;
		else if (str && strcmp(v->s, "server") == 0)
			o->no_symbolize = false, o->symbolize_server = true;
		else if (str && strcmp(v->s, "none") == 0)
			o->no_symbolize = true, o->symbolize_server = false;
		else
			return why(msg, len, "expected \"local\", \"server\", \"none\", true or false");
		return 0;
	case STROBE_AOT_LABELS: {
		if (!str)
			return why(msg, len, "label values must be strings");
		strobe_err e2 = {{0}};
		int rc = strobe_agent_add_label(&o->labels, &o->nlabels, v->s, &e2);
		if (rc == -EINVAL)
			return why(msg, len, "%s", e2.msg);
		return rc;
	}
	}
	return why(msg, len, "not an option");
}

/* A flag's argument as a number: a whole or decimal number; for sizes also K, M or G. */
static int flag_number(const strobe_agent_option *e, const char *arg, double *d, char *msg,
		       size_t len)
{
	char *end;
	errno = 0;
	*d = strtod(arg, &end);
	if (e->type == STROBE_AOT_BYTES && end != arg) {
		double mul = *end == 'K' || *end == 'k'	  ? 1024
			     : *end == 'M' || *end == 'm' ? 1024.0 * 1024
			     : *end == 'G' || *end == 'g' ? 1024.0 * 1024 * 1024
							  : 1;
		if (mul != 1)
			end++, *d *= mul;
	}
	if (!*arg || end == arg || *end || errno || *d != *d)
		return why(msg, len, "'%s' is not a number%s", arg,
			   e->type == STROBE_AOT_BYTES ? " (with K, M or G)" : "");
	return 0;
}

int strobe_agent_option_set_flag(const strobe_agent_option *e, const char *arg,
				 strobe_agent_opts *o, strobe_err *err)
{
	char msg[300] = "";
	const char *a = arg ? arg : e->implied ? e->implied : "";
	int rc = 0;
	strobe_agent_value v = {.kind = STROBE_AV_STR, .s = a};
	if (e->type == STROBE_AOT_BOOL) {
		v = (strobe_agent_value){.kind = STROBE_AV_BOOL, .b = strcmp(a, "true") == 0};
		rc = strobe_agent_option_set(e, &v, o, msg, sizeof(msg));
	} else if (e->type == STROBE_AOT_PIDS) {
		/* "PID[,PID]": each appended */
		char *dup = strdup(a), *save = NULL;
		if (!dup)
			return -ENOMEM;
		for (char *t = strtok_r(dup, ",", &save); t && rc == 0;
		     t = strtok_r(NULL, ",", &save)) {
			v = (strobe_agent_value){.kind = STROBE_AV_NUM};
			rc = flag_number(e, t, &v.d, msg, sizeof(msg));
			if (rc == 0)
				rc = strobe_agent_option_set(e, &v, o, msg, sizeof(msg));
		}
		free(dup);
	} else if (e->type == STROBE_AOT_UINT || e->type == STROBE_AOT_DOUBLE ||
		   e->type == STROBE_AOT_BYTES) {
		v = (strobe_agent_value){.kind = STROBE_AV_NUM};
		rc = flag_number(e, a, &v.d, msg, sizeof(msg));
		if (rc == 0)
			rc = strobe_agent_option_set(e, &v, o, msg, sizeof(msg));
	} else {
		rc = strobe_agent_option_set(e, &v, o, msg, sizeof(msg));
	}
	if (rc != -EINVAL)
		return rc;
	/* the argument quoted where the message does not show it already */
	bool quote = e->type == STROBE_AOT_MODE || e->type == STROBE_AOT_CALL_GRAPH ||
		     e->type == STROBE_AOT_LOG_LEVEL || e->type == STROBE_AOT_SYMBOLIZE ||
		     e->type == STROBE_AOT_REGEX || e->type == STROBE_AOT_NONEMPTY;
	if (quote)
		return strobe_errf(err, rc, "--%s '%s': %s", e->flag, a, msg);
	return strobe_errf(err, rc, "--%s: %s", e->flag, msg);
}

char *strobe_agent_options_usage(void)
{
	size_t cap = 8192, len = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	out[0] = 0;
	for (unsigned i = 0; i < strobe_agent_noptions; i++) {
		const strobe_agent_option *e = &strobe_agent_options[i];
		if (!e->flag || !e->help)
			continue;
		char left[64];
		if (e->short_flag)
			snprintf(left, sizeof(left), "  -%c, --%s%s%s", e->short_flag, e->flag,
				 e->metavar ? " " : "", e->metavar ? e->metavar : "");
		else
			snprintf(left, sizeof(left), "  --%s%s%s", e->flag, e->metavar ? " " : "",
				 e->metavar ? e->metavar : "");
		/* the help column starts at 25, at least two spaces after the flag */
		size_t need = strlen(left) + 2 + 25 + strlen(e->help) * 2 + 64;
		if (len + need > cap) {
			size_t nc = (len + need) * 2;
			char *n = realloc(out, nc);
			if (!n) {
				free(out);
				return NULL;
			}
			out = n;
			cap = nc;
		}
		len += (size_t)snprintf(out + len, cap - len, "%-23s  ", left);
		for (const char *p = e->help; *p;) {
			const char *nl = strchr(p, '\n');
			size_t n = nl ? (size_t)(nl - p) : strlen(p);
			len += (size_t)snprintf(out + len, cap - len, "%.*s\n", (int)n, p);
			if (!nl)
				break;
			p = nl + 1;
			len += (size_t)snprintf(out + len, cap - len, "%25s", "");
		}
	}
	return out;
}
