/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the subcommands share: the command table's entry points, reading and merging inputs with
 * the pprof-style transform options, and writing an output file atomically (a temp file renamed
 * into place on success, removed on failure), so a failed command never leaves a partial file.
 *
 * Exit codes, for every command: 0 success, 1 a negative verdict (gate), 2 bad usage or input.
 */
#ifndef STROBE_CLI_H
#define STROBE_CLI_H

#include <getopt.h>
#include <stdio.h>
#include <sys/types.h>

#include "strobe/codec.h"
#include "strobe/transform.h"

int cmd_collapse(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_gate(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_debuginfo(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_cost(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_regressions(int argc, char **argv);
int cmd_server(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_pgo(int argc, char **argv);
/* `strobe agent`: execs the lean strobe-agent next to this executable (agent_exec.c); returns
 * only where there is none or it cannot run (said on stderr). */
void cli_exec_lean_agent(char **argv);

/* record -e lock (record_lock.c): the futex-wait program loaded for record's targets (NULL
 * after saying why), then attached (-errno after saying why), its sums moved into the sampler,
 * and at the end the last sums moved (s: NULL for none), a summary unless quiet, and the
 * program closed. */
struct strobe_locks;
struct strobe_sampler;
struct strobe_sampler_opts;
struct strobe_locks *record_lock_open(const char *cmd, const struct strobe_sampler_opts *so);
int record_lock_attach(const char *cmd, struct strobe_locks *lk);
void record_lock_stop(struct strobe_locks *lk); /* detached: the window ends */
int record_lock_collect(const char *cmd, struct strobe_locks *lk, struct strobe_sampler *s);
void record_lock_close(const char *cmd, struct strobe_locks *lk, struct strobe_sampler *s,
		       bool quiet);

/* record -e cpu|offcpu|wall on the eBPF programs (record_bpf.c; --mode: RECORD_MODE_*). open:
 * loaded for so's targets and events, with so->cpu_external / offcpu_external set for the
 * sampler, or NULL: the perf path (after saying why, unless --mode perf or nothing to do;
 * with --mode bpf a NULL is an error, said). attach after the sampler opened (-errno after
 * saying why); collect moves the kernel's sums into the sampler (each round, and after stop, the
 * last); close adds comments on what was dropped to p (NULL: none), prints a summary unless
 * quiet, frees; 1 when something was dropped, else 0. */
enum { RECORD_MODE_AUTO, RECORD_MODE_BPF, RECORD_MODE_PERF };
typedef struct record_bpf record_bpf;
struct strobe_profile;
record_bpf *record_bpf_open(const char *cmd, struct strobe_sampler_opts *so, int mode);
int record_bpf_attach(const char *cmd, record_bpf *b, const struct strobe_sampler_opts *so);
int record_bpf_collect(const char *cmd, record_bpf *b, struct strobe_sampler *s);
/* The command record started has exec'd: its interpreter is looked for at once. */
void record_bpf_exec(record_bpf *b, pid_t pid);
void record_bpf_stop(record_bpf *b);
int record_bpf_close(record_bpf *b, struct strobe_profile *p, bool quiet);

/* Options every profile-reading command takes (pprof's names). */
typedef struct cli_profile_opts {
	const char *sample_index; /* name or index; NULL = pprof default */
	strobe_filter filter;
	strobe_granularity gran;
	strobe_format from; /* input format asked for (convert --from), STROBE_FMT_UNKNOWN = detect */
	const char *type; /* --type NAME:UNIT of folded or perf script input; NULL = as read */
} cli_profile_opts;

enum {
	OPT_SAMPLE_INDEX = 1000, OPT_FOCUS, OPT_IGNORE, OPT_HIDE, OPT_SHOW, OPT_TAGFOCUS,
	OPT_TAGIGNORE, OPT_PRUNE, OPT_GRAN, OPT_TYPE, OPT_CMD_BASE = 1100,
};

#define CLI_PROFILE_LONGOPTS                                                                      \
	{"sample-index", required_argument, 0, OPT_SAMPLE_INDEX},                                 \
	{"focus", required_argument, 0, OPT_FOCUS}, {"ignore", required_argument, 0, OPT_IGNORE}, \
	{"hide", required_argument, 0, OPT_HIDE}, {"show", required_argument, 0, OPT_SHOW},       \
	{"tagfocus", required_argument, 0, OPT_TAGFOCUS},                                         \
	{"tagignore", required_argument, 0, OPT_TAGIGNORE},                                       \
	{"prune", required_argument, 0, OPT_PRUNE},                                               \
	{"granularity", required_argument, 0, OPT_GRAN}, {"type", required_argument, 0, OPT_TYPE}

#define CLI_PROFILE_HELP                                                                          \
	"  --sample-index NAME|N  value to use (default: the profile's default, else the last)\n" \
	"  --focus RE             keep only samples with a frame matching RE\n"                   \
	"  --ignore RE            drop samples with a frame matching RE\n"                        \
	"  --hide RE              remove frames matching RE from stacks\n"                        \
	"  --show RE              keep only frames matching RE in stacks\n"                       \
	"  --tagfocus KEY=RE      keep only samples with a label KEY matching RE\n"               \
	"  --tagignore KEY=RE     drop samples with a label KEY matching RE\n"                    \
	"  --prune FRACTION       drop call-tree nodes below FRACTION of the total (e.g. 0.005)\n" \
	"  --granularity G        functions (default), lines or addresses\n"                      \
	"  --type NAME:UNIT       what the values of folded or perf script input are, e.g.\n"     \
	"                         cpu:nanoseconds (folded lines carry no unit: samples:count)\n"

/* Handles one of the CLI_PROFILE_LONGOPTS; returns 1 if handled, 0 if not ours, -1 on a bad
 * value (message printed). */
int cli_profile_opt(const char *cmd, int opt, const char *arg, cli_profile_opts *o);

/* Reads every file, merges them into one profile and applies the transforms. On success *type
 * is the selected value index. Errors are printed as "strobe CMD: message". */
int cli_load(const char *cmd, char **files, int nfiles, const cli_profile_opts *o,
	     strobe_profile **out, int *type);
/* Reads and merges only (no transforms, no type selection); type is --type (may be NULL),
 * from the input format asked for (--from; STROBE_FMT_UNKNOWN: detected). */
int cli_load_merged(const char *cmd, char **files, int nfiles, const char *type,
		    strobe_profile **out);
int cli_load_merged_as(const char *cmd, char **files, int nfiles, strobe_format from,
		       const char *type, strobe_profile **out);
/* Reads one input (as from, or detected); with type (--type NAME:UNIT) its one value column is
 * named so, which only folded and perf script input may be (a pprof names its own types).
 * Errors are printed. */
int cli_read_profile(const char *cmd, const char *path, strobe_format from, const char *type,
		     strobe_profile **out);
/* Resolves --sample-index for p; prints an error naming the available types when unknown. */
int cli_type(const char *cmd, const strobe_profile *p, const char *sample_index);

/* Output: path NULL or "-" is stdout. A regular file (or a new one) is written to a temporary
 * that cli_out_close renames over it when ok, else discards; anything else (/dev/null, a FIFO) is
 * written in place. */
typedef struct cli_out {
	FILE *f;
	char *path, *tmp;
} cli_out;
int cli_out_open(const char *cmd, const char *path, cli_out *o);
int cli_out_close(const char *cmd, cli_out *o, bool ok);

/* Writes p as fmt (pprof: every type; folded, json, speedscope, svg: value `type`) to path
 * (NULL or "-" = stdout), atomically. Returns 0 or -1 after printing an error. */
int cli_write_as(const char *cmd, strobe_profile *p, strobe_format fmt, int type,
		 strobe_granularity g, const char *path);
/* The format an output path's extension implies (.pb.gz/.pprof/.pb: pprof, .folded/.txt,
 * .svg, .json, .speedscope.json), else UNKNOWN. */
strobe_format cli_format_for_path(const char *path);

/* One HTTP request to a strobe server (push, query). The body is returned NUL-terminated;
 * errors (connection, non-200 with the server's JSON message) are printed and give -1. */
typedef struct cli_http_req {
	const char *url;
	const void *body; /* NULL: GET */
	size_t len;
	const char *tenant, *token; /* X-Scope-OrgID, Authorization: Bearer; NULL = none */
	const char *ca; /* --ca: PEM file of the CAs to verify an https server by; NULL = the system's */
	long timeout_s;
	long *status; /* when set: the HTTP status lands here and a non-200 answer is no error */
} cli_http_req;
int cli_http(const char *cmd, const cli_http_req *rq, char **body, size_t *len);
/* --ca FILE: readable and holding PEM certificates, else an error naming it and -1. */
int cli_ca_check(const char *cmd, const char *ca);
/* The bearer token of --token TOKEN or --token-file FILE (a file only its owner can read, whose
 * first line is the token; not on the command line, where ps shows it); NULL when neither. On a
 * bad one (both given, a control character, a file others can read) prints why, sets *bad. */
const char *cli_token(const char *cmd, const char *token, const char *file, bool *bad);
#define CLI_TOKEN_HINT "give the token with --token-file or --token (sent as Authorization: Bearer)"

void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a number with checking; prints an error and returns -1 when bad. */
int cli_double(const char *cmd, const char *opt, const char *arg, double *out);
int cli_int(const char *cmd, const char *opt, const char *arg, long lo, long hi, long *out);

#endif
