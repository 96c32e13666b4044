/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strobe record -e heap|mutex (cli/record_heap.c): the part of `strobe record` that runs a
 * command with libstrobe-heap.so preloaded instead of sampling it with perf_event. Kept apart
 * from cmd_record.c, which only parses the options and hands them over.
 */
#ifndef STROBE_CLI_RECORD_HEAP_H
#define STROBE_CLI_RECORD_HEAP_H

#include <stdbool.h>

#include "strobe/codec.h"
#include "strobe/heap_channel.h"

typedef struct record_heap_opts {
	enum strobe_heap_kind kind;   /* ALLOC (-e heap) or LOCK (-e mutex) */
	char **command;               /* NULL-terminated argv of the command */
	const char *output;
	strobe_format fmt;
	double interval;              /* -i: seconds between profiles, 0 = only at the end */
	double duration;              /* -d: stop the command after this long, 0 = no limit */
	const char *leaks_path;       /* --leaks FILE, NULL = stderr */
	bool no_leaks, quiet, symbolize;
	const char *const *debug_dirs;
	const char *const *labels;    /* --label KEY=VALUE, on every sample */
	unsigned nlabels;
	int argc;                     /* the record command line, for the profile's comment */
	char **argv;
} record_heap_opts;

/* -e NAME: sets o->kind and returns true for heap (alloc) and mutex, else false. */
bool record_heap_event(const char *name, record_heap_opts *o);
/* After option parsing: checks the target and output, fills o, runs it. Returns the exit
 * status of `strobe record`. */
int record_heap_run(const char *cmd, record_heap_opts *o, char **command, int ncommand,
		    bool other_target, const char *output, double duration, bool quiet,
		    bool symbolize, const char **debug_dirs, int argc, char **argv);
/* Runs it; returns the exit status of `strobe record` (0, or 2 after printing why). */
int record_heap(const record_heap_opts *o);

#endif
