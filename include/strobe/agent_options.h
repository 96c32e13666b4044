/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's options, once: one table of every command-line flag and config-file key, with its
 * type, bounds, default, where it goes in strobe_agent_opts and its --help text. The CLI
 * (cli/cmd_agent.c) builds its getopt table and its usage from it, the config parser
 * (agent_config.c) looks keys up in it, strobe_agent_opts_init takes the defaults from it, and
 * both sources set a value through the same checks, so that a flag and its key cannot drift
 * apart in range or meaning. Used by agent/ and the CLI.
 *
 * A flag without an argument stands for a fixed value of its key (--no-python is
 * "python": false). A key may have no flag (secrets that would show in ps, the process rules)
 * and a flag no key, which then says why (no_key).
 */
#ifndef STROBE_AGENT_OPTIONS_H
#define STROBE_AGENT_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "strobe/agent.h"

typedef enum strobe_agent_opt_type {
	STROBE_AOT_NONE,         /* no value (--help, --config: the caller's) */
	STROBE_AOT_STR,          /* char *, any string */
	STROBE_AOT_NONEMPTY,     /* char *, not empty */
	STROBE_AOT_REGEX,        /* char *, a POSIX extended pattern (strobe_agent_regcomp) */
	STROBE_AOT_TOKEN_FILE,   /* char *: the token read from the file named (mode 600) */
	STROBE_AOT_UINT,         /* unsigned, a whole number in [min, max] */
	STROBE_AOT_DOUBLE,       /* double in [min, max] */
	STROBE_AOT_BYTES,        /* uint64_t in [min, max]; a flag may say K, M or G */
	STROBE_AOT_BOOL,         /* bool (inverted: the field is its negation) */
	STROBE_AOT_MODE,         /* unsigned STROBE_OFFCPU_*: "auto", "bpf" or "perf" */
	STROBE_AOT_CALL_GRAPH,   /* unsigned STROBE_CG_*: "fp", "dwarf" or "auto" */
	STROBE_AOT_LOG_LEVEL,    /* int STROBE_LOG_*: "error", "warn", "info" or "debug" */
	STROBE_AOT_SYMBOLIZE,    /* "local", "server", "none" (or a config's true / false) */
	STROBE_AOT_PIDS,         /* pids, npids: a flag's "PID[,PID]", a config's array; appended */
	STROBE_AOT_LABELS,       /* labels, nlabels: a flag's KEY=VALUE, a config's object; appended */
	STROBE_AOT_RULES,        /* the config's "processes" rules (agent_config.c) */
} strobe_agent_opt_type;

typedef struct strobe_agent_option {
	const char *flag;    /* long flag without "--", or NULL (config only) */
	char short_flag;     /* its one-letter form, or 0 */
	const char *key;     /* config key ("spool.dir": "dir" inside "spool"), or NULL */
	const char *no_key;  /* with a flag and no key: why */
	strobe_agent_opt_type type;
	size_t off;          /* offsetof(strobe_agent_opts, field) (pids, labels: the array) */
	bool inverted;       /* a bool: the field holds the negation of the value */
	const char *implied; /* a flag without argument: the value it stands for */
	double min, max;     /* numbers: bounds, inclusive */
	bool has_default;    /* strobe_agent_opts_init sets dflt (a bool's value, not its field) */
	double dflt;
	const char *metavar; /* the flag's argument in --help ("HZ"), NULL: none */
	const char *help;    /* --help text, lines split by \n; NULL: not listed (hidden) */
} strobe_agent_option;

/* The table, in --help order, and its length. */
extern const strobe_agent_option strobe_agent_options[];
extern const unsigned strobe_agent_noptions;

/* The entry of a config key ("spool.dir" for a nested one) or a long flag, or NULL. */
const strobe_agent_option *strobe_agent_option_by_key(const char *key);
const strobe_agent_option *strobe_agent_option_by_flag(const char *flag);

/* A value from either source: a flag's argument (numbers parsed first) or a JSON value. */
typedef struct strobe_agent_value {
	enum { STROBE_AV_STR, STROBE_AV_NUM, STROBE_AV_BOOL, STROBE_AV_OTHER } kind;
	const char *s;
	double d;
	bool b;
} strobe_agent_value;

/* Checks v against e's type and bounds and stores it in o: 0, -ENOMEM, or -EINVAL with msg
 * saying what is wrong (the caller names the flag or the key). */
int strobe_agent_option_set(const strobe_agent_option *e, const strobe_agent_value *v,
			    strobe_agent_opts *o, char *msg, size_t len);
/* Sets option e from a flag's argument (arg NULL: the flag takes none, e->implied is used).
 * -EINVAL with err naming the flag ("--freq: ..."), -ENOMEM, or 0. */
int strobe_agent_option_set_flag(const strobe_agent_option *e, const char *arg,
				 strobe_agent_opts *o, strobe_err *err);

/* The options' part of `strobe agent --help`, from the table (malloc'd; NULL: out of memory). */
char *strobe_agent_options_usage(void);

#endif
