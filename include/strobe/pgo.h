/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile-guided optimisation exports: a merged CPU profile written as the three files compilers
 * and binary optimisers read back (docs/pgo.md).
 *
 *  - Go's default.pgo (lib/pgo_go.c): a gzipped pprof with one sample type (samples/count or
 *    cpu/nanoseconds), symbolized frames with Function.start_line, inlined frames kept, trimmed
 *    to the leaf-most frames of the stacks that carry most of the time.
 *  - AutoFDO text (lib/autofdo.c): LLVM's sample-profile text format, what
 *    `clang -fprofile-sample-use` reads.
 *  - BOLT fdata without LBR (lib/bolt_fdata.c): `no_lbr` samples per symbol + offset, what
 *    `llvm-bolt -data=` reads. Addresses are turned into BOLT's symbol names by a resolver the
 *    caller gives (symbolize/bolt_syms.c reads them from the executable).
 *
 * Every writer refuses, with a message that says what is missing and how to get it, a profile
 * a compiler would take but could not use: no samples, no CPU sample type, unsymbolized frames,
 * no line numbers or function start lines. It never returns an empty file.
 *
 * Ownership: the writers append to out (its cap applies: -E2BIG); p is not changed.
 */
#ifndef STROBE_PGO_H
#define STROBE_PGO_H

#include "strobe/buf.h"
#include "strobe/profile.h"

typedef enum strobe_pgo_format {
	STROBE_PGO_NONE = -1,
	STROBE_PGO_GO,
	STROBE_PGO_AUTOFDO,
	STROBE_PGO_BOLT,
} strobe_pgo_format;

/* "go", "autofdo", "bolt"; STROBE_PGO_NONE for anything else. */
strobe_pgo_format strobe_pgo_format_parse(const char *name);

/* The CPU value column PGO weighs by: samples/count if p has it, else cpu/nanoseconds. -EINVAL
 * naming p's types when it has neither (a heap, lock or off-CPU profile), -ENODATA when that
 * column sums to zero (an empty window), -ENOENT when no sampled leaf has a function name
 * (unsymbolized addresses). Returns the column's index. */
int strobe_pgo_type(const strobe_profile *p, strobe_err *err);

/* The Go writer's trimming (Pyroscope's go-pgo export does the same): each stack is cut to its
 * keep_frames leaf-most frames (whole locations, inlined frames counted), then the lightest
 * samples are dropped while the rest still hold keep_share of the total. */
typedef struct strobe_pgo_go_opts {
	unsigned keep_frames; /* 0: 5 */
	double keep_share;    /* 0: 0.99; 1 keeps every sample */
} strobe_pgo_go_opts;

/* What a writer kept, for the caller to report. */
typedef struct strobe_pgo_stats {
	int64_t total;    /* the column's sum over the input */
	int64_t used;     /* of which the output accounts for */
	uint64_t records; /* samples (go), functions (autofdo), addresses (bolt) written */
	int64_t line0;    /* autofdo: of total, leaf samples on line 0 (compiler-made code), left out */
	int64_t discriminated; /* autofdo: of used, leaf samples on a line with a discriminator */
} strobe_pgo_stats;

/* Writes the gzipped pprof Go reads as default.pgo. -ENODATA with a message when no sample has
 * a leaf frame with a line and Function.start_line. stats may be NULL. */
int strobe_pgo_go_write(const strobe_profile *p, int type, const strobe_pgo_go_opts *o,
			strobe_buf *out, strobe_pgo_stats *stats, strobe_err *err);

/* Writes LLVM sample-profile text: per function (its linkage name) the samples per line offset
 * from its start line, call targets at call lines and inlined callees nested. -ENODATA with a
 * message when no sampled frame has a line and a start line. */
int strobe_autofdo_write(const strobe_profile *p, int type, strobe_buf *out,
			 strobe_pgo_stats *stats, strobe_err *err);
/* The base discriminator LLVM's sample loader looks a line up by (without flow-sensitive
 * discriminators), from the discriminator as LLVM wrote it in DWARF: its first component in
 * LLVM's prefix encoding; the duplication factor and copy id that follow are dropped. */
uint32_t strobe_autofdo_base_discriminator(uint32_t d);

/* Names the instruction of a location for BOLT: its symbol as llvm-bolt names it (locals get
 * "/N") and the offset into it. Returns 1 when named, 0 when the address is in no binary the
 * resolver knows, -errno to stop. */
typedef int (*strobe_bolt_resolver)(void *ctx, const strobe_profile *p, const strobe_location *loc,
				    const char **sym, uint64_t *offset);

/* Writes no-LBR fdata from the samples' leaf addresses. -ENODATA with a message when the
 * resolver names none of them. */
int strobe_bolt_fdata_write(const strobe_profile *p, int type, strobe_bolt_resolver resolve,
			    void *ctx, strobe_buf *out, strobe_pgo_stats *stats, strobe_err *err);

#endif
