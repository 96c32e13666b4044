// SPDX-License-Identifier: Apache-2.0
/*
 * strobe agent: the always-on profiling daemon (agent/). This file parses the command line and
 * the config file (both through the options table, strobe/agent_options.h), prints the agent's
 * log lines to stderr and maps signals onto it: SIGTERM and SIGINT stop it cleanly (the last
 * interval is exported and pushed or spooled), SIGUSR1 pauses and SIGUSR2 resumes sampling.
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
#include "strobe/agent_options.h"
#include "strobe/sampler.h"

/* The usage: this head, the options from the table (strobe/agent_options.h), the tail. */
static const char usage_head[] =
	"usage: strobe agent --server URL [options]\n\n"
	"Profiles every process on the host (or those selected) all the time and sends one profile\n"
	"per process every interval to a strobe server's push API, labelled service_name (from the\n"
	"process's STROBE_SERVICE or PYROSCOPE_APPLICATION_NAME, its systemd unit or container,\n"
	"else its executable), host, pid, comm, exe and build_id. Stays within a CPU budget,\n"
	"keeps profiles in a bounded spool while the server is unreachable, and can be paused.\n"
	"Needs root or CAP_PERFMON (and CAP_SYS_PTRACE to read other users' processes).\n\n";
static const char usage_tail[] =
	"\nSignals: SIGTERM/SIGINT stop (after a final push), SIGUSR1 pauses, SIGUSR2 resumes.\n";

static void usage(FILE *f)
{
	char *opts = strobe_agent_options_usage();
	fputs(usage_head, f);
	fputs(opts ? opts : "(out of memory)\n", f);
	fputs(usage_tail, f);
	free(opts);
}

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

static int agent_flags(const char *cmd, int argc, char **argv, const struct option *longopts,
		       const char *shortopts, strobe_agent_opts *o);

/* The config files (-c), then the flags; 1 after --help, -1 after a message. */
static int agent_args(const char *cmd, int argc, char **argv, strobe_agent_opts *o)
{
	/* getopt's tables from the options table: a short flag is its own val, a long one its
	 * index past OPT_CMD_BASE */
	const unsigned n = strobe_agent_noptions;
	struct option *longopts = calloc(n + 1, sizeof(*longopts));
	char shortopts[64] = "";
	size_t ns = 0;
	if (!longopts) {
		cli_err(cmd, "out of memory");
		return -1;
	}
	unsigned nl = 0;
	for (unsigned i = 0; i < n; i++) {
		const strobe_agent_option *e = &strobe_agent_options[i];
		if (!e->flag)
			continue;
		bool arg = e->metavar != NULL;
		int val = e->short_flag ? e->short_flag : OPT_CMD_BASE + (int)i;
		longopts[nl++] = (struct option){e->flag, arg ? required_argument : no_argument, 0, val};
		if (e->short_flag && ns + 3 < sizeof(shortopts)) {
			shortopts[ns++] = e->short_flag;
			if (arg)
				shortopts[ns++] = ':';
		}
	}
	int rc = agent_flags(cmd, argc, argv, longopts, shortopts, o);
	free(longopts);
	return rc;
}

/* The config files (-c) first, then every flag over them. */
static int agent_flags(const char *cmd, int argc, char **argv, const struct option *longopts,
		       const char *shortopts, strobe_agent_opts *o)
{
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
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const strobe_agent_option *e = NULL;
		for (unsigned i = 0; i < strobe_agent_noptions && !e; i++)
			if (strobe_agent_options[i].flag &&
			    (c == strobe_agent_options[i].short_flag || c == OPT_CMD_BASE + (int)i))
				e = &strobe_agent_options[i];
		if (!e) { /* getopt said what was wrong */
			usage(stderr);
			return -1;
		}
		if (e->short_flag == 'h') {
			usage(stdout);
			return 1;
		}
		if (e->short_flag == 'c')
			continue; /* read above */
		int rc = strobe_agent_option_set_flag(e, e->metavar ? optarg : NULL, o, &err);
		if (rc < 0) {
			cli_err(cmd, "%s", rc == -ENOMEM ? "out of memory" : err.msg);
			return -1;
		}
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
	strobe_agent *a = strobe_agent_new(&o, &err);
	if (!a) {
		int e = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(e));
		rc = e == EINVAL ? 2 : 1; /* a bad option, or the host refused (perf_event, port) */
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
