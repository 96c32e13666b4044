// SPDX-License-Identifier: Apache-2.0
/*
 * strobe merge: many profiles into one (same stack and labels sum). Sample types must match.
 */
#include "cli.h"

static const char usage_text[] =
	"usage: strobe merge -o OUT [-f FORMAT] FILE...\n\n"
	"Merges profiles: samples with the same stack and labels are summed. All inputs must have\n"
	"the same sample types. Output is pprof unless -f or OUT's extension says otherwise.\n\n"
	"  -o, --output OUT       output file ('-' = stdout); written atomically\n"
	"  -f, --format FORMAT    pprof (default), folded, json, speedscope, svg (-t, --to: the\n"
	"                         same, the older spelling)\n"
	"  --type NAME:UNIT       what the values of folded or perf script inputs are, e.g.\n"
	"                         cpu:nanoseconds (folded lines carry no unit: samples:count)\n";

int cmd_merge(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
						 {"output", required_argument, 0, 'o'},
						 {"format", required_argument, 0, 'f'},
						 {"to", required_argument, 0, 't'},
						 {"type", required_argument, 0, OPT_TYPE},
						 {0, 0, 0, 0}};
	const char *cmd = "merge", *output = NULL, *to = NULL, *vtype = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "ho:f:t:", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'o': output = optarg; break;
		case 'f':
		case 't': to = optarg; break;
		case OPT_TYPE: vtype = optarg; break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	if (!output) {
		cli_err(cmd, "-o OUT is required ('-' for stdout)");
		return 2;
	}
	if (optind >= argc) {
		cli_err(cmd, "no input files");
		return 2;
	}
	strobe_format fmt = to ? strobe_format_parse(to) : cli_format_for_path(output);
	if (fmt == STROBE_FMT_UNKNOWN)
		fmt = STROBE_FMT_PPROF;
	strobe_profile *p;
	if (cli_load_merged(cmd, argv + optind, argc - optind, vtype, &p) < 0)
		return 2;
	int type = cli_type(cmd, p, NULL);
	int r = type < 0 ? -1 : cli_write_as(cmd, p, fmt, type, STROBE_GRAN_FUNCTIONS, output);
	strobe_profile_free(p);
	return r < 0 ? 2 : 0;
}
