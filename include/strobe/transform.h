/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transforms on a profile, as `go tool pprof` users know them: focus, ignore, hide, tag focus and
 * tag ignore by regular expression, and pruning of call-tree nodes below a fraction of the total;
 * and per-function statistics (flat and cumulative), the numbers behind `top`, `diff -t top` and
 * `gate`.
 *
 * Regular expressions are POSIX extended (regcomp), which covers the RE2 subset pprof users
 * write in practice (alternation, classes, anchors, repetition).
 */
#ifndef STROBE_TRANSFORM_H
#define STROBE_TRANSFORM_H

#include "strobe/profile.h"
#include <stdio.h>

#include "strobe/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strobe_filter {
	const char *focus;     /* keep samples with a frame whose function matches */
	const char *ignore;    /* drop samples with a frame whose function matches */
	const char *hide;      /* remove matching frames from stacks, keep the samples */
	const char *show;      /* keep only matching frames in stacks */
	const char *tagfocus;  /* "key=RE" or "RE": keep samples with a matching label value */
	const char *tagignore; /* likewise, drop */
	double prune;          /* drop call-tree nodes whose total is below this fraction of the
				  total (0 = off); their value goes to the nearest kept caller */
} strobe_filter;

/* Applies the filter in place. `type` is the value column pruning measures. Bad regexes are
 * -EINVAL with a message naming the option. */
int strobe_profile_filter(strobe_profile *p, const strobe_filter *f, int type, strobe_err *err);

typedef struct strobe_fnstat {
	const char *name; /* points into the profile's string table */
	int64_t flat, cum;
} strobe_fnstat;

/* Flat (leaf) and cumulative (anywhere on the stack, once per sample) value of every frame name
 * at granularity g, unsorted. *out is malloc'd. */
int strobe_fnstats(strobe_profile *p, int type, strobe_granularity g, strobe_fnstat **out,
		   size_t *n);

/* One function in a comparison of two profiles; column 0 = new, 1 = base (already scaled when
 * normalised). */
typedef struct strobe_fncmp {
	char *name;
	int64_t flat[2], cum[2];
} strobe_fncmp;

/* Per-function flat/cum of both profiles matched by frame name. With normalize, base values are
 * scaled by total(new)/total(base) first. totals[0] = new total, totals[1] = base total (scaled).
 * Free with strobe_fncmp_free. */
int strobe_fncompare(strobe_profile *base, int btype, strobe_profile *cur, int ctype,
		     strobe_granularity g, bool normalize, strobe_fncmp **out, size_t *n,
		     int64_t totals[2]);
void strobe_fncmp_free(strobe_fncmp *c, size_t n);

/* Writes a table like `go tool pprof -top`: header lines, then flat, flat%, sum%, cum, cum% and
 * name per function, sorted by flat (or cum when by_cum), at most `limit` rows (0 = all). */
int strobe_top_write(FILE *out, strobe_profile *p, int type, strobe_granularity g, size_t limit,
		     bool by_cum);

/* The top table from statistics already computed (sorts st in place). */
typedef struct strobe_top_info {
	const char *type, *unit; /* the sample type shown */
	int64_t total;           /* sum of |value| over all samples */
	int64_t duration_nanos;  /* 0 = not shown */
} strobe_top_info;
int strobe_top_print(FILE *out, strobe_fnstat *st, size_t n, const strobe_top_info *info,
		     size_t limit, bool cum_order);

/* Per-function statistics straight from serialized pprof bytes (not gzipped), without building
 * a profile: one pass for the tables, one over the samples, memory for the tables only. For
 * `top` on big profiles. `sample_index` is a type name or number, NULL for pprof's default.
 * -EINVAL on anything malformed and -ENOENT for an unknown sample type (the caller then takes
 * the validating path, which says what is wrong); on success *out, and *arena holding every
 * name *out and *info point to, are malloc'd. */
int strobe_pprof_fnstats(const uint8_t *buf, size_t len, const char *sample_index,
			 strobe_fnstat **out, size_t *n, char **arena, strobe_top_info *info);

/* A table of functions ranked by the change of their share (flat, then cum, then name): base
 * flat, new flat, delta, delta of share in percentage points, cum delta, and the change's
 * significance at `confidence` (e.g. 0.99): p of the flat change, q (Benjamini-Hochberg) of flat
 * and cum, "noise" when neither is significant. At most limit rows (0 = all); unchanged
 * functions are left out. Uses the two-profile count test (strobe/diffsig.h). */
int strobe_diff_top_write(FILE *f, strobe_profile *base, int bt, strobe_profile *cur, int ct,
			  strobe_granularity g, bool norm, size_t limit, double confidence);

struct strobe_sig_row;
/* The same table from a comparison already made (normalize=false) and its significance rows
 * (from either test): for callers with their own test, such as the server's profile sets. */
typedef struct strobe_diff_top_in {
	const strobe_fncmp *c;
	size_t n;
	int64_t totals[2]; /* new, base (raw) */
	const struct strobe_sig_row *flat, *cum;
	const char *type, *unit, *method;
	bool norm;
	size_t limit;
	double confidence;
} strobe_diff_top_in;
int strobe_diff_top_rows_write(FILE *f, const strobe_diff_top_in *in);

/* Formats a value of unit `unit` as pprof does ("1.50s", "12ms", "3.20MB", "42"). */
void strobe_format_value(char *buf, size_t cap, int64_t v, const char *unit);

/* NULL when a POSIX extended pattern is cheap enough to give to regcomp, else what makes it too
 * costly (longer than max_len, stacked repetitions, counts over 100, repetitions whose product
 * passes 4096: glibc's regcomp grows geometrically with nested repetitions). lib/regex_guard.c */
const char *strobe_regex_too_costly(const char *re, size_t max_len);

#ifdef __cplusplus
}
#endif
#endif
