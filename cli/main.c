// SPDX-License-Identifier: Apache-2.0
/*
 * strobe's entry point: one command table, one file per subcommand (cmd_<name>.c), perf-style.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef STROBE_VERSION
#define STROBE_VERSION "0.1.0"
#endif

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"record", cmd_record, "sample call stacks of a command, processes or the host"},
	{"collapse", cmd_collapse, "perf script text -> folded stacks (stackcollapse-perf.pl)"},
	{"flamegraph", cmd_flamegraph, "interactive SVG flame graph of any profile"},
	{"top", cmd_top, "functions ranked by flat or cumulative value (pprof -top)"},
	{"convert", cmd_convert, "convert between pprof, folded, JSON and speedscope"},
	{"merge", cmd_merge, "merge profiles into one"},
	{"diff", cmd_diff, "differential flame graph / ranking of two profiles"},
	{"gate", cmd_gate, "fail (exit 1) when a function's share grew too much (CI)"},
	{"server", cmd_server, "profile server: store, push and query API over HTTP"},
	{"agent", cmd_agent, "always-on profiling daemon: every process, pushed to a server"},
	{"push", cmd_push, "send profiles to a strobe server"},
	{"debuginfo", cmd_debuginfo, "upload executables and debug files to a server, by build ID"},
	{"query", cmd_query, "merged profile or diff of a selector from a strobe server"},
	{"cost", cmd_cost, "core-hours, dollars and energy a year, per team or function"},
	{"leaks", cmd_leaks, "stacks whose in-use memory grows, ranked by growth per hour"},
	{"pgo", cmd_pgo, "PGO input from a CPU profile: Go default.pgo, AutoFDO, BOLT"},
	{"regressions", cmd_regressions, "functions that got significantly costlier between releases, with owners"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: strobe <command> [options] [args]\n\n"
		   "strobe is a continuous profiler: record samples call stacks, the other commands\n"
		   "work on profile files.\n"
		   "Inputs may be pprof (gzipped or not), folded stacks, `perf script` text or OTLP\n"
		   "profiles (docs/otlp.md); '-' reads stdin.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'strobe <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("strobe %s\n", STROBE_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "agent") == 0)
		cli_exec_lean_agent(argv); /* returns only where it cannot: the agent runs here */
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "strobe: '%s' is not a command; see 'strobe --help'\n", argv[1]);
	return 2;
}
