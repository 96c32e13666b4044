// SPDX-License-Identifier: Apache-2.0
/*
 * strobe top: functions ranked by flat (or cumulative) value, the table `go tool pprof -top`
 * prints, from any profile.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: strobe top [-n N] [--cum] [options] FILE...\n\n"
	"Ranks functions by flat value (samples where the function is the leaf), or by cumulative\n"
	"value with --cum, like `go tool pprof -top`.\n\n"
	"  -n, --nodes N          show at most N rows (default all)\n"
	"  --cum                  sort by cumulative value\n" CLI_PROFILE_HELP;

/* One pprof input and no transforms: statistics straight from the bytes, without building the
 * profile (a fraction of the memory on big profiles). Returns 1 when the case does not apply or
 * the input needs the validating decoder (which then reports any error), else the result. */
static int fast_top(int nfiles, char **files, const cli_profile_opts *po, size_t limit, bool cum)
{
	const strobe_filter *f = &po->filter;
	if (nfiles != 1 || f->focus || f->ignore || f->hide || f->show || f->tagfocus ||
	    f->tagignore || f->prune > 0 || po->gran != STROBE_GRAN_FUNCTIONS ||
	    strcmp(files[0], "-") == 0)
		return 1;
	/* A pipe (`top <(zcat x)`) can be read once: the profile path must get its bytes. */
	struct stat sb;
	if (stat(files[0], &sb) < 0 || !S_ISREG(sb.st_mode))
		return 1;
	strobe_input in;
	if (strobe_input_open(files[0], &in, NULL) < 0)
		return 1;
	int r = 1;
	strobe_fnstat *st;
	size_t n;
	char *arena;
	strobe_top_info info;
	if (strobe_detect(in.data, in.len) == STROBE_FMT_PPROF &&
	    strobe_pprof_fnstats(in.data, in.len, po->sample_index, &st, &n, &arena, &info) == 0) {
		r = strobe_top_print(stdout, st, n, &info, limit, cum);
		free(st);
		free(arena);
	}
	strobe_input_close(&in);
	return r;
}

int cmd_top(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
						 {"nodes", required_argument, 0, 'n'},
						 {"cum", no_argument, 0, 'c'},
						 CLI_PROFILE_LONGOPTS,
						 {0, 0, 0, 0}};
	const char *cmd = "top";
	cli_profile_opts po = {0};
	long limit = 0;
	bool cum = false;
	int c;
	while ((c = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
		int h = cli_profile_opt(cmd, c, optarg, &po);
		if (h < 0)
			return 2;
		if (h)
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'n':
			if (cli_int(cmd, "-n", optarg, 0, 1L << 30, &limit) < 0)
				return 2;
			break;
		case 'c': cum = true; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	int r = fast_top(argc - optind, argv + optind, &po, (size_t)limit, cum);
	if (r == 1) {
		strobe_profile *p;
		int type;
		if (cli_load(cmd, argv + optind, argc - optind, &po, &p, &type) < 0)
			return 2;
		r = strobe_top_write(stdout, p, type, po.gran, (size_t)limit, cum);
		strobe_profile_free(p);
	}
	if (r < 0 || fflush(stdout) != 0) {
		cli_err(cmd, "writing output failed");
		return 2;
	}
	return 0;
}
