// SPDX-License-Identifier: Apache-2.0
/*
 * strobe agent: the always-on profiling daemon (agent/). This file parses the command line and
 * the config file, prints the agent's log lines to stderr and maps signals onto it: SIGTERM and
 * SIGINT stop it cleanly (the last interval is exported and pushed or spooled), SIGUSR1 pauses
 * and SIGUSR2 resumes sampling.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "strobe/agent.h"
#include "strobe/sampler.h"

static const char usage_text[] =
	"usage: strobe agent --server URL [options]\n\n"
	"Profiles every process on the host (or those selected) all the time and sends one profile\n"
	"per process every interval to a strobe server's push API, labelled service_name (from the\n"
	"process's STROBE_SERVICE or PYROSCOPE_APPLICATION_NAME, its systemd unit or container,\n"
	"else its executable), host, pid, comm, exe and build_id. Stays within a CPU budget,\n"
	"keeps profiles in a bounded spool while the server is unreachable, and can be paused.\n"
	"Needs root or CAP_PERFMON (and CAP_SYS_PTRACE to read other users' processes).\n\n"
	"  -s, --server URL       the strobe server, e.g. http://127.0.0.1:4100 (required here\n"
	"                         or in the config)\n"
	"  -c, --config FILE      JSON config (see examples/agent.json); flags override it\n"
	"  -F, --freq HZ          on-CPU samples per second (default 19)\n"
	"  --on-cpu-mode MODE     bpf (summed in the kernel by an eBPF program on the sampling\n"
	"                         event, stacks walked there: no stack copies), perf (a sample\n"
	"                         with a stack copy each, unwound here), or auto (default: bpf\n"
	"                         when it loads, else perf)\n"
	"  --on-cpu-entries N     bpf: sums per interval the kernel's map holds (default: from\n"
	"                         the rate, the CPUs and the interval); what does not fit is\n"
	"                         counted\n"
	"  --offcpu               also record off-CPU time (blocked / run queue, from sched_switch)\n"
	"  --off-cpu-mode MODE    bpf (summed in the kernel by an eBPF program: cheap; user stacks\n"
	"                         by frame pointers only), perf (a sample per context switch), or\n"
	"                         auto (default: bpf when it loads, else perf)\n"
	"  --off-cpu-entries N    bpf: sums and stacks per interval the kernel's\n"
	"                         maps hold (default 16384); what does not fit is counted\n"
	"  --preload-dir DIR      where processes run with libstrobe-heap.so preloaded keep their\n"
	"                         channel files (their STROBE_HEAP_DIR; default /dev/shm): their\n"
	"                         heap and mutex profiles are collected each interval\n"
	"  --no-preload           do not collect them\n"
	"  --locks                also record lock contention: futex waits summed in the kernel\n"
	"                         by an eBPF program, by waiter stack and lock address, pushed\n"
	"                         as mutex:contentions and mutex:delay profiles\n"
	"  -p, --pid PID[,PID]    only these processes (and their children)\n"
	"  --comm REGEX           only processes whose name (comm) matches\n"
	"  --cgroup PATH          only processes in this cgroup (e.g. /system.slice/nginx.service)\n"
	"  -i, --interval SEC     export interval (default 10)\n"
	"  -l, --label KEY=VALUE  a label on every profile (repeatable)\n"
	"  --symbolize MODE       where frames are named: local (default: here, from the\n"
	"                         binaries' symbol tables), server (user frames go as addresses\n"
	"                         with build IDs and the server names them from its debug-info\n"
	"                         store; kernel and JIT frames are named here), none (every\n"
	"                         frame raw; the same as --no-symbolize). In server mode a\n"
	"                         binary that kept its symbol table is sent once per build ID\n"
	"                         to the server's debug-info store, after asking whether it\n"
	"                         has it\n"
	"  --no-upload-symbols    server mode without sending any binary\n"
	"  --no-symbolize         send raw addresses and build IDs (the server names them)\n"
	"  --no-jvm-attach        do not ask JVMs for their perf map (by default a JVM whose\n"
	"                         compiled Java frames go unnamed is asked, through its attach\n"
	"                         socket, as `jcmd PID Compiler.perfmap` would: JDK 17+)\n"
	"  --no-python            native frames only in CPython processes (by default the eBPF\n"
	"                         on-CPU mode reads their Python frames: docs/python.md)\n"
	"  --dwarf                also read DWARF: file:line and inlined frames (costs memory:\n"
	"                         tens of MB on a busy host); default: symbol tables only\n"
	"  --user                 user frames only (no kernel frames)\n"
	"  --call-graph MODE      how user stacks are walked: fp (frame pointers), dwarf (unwind\n"
	"                         tables), auto (tables completed by frame pointers; default)\n"
	"  --unwind-cache MIB     memory budget of the unwinder's caches (default 16)\n"
	"  --unwind-table MIB     kernel memory for the eBPF off-CPU walk's unwind tables\n"
	"                         (default 8, at most 32; 0: frame pointers only there)\n"
	"  --max-cpu PCT          CPU budget in percent of one core (default 1): above it the\n"
	"                         agent halves its frequency, then turns off-CPU off\n"
	"  --admin ADDR:PORT      admin HTTP server (GET /status, /metrics, /ready,\n"
	"                         /debug/pprof/profile; POST /pause, /resume); loopback only\n"
	"                         unless an admin token is set\n"
	"  --admin-token-file FILE  the admin token (first line; the file must be mode 600):\n"
	"                         then all but /status, /metrics and /ready want\n"
	"                         Authorization: Bearer TOKEN, and --admin may be off loopback\n"
	"  --spool DIR            keep unsent profiles on disk here (default: in memory)\n"
	"  --spool-max BYTES      spool limit (default 64M; K, M, G suffixes); oldest dropped first\n"
	"  --host NAME            host label (default: the host name)\n"
	"  --tenant ID            X-Scope-OrgID of the pushes\n"
	"  --token TOKEN          Authorization: Bearer TOKEN (visible in ps; prefer:)\n"
	"  --token-file FILE      the token from FILE (mode 600), its first line\n"
	"  --ca FILE              https: verify the server's certificate with these PEM CA\n"
	"                         certificates (default: the system's); always verified, and a\n"
	"                         failed check is retried like any failed push\n"
	"  --log-level LEVEL      error, warn, info (default) or debug\n\n"
	"Signals: SIGTERM/SIGINT stop (after a final push), SIGUSR1 pauses, SIGUSR2 resumes.\n";

static strobe_agent *the_agent;

static void on_signal(int sig)
{
	if (!the_agent)
		return;
	if (sig == SIGUSR1)
		strobe_agent_pause(the_agent);
	else if (sig == SIGUSR2)
		strobe_agent_resume(the_agent);
	else
		strobe_agent_stop(the_agent);
}

static void log_line(void *ctx, int level, const char *msg)
{
	(void)ctx;
	char ts[32];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct tm tm;
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ldZ %-5s strobe agent: %s\n", ts, now.tv_nsec / 1000000,
		strobe_log_level_name(level), msg);
}

static int parse_bytes(const char *cmd, const char *arg, uint64_t *out)
{
	char *end;
	double v = strtod(arg, &end);
	double mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1024, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1024 * 1024, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1024.0 * 1024 * 1024, end++;
	if (end == arg || *end || v <= 0 || v * mul < 4096 || v * mul > 1e12) {
		cli_err(cmd, "--spool-max: '%s' is not a size between 4K and 1T", arg);
		return -1;
	}
	*out = (uint64_t)(v * mul);
	return 0;
}

static int set_str(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

/* --token-file, --admin-token-file: the token read from FILE (lib/secrets.c) replaces *dst. */
static int set_token_file(const char *cmd, const char *opt, char **dst, const char *file)
{
	strobe_err err = {{0}};
	char *t = NULL;
	if (strobe_token_file_read(file, &t, &err) < 0) {
		cli_err(cmd, "%s %s", opt, err.msg[0] ? err.msg : "out of memory");
		return -1;
	}
	free(*dst);
	*dst = t;
	return 0;
}

enum { O_OFFCPU = OPT_CMD_BASE, O_COMM, O_CGROUP, O_NOSYM, O_USER, O_MAXCPU, O_ADMIN,
       O_SPOOL, O_SPOOLMAX, O_HOST, O_TENANT, O_TOKEN, O_LOGLEVEL, O_NODWARF, O_DWARF,
       O_CALLGRAPH, O_UWCACHE, O_UWTABLE, O_OFFMODE, O_OFFENTRIES, O_ONMODE, O_ONENTRIES, O_TOKENFILE, O_CA,
       O_ADMINTOKEN, O_LOCKS, O_PRELOADDIR, O_NOPRELOAD, O_SYMBOLIZE, O_NOUPSYM,
       O_NOJVM, O_NOPYTHON };

static int oom(const char *cmd)
{
	cli_err(cmd, "out of memory");
	return -1;
}

/* One flag into o; -1 after a message (exit 2). Flags are read after the config, so that they
 * override it wherever they appear. */
static int agent_opt(const char *cmd, int c, const char *arg, strobe_agent_opts *o)
{
	strobe_err err = {{0}};
	long v;
	double d;
	switch (c) {
	case 's': if (set_str(&o->server, arg) < 0) return oom(cmd); break;
	case 'c': break; /* read above */
	case 'F':
		if (cli_int(cmd, "-F", arg, 1, 10000, &v) < 0)
			return -1;
		o->freq = (unsigned)v;
		break;
	case O_OFFCPU: o->offcpu = true; break;
	case O_LOCKS: o->locks = true; break;
	case O_PRELOADDIR: if (set_str(&o->preload_dir, arg) < 0) return oom(cmd); break;
	case O_NOPRELOAD: o->no_preload = true; break;
	case O_OFFMODE: {
		int m = strobe_offcpu_mode_parse(arg);
		if (m < 0) {
			cli_err(cmd, "--off-cpu-mode '%s': expected auto, bpf or perf", arg);
			return -1;
		}
		o->offcpu_mode = (unsigned)m;
		break;
	}
	case O_ONMODE: {
		int m = strobe_offcpu_mode_parse(arg);
		if (m < 0) {
			cli_err(cmd, "--on-cpu-mode '%s': expected auto, bpf or perf", arg);
			return -1;
		}
		o->oncpu_mode = (unsigned)m;
		break;
	}
	case O_ONENTRIES:
		if (cli_int(cmd, "--on-cpu-entries", arg, 4, 1 << 18, &v) < 0)
			return -1;
		o->oncpu_entries = (unsigned)v;
		break;
	case O_OFFENTRIES:
		if (cli_int(cmd, "--off-cpu-entries", arg, 64, 1 << 20, &v) < 0)
			return -1;
		o->offcpu_entries = (unsigned)v;
		break;
	case 'p': {
		char *dup = strdup(arg), *save = NULL;
		if (!dup)
			return oom(cmd);
		for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			if (cli_int(cmd, "-p", t, 1, 0x7fffffff, &v) < 0) {
				free(dup);
				return -1;
			}
			pid_t *np = realloc(o->pids, (o->npids + 1) * sizeof(*np));
			if (!np) {
				free(dup);
				return oom(cmd);
			}
			o->pids = np;
			o->pids[o->npids++] = (pid_t)v;
		}
		free(dup);
		break;
	}
	case O_COMM: if (set_str(&o->comm_re, arg) < 0) return oom(cmd); break;
	case O_CGROUP: if (set_str(&o->cgroup, arg) < 0) return oom(cmd); break;
	case 'i':
		if (cli_int(cmd, "-i", arg, 1, 3600, &v) < 0)
			return -1;
		o->interval_s = (unsigned)v;
		break;
	case 'l':
		if (strobe_agent_add_label(&o->labels, &o->nlabels, arg, &err) < 0) {
			cli_err(cmd, "--label: %s", err.msg);
			return -1;
		}
		break;
	case O_NOSYM: o->no_symbolize = true; o->symbolize_server = false; break;
	case O_NOUPSYM: o->no_upload_symbols = true; break;
	case O_NOJVM: o->no_jvm_attach = true; break;
	case O_NOPYTHON: o->no_python = true; break;
	case O_SYMBOLIZE:
		if (strcmp(arg, "local") && strcmp(arg, "server") && strcmp(arg, "none")) {
			cli_err(cmd, "--symbolize: '%s' is not local, server or none", arg);
			return -1;
		}
		o->no_symbolize = strcmp(arg, "none") == 0;
		o->symbolize_server = strcmp(arg, "server") == 0;
		break;
	case O_NODWARF: o->no_dwarf = true; break;
	case O_DWARF: o->no_dwarf = false; break;
	case O_USER: o->kernel = false; break;
	case O_CALLGRAPH:
		if ((v = strobe_call_graph_parse(arg)) < 0) {
			cli_err(cmd, "--call-graph: unknown mode '%s' (fp, dwarf or auto)",
				arg);
			return -1;
		}
		o->call_graph = (unsigned)v;
		break;
	case O_UWCACHE:
		if (cli_int(cmd, "--unwind-cache", arg, 1, 1 << 20, &v) < 0)
			return -1;
		o->unwind_cache_mb = (unsigned)v;
		break;
	case O_UWTABLE:
		if (cli_int(cmd, "--unwind-table", arg, 0, 32, &v) < 0)
			return -1;
		o->unwind_table_mb = (unsigned)v;
		break;
	case O_MAXCPU:
		if (cli_double(cmd, "--max-cpu", arg, &d) < 0)
			return -1;
		if (d <= 0 || d > 100) {
			cli_err(cmd, "--max-cpu: %s is not a percentage in (0, 100]", arg);
			return -1;
		}
		o->max_cpu = d;
		break;
	case O_ADMIN: if (set_str(&o->admin, arg) < 0) return oom(cmd); break;
	case O_SPOOL: if (set_str(&o->spool_dir, arg) < 0) return oom(cmd); break;
	case O_SPOOLMAX:
		if (parse_bytes(cmd, arg, &o->spool_max) < 0)
			return -1;
		break;
	case O_HOST: if (set_str(&o->host, arg) < 0) return oom(cmd); break;
	case O_TENANT: if (set_str(&o->tenant, arg) < 0) return oom(cmd); break;
	case O_TOKEN: if (set_str(&o->token, arg) < 0) return oom(cmd); break;
	case O_TOKENFILE:
		if (set_token_file(cmd, "--token-file", &o->token, arg) < 0)
			return -1;
		break;
	case O_CA: if (set_str(&o->ca, arg) < 0) return oom(cmd); break;
	case O_ADMINTOKEN:
		if (set_token_file(cmd, "--admin-token-file", &o->admin_token, arg) < 0)
			return -1;
		break;
	case O_LOGLEVEL:
		if ((o->log_level = strobe_log_level_parse(arg)) < 0) {
			cli_err(cmd, "--log-level: '%s' is not error, warn, info or debug", arg);
			return -1;
		}
		break;
	default: fputs(usage_text, stderr); return -1;
	}
	return 0;
}

/* The config files (-c), then the flags; 1 after --help, -1 after a message. */
static int agent_args(const char *cmd, int argc, char **argv, strobe_agent_opts *o)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},	       {"server", required_argument, 0, 's'},
		{"config", required_argument, 0, 'c'}, {"freq", required_argument, 0, 'F'},
		{"offcpu", no_argument, 0, O_OFFCPU},  {"pid", required_argument, 0, 'p'},
		{"locks", no_argument, 0, O_LOCKS},
		{"preload-dir", required_argument, 0, O_PRELOADDIR},
		{"no-preload", no_argument, 0, O_NOPRELOAD},
		{"comm", required_argument, 0, O_COMM}, {"cgroup", required_argument, 0, O_CGROUP},
		{"interval", required_argument, 0, 'i'}, {"label", required_argument, 0, 'l'},
		{"no-symbolize", no_argument, 0, O_NOSYM}, {"user", no_argument, 0, O_USER},
		{"symbolize", required_argument, 0, O_SYMBOLIZE},
		{"no-upload-symbols", no_argument, 0, O_NOUPSYM},
		{"no-jvm-attach", no_argument, 0, O_NOJVM},
		{"no-python", no_argument, 0, O_NOPYTHON},
		{"dwarf", no_argument, 0, O_DWARF}, {"no-dwarf", no_argument, 0, O_NODWARF},
		{"max-cpu", required_argument, 0, O_MAXCPU}, {"admin", required_argument, 0, O_ADMIN},
		{"spool", required_argument, 0, O_SPOOL}, {"spool-max", required_argument, 0, O_SPOOLMAX},
		{"host", required_argument, 0, O_HOST}, {"tenant", required_argument, 0, O_TENANT},
		{"token", required_argument, 0, O_TOKEN}, {"log-level", required_argument, 0, O_LOGLEVEL},
		{"call-graph", required_argument, 0, O_CALLGRAPH},
		{"unwind-cache", required_argument, 0, O_UWCACHE},
		{"unwind-table", required_argument, 0, O_UWTABLE},
		{"off-cpu-mode", required_argument, 0, O_OFFMODE},
		{"off-cpu-entries", required_argument, 0, O_OFFENTRIES},
		{"on-cpu-mode", required_argument, 0, O_ONMODE},
		{"on-cpu-entries", required_argument, 0, O_ONENTRIES},
		{"token-file", required_argument, 0, O_TOKENFILE},
		{"ca", required_argument, 0, O_CA},
		{"admin-token-file", required_argument, 0, O_ADMINTOKEN},
		{0, 0, 0, 0}};
	strobe_err err = {{0}};
	for (int i = 1; i < argc; i++) {
		const char *path = NULL;
		if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) && i + 1 < argc)
			path = argv[i + 1];
		else if (strncmp(argv[i], "--config=", 9) == 0)
			path = argv[i] + 9;
		if (path && strobe_agent_config_load(path, o, &err) < 0) {
			cli_err(cmd, "%s", err.msg);
			return -1;
		}
	}
	int c;
	while ((c = getopt_long(argc, argv, "hs:c:F:p:i:l:", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 1;
		}
		if (agent_opt(cmd, c, optarg, o) < 0)
			return -1;
	}
	return 0;
}

int cmd_agent(int argc, char **argv)
{
	const char *cmd = "agent";
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	strobe_err err = {{0}};
	int rc = 2, pr = agent_args(cmd, argc, argv, &o);
	if (pr) {
		rc = pr > 0 ? 0 : 2;
		goto out;
	}
	if (optind < argc) {
		cli_err(cmd, "unexpected argument '%s' (see --help)", argv[optind]);
		goto out;
	}
	if (!o.server) {
		cli_err(cmd, "--server URL is required (or \"server\" in the config)");
		goto out;
	}
	if (strobe_url_check_secrets(o.server, "--server (or \"server\" in the config)",
				     "give the token with --token-file, \"token_file\" or \"token\" "
				     "(sent as Authorization: Bearer)",
				     &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	if (o.token && strobe_token_check(o.token, "--token (or \"token\" in the config)", &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	if (o.comm_re && o.npids) {
		cli_err(cmd, "give --pid or --comm, not both");
		goto out;
	}
	o.log = log_line;

	/* Signals are blocked while the agent starts its threads, so they land on this one. */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	strobe_agent *a = NULL;
	int ar = strobe_agent_new(&o, &a, &err);
	if (ar < 0) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-ar));
		rc = ar == -EINVAL ? 2 : 1; /* a bad option, or the host refused (perf_event, port) */
		goto out;
	}
	the_agent = a;
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigdelset(&old, SIGINT);
	sigdelset(&old, SIGTERM);
	sigdelset(&old, SIGUSR1);
	sigdelset(&old, SIGUSR2);
	sigdelset(&old, SIGHUP);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (o.admin) {
		char msg[128];
		snprintf(msg, sizeof(msg), "admin listening on %s port %u%s", o.admin,
			 strobe_agent_admin_port(a),
			 o.admin_token ? " (admin token required for controls and captures)" : "");
		log_line(NULL, STROBE_LOG_INFO, msg);
	}
	rc = strobe_agent_run(a, &err) < 0 ? 1 : 0;
	/* A diagnostic of the agent's memory (docs/agent.md): glibc's view of each arena, what it
	 * holds from the system against what is in use, before the teardown frees it. */
	const char *ms = getenv("STROBE_MALLOC_STATS");
	if (ms && strcmp(ms, "1") == 0)
		malloc_stats();
	the_agent = NULL;
	strobe_agent_free(a);
out:
	strobe_agent_opts_free(&o);
	return rc;
}
