/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading and writing profiles: pprof (profile.proto), folded stacks, `perf script` text,
 * speedscope and a JSON tree. Input formats are detected from content and gzip is undone
 * transparently, so every command takes any supported file (or "-" for stdin).
 *
 * Decoders take a buffer and a name (the file name, for messages) and never trust the input:
 * every length and id is checked, every buffer grown from input has a cap, and errors come back
 * as -EINVAL with a message naming the input and the line or byte offset.
 */
#ifndef STROBE_CODEC_H
#define STROBE_CODEC_H

#include <stdio.h>

#include "strobe/profile.h"
#include "strobe/tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps on untrusted input. */
#define STROBE_MAX_INPUT     ((size_t)4 << 30)  /* 4 GiB after decompression */
#define STROBE_MAX_NAME      (64u << 10)        /* a frame/function name, bytes */
#define STROBE_MAX_DEPTH     4096u              /* frames in one stack */

typedef enum strobe_format {
	STROBE_FMT_UNKNOWN = 0,
	STROBE_FMT_PPROF,
	STROBE_FMT_FOLDED,
	STROBE_FMT_PERF_SCRIPT,
	STROBE_FMT_SPEEDSCOPE,
	STROBE_FMT_JSON,
	STROBE_FMT_SVG,
	STROBE_FMT_OTLP, /* OpenTelemetry profiles request (lib/otlp.c), protobuf or OTLP/JSON */
	/* Written only, by the HTTP API (strobe_output_parse): the UI's flat JSON tree and the
	 * top table. */
	STROBE_FMT_FLAT,
	STROBE_FMT_TOP,
	/* Read only: Java Flight Recorder (lib/jfr.c, strobe/jfr.h). */
	STROBE_FMT_JFR,
} strobe_format;

/* Guesses the format of an (already decompressed) buffer. */
strobe_format strobe_detect(const uint8_t *buf, size_t len);
const char *strobe_format_name(strobe_format f);
/* "pprof", "folded", "json", "speedscope", "svg", "perf" -> format; UNKNOWN otherwise. */
strobe_format strobe_format_parse(const char *name);
/* The same, and the written-only "flat" and "top". */
strobe_format strobe_output_parse(const char *name);

/* Reads a whole file ("-" = stdin), gunzipping if it starts with the gzip magic. *out is
 * malloc'd and NUL-terminated (not counted in *len). */
int strobe_slurp(const char *path, uint8_t **out, size_t *len, strobe_err *err);
/* An input file's bytes: mapped read-only when it is a regular uncompressed file (no copy, no
 * zeroed pages: most of the cost of reading a big file on a VM), else read (and gunzipped)
 * into memory. Not NUL-terminated when mapped: decoders go by len. */
typedef struct strobe_input {
	const uint8_t *data;
	size_t len;
	void *owned;      /* malloc'd buffer to free, or NULL */
	size_t map_len;   /* mapped length, or 0 */
} strobe_input;
int strobe_input_open(const char *path, strobe_input *in, strobe_err *err);
void strobe_input_close(strobe_input *in);

/* gunzip (lib/gzip.c) of a whole buffer, gzip or zlib, concatenated gzip members as one
 * stream. It gives up as soon as the output passes cap bytes (-E2BIG), so a small hostile input
 * cannot make us allocate gigabytes; -EINVAL for corrupt or truncated data, with a message that
 * starts with `what` when it is not NULL. *out is malloc'd and NUL-terminated (not counted in
 * *outlen); NULL on failure. */
int strobe_gunzip_capped(const uint8_t *in, size_t inlen, size_t cap, uint8_t **out,
			 size_t *outlen, const char *what, strobe_err *err);
/* strobe_gunzip_capped at STROBE_MAX_INPUT, for files: -EFBIG beyond. */
int strobe_gunzip(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, strobe_err *err);
int strobe_gzip(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen);
/* strobe_gzip at a compression level from 1 (fastest) to 12 (smallest); strobe_gzip's is 6.
 * -EINVAL for another level. */
int strobe_gzip_level(const uint8_t *in, size_t inlen, int level, uint8_t **out, size_t *outlen);

/* Reads any supported profile file into a new profile. */
int strobe_read_profile(const char *path, strobe_profile **out, strobe_err *err);
/* The same, read as format `as` (STROBE_FMT_UNKNOWN: from the name, .otlp / .otlp.json, or the
 * content). */
int strobe_read_profile_as(const char *path, strobe_format as, strobe_profile **out,
			   strobe_err *err);
/* The same for a buffer already in memory; `name` is used in messages. */
int strobe_decode_profile(const uint8_t *buf, size_t len, const char *name, strobe_profile **out,
			  strobe_err *err);

/* pprof. decode takes the serialized protobuf (not gzipped); encode produces gzipped bytes. */
int strobe_pprof_decode(const uint8_t *buf, size_t len, const char *name, strobe_profile **out,
			strobe_err *err);
int strobe_pprof_encode(const strobe_profile *p, uint8_t **out, size_t *len);
/* strobe_pprof_encode gzipped at a level (strobe_gzip_level), or not gzipped at level 0 (the
 * serialized protobuf: pprof readers, strobe's push API among them, take either). */
int strobe_pprof_encode_level(const strobe_profile *p, int level, uint8_t **out, size_t *len);

/* Folded stacks: "a;b;c 12" per line; also the two-count "a;b;c 10 12" of difffolded.pl, whose
 * first count goes to sample type "base" and second to "new" (profile has two types then). */
int strobe_folded_decode(const char *buf, size_t len, const char *name, strobe_profile **out,
			 strobe_err *err);
/* One line per (stack) with the value of column `type`, sorted by stack text, zero values left
 * out. */
int strobe_folded_write(FILE *out, strobe_profile *p, int type, strobe_granularity g);

/* Folded text straight into an empty tree (column 0), without a profile in between: the fast
 * path of `flamegraph` for one folded input with no transforms. Nodes whose total is below
 * min_fraction of the whole are left out (their value stays in their ancestors); children are
 * in the byte order of the lines, as flamegraph.pl draws them. Returns -ENOTSUP for the
 * two-count form. The tree cannot be added to afterwards. */
int strobe_tree_from_folded(strobe_tree *t, const char *buf, size_t len, const char *name,
			    double min_fraction, strobe_err *err);

/* `perf script` text into a profile of one type "samples/count" (same rules as collapse with no
 * options, labels `comm` kept per sample). */
/* `perf script` text collapsed to folded text (sorted, as stackcollapse-perf.pl prints it);
 * *out is malloc'd. */
int strobe_perf_script_fold(const char *buf, size_t len, const char *name, char **out,
			    size_t *outlen, strobe_err *err);
int strobe_perf_script_decode(const char *buf, size_t len, const char *name, strobe_profile **out,
			      strobe_err *err);

/* JSON outputs of a tree. */
int strobe_json_tree_write(FILE *out, const strobe_tree *t, const char *type, const char *unit);
/* The web UI's flame graph format: {"type","unit","diff","stride","names":[...],"nodes":[...]},
 * nodes flattened in pre-order (children in tree order), `stride` numbers each: name index,
 * depth (root 0), self, total, and in a diff tree base_self, base_total (column 1). */
int strobe_json_flat_write(FILE *out, const strobe_tree *t, const char *type, const char *unit);
int strobe_speedscope_write(FILE *out, strobe_profile *p, int type, strobe_granularity g,
			    const char *name);

#ifdef __cplusplus
}
#endif
#endif
