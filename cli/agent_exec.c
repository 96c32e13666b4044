// SPDX-License-Identifier: Apache-2.0
/*
 * `strobe agent` runs the lean agent executable, strobe-agent, installed next to strobe
 * (cli/lean/strobe_agent.c: the agent's layers and libraries only), in the same process (exec),
 * so that the always-on agent does not map and relocate the server's libraries and pages: 0.7 MB
 * less resident with 200 processes profiled (docs/BENCHMARKS.md, the agent's memory). Where it
 * is missing or cannot be run, the agent runs in strobe itself, as before, and says so once on
 * stderr. The build names it (STROBE_AGENT_EXE) for the optimised strobe only: the sanitizer
 * build, which the tests run, keeps its agent in itself, sanitized.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void cli_exec_lean_agent(char **argv)
{
#ifdef STROBE_AGENT_EXE
	char self[PATH_MAX], path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash || getenv("STROBE_AGENT_IN_STROBE")) /* (for comparisons: the agent here) */
		return;
	int len = snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - self), self,
			   STROBE_AGENT_EXE);
	if (len <= 0 || (size_t)len >= sizeof(path))
		return;
	execv(path, argv); /* its main takes `agent ARGS` as strobe's does */
	fprintf(stderr, "strobe agent: the lean agent executable %s cannot be run (%s): the agent "
		"runs in %s, which maps the server's libraries too (about 0.7 MB more resident)\n",
		path, strerror(errno), self);
#else
	(void)argv;
#endif
}
