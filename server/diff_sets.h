/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-function significance over the store (diff_sets.c), shared by /api/v1/diff's function
 * formats and /api/v1/regressions: the profile-set test over window slices when each side has
 * enough of them, the counting test otherwise, or the per-unit test when units are given.
 */
#ifndef SRV_DIFF_SETS_H
#define SRV_DIFF_SETS_H

#include "server_impl.h"
#include "strobe/significance.h"
#include "strobe/transform.h"

/* One side: what was queried (selector, window), its merged profile, and the units of work it
 * did (0 = none given: normalise by total). */
typedef struct srv_sig_side {
	const strobe_selector *sel;
	int64_t from, to;
	strobe_profile *p;
	double units;
} srv_sig_side;

typedef struct srv_sig_result {
	strobe_fncmp *c;       /* the comparison, raw (not normalised) */
	size_t n;
	int64_t tot[2];        /* new, base */
	strobe_sig_row *rows;  /* 2n: flat rows, then cum rows */
	const char *method;
	size_t kb, kn;         /* profiles a side the test saw (1 = the merged profile) */
	double per_sample;
} srv_sig_result;

int srv_sig_functions(srv_req *r, const srv_sig_side *b, const srv_sig_side *nw, double conf,
		      srv_sig_result *out);
void srv_sig_result_free(srv_sig_result *res);
json_t *srv_sig_row_json(const strobe_sig_row *s);
/* confidence=C (0.5 to below 1; default 0.99); -1 after a 400. */
int srv_confidence(srv_req *r, double *out);

#endif
