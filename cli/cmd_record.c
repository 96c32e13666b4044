// SPDX-License-Identifier: Apache-2.0
/*
 * strobe record: samples a command, running processes or the whole host with perf_event and
 * writes a symbolized profile (pprof by default; SVG, folded, JSON by the output's extension).
 *
 * A command is started stopped at a pipe: the events are opened on the child with
 * enable_on_exec, so counting starts exactly at its exec and covers every thread and child it
 * creates. Recording ends on -d, when the command (or every -p process) exits, or on
 * SIGINT/SIGTERM; the profile is written in every case.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "record_heap.h"
#include "strobe/clock.h"
#include "strobe/jvm_perfmap.h"
#include "strobe/sampler.h"

static const char usage_text[] =
	"usage: strobe record [options] -a\n"
	"       strobe record [options] -p PID[,PID...]\n"
	"       strobe record [options] [--] COMMAND [ARGS...]\n\n"
	"Samples call stacks (kernel and user) and writes a symbolized profile.\n"
	"Ends after -d, when the command or processes exit, or on Ctrl-C; the output is always\n"
	"written. Needs root, CAP_PERFMON, or kernel.perf_event_paranoid low enough.\n\n"
	"  -e, --event EVENT      cpu (on-CPU samples, default), offcpu (time blocked or waiting\n"
	"                         to run, from sched_switch), wall (both in one profile),\n"
	"                         cycles (on-CPU from the hardware cycle counter, where there is\n"
	"                         one), lock (futex waits summed in the kernel by eBPF: lock\n"
	"                         contention, by the waiter's stack and the lock's address);\n"
	"                         heap or mutex: allocations or lock contention of a command, by\n"
	"                         preloading libstrobe-heap.so (no root needed; docs/heap.md)\n"
	"  -F, --freq HZ          on-CPU samples per second (default 99)\n"
	"  -a, --all-cpus         every process on the host\n"
	"  -p, --pid PID[,PID]    these running processes, all threads and later children\n"
	"  -d, --duration SECONDS stop after this long\n"
	"  -o, --output FILE      default strobe.pb.gz (pprof); .svg, .folded, .json and\n"
	"                         .speedscope.json write that format instead\n"
	"  --label KEY=VALUE      a label on every sample (repeatable)\n"
	"  --min-block DURATION   drop off-CPU intervals shorter than this (e.g. 500us, 2ms)\n"
	"  --mode MODE            cpu, offcpu, wall: bpf (counted and summed in the kernel by eBPF\n"
	"                         programs that walk stacks there: no samples or stack copies\n"
	"                         to read), perf (a sample per event, stacks unwound here), or\n"
	"                         auto (default: bpf where it loads, else perf, saying why)\n"
	"                         (--idle, -e cycles and --call-graph dwarf: perf)\n"
	"  --user                 user frames only (no kernel frames)\n"
	"  --no-threads           label samples by process only (no tid and thread labels)\n"
	"  --no-symbolize         keep raw addresses, mappings and build IDs (name them later)\n"
	"  --no-jvm-attach        do not ask running JVMs (-p, -a) for their perf map: by\n"
	"                         default one whose compiled Java frames are unnamed is asked\n"
	"                         as `jcmd PID Compiler.perfmap` would (JDK 17+)\n"
	"  --debug-dir DIR        also look for debug files under DIR (repeatable)\n"
	"  --debug-budget MB      debug information held per binary while naming frames: one\n"
	"                         whose DWARF is over half of it is named from its symbol table\n"
	"                         (no lines or inlined frames); 0 = no limit (default: 12 with\n"
	"                         -a, where it keeps the recorder small, else 0)\n"
	"  --idle                 keep samples of idle CPUs (-a)\n"
	"  -m, --mmap-pages N     ring buffer pages per CPU (a power of two)\n"
	"  --call-graph MODE      how user stacks are walked: fp (frame pointers, by the kernel),\n"
	"                         dwarf (a copy of the stack unwound with the binaries' unwind\n"
	"                         tables), auto (dwarf completed by frame pointers; default)\n"
	"  --stack-size BYTES     user stack copied per sample for dwarf/auto (default\n"
	"                         16384 on-CPU, 8192 at switch-outs)\n"
	"  --unwind-cache MIB     memory budget of the unwind-table cache (default 64)\n"
	"  -q, --quiet            no summary on stderr\n"
	"  -i, --interval SECONDS heap/mutex: also write a profile every SECONDS (OUTPUT with .1,\n"
	"                         .2, ... before its extension)\n"
	"  --leaks FILE           heap: write the possible leaks there, not to stderr\n"
	"  --no-leaks             heap: no leak report\n\n"
	"Sample types: cpu: samples/count, cpu/nanoseconds; offcpu: off_cpu, blocked, runqueue\n"
	"(nanoseconds) and switches/count; wall: all of these and wall/nanoseconds; lock:\n"
	"contentions/count and delay/nanoseconds (--min-block drops shorter waits); heap:\n"
	"alloc_objects, alloc_space, inuse_objects, inuse_space (Go's); mutex: contentions/count,\n"
	"delay/nanoseconds. STROBE_HEAP_RATE (bytes, default 524288) and STROBE_LOCK_SAMPLE_NS\n"
	"(default 100000) set the heap and lock sampling.\n";

#define DEFAULT_BUDGET_MB 12 /* --debug-budget with -a */

/* Profile building met unnamed JIT frames of pid: a live JVM is asked for its perf map (it
 * may take a second or two the first time, while the JVM starts its attach listener). A
 * JVM that cannot be asked says why; another process (not a JVM, or gone) says nothing. */
static int ask_jvm(void *ctx, pid_t pid)
{
	char why[256];
	int rc = strobe_jvm_write_perfmap(NULL, pid, 3000, why, sizeof(why));
	if (rc < 0 && rc != -ESRCH && strobe_jvm_is_hotspot(NULL, pid))
		cli_err(ctx, "Java frames of %d stay unnamed: %s", (int)pid, why);
	return rc == 0;
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }
/* Only there to interrupt poll() when the command exits; waitpid() does the rest. */
static void on_child(int sig) { (void)sig; }

/* The longest wait for records between two rounds. Each round costs a poll() wake-up, a read
 * of every ring and a sort: at 99 Hz the rings take more than a second to reach their
 * wake-up mark, and ten rounds a second were a third of the recorder's own CPU on a virtual
 * machine, where a system call is dear. Signals and the command's exit interrupt the wait.
 * Off-CPU recording writes records at every context switch, thousands a second: there the
 * rings are read every 100 ms, as before, so a recorder slow to be scheduled on a loaded
 * machine still has the whole ring to spare. */
#define ROUND_MS 1000
#define ROUND_MS_OFFCPU 100
#define EARLY_ROUND_MS  100          /* rounds of the eBPF path's first EARLY_NS */
#define EARLY_NS        2000000000LL
/* ... and its very first rounds: a started command's C SDK publishes its label offset in a
 * constructor, a millisecond after the exec; the kernel labels its samples only once the
 * offset is found, at a round (with 100-ms rounds, a 1.4 s run lost 3 % of its labels). */
#define FIRST_ROUND_MS  20
#define FIRST_NS        400000000LL

/* "2ms", "500us", "1.5s", "100ns"; 0 needs no unit. */
static int parse_duration(const char *cmd, const char *opt, const char *arg, int64_t *ns)
{
	char *end;
	double v = strtod(arg, &end);
	static const struct { const char *u; double mul; } units[] = {
		{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
	if (end != arg && v >= 0) {
		if (*end == 0 && v == 0) {
			*ns = 0;
			return 0;
		}
		for (size_t i = 0; i < 4; i++)
			if (strcmp(end, units[i].u) == 0) {
				*ns = (int64_t)(v * units[i].mul);
				return 0;
			}
	}
	cli_err(cmd, "%s: '%s' is not a duration (a number with ns, us, ms or s, e.g. 2ms)", opt,
		arg);
	return -1;
}

static int parse_pids(const char *cmd, const char *arg, pid_t **pids, unsigned *n)
{
	char *dup = strdup(arg), *save = NULL;
	if (!dup)
		return -1;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(t, &end, 10);
		if (*end || v <= 0 || v > 0x7fffffff) {
			cli_err(cmd, "-p: '%s' is not a process id", t);
			free(dup);
			return -1;
		}
		if (kill((pid_t)v, 0) < 0 && errno == ESRCH) {
			cli_err(cmd, "-p: no process %ld", v);
			free(dup);
			return -1;
		}
		pid_t *np = realloc(*pids, (*n + 1) * sizeof(*np));
		if (!np) {
			free(dup);
			return -1;
		}
		*pids = np;
		(*pids)[(*n)++] = (pid_t)v;
	}
	free(dup);
	return 0;
}

/* Starts argv stopped before exec; *go is the pipe end that lets it run, *status the end that
 * reports a failed exec (errno) or closes on success. */
static pid_t spawn(char **argv, int *go, int *status)
{
	int gp[2], sp[2];
	if (pipe2(gp, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(sp, O_CLOEXEC) < 0) {
		close(gp[0]);
		close(gp[1]);
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(gp[1]);
		close(sp[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		char c;
		if (read(gp[0], &c, 1) != 1)
			_exit(127); /* the recorder gave up */
		execvp(argv[0], argv);
		int e = errno;
		if (write(sp[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(gp[0]);
	close(sp[1]);
	if (pid < 0) {
		close(gp[1]);
		close(sp[0]);
		return -1;
	}
	*go = gp[1];
	*status = sp[0];
	return pid;
}

static bool any_alive(const pid_t *pids, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (kill(pids[i], 0) == 0 || errno == EPERM)
			return true;
	return false;
}

/* The options, as parsed. */
typedef struct rec_opts {
	strobe_sampler_opts so;
	const char *output;
	double duration;
	long budget_mb; /* -1: not given */
	bool quiet, per_thread, symbolize;
	bool no_jvm_attach; /* --no-jvm-attach */
	pid_t *pids;
	unsigned npids;
	const char **labels, **debug_dirs;
	unsigned nlabels, ndebug;
	record_heap_opts ho; /* -e heap|mutex: kind set */
	int mode;       /* RECORD_MODE_*: -e cpu, offcpu, wall on the eBPF programs or perf */
} rec_opts;

/* What a recording holds while it runs. */
typedef struct rec_run {
	pid_t child;    /* the command, or -1 */
	bool child_done;
	int child_status;
	strobe_sampler *s;
	struct strobe_locks *lk; /* -e lock */
	record_bpf *bpf;         /* -e cpu, offcpu, wall summed in the kernel (NULL: perf) */
} rec_run;

enum { O_LABEL = OPT_CMD_BASE, O_MINBLOCK, O_USER, O_NOTHREADS, O_NOSYM, O_DEBUGDIR, O_IDLE,
       O_BUDGET, O_CALLGRAPH, O_STACKSIZE, O_UWCACHE, O_LEAKS, O_NOLEAKS, O_MODE, O_NOJVM };

static int parse_event(const char *cmd, const char *arg, rec_opts *o)
{
	strobe_sampler_opts *so = &o->so;
	if (strcmp(arg, "cpu") == 0 || strcmp(arg, "cpu-clock") == 0)
		so->events = STROBE_EV_CPU;
	else if (strcmp(arg, "offcpu") == 0 || strcmp(arg, "off-cpu") == 0)
		so->events = STROBE_EV_OFFCPU;
	else if (strcmp(arg, "wall") == 0)
		so->events = STROBE_EV_CPU | STROBE_EV_OFFCPU;
	else if (strcmp(arg, "cycles") == 0)
		so->events = STROBE_EV_CPU, so->cycles = true;
	else if (strcmp(arg, "lock") == 0 || strcmp(arg, "locks") == 0)
		so->events = STROBE_EV_LOCK;
	else if (!record_heap_event(arg, &o->ho)) {
		cli_err(cmd, "-e: unknown event '%s' (cpu, offcpu, wall, cycles, lock, heap or mutex)",
			arg);
		return -1;
	}
	return 0;
}

/* Appends arg to a NULL-terminated list. */
static int push_arg(const char ***list, unsigned *n, const char *arg)
{
	const char **nl = realloc(*list, (*n + 2) * sizeof(*nl));
	if (!nl)
		return -1;
	*list = nl;
	nl[(*n)++] = arg;
	nl[*n] = NULL;
	return 0;
}

/* One option; -1 after a message (exit 2). */
static int parse_opt(const char *cmd, int c, const char *arg, rec_opts *o)
{
	strobe_sampler_opts *so = &o->so;
	long v;
	switch (c) {
	case 'e': return parse_event(cmd, arg, o);
	case 'F':
		if (cli_int(cmd, "-F", arg, 1, 100000, &v) < 0)
			return -1;
		so->freq = (unsigned)v;
		return 0;
	case 'a': so->all = true; return 0;
	case 'p': return parse_pids(cmd, arg, &o->pids, &o->npids);
	case 'd':
		if (cli_double(cmd, "-d", arg, &o->duration) < 0)
			return -1;
		if (o->duration <= 0) {
			cli_err(cmd, "-d: the duration must be positive, not '%s'", arg);
			return -1;
		}
		return 0;
	case 'o': o->output = arg; return 0;
	case 'm':
		if (cli_int(cmd, "-m", arg, 1, 65536, &v) < 0)
			return -1;
		if (v & (v - 1)) {
			cli_err(cmd, "-m: %ld is not a power of two", v);
			return -1;
		}
		so->ring_pages = (unsigned)v;
		return 0;
	case 'q': o->quiet = true; return 0;
	case O_LABEL: {
		const char *eq = strchr(arg, '=');
		if (!eq || eq == arg) {
			cli_err(cmd, "--label: '%s' is not KEY=VALUE", arg);
			return -1;
		}
		return push_arg(&o->labels, &o->nlabels, arg);
	}
	case O_MINBLOCK: return parse_duration(cmd, "--min-block", arg, &so->min_block_ns);
	case O_USER: so->kernel = false; return 0;
	case O_NOTHREADS: o->per_thread = false; return 0;
	case O_NOSYM: o->symbolize = false; return 0;
	case O_NOJVM: o->no_jvm_attach = true; return 0;
	case O_DEBUGDIR: return push_arg(&o->debug_dirs, &o->ndebug, arg);
	case O_IDLE: so->keep_idle = true; return 0;
	case O_MODE:
		if (strcmp(arg, "auto") == 0)
			o->mode = RECORD_MODE_AUTO;
		else if (strcmp(arg, "bpf") == 0)
			o->mode = RECORD_MODE_BPF;
		else if (strcmp(arg, "perf") == 0)
			o->mode = RECORD_MODE_PERF;
		else {
			cli_err(cmd, "--mode '%s': expected auto, bpf or perf", arg);
			return -1;
		}
		return 0;
	case O_BUDGET: return cli_int(cmd, "--debug-budget", arg, 0, 1 << 20, &o->budget_mb);
	case O_CALLGRAPH:
		if ((v = strobe_call_graph_parse(arg)) < 0) {
			cli_err(cmd, "--call-graph: unknown mode '%s' (fp, dwarf or auto)", arg);
			return -1;
		}
		so->call_graph = (unsigned)v;
		return 0;
	case O_STACKSIZE:
		if (cli_int(cmd, "--stack-size", arg, 8, 65000, &v) < 0)
			return -1;
		so->stack_size = (unsigned)v & ~7u;
		return 0;
	case O_UWCACHE:
		if (cli_int(cmd, "--unwind-cache", arg, 1, 1 << 20, &v) < 0)
			return -1;
		so->unwind_cache_bytes = (size_t)v << 20;
		return 0;
	case 'i':
		if (cli_double(cmd, "-i", arg, &o->ho.interval) < 0)
			return -1;
		if (o->ho.interval <= 0) {
			cli_err(cmd, "-i: the interval must be positive, not '%s'", arg);
			return -1;
		}
		return 0;
	case O_LEAKS: o->ho.leaks_path = arg; return 0;
	case O_NOLEAKS: o->ho.no_leaks = true; return 0;
	default: fputs(usage_text, stderr); return -1;
	}
}

/* The options up to the command; 1 after --help (exit 0), -1 after a message (exit 2). */
static int parse_args(const char *cmd, int argc, char **argv, rec_opts *o)
{
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},	       {"event", required_argument, 0, 'e'},
		{"freq", required_argument, 0, 'F'},   {"all-cpus", no_argument, 0, 'a'},
		{"pid", required_argument, 0, 'p'},    {"duration", required_argument, 0, 'd'},
		{"output", required_argument, 0, 'o'}, {"mmap-pages", required_argument, 0, 'm'},
		{"quiet", no_argument, 0, 'q'},	       {"label", required_argument, 0, O_LABEL},
		{"min-block", required_argument, 0, O_MINBLOCK},
		{"mode", required_argument, 0, O_MODE},
		{"user", no_argument, 0, O_USER},      {"no-threads", no_argument, 0, O_NOTHREADS},
		{"no-symbolize", no_argument, 0, O_NOSYM},
		{"no-jvm-attach", no_argument, 0, O_NOJVM},
		{"debug-dir", required_argument, 0, O_DEBUGDIR},
		{"idle", no_argument, 0, O_IDLE},
		{"debug-budget", required_argument, 0, O_BUDGET},
		{"call-graph", required_argument, 0, O_CALLGRAPH},
		{"stack-size", required_argument, 0, O_STACKSIZE},
		{"unwind-cache", required_argument, 0, O_UWCACHE},
		{"interval", required_argument, 0, 'i'}, {"leaks", required_argument, 0, O_LEAKS},
		{"no-leaks", no_argument, 0, O_NOLEAKS}, {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "+he:F:ap:d:o:m:qi:", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 1;
		}
		if (parse_opt(cmd, c, optarg, o) < 0)
			return -1;
	}
	return 0;
}

static void on_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction sc = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
	sigemptyset(&sc.sa_mask);
	sigaction(SIGCHLD, &sc, NULL);
}

/* Starts the command (stopped until the events are open), opens the events on the targets and
 * lets the command go; -1 after a message, with nothing left running. */
static int start(const char *cmd, rec_opts *o, char **command, int ncommand, rec_run *r)
{
	strobe_sampler_opts *so = &o->so;
	int go = -1, status_fd = -1;
	if (ncommand) {
		r->child = spawn(command, &go, &status_fd);
		if (r->child < 0) {
			cli_err(cmd, "cannot start '%s': %s", command[0], strerror(errno));
			return -1;
		}
		so->pids = &r->child;
		so->npids = 1;
		so->enable_on_exec = true;
	} else if (o->npids) {
		so->pids = o->pids;
		so->npids = o->npids;
	}
	strobe_err err = {{0}};
	if (so->events == STROBE_EV_LOCK && !(r->lk = record_lock_open(cmd, so)))
		goto fail;
	r->bpf = record_bpf_open(cmd, so, o->mode);
	if (!r->bpf && o->mode == RECORD_MODE_BPF && (so->events & (STROBE_EV_CPU | STROBE_EV_OFFCPU)))
		goto fail; /* (said why) */
	if (!(r->s = strobe_sampler_open(so, &err)) ||
	    (r->lk && record_lock_attach(cmd, r->lk) < 0) ||
	    (r->bpf && record_bpf_attach(cmd, r->bpf, so) < 0)) {
		if (!r->s)
			cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(errno));
		goto fail;
	}
	if (r->child > 0) {
		int e = 0;
		if (write(go, "x", 1) != 1 || read(status_fd, &e, sizeof(e)) == (ssize_t)sizeof(e)) {
			cli_err(cmd, "cannot run '%s': %s", command[0], strerror(e ? e : EPIPE));
			goto fail;
		}
		close(go);
		close(status_fd);
		record_bpf_exec(r->bpf, r->child); /* (the status pipe closed at the exec) */
	} else if (strobe_sampler_enable(r->s, &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		goto fail;
	}
	return 0;
fail:
	record_lock_close(cmd, r->lk, r->s, true);
	record_bpf_close(r->bpf, NULL, true);
	r->bpf = NULL;
	strobe_sampler_close(r->s);
	r->s = NULL;
	r->lk = NULL;
	if (r->child > 0) {
		close(go); /* the child reads EOF and exits */
		close(status_fd);
		waitpid(r->child, NULL, 0);
		r->child = -1;
	}
	return -1;
}

/* Polls until a stop: a signal, -d, the command's exit or the -p processes'. Returns why. */
static const char *record_loop(const char *cmd, const rec_opts *o, rec_run *r)
{
	strobe_err err = {{0}};
	int64_t t0 = strobe_mono_ns(), last_check = t0;
	for (;;) {
		/* (summed in the kernel, off-CPU needs no quick reading: rounds of ROUND_MS) */
		int wait_ms = (o->so.events & (STROBE_EV_OFFCPU | STROBE_EV_LOCK)) && !r->bpf ? ROUND_MS_OFFCPU
										: ROUND_MS;
		if (o->duration > 0) { /* wake up when the duration is reached, not after */
			double left = o->duration * 1e3 - (double)(strobe_mono_ns() - t0) / 1e6;
			if (left < wait_ms)
				wait_ms = left < 1 ? 1 : (int)left + 1;
		}
		if (o->npids && wait_ms > 500)
			wait_ms = 500; /* -p: notice within half a second that they exited */
		/* The eBPF sums are read each round, and a process is looked at for an interpreter
		 * (Python) when its sums are read: short rounds at first, so that a command started
		 * here is found soon after it execs, not a whole round later */
		int64_t since = strobe_mono_ns() - t0;
		if (r->bpf && since < EARLY_NS && wait_ms > EARLY_ROUND_MS)
			wait_ms = since < FIRST_NS ? FIRST_ROUND_MS : EARLY_ROUND_MS;
		if (strobe_sampler_poll(r->s, wait_ms, &err) < 0) {
			cli_err(cmd, "%s", err.msg);
			return "";
		}
		if (r->lk && record_lock_collect(cmd, r->lk, r->s) < 0)
			return "";
		if (r->bpf && record_bpf_collect(cmd, r->bpf, r->s) < 0)
			return "";
		int64_t now = strobe_mono_ns();
		if (stop_signal)
			return stop_signal == SIGINT ? "interrupted" : "terminated";
		if (o->duration > 0 && (double)(now - t0) >= o->duration * 1e9)
			return "duration reached";
		if (r->child > 0 && waitpid(r->child, &r->child_status, WNOHANG) == r->child) {
			r->child_done = true;
			return "command exited";
		}
		if (o->npids && now - last_check > 500000000) {
			last_check = now;
			if (!any_alive(o->pids, o->npids))
				return "processes exited";
		}
	}
}

/* Ends the recording: every record read, the command stopped, collection-only memory freed. */
static void stop_recording(const char *cmd, const rec_opts *o, rec_run *r)
{
	strobe_err err = {{0}};
	strobe_sampler_disable(r->s);
	record_lock_stop(r->lk);
	record_bpf_stop(r->bpf);
	if (r->child > 0 && !r->child_done) /* the command does not outlive its recording */
		kill(r->child, stop_signal ? stop_signal : SIGTERM);
	if (strobe_sampler_drain(r->s, &err) < 0)
		cli_err(cmd, "%s", err.msg);
	record_lock_close(cmd, r->lk, r->s, o->quiet); /* the last sums, while mappings are held */
	if (r->bpf)
		record_bpf_collect(cmd, r->bpf, r->s); /* the same for the eBPF sums */
	r->lk = NULL;
	strobe_sampler_trim(r->s); /* recording is over: make room for the symbolizer */
}

/* The profile, symbolized, with comments saying how it was taken and what it is missing.
 * NULL after a message. */
static strobe_profile *build_profile(const char *cmd, rec_opts *o, rec_run *r, strobe_format fmt,
				     int argc, char **argv, strobe_sampler_stats *st,
				     size_t *over_budget)
{
	strobe_symbolizer *sym = NULL;
	if (o->symbolize) {
		/* Whole-host recordings meet every binary on the host, libc's full debug
		 * information among them (libc6-dbg: 10 MB decompressed, as much again in line
		 * tables): bounded by default there, so the recorder stays small. */
		if (o->budget_mb < 0)
			o->budget_mb = o->so.all ? DEFAULT_BUDGET_MB : 0;
		strobe_sym_opts syo = {.debug_dirs = o->debug_dirs, .no_kernel = !o->so.kernel,
				       .max_debug_bytes = (uint64_t)o->budget_mb << 20};
		sym = strobe_symbolizer_new(&syo);
		if (!sym)
			cli_err(cmd, "cannot start the symbolizer (%s); writing raw addresses",
				strerror(errno));
	}
	pid_t two[2];
	strobe_sampler_profile_opts po = {
		.sym = sym, .per_thread = o->per_thread, .labels = o->labels, .nlabels = o->nlabels,
		.jit_unnamed = o->no_jvm_attach ? NULL : ask_jvm, .jit_ctx = (void *)cmd,
		.release_objects = true, /* one binary's debug info in memory at a time */
		/* a flame graph or folded file of several processes is rooted at their names */
		.process_frames = fmt != STROBE_FMT_PPROF && strobe_sampler_pids(r->s, two, 2) > 1};
	strobe_err err = {{0}};
	strobe_profile *p = strobe_sampler_profile(r->s, &po, &err);
	strobe_sampler_get_stats(r->s, st);
	strobe_sampler_close(r->s);
	r->s = NULL;
	*over_budget = strobe_symbolizer_over_budget(sym);
	strobe_symbolizer_free(sym);
	if (!p) {
		cli_err(cmd, "%s", err.msg);
		return NULL;
	}
	char note[512];
	int nn = snprintf(note, sizeof(note), "strobe record");
	for (int i = 1; i < argc && nn < (int)sizeof(note) - 1; i++)
		nn += snprintf(note + nn, sizeof(note) - (size_t)nn, " %s", argv[i]);
	strobe_profile_add_comment(p, note);
	if (st->unwind_truncated) {
		snprintf(note, sizeof(note), "truncated stacks: %" PRIu64 " (stack slice of --stack-size too small)",
			 st->unwind_truncated);
		strobe_profile_add_comment(p, note);
	}
	if (st->lost) {
		snprintf(note, sizeof(note), "lost records: %" PRIu64 " (ring buffer full)", st->lost);
		strobe_profile_add_comment(p, note);
	}
	if (*over_budget) {
		snprintf(note, sizeof(note), "named from symbol tables only (debug information over "
			 "the %ld MB budget): %zu binar%s", o->budget_mb, *over_budget,
			 *over_budget == 1 ? "y" : "ies");
		strobe_profile_add_comment(p, note);
	}
	return p;
}

/* The summary on stderr, and what to do about what was lost. */
static void print_summary(const rec_opts *o, const strobe_sampler_stats *st, const char *why,
			  double secs, size_t over_budget)
{
	fprintf(stderr, "strobe record: %s after %.1f s: ", why, secs);
	if (o->so.events & STROBE_EV_CPU)
		fprintf(stderr, "%" PRIu64 " samples, ", st->samples);
	if (o->so.events & STROBE_EV_OFFCPU)
		fprintf(stderr, "%" PRIu64 " off-CPU intervals, ", st->switches);
	fprintf(stderr, "%" PRIu64 " lost, %u process%s, %u thread%s; wrote %s\n", st->lost,
		st->processes, st->processes == 1 ? "" : "es", st->threads,
		st->threads == 1 ? "" : "s", o->output);
	if (getenv("STROBE_DEBUG"))
		fprintf(stderr, "strobe record: orphan-in %" PRIu64 " unmatched %" PRIu64 " late %" PRIu64 " throttled %" PRIu64
				" short %" PRIu64 " unknown-pid %" PRIu64 "\n",
			st->orphan_in, st->unmatched, st->late, st->throttled, st->short_blocks, st->unknown_pid);
	if (over_budget)
		fprintf(stderr, "strobe record: %zu binar%s named without line numbers or "
				"inlined frames: debug information over --debug-budget %ld "
				"(MB; 0 = no limit)\n", over_budget,
			over_budget == 1 ? "y" : "ies", o->budget_mb);
	if (getenv("STROBE_DEBUG") && st->unwound + st->unwind_failed)
		fprintf(stderr, "strobe record: unwound %" PRIu64 " complete %" PRIu64
				" truncated %" PRIu64 " failed %" PRIu64 " fp-spliced %" PRIu64
				" fp-kept %" PRIu64 " unwind-ns p50 %" PRIu64 " p99 %" PRIu64
				" cache %" PRIu64 " bytes hits %" PRIu64 " misses %" PRIu64
				" evictions %" PRIu64 " extended %" PRIu64
				" ext-changed %" PRIu64 " debug-frame %" PRIu64
				" at-arrival %" PRIu64 " held %" PRIu64 " rule-hits %" PRIu64 "\n",
			st->unwound, st->unwind_complete, st->unwind_truncated, st->unwind_failed,
			st->unwind_fp_spliced, st->unwind_fp_kept, st->unwind_ns_p50,
			st->unwind_ns_p99, st->unwind_cache_bytes, st->unwind_cache_hits,
			st->unwind_cache_misses, st->unwind_cache_evictions,
			st->unwind_extended, st->unwind_ext_changed, st->unwind_debug_frame,
			st->unwind_at_arrival, st->unwind_held, st->unwind_rule_hits);
	if (st->unwind_truncated)
		fprintf(stderr, "strobe record: %" PRIu64 " stacks were deeper than the "
				"copied slice (completed by frame pointers where possible): "
				"use a larger --stack-size\n", st->unwind_truncated);
	if (st->lost)
		fprintf(stderr, "strobe record: the kernel dropped %" PRIu64 " records (ring "
				"buffer full): use a larger -m or a lower -F\n", st->lost);
}

int cmd_record(int argc, char **argv)
{
	const char *cmd = "record";
	rec_opts o = {.so = {.events = STROBE_EV_CPU, .freq = 99, .kernel = true,
			     .call_graph = STROBE_CG_AUTO},
		      .output = "strobe.pb.gz", .budget_mb = -1, .per_thread = true,
		      .symbolize = true};
	rec_run r = {.child = -1};
	int rc = 2, pr = parse_args(cmd, argc, argv, &o);
	if (pr) {
		rc = pr > 0 ? 0 : 2;
		goto out;
	}
	char **command = argv + optind;
	int ncommand = argc - optind;
	if (o.ho.kind) {
		o.ho.labels = o.labels;
		o.ho.nlabels = o.nlabels;
		rc = record_heap_run(cmd, &o.ho, command, ncommand, o.so.all || o.npids, o.output,
				     o.duration, o.quiet, o.symbolize, o.debug_dirs, argc, argv);
		goto out;
	}
	int ntargets = (o.so.all ? 1 : 0) + (o.npids ? 1 : 0) + (ncommand ? 1 : 0);
	if (ntargets != 1) {
		cli_err(cmd, ntargets ? "give one target: -a, -p PID or a command, not several"
				      : "nothing to record: give -a, -p PID or a command (see --help)");
		goto out;
	}
	strobe_format fmt = cli_format_for_path(o.output);
	if (fmt == STROBE_FMT_UNKNOWN || fmt == STROBE_FMT_PERF_SCRIPT) {
		cli_err(cmd, "-o %s: unknown output format (use .pb.gz, .svg, .folded, .json or "
			     ".speedscope.json)", o.output);
		goto out;
	}
	on_signals();
	if (start(cmd, &o, command, ncommand, &r) < 0)
		goto out;
	const char *why = record_loop(cmd, &o, &r);
	stop_recording(cmd, &o, &r);
	strobe_sampler_stats st;
	size_t over_budget = 0;
	strobe_profile *p = build_profile(cmd, &o, &r, fmt, argc, argv, &st, &over_budget);
	record_bpf_close(r.bpf, p, o.quiet || !p);
	r.bpf = NULL;
	if (p && cli_write_as(cmd, p, fmt, strobe_default_type_index(p), STROBE_GRAN_FUNCTIONS,
			      o.output) == 0) {
		if (!o.quiet)
			print_summary(&o, &st, why, (double)p->duration_nanos / 1e9, over_budget);
		rc = 0;
	}
	strobe_profile_free(p);
	if (r.child > 0 && !r.child_done) {
		for (int i = 0; i < 20 && waitpid(r.child, &r.child_status, WNOHANG) == 0; i++)
			usleep(50000);
	}
out:
	free(o.pids);
	free(o.labels);
	free(o.debug_dirs);
	return rc;
}
