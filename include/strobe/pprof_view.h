/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pprof profile checked and flattened, but not interned: the server's ingest form. Decoding a
 * pprof into the profile model interns every string, function, location, stack node and sample
 * into fresh hash tables, and the store then interns the same things again into its own tables;
 * that double intern was over a third of the server's CPU per push. A view keeps the pprof's
 * own tables as plain arrays (pprof ids resolved to 1-based indices, every reference checked as
 * strobe_pprof_decode checks it), so the store maps each entity straight to its own ids once.
 *
 * Only the header (sample types, period, times, comments) is a profile model, for the code that
 * names types and series. A view is `simple` when the store can take it without the model: no
 * sample has labels (per-sample labels split a push into series, server/sample_labels.c) and no
 * sample type is one whose profile name is guessed from the leaf frames (contentions, delay).
 * Anything else, and any input strobe_pprof_view_open refuses, goes through strobe_pprof_decode,
 * whose error messages are the reference: the view refuses whatever the decoder refuses.
 *
 * The protobuf message is read by a reader of the usual encoding (packed scalars, known fields)
 * into protobuf-c's own structs, falling back to protobuf-c's unpacking for anything else.
 */
#ifndef STROBE_PPROF_VIEW_H
#define STROBE_PPROF_VIEW_H

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strobe_pprof_str {
	const char *p; /* into the decoded buffer or the view's memory; not NUL-terminated */
	uint32_t len;
} strobe_pprof_str;

typedef struct strobe_pprof_loc {
	uint64_t address;
	uint32_t mapping;      /* 1-based index into maps, 0 = none */
	uint32_t line0, nline; /* lines[line0 .. line0 + nline) */
	bool is_folded;
} strobe_pprof_loc;

typedef struct strobe_pprof_view {
	strobe_profile *hdr; /* types, period type, period, times, comments; no symbols, no samples */
	bool simple;
	uint32_t nstr, nfn, nmap, nloc, nsamples;
	const strobe_pprof_str *str;  /* the string table, exact lengths */
	const strobe_function *fns;   /* name, system_name, filename: string indices */
	const strobe_mapping *maps;   /* filename, build_id: string indices */
	const strobe_pprof_loc *locs;
	const strobe_line *lines;     /* function: 1-based index into fns */
	const uint32_t *soff;         /* sample i's frames: sloc[soff[i] .. soff[i + 1]) */
	const uint32_t *sloc;         /* 1-based indices into locs, leaf first as in pprof */
	const int64_t *values;        /* values[i * hdr->ntypes + t] */
	void *priv_;                  /* the unpacked message and the arrays, freed together */
} strobe_pprof_view;

/* buf: the serialized Profile (not gzipped), which must outlive the view. NULL + errno: EINVAL
 * when the decoder would refuse it, or ENOMEM (no message: decode it with strobe_pprof_decode
 * for one). */
strobe_pprof_view *strobe_pprof_view_open(const uint8_t *buf, size_t len);
void strobe_pprof_view_free(strobe_pprof_view *v);
/* The same, always through protobuf-c's unpacking rather than the view's own reader of the
 * usual encoding: the reference the tests and fuzz_pprof compare the reader with. */
strobe_pprof_view *strobe_pprof_view_open_pbc(const uint8_t *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
