/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cumulative profiles turned into deltas, and the column operations the ingest paths need.
 *
 * Go's allocs, heap (its alloc_* columns), mutex and block profiles count from process start: each
 * scrape or upload holds everything since then. Stored as they come, a query over an hour would
 * sum the same allocations many times over, so the server keeps the difference between two
 * consecutive profiles of one series instead, as Pyroscope and Parca do.
 *
 * Samples of the two profiles are matched by content: the frames of the stack (mapping, address,
 * function names, files and lines) and the label set, never by ids, which differ between two
 * decodes of two files.
 *
 * Ownership: inputs are only read; *out is a new profile the caller frees. Errors are 0/-errno,
 * with a message in err (may be NULL) for input that cannot be diffed.
 */
#ifndef STROBE_DELTA_H
#define STROBE_DELTA_H

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cur - prev for every sample (stack, labels) and every value column, treating all columns as
 * cumulative. A sample absent from prev counts from zero; negative differences (a counter that
 * went down for one stack) become 0; samples whose values are all 0 afterwards are left out.
 * A restarted process resets its counters: when the total of any column of cur is below that of
 * prev, *out is a copy of cur as it is (the counts since the restart). The sample types of prev
 * and cur must be the same (type and unit, in order): -EINVAL otherwise. The result's window
 * runs from prev's time_nanos to cur's (when both are set). */
int strobe_profile_delta(const strobe_profile *prev, const strobe_profile *cur,
			 strobe_profile **out, strobe_err *err);

/* The same with a choice of columns: cumulative[t] says whether column t is a counter (NULL:
 * all are). Columns that are not (a heap profile's inuse_* gauges) are copied from cur as they
 * are, and only cumulative columns decide whether counters were reset. *reset (may be NULL)
 * tells whether a reset was detected and cur returned as it is. */
int strobe_profile_delta_cols(const strobe_profile *prev, const strobe_profile *cur,
			      const bool *cumulative, strobe_profile **out, bool *reset,
			      strobe_err *err);

/* A copy of p with only value column `type` (it becomes the one and default type) and without
 * the samples whose value in it is 0. Returns 0, -EINVAL for a bad index, -ENOMEM. */
int strobe_profile_select_type(const strobe_profile *p, uint32_t type, strobe_profile **out);

/* Removes, in place, the samples whose values are all 0. On failure p is unchanged. */
int strobe_profile_drop_zero(strobe_profile *p);

#ifdef __cplusplus
}
#endif
#endif
