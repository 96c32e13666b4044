/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile model: the one data structure every part of strobe reads and writes.
 *
 * It is the pprof model (profile.proto) held in interned tables, so that equal strings, functions,
 * mappings, locations, stacks and label sets exist once and merging N profiles is a matter of
 * remapping ids and summing values. Stacks are a parent-pointer tree (Parca/Pyroscope style): a
 * stack id names a node, the node names its leaf location and its parent stack, and the root
 * (id 0) is the empty stack. Samples are unique by (stack, label set); adding a sample that exists
 * already sums its values.
 *
 * Ids. In every table, id 0 is a reserved "none" entry (the empty string, no function, no
 * mapping, no location, the empty stack, the empty label set), so ids match pprof's convention
 * that 0 means absent. Ids are dense: entity i of a table has id i.
 *
 * Ownership. A strobe_profile owns everything it points to. Pointers returned by accessors
 * (strings, locations, label arrays) stay valid only until the next call that adds to the same
 * profile: copy what you keep across insertions.
 *
 * Errors. Functions return 0 or a negative errno; those that can fail on bad input also fill a
 * strobe_err (when one is passed) with a one-line message. Constructors return NULL and set errno.
 */
#ifndef STROBE_PROFILE_H
#define STROBE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------------- */

typedef struct strobe_err {
	char msg[512]; /* one line, no trailing newline; empty when no message was set */
} strobe_err;

/* printf-style; safe with err == NULL. Returns code, so `return strobe_errf(err, -EINVAL, ...)`. */
int strobe_errf(strobe_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* For a file that holds tokens (open as fd): -EACCES with a message naming path and the fix
 * (chmod 600) when its mode lets the group or others read it; 0 when only its owner can. */
int strobe_secret_file_check(int fd, const char *path, strobe_err *err);
/* -EINVAL with a message naming `what` (not quoting the URL) and saying what to do `instead`
 * when url carries credentials: user:password@ in its authority, or a token= / access_token=
 * query parameter. */
int strobe_url_check_secrets(const char *url, const char *what, const char *instead,
			     strobe_err *err);
#define STROBE_TOKEN_MAX 4096u
/* -EINVAL naming `what` unless tok is 1 to STROBE_TOKEN_MAX printable non-space characters (it
 * goes into an Authorization header, where a CR or LF would start another header). */
int strobe_token_check(const char *tok, const char *what, strobe_err *err);
/* Reads a token from a file of one line (its newline dropped), refused like a config with
 * tokens when the group or others may read it; *out is malloc'd. */
int strobe_token_file_read(const char *path, char **out, strobe_err *err);

/* ---- interning table (exported for codecs that want their own dedup) ------------------------- */

/* Byte blobs -> dense ids, in insertion order. Keys are copied into an arena. */
typedef struct strobe_itab {
	uint8_t *data;   /* arena of keys, each 8-byte aligned */
	size_t len, cap;
	uint64_t *off;   /* off[id]: offset of key id in data (variable-size keys only) */
	uint32_t *klen;  /* klen[id]: key length (variable-size keys only) */
	uint32_t fixed;  /* every key has this size (set before the first insert), or 0 */
	uint32_t n, ncap;
	uint64_t *slots; /* open addressing: hash << 32 | (id + 1), 0 = empty */
	uint32_t *hashes;/* hash of each id, for cheap rehash and compare */
	uint32_t nslots;
} strobe_itab;

void strobe_itab_free(strobe_itab *t);
/* Finds or adds key; *id receives its id; *added (may be NULL) whether it was new. */
int strobe_itab_intern(strobe_itab *t, const void *key, size_t len, uint32_t *id, bool *added);
/* Makes room for n entries with key_bytes of keys in all, so no growth happens until then. */
int strobe_itab_reserve(strobe_itab *t, uint32_t n, size_t key_bytes);
/* -1 (as uint32) when absent. */
uint32_t strobe_itab_find(const strobe_itab *t, const void *key, size_t len);
static inline const void *strobe_itab_get(const strobe_itab *t, uint32_t id, size_t *len)
{
	if (t->fixed) {
		if (len)
			*len = t->fixed;
		return t->data + (size_t)id * ((t->fixed + 7) & ~7u);
	}
	if (len)
		*len = t->klen[id];
	return t->data + t->off[id];
}
uint32_t strobe_hash(const void *key, size_t len);

/* ---- entities -------------------------------------------------------------------------------- */

typedef struct strobe_value_type {
	uint32_t type, unit; /* string ids, e.g. "cpu", "nanoseconds" */
} strobe_value_type;

/* One label: a string label has str != 0; a numeric one has str == 0 and num/num_unit. */
typedef struct strobe_label {
	uint32_t key, str;
	int64_t num;
	uint32_t num_unit, pad_;
} strobe_label;

typedef struct strobe_function {
	uint32_t name, system_name, filename, pad_;
	int64_t start_line;
} strobe_function;

typedef struct strobe_mapping {
	uint64_t start, limit, offset;
	uint32_t filename, build_id;
	uint8_t has_functions, has_filenames, has_line_numbers, has_inline_frames;
	uint32_t pad_;
} strobe_mapping;

/* discriminator: the DWARF line table's discriminator of the address (leaf line) or the
 * DW_AT_GNU_discriminator of the inlined call (caller lines), as the compiler wrote it (LLVM
 * packs a base discriminator, duplication factor and copy id into it); 0 = none. It tells apart
 * the basic blocks of one source line, which AutoFDO keys its counts by. pprof has no field for
 * it: strobe writes it as Line field 100 (proto/profile.proto), which other readers skip. */
typedef struct strobe_line {
	uint32_t function, discriminator; /* function id, 0 = none */
	int64_t line, column;
} strobe_line;

/* A location's lines are stored leaf-first as in pprof: line[0] is the innermost inlined frame,
 * line[nline-1] the function that physically contains the address. */
typedef struct strobe_location {
	uint64_t address;
	uint32_t mapping, nline;
	uint8_t is_folded, pad_[7];
	strobe_line line[]; /* nline entries */
} strobe_location;

typedef struct strobe_stack_node {
	uint32_t parent, location; /* parent stack id (0 = root), leaf location id */
} strobe_stack_node;

typedef struct strobe_sample_key {
	uint32_t stack, labels; /* stack id, label set id */
} strobe_sample_key;
/* The key of the reserved sample id 0 (no real sample has stack UINT32_MAX). */
#define STROBE_SAMPLE_NONE ((strobe_sample_key){UINT32_MAX, UINT32_MAX})

typedef struct strobe_profile {
	strobe_itab strings;    /* id 0 = "" */
	strobe_itab functions;  /* strobe_function */
	strobe_itab mappings;   /* strobe_mapping */
	strobe_itab locations;  /* strobe_location + lines */
	strobe_itab stacks;     /* strobe_stack_node; id 0 = empty stack */
	strobe_itab labelsets;  /* strobe_label[], sorted by (key, str, num, unit); id 0 = empty */
	strobe_itab samples;    /* strobe_sample_key; id 0 reserved */
	int64_t *values;        /* values[sample_id * ntypes + t] */
	size_t values_cap;      /* in samples */

	strobe_value_type *types;
	uint32_t ntypes;
	int32_t default_type;   /* index into types, -1 = none given */
	strobe_value_type period_type;
	int64_t period, time_nanos, duration_nanos;
	uint32_t *comments;     /* string ids */
	uint32_t ncomments;
	uint32_t drop_frames, keep_frames; /* string ids (regexes), 0 = none */
} strobe_profile;

/* ---- construction ---------------------------------------------------------------------------- */

/* An empty profile with the reserved id-0 entries in place and no sample types. */
strobe_profile *strobe_profile_new(void);
void strobe_profile_free(strobe_profile *p);

/* Sets the sample types; only allowed while the profile has no samples. */
int strobe_profile_set_types(strobe_profile *p, const strobe_value_type *types, uint32_t n);
/* Convenience: adds one sample type by name and unit (before any sample). Returns 0/-errno. */
int strobe_profile_add_type(strobe_profile *p, const char *type, const char *unit);

uint32_t strobe_str_intern(strobe_profile *p, const char *s, size_t len); /* UINT32_MAX on ENOMEM */
static inline uint32_t strobe_str_intern0(strobe_profile *p, const char *s)
{
	return strobe_str_intern(p, s, strlen(s));
}
/* The string; never NULL for a valid id. Strings are NUL-terminated. */
static inline const char *strobe_str(const strobe_profile *p, uint32_t id)
{
	return (const char *)strobe_itab_get(&p->strings, id, NULL);
}
static inline size_t strobe_str_len(const strobe_profile *p, uint32_t id)
{
	size_t n;
	strobe_itab_get(&p->strings, id, &n);
	return n - 1; /* stored with NUL */
}

/* Each returns the id (found or added) or UINT32_MAX on ENOMEM. */
uint32_t strobe_function_intern(strobe_profile *p, const strobe_function *f);
uint32_t strobe_mapping_intern(strobe_profile *p, const strobe_mapping *m);
uint32_t strobe_location_intern(strobe_profile *p, uint32_t mapping, uint64_t address,
				const strobe_line *lines, uint32_t nline, bool is_folded);
/* The stack whose leaf is location and whose caller stack is parent. */
uint32_t strobe_stack_push(strobe_profile *p, uint32_t parent, uint32_t location);
/* Labels need not be sorted; they are sorted (stably by key) into the canonical order. */
uint32_t strobe_labelset_intern(strobe_profile *p, const strobe_label *labels, uint32_t n);

/* Appends a comment (pprof's Profile.comment). Returns 0/-ENOMEM. */
int strobe_profile_add_comment(strobe_profile *p, const char *text);

/* The id of an existing label set, or UINT32_MAX when p has none like it. Sorts labels (the
 * caller's array) into the canonical order first. */
uint32_t strobe_labelset_find(const strobe_profile *p, strobe_label *labels, uint32_t n);

/* Adds values (ntypes of them) to the sample (stack, labels), creating it if new. */
int strobe_sample_add(strobe_profile *p, uint32_t stack, uint32_t labels, const int64_t *values);

/* Convenience for text formats: a frame that is just a function name (no mapping/address). */
uint32_t strobe_location_for_name(strobe_profile *p, const char *name, size_t len);

/* ---- access ---------------------------------------------------------------------------------- */

static inline uint32_t strobe_nsamples(const strobe_profile *p) { return p->samples.n - 1; }
/* Sample ids run from 1 to strobe_nsamples(p). */
static inline const strobe_sample_key *strobe_sample(const strobe_profile *p, uint32_t id)
{
	return (const strobe_sample_key *)strobe_itab_get(&p->samples, id, NULL);
}
static inline int64_t *strobe_sample_values(const strobe_profile *p, uint32_t id)
{
	return p->values + (size_t)id * p->ntypes;
}
static inline const strobe_function *strobe_function_get(const strobe_profile *p, uint32_t id)
{
	return (const strobe_function *)strobe_itab_get(&p->functions, id, NULL);
}
static inline const strobe_mapping *strobe_mapping_get(const strobe_profile *p, uint32_t id)
{
	return (const strobe_mapping *)strobe_itab_get(&p->mappings, id, NULL);
}
static inline const strobe_location *strobe_location_get(const strobe_profile *p, uint32_t id)
{
	return (const strobe_location *)strobe_itab_get(&p->locations, id, NULL);
}
static inline const strobe_stack_node *strobe_stack_get(const strobe_profile *p, uint32_t id)
{
	return (const strobe_stack_node *)strobe_itab_get(&p->stacks, id, NULL);
}
static inline const strobe_label *strobe_labelset_get(const strobe_profile *p, uint32_t id,
						       uint32_t *n)
{
	size_t len;
	const strobe_label *l = (const strobe_label *)strobe_itab_get(&p->labelsets, id, &len);
	*n = (uint32_t)(len / sizeof(strobe_label));
	return l;
}
/* Number of locations in a stack (its depth). */
uint32_t strobe_stack_depth(const strobe_profile *p, uint32_t stack);

/* Index of the sample type named `name` (type string), or -1. A decimal number is taken as an
 * index. */
int strobe_type_index(const strobe_profile *p, const char *name);
/* pprof's default when none is asked for: default_sample_type if set, else the last type. */
int strobe_default_type_index(const strobe_profile *p);
/* Sum of one value column over all samples. */
int64_t strobe_total(const strobe_profile *p, int type_index);

/* ---- whole-profile operations ---------------------------------------------------------------- */

/* Adds every sample of src into dst, remapping ids. The sample types must match (type and unit,
 * in order) unless dst has no types yet, in which case it takes src's. On mismatch returns
 * -EINVAL with a message naming both type lists. */
int strobe_profile_merge(strobe_profile *dst, const strobe_profile *src, strobe_err *err);
/* Names what src left unnamed, as it is merged: for every location of src without lines (loc_id
 * its id in src), namer
 * may fill up to max lines (leaf first; function ids interned in dst) and return their count,
 * 0 to keep the location as it is, or -errno to stop the merge. Late symbolization (the server
 * naming bare addresses from debug files uploaded after the profile) is this. */
typedef int (*strobe_location_namer)(void *ctx, strobe_profile *dst, const strobe_profile *src,
				     uint32_t loc_id, const strobe_location *loc, strobe_line *out,
				     uint32_t max);
#define STROBE_NAMER_MAX_LINES 64u
int strobe_profile_merge_named(strobe_profile *dst, const strobe_profile *src,
			       strobe_location_namer namer, void *ctx, strobe_err *err);
/* Multiplies every value by factor (rounded to nearest). */
void strobe_profile_scale(strobe_profile *p, double factor);
/* A deep copy. */
strobe_profile *strobe_profile_clone(const strobe_profile *p);

#ifdef __cplusplus
}
#endif
#endif
