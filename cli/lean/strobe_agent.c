// SPDX-License-Identifier: Apache-2.0
/*
 * strobe-agent: `strobe agent` alone, in an executable linked with the agent's layers and
 * libraries only (no server, store, SQLite or UI): the program `strobe agent` runs (cli/main.c
 * execs it when it is installed next to strobe).
 *
 * Why: the agent is the one strobe program that runs always, on every host, and its memory is
 * a goal (issue 23: peak RSS <= 15 MB with 200 processes). A process maps and relocates every
 * library its executable needs, used or not, and touches its executable's pages around the code
 * it runs; the one `strobe` executable for every command made the agent pay for the server's
 * libraries (SQLite) and pages (measured: docs/BENCHMARKS.md, the agent's memory). Same
 * options, same behaviour: the command's code is cli/cmd_agent.c in both executables.
 */
#include <stdio.h>
#include <string.h>

#include "../cli.h"

int main(int argc, char **argv)
{
	/* called as `strobe-agent ARGS` or, from strobe, `strobe-agent agent ARGS` */
	if (argc > 1 && strcmp(argv[1], "agent") == 0)
		return cmd_agent(argc - 1, argv + 1); /* as strobe's table calls it */
	return cmd_agent(argc, argv);
}
