// SPDX-License-Identifier: Apache-2.0
/*
 * strobe convert: one or more profiles (merged) to pprof, folded, JSON tree, speedscope or SVG.
 */
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: strobe convert -f FORMAT [-o OUT] [options] FILE...\n\n"
	"Converts (and merges) profiles. FORMAT: pprof (gzipped profile.proto, every sample type\n"
	"kept), otlp (an OpenTelemetry ExportProfilesServiceRequest, protobuf, one profile per\n"
	"sample type), folded, json (call tree), speedscope, svg. Without -f the format follows\n"
	"OUT's extension (.pb.gz, .otlp, .folded, .json, .speedscope.json, .svg). Input: pprof,\n"
	"folded, perf script, and OTLP (protobuf or OTLP/JSON: found by the content, by the\n"
	"extension .otlp / .otlp.json, or asked for with --from otlp).\n\n"
	"  -f, --format FORMAT    output format (-t, --to: the same, the older spelling)\n"
	"  -F, --from FORMAT      input format: otlp (default: detected)\n"
	"  -o, --output OUT       output file (default stdout); written atomically\n" CLI_PROFILE_HELP;

int cmd_convert(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
						 {"format", required_argument, 0, 'f'},
						 {"to", required_argument, 0, 't'},
						 {"output", required_argument, 0, 'o'},
						 {"from", required_argument, 0, 'F'},
						 CLI_PROFILE_LONGOPTS,
						 {0, 0, 0, 0}};
	const char *cmd = "convert", *output = NULL, *to = NULL;
	cli_profile_opts po = {0};
	int c;
	while ((c = getopt_long(argc, argv, "hf:t:o:F:", longopts, NULL)) != -1) {
		int h = cli_profile_opt(cmd, c, optarg, &po);
		if (h < 0)
			return 2;
		if (h)
			continue;
		switch (c) {
		case 'h': fputs(usage_text, stdout); return 0;
		case 'f':
		case 't': to = optarg; break;
		case 'o': output = optarg; break;
		case 'F':
			if (strcmp(optarg, "otlp") != 0) {
				cli_err(cmd, "--from: '%s' is not an input format to choose (otlp; "
					     "the others are detected)", optarg);
				return 2;
			}
			po.from = STROBE_FMT_OTLP;
			break;
		default: fputs(usage_text, stderr); return 2;
		}
	}
	strobe_format fmt = to ? strobe_format_parse(to) : cli_format_for_path(output);
	if (fmt == STROBE_FMT_UNKNOWN || fmt == STROBE_FMT_PERF_SCRIPT) {
		if (to)
			cli_err(cmd, "--format: '%s' is not an output format (pprof, otlp, folded, "
				     "json, speedscope, svg)", to);
		else
			cli_err(cmd, "give the output format with -f (pprof, folded, json, speedscope, "
				     "svg)");
		return 2;
	}
	if (optind >= argc) {
		cli_err(cmd, "no input files (use '-' for stdin)");
		return 2;
	}
	strobe_profile *p;
	int type;
	if (cli_load(cmd, argv + optind, argc - optind, &po, &p, &type) < 0)
		return 2;
	int r = cli_write_as(cmd, p, fmt, type, po.gran, output);
	strobe_profile_free(p);
	return r < 0 ? 2 : 0;
}
