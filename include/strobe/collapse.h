/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `perf script` text -> folded stacks, with exactly the output of FlameGraph's
 * stackcollapse-perf.pl (same names, same annotations, same sort order), so strobe can replace it
 * in existing pipelines byte for byte.
 */
#ifndef STROBE_COLLAPSE_H
#define STROBE_COLLAPSE_H

#include <stdio.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strobe_collapse_opts {
	bool pid;    /* --pid: "comm-PID" as the root frame */
	bool tid;    /* --tid: "comm-PID/TID" */
	bool kernel; /* --kernel: annotate kernel frames with _[k] */
	bool jit;    /* --jit: annotate JIT frames with _[j] */
	bool all;    /* --all: kernel + jit (and inline annotations where perl has them) */
	bool addrs;  /* --addrs: unknown symbols as their address */
	bool inline_; /* --inline: expand inlined frames (needs addr2line; perl's option) */
	bool context; /* --context: keep source context (perl's option, with --inline) */
	bool srcline; /* --srcline: input is `perf script -F+srcline`; append each frame's
		       * source line as perl does */
	const char *event_filter; /* --event-filter NAME: only samples of this event */
} strobe_collapse_opts;

/* Calls emit(stack, len, count, ctx) once per distinct folded stack in stackcollapse-perf.pl's
 * output order (sorted by stack string). stack is "root;...;leaf" without the count. */
typedef int (*strobe_collapse_emit)(const char *stack, size_t len, uint64_t count, void *ctx);
int strobe_collapse(const char *buf, size_t len, const char *name, const strobe_collapse_opts *o,
		    strobe_collapse_emit emit, void *ctx, strobe_err *err);

/* The same in pieces, for input read as it comes (a pipe, or a big file read in chunks, which
 * is cheaper than holding it all): feed the text in pieces of any size (a line may span two),
 * then finish, which emits as above. strobe_collapse is new + feed + finish + free. After an
 * error, feed and finish return it again. new copies name and opts; NULL and errno on ENOMEM. */
typedef struct strobe_collapser strobe_collapser;
strobe_collapser *strobe_collapser_new(const char *name, const strobe_collapse_opts *o);
int strobe_collapser_feed(strobe_collapser *c, const char *buf, size_t len, strobe_err *err);
int strobe_collapser_finish(strobe_collapser *c, strobe_collapse_emit emit, void *ctx,
			    strobe_err *err);
void strobe_collapser_free(strobe_collapser *c);
/* The event type the samples kept are of (the first seen, or --event-filter's), as perf
 * names it ("cpu-clock:pppH", "cycles"), with its length; NULL before any event line. */
const char *strobe_collapser_event(const strobe_collapser *c, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
