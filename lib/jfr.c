// SPDX-License-Identifier: Apache-2.0
/*
 * A Java Flight Recorder reader, written by hand for strobe: no C library reads JFR, and the
 * format is small enough to read directly. It turns the recordings of the JDK (11 and later,
 * format 2.x) and of async-profiler / pyroscope-java into the profile model (see strobe/jfr.h
 * for the columns and the naming).
 *
 * The format, as this reader takes it. A file is a sequence of chunks. A chunk starts with a
 * 68-byte big-endian header: magic "FLR\0", major and minor version, the chunk's size, the
 * offsets (from the chunk's start) of its last checkpoint and of its metadata, start time,
 * duration, start ticks, ticks per second, and feature flags (bit 0: integers are compressed).
 * Then events, each: its size (including the size field), its type id, its fields. Integers are
 * LEB128 (7 bits a byte, low first, the 9th byte carries 8 bits) when compressed, else
 * big-endian of their width. The metadata event (type 0) holds a string table and a tree of
 * elements; its "class" elements give each type's id, name and fields (name, type id, whether
 * the value is a constant-pool reference, whether it is an array). Checkpoint events (type 1)
 * hold constant pools: per type, entries of a key and a value laid out by the type's fields.
 * Each checkpoint names the previous one by a (negative) delta; we read every checkpoint of a
 * chunk in file order instead of following those deltas, which reaches the same entries and
 * cannot loop. Pools are per chunk: the JDK and async-profiler write every chunk
 * self-contained, and a key means nothing in another chunk.
 *
 * Pool entries are not decoded up front: an index maps (type, key) to the entry's byte offset,
 * and an entry is read when an event refers to it (a stack trace, then its methods, classes and
 * symbols), with caches per chunk from stack-trace key to stack id and method key to location.
 * Events are recognised by their type NAME from the metadata, never by fixed ids, which differ
 * between JDK versions and async-profiler.
 *
 * Strings: tag 0 null, 1 empty, 2 a reference into the java.lang.String pool, 3 UTF-8 (length,
 * bytes), 4 UTF-16 chars (length, each char an integer; written back as UTF-8), 5 Latin-1
 * (length, bytes; written as UTF-8).
 *
 * Untrusted input: every read is bounded by its event (or chunk), every count by the bytes left
 * (an element takes at least one byte), recursion by MAX_NEST, the values visited by a budget
 * proportional to the input (a type with no fields takes no bytes, so counts alone do not bound
 * the work), stacks by STROBE_MAX_DEPTH,
 * names by STROBE_MAX_NAME, and the parser's own tables by opts->max_memory. Errors say which
 * input and which byte offset.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/jfr.h"
#include "jfr_labels.pb-c.h"

#define HDR_SIZE 68u
#define MAX_NEST 32u           /* nested class values and string pool hops */
#define MAX_CLASSES 65536u     /* types in one metadata event */
#define MAX_META_STRINGS (1u << 20)
#define DEF_MAX_MEMORY ((size_t)1 << 30)

/* ---- columns ----------------------------------------------------------------------------------- */

enum { K_CPU, K_WALL, K_TLAB, K_OUTSIDE, K_ASAMPLE, K_LOCK, K_PARK, NKINDS };

/* Column pairs per event kind (objects/count first); wall and cpu have one. */
static const strobe_jfr_kind kinds[] = {
	{"cpu", "process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds"},
	{"wall", "wall", "wall", "nanoseconds", "wall", "nanoseconds"},
	{"alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count", "space", "bytes"},
	{"alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes", "space", "bytes"},
	{"alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count", "space", "bytes"},
	{"alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes", "space", "bytes"},
	{"alloc_sample_objects", "memory", "alloc_sample_objects", "count", "space", "bytes"},
	{"alloc_sample_bytes", "memory", "alloc_sample_bytes", "bytes", "space", "bytes"},
	{"lock_count", "mutex", "contentions", "count", "mutex", "count"},
	{"lock_duration", "mutex", "delay", "nanoseconds", "mutex", "count"},
	{"park_count", "block", "contentions", "count", "block", "count"},
	{"park_duration", "block", "delay", "nanoseconds", "block", "count"},
};
/* First column of each kind in kinds[] and how many it has. */
static const uint8_t kind_col[NKINDS] = {0, 1, 2, 4, 6, 8, 10};
static const uint8_t kind_ncol[NKINDS] = {1, 1, 2, 2, 2, 2, 2};
#define NCOLS 12u

const strobe_jfr_kind *strobe_jfr_kind_of(const char *column)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		if (strcmp(kinds[i].column, column) == 0)
			return &kinds[i];
	return NULL;
}

bool strobe_jfr_is(const uint8_t *buf, size_t len)
{
	return len >= 4 && memcmp(buf, "FLR\0", 4) == 0;
}

/* ---- metadata ---------------------------------------------------------------------------------- */

typedef struct jfield {
	const char *name;
	uint64_t type;    /* class id */
	uint32_t cls;     /* index into classes, resolved after reading; UINT32_MAX unknown */
	bool cp, array;
} jfield;

enum prim { P_NONE, P_BOOL, P_BYTE, P_CHAR, P_SHORT, P_INT, P_LONG, P_FLOAT, P_DOUBLE, P_STRING };

typedef struct jclass {
	uint64_t id;
	const char *name;
	jfield *fields;
	uint32_t nfields, capfields;
	uint8_t prim;
} jclass;

/* One pool entry: where its value starts. */
typedef struct pentry {
	uint64_t key;
	uint32_t cls, used;
	size_t off;
} pentry;

typedef struct cache_ent {
	uint64_t key;
	uint32_t val, used;
} cache_ent;

typedef struct jfr {
	const uint8_t *buf;
	size_t len;
	const char *name;
	strobe_err *err;
	const strobe_jfr_options *opts;
	size_t mem, max_mem;
	strobe_profile *p;
	/* the chunk being read */
	size_t cstart, cend;
	bool compressed;
	int64_t ticks_per_sec;
	char **mstrings;          /* metadata string table (NUL-terminated copies) */
	uint32_t nmstrings;
	jclass *classes;
	uint32_t nclasses;
	pentry *pool;             /* open addressing on (cls, key) */
	size_t npool, poolcap;
	cache_ent *stk, *loc;     /* stack-trace key -> stack id; method key -> location id */
	size_t nstk, stkcap, nloc, loccap;
	uint32_t c_string, c_stacktrace, c_method, c_class; /* class indexes, UINT32_MAX absent */
	int64_t vals[NCOLS];
	int64_t tot[NCOLS];       /* column totals: a value that would pass INT64_MAX is clamped, so
				   * no sample's sum can wrap to a negative */
	bool seen[NKINDS];
	uint32_t colmap[NCOLS];   /* our column -> profile column, after the first pass */
	bool capped;              /* an allocation was refused by max_mem */
	uint64_t steps, max_steps;/* values visited; a type of no bytes nested in arrays could
				   * otherwise make a small input cost years */
} jfr;

static int fail(jfr *j, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(jfr *j, size_t off, const char *fmt, ...)
{
	char m[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	return strobe_errf(j->err, -EINVAL, "%s: byte %zu: %s", j->name, off, m);
}

static void *jalloc(jfr *j, size_t n)
{
	if (n > j->max_mem - j->mem) {
		j->capped = true;
		return NULL;
	}
	void *p = calloc(1, n ? n : 1);
	if (p)
		j->mem += n;
	return p;
}

static int oom(jfr *j, size_t off)
{
	if (j->capped)
		return strobe_errf(j->err, -E2BIG, "%s: byte %zu: the JFR needs more than %zu MiB to read",
				   j->name, off, j->max_mem >> 20);
	return strobe_errf(j->err, -ENOMEM, "%s: out of memory", j->name);
}

/* ---- reading integers -------------------------------------------------------------------------- */

typedef struct rd {
	jfr *j;
	size_t pos, end; /* absolute offsets in j->buf */
	int bad;         /* first error */
} rd;

static int rd_fail(rd *r, const char *what)
{
	if (!r->bad)
		r->bad = fail(r->j, r->pos, "%s", what);
	r->pos = r->end;
	return r->bad;
}

static uint8_t rd_u8(rd *r)
{
	if (r->pos >= r->end) {
		rd_fail(r, "truncated value");
		return 0;
	}
	return r->j->buf[r->pos++];
}

/* LEB128 as JFR writes it: at most 9 bytes, the ninth with all 8 bits. */
static uint64_t rd_leb(rd *r)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++) {
		uint8_t b = rd_u8(r);
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return v;
	}
	return v | (uint64_t)rd_u8(r) << 56;
}

static uint64_t rd_be(rd *r, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | rd_u8(r);
	return v;
}

static int64_t rd_long(rd *r) { return (int64_t)(r->j->compressed ? rd_leb(r) : rd_be(r, 8)); }
static int32_t rd_int(rd *r) { return (int32_t)(r->j->compressed ? rd_leb(r) : rd_be(r, 4)); }
static int16_t rd_short(rd *r) { return (int16_t)(r->j->compressed ? rd_leb(r) : rd_be(r, 2)); }

/* A count of things that take at least `each` bytes apiece, so no count can exceed the bytes
 * left. */
static uint32_t rd_count(rd *r, size_t each)
{
	int32_t n = rd_int(r);
	if (r->bad)
		return 0;
	if (n < 0 || (size_t)n > (r->end - r->pos) / each) {
		rd_fail(r, "count larger than the bytes left");
		return 0;
	}
	return (uint32_t)n;
}

/* ---- strings ----------------------------------------------------------------------------------- */

/* Appends the UTF-8 of code point c to out (cap bytes, len so far); false when full. */
static bool put_utf8(char *out, size_t cap, size_t *len, uint32_t c)
{
	char t[4];
	size_t n;
	if (c >= 0xd800 && c <= 0xdfff)
		c = 0xfffd; /* a lone surrogate half */
	if (c < 0x80) {
		t[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		t[0] = (char)(0xc0 | c >> 6);
		t[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else {
		t[0] = (char)(0xe0 | c >> 12);
		t[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		t[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	}
	if (*len + n >= cap)
		return false;
	memcpy(out + *len, t, n);
	*len += n;
	return true;
}

static const pentry *pool_find(jfr *j, uint32_t cls, uint64_t key);

/* Reads a string value into out (cap bytes, NUL-terminated, cut at cap-1 on a UTF-8 character
 * boundary for tags 4 and 5). *null set for tag 0. */
static int rd_string_into(rd *r, char *out, size_t cap, size_t *outlen, unsigned depth)
{
	size_t len = 0;
	uint8_t tag = rd_u8(r);
	out[0] = 0;
	*outlen = 0;
	if (r->bad)
		return r->bad;
	switch (tag) {
	case 0:
	case 1:
		return 0;
	case 2: {
		uint64_t key = (uint64_t)rd_long(r);
		if (r->bad)
			return r->bad;
		jfr *j = r->j;
		const pentry *e = j->c_string == UINT32_MAX ? NULL : pool_find(j, j->c_string, key);
		if (!e)
			return 0; /* a dangling string: empty, as the JDK's reader gives null */
		if (depth >= MAX_NEST)
			return rd_fail(r, "string references nest too deep");
		rd s = {j, e->off, j->cend, 0};
		int x = rd_string_into(&s, out, cap, outlen, depth + 1);
		if (x)
			r->bad = x;
		return x;
	}
	case 3:
	case 5: {
		uint32_t n = rd_count(r, 1);
		if (r->bad)
			return r->bad;
		const uint8_t *s = r->j->buf + r->pos;
		r->pos += n;
		for (uint32_t i = 0; i < n; i++) {
			if (tag == 3) {
				if (len + 1 >= cap)
					break;
				out[len++] = (char)s[i];
			} else if (!put_utf8(out, cap, &len, s[i])) {
				break;
			}
		}
		break;
	}
	case 4: {
		uint32_t n = rd_count(r, 1);
		for (uint32_t i = 0; i < n && !r->bad; i++) {
			uint32_t c = (uint16_t)rd_short(r);
			if (c == 0)
				c = 0xfffd; /* keep names NUL-free */
			if (!r->bad)
				(void)put_utf8(out, cap, &len, c);
		}
		if (r->bad)
			return r->bad;
		break;
	}
	default:
		return rd_fail(r, "unknown string encoding");
	}
	/* A NUL inside a UTF-8 or Latin-1 string would cut names short downstream. */
	for (size_t i = 0; i < len; i++)
		if (!out[i])
			out[i] = '?';
	out[len] = 0;
	*outlen = len;
	return 0;
}

/* ---- the metadata event ------------------------------------------------------------------------ */

static void meta_free(jfr *j)
{
	for (uint32_t i = 0; i < j->nmstrings; i++)
		free(j->mstrings[i]);
	free(j->mstrings);
	for (uint32_t i = 0; i < j->nclasses; i++)
		free(j->classes[i].fields);
	free(j->classes);
	j->mstrings = NULL;
	j->classes = NULL;
	j->nmstrings = j->nclasses = 0;
}

static const char *mstr(jfr *j, rd *r)
{
	int32_t i = rd_int(r);
	if (r->bad)
		return NULL;
	if (i < 0 || (uint32_t)i >= j->nmstrings) {
		rd_fail(r, "metadata string index out of range");
		return NULL;
	}
	return j->mstrings[i] ? j->mstrings[i] : "";
}

/* Reads one element (and its children); `in` says where we are: 0 root, 1 metadata, 2 class. */
static int meta_element(jfr *j, rd *r, unsigned depth, int in)
{
	if (depth > MAX_NEST)
		return rd_fail(r, "metadata elements nest too deep");
	const char *ename = mstr(j, r);
	uint32_t nattr = rd_count(r, 2);
	if (r->bad)
		return r->bad;
	bool is_class = in == 1 && strcmp(ename, "class") == 0;
	bool is_field = in == 2 && strcmp(ename, "field") == 0;
	const char *a_id = NULL, *a_name = NULL, *a_class = NULL, *a_cp = NULL, *a_dim = NULL;
	for (uint32_t i = 0; i < nattr; i++) {
		const char *k = mstr(j, r), *v = mstr(j, r);
		if (r->bad)
			return r->bad;
		if (!strcmp(k, "id"))
			a_id = v;
		else if (!strcmp(k, "name"))
			a_name = v;
		else if (!strcmp(k, "class"))
			a_class = v;
		else if (!strcmp(k, "constantPool"))
			a_cp = v;
		else if (!strcmp(k, "dimension"))
			a_dim = v;
	}
	/* root > metadata > class > field; the root's other children (region) are skipped. */
	int child_in = depth == 0 ? 0 : in == 0 && !strcmp(ename, "metadata") ? 1 : is_class ? 2 : 3;
	if (is_class) {
		if (j->nclasses >= MAX_CLASSES)
			return rd_fail(r, "more than 65536 types in the metadata");
		jclass *nc = realloc(j->classes, (j->nclasses + 1) * sizeof(*nc));
		if (!nc)
			return oom(j, r->pos);
		j->classes = nc;
		jclass *c = &nc[j->nclasses++];
		memset(c, 0, sizeof(*c));
		c->id = a_id ? strtoull(a_id, NULL, 10) : 0;
		c->name = a_name ? a_name : "";
		static const struct {
			const char *n;
			uint8_t p;
		} prims[] = {{"boolean", P_BOOL}, {"byte", P_BYTE},   {"char", P_CHAR},
			     {"short", P_SHORT},  {"int", P_INT},     {"long", P_LONG},
			     {"float", P_FLOAT},  {"double", P_DOUBLE}, {"java.lang.String", P_STRING}};
		for (size_t i = 0; i < sizeof(prims) / sizeof(*prims); i++)
			if (!strcmp(c->name, prims[i].n))
				c->prim = prims[i].p;
	} else if (is_field && j->nclasses) {
		jclass *c = &j->classes[j->nclasses - 1];
		if (c->nfields == c->capfields) {
			uint32_t ncap = c->capfields ? c->capfields * 2 : 8;
			if ((size_t)ncap * sizeof(jfield) > j->max_mem - j->mem) {
				j->capped = true;
				return oom(j, r->pos);
			}
			jfield *nf = realloc(c->fields, ncap * sizeof(*nf));
			if (!nf)
				return oom(j, r->pos);
			j->mem += (size_t)(ncap - c->capfields) * sizeof(jfield);
			c->fields = nf;
			c->capfields = ncap;
		}
		jfield *f = &c->fields[c->nfields++];
		f->name = a_name ? a_name : "";
		f->type = a_class ? strtoull(a_class, NULL, 10) : 0;
		f->cls = UINT32_MAX;
		f->cp = a_cp && !strcmp(a_cp, "true");
		f->array = a_dim && strcmp(a_dim, "0") != 0;
	}
	uint32_t nchild = rd_count(r, 2);
	for (uint32_t i = 0; i < nchild && !r->bad; i++)
		meta_element(j, r, depth + 1, child_in);
	return r->bad;
}

static int cls_cmp(const void *a, const void *b)
{
	uint64_t x = ((const jclass *)a)->id, y = ((const jclass *)b)->id;
	return x < y ? -1 : x > y;
}

static uint32_t cls_find(const jfr *j, uint64_t id)
{
	uint32_t lo = 0, hi = j->nclasses;
	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;
		if (j->classes[m].id < id)
			lo = m + 1;
		else if (j->classes[m].id > id)
			hi = m;
		else
			return m;
	}
	return UINT32_MAX;
}

static uint32_t cls_named(const jfr *j, const char *name)
{
	for (uint32_t i = 0; i < j->nclasses; i++)
		if (!strcmp(j->classes[i].name, name))
			return i;
	return UINT32_MAX;
}

static int read_metadata(jfr *j, size_t off)
{
	meta_free(j);
	rd r = {j, off, j->cend, 0};
	int64_t size = rd_int(&r);
	if (r.bad)
		return r.bad;
	if (size < 2 || (uint64_t)size > j->cend - off)
		return fail(j, off, "metadata event size %lld runs past its chunk", (long long)size);
	r.end = off + (size_t)size;
	int64_t type = rd_long(&r);
	if (!r.bad && type != 0)
		return fail(j, off, "the metadata offset points at an event of type %lld, not 0",
			    (long long)type);
	(void)rd_long(&r); /* start time */
	(void)rd_long(&r); /* duration */
	(void)rd_long(&r); /* metadata id */
	uint32_t ns = rd_count(&r, 1);
	if (r.bad)
		return r.bad;
	if (ns > MAX_META_STRINGS)
		return fail(j, r.pos, "%u metadata strings, more than %u", ns, MAX_META_STRINGS);
	if (!(j->mstrings = jalloc(j, (size_t)ns * sizeof(char *) + 1)))
		return oom(j, r.pos);
	char *tmp = malloc(STROBE_MAX_NAME);
	if (!tmp)
		return oom(j, r.pos);
	for (uint32_t i = 0; i < ns && !r.bad; i++) {
		size_t n;
		if (rd_string_into(&r, tmp, STROBE_MAX_NAME, &n, MAX_NEST) < 0)
			break;
		if (!(j->mstrings[i] = jalloc(j, n + 1))) {
			free(tmp);
			return oom(j, r.pos);
		}
		memcpy(j->mstrings[i], tmp, n + 1);
		j->nmstrings = i + 1;
	}
	free(tmp);
	if (r.bad)
		return r.bad;
	if (meta_element(j, &r, 0, 0) < 0)
		return r.bad;
	/* Sort by id, then resolve field types to indexes. */
	if (j->nclasses)
		qsort(j->classes, j->nclasses, sizeof(*j->classes), cls_cmp);
	for (uint32_t i = 0; i < j->nclasses; i++)
		for (uint32_t f = 0; f < j->classes[i].nfields; f++)
			j->classes[i].fields[f].cls = cls_find(j, j->classes[i].fields[f].type);
	j->c_string = cls_named(j, "java.lang.String");
	j->c_stacktrace = cls_named(j, "jdk.types.StackTrace");
	j->c_method = cls_named(j, "jdk.types.Method");
	j->c_class = cls_named(j, "java.lang.Class");
	return 0;
}

/* ---- values ------------------------------------------------------------------------------------ */

static int skip_value(rd *r, const jfield *f, unsigned depth);

/* Skips one value of class c (not a reference, not an array). */
static int skip_class(rd *r, uint32_t ci, unsigned depth)
{
	jfr *j = r->j;
	if (ci == UINT32_MAX)
		return rd_fail(r, "a field's type is not in the metadata");
	if (depth > MAX_NEST)
		return rd_fail(r, "values nest too deep");
	if (++j->steps > j->max_steps)
		return rd_fail(r, "the values cost too much to read (types of no bytes in arrays)");
	const jclass *c = &j->classes[ci];
	char tmp[8];
	size_t n;
	switch (c->prim) {
	case P_BOOL:
	case P_BYTE:
		rd_u8(r);
		return r->bad;
	case P_CHAR:
	case P_SHORT:
		rd_short(r);
		return r->bad;
	case P_INT:
		rd_int(r);
		return r->bad;
	case P_LONG:
		rd_long(r);
		return r->bad;
	case P_FLOAT:
		rd_be(r, 4);
		return r->bad;
	case P_DOUBLE:
		rd_be(r, 8);
		return r->bad;
	case P_STRING: {
		/* Skip without copying: only the tag and length matter. */
		size_t at = r->pos;
		uint8_t tag = rd_u8(r);
		if (tag == 3 || tag == 5) {
			uint32_t len = rd_count(r, 1);
			r->pos += len;
		} else if (tag == 4) {
			uint32_t len = rd_count(r, 1);
			for (uint32_t i = 0; i < len && !r->bad; i++)
				rd_short(r);
		} else if (tag == 2) {
			rd_long(r);
		} else if (tag > 1) {
			r->pos = at;
			return rd_string_into(r, tmp, sizeof(tmp), &n, 0);
		}
		return r->bad;
	}
	default:
		for (uint32_t i = 0; i < c->nfields && !r->bad; i++)
			skip_value(r, &c->fields[i], depth + 1);
		return r->bad;
	}
}

static int skip_one(rd *r, const jfield *f, unsigned depth)
{
	if (f->cp) {
		rd_long(r);
		return r->bad;
	}
	return skip_class(r, f->cls, depth);
}

static int skip_value(rd *r, const jfield *f, unsigned depth)
{
	if (f->array) {
		uint32_t n = rd_count(r, 1);
		for (uint32_t i = 0; i < n && !r->bad; i++)
			skip_one(r, f, depth);
		return r->bad;
	}
	return skip_one(r, f, depth);
}

/* Positions r at the value of field `name` of class ci (r at the start of a value of ci);
 * returns the field or NULL (absent, or a read error in r->bad). */
static const jfield *seek_field(rd *r, uint32_t ci, const char *name)
{
	if (ci == UINT32_MAX)
		return NULL;
	const jclass *c = &r->j->classes[ci];
	for (uint32_t i = 0; i < c->nfields && !r->bad; i++) {
		if (!strcmp(c->fields[i].name, name))
			return &c->fields[i];
		skip_value(r, &c->fields[i], 1);
	}
	return NULL;
}

/* An integer-valued field (int, long, short, byte, char, boolean) of a value of class ci at
 * off; 0 when absent. */
static int64_t int_field(jfr *j, size_t off, uint32_t ci, const char *name, bool *found)
{
	rd r = {j, off, j->cend, 0};
	const jfield *f = seek_field(&r, ci, name);
	if (found)
		*found = false;
	if (!f || f->array || r.bad)
		return 0;
	if (f->cp) {
		if (found)
			*found = true;
		return rd_long(&r);
	}
	if (f->cls == UINT32_MAX)
		return 0;
	int64_t v;
	switch (j->classes[f->cls].prim) {
	case P_BOOL:
	case P_BYTE:
		v = rd_u8(&r);
		break;
	case P_CHAR:
	case P_SHORT:
		v = rd_short(&r);
		break;
	case P_INT:
		v = rd_int(&r);
		break;
	case P_LONG:
		v = rd_long(&r);
		break;
	default:
		return 0;
	}
	if (r.bad)
		return 0;
	if (found)
		*found = true;
	return v;
}

/* A string-valued field: a String, a reference into the String pool, or a reference to a
 * Symbol-like entry (a class whose field "string" holds it). */
static int string_field(jfr *j, size_t off, uint32_t ci, const char *name, char *out, size_t cap,
			size_t *len, unsigned depth)
{
	rd r = {j, off, j->cend, 0};
	const jfield *f = seek_field(&r, ci, name);
	out[0] = 0;
	*len = 0;
	if (r.bad)
		return r.bad;
	if (!f || f->array || f->cls == UINT32_MAX || depth > MAX_NEST)
		return 0;
	if (!f->cp) {
		if (j->classes[f->cls].prim != P_STRING)
			return 0;
		return rd_string_into(&r, out, cap, len, 0);
	}
	uint64_t key = (uint64_t)rd_long(&r);
	if (r.bad)
		return r.bad;
	const pentry *e = pool_find(j, f->cls, key);
	if (!e)
		return 0;
	if (j->classes[f->cls].prim == P_STRING) {
		rd s = {j, e->off, j->cend, 0};
		return rd_string_into(&s, out, cap, len, 0);
	}
	return string_field(j, e->off, f->cls, "string", out, cap, len, depth + 1);
}

/* ---- pools ------------------------------------------------------------------------------------- */

static size_t mix(uint32_t cls, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull ^ (uint64_t)cls * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ h >> 29);
}

static const pentry *pool_find(jfr *j, uint32_t cls, uint64_t key)
{
	if (!j->poolcap)
		return NULL;
	size_t m = j->poolcap - 1;
	for (size_t i = mix(cls, key) & m;; i = (i + 1) & m) {
		const pentry *e = &j->pool[i];
		if (!e->used)
			return NULL;
		if (e->cls == cls && e->key == key)
			return e;
	}
}

static int pool_put(jfr *j, uint32_t cls, uint64_t key, size_t off, size_t at)
{
	if ((j->npool + 1) * 2 > j->poolcap) {
		size_t ncap = j->poolcap ? j->poolcap * 2 : 1024;
		pentry *np = jalloc(j, ncap * sizeof(*np));
		if (!np)
			return oom(j, at);
		for (size_t i = 0; i < j->poolcap; i++) {
			pentry *e = &j->pool[i];
			if (!e->used)
				continue;
			size_t k = mix(e->cls, e->key) & (ncap - 1);
			while (np[k].used)
				k = (k + 1) & (ncap - 1);
			np[k] = *e;
		}
		j->mem -= j->poolcap * sizeof(*np);
		free(j->pool);
		j->pool = np;
		j->poolcap = ncap;
	}
	size_t m = j->poolcap - 1;
	for (size_t i = mix(cls, key) & m;; i = (i + 1) & m) {
		pentry *e = &j->pool[i];
		if (!e->used) {
			*e = (pentry){key, cls, 1, off};
			j->npool++;
			return 0;
		}
		if (e->cls == cls && e->key == key) {
			e->off = off; /* a later checkpoint's entry replaces an earlier one */
			return 0;
		}
	}
}

/* A cache from u64 key to u32 value. */
static uint32_t cache_get(cache_ent *t, size_t cap, uint64_t key)
{
	if (!cap)
		return UINT32_MAX;
	for (size_t i = mix(0, key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
		if (!t[i].used)
			return UINT32_MAX;
		if (t[i].key == key)
			return t[i].val;
	}
}

static int cache_put(jfr *j, cache_ent **t, size_t *n, size_t *cap, uint64_t key, uint32_t val)
{
	if ((*n + 1) * 2 > *cap) {
		size_t ncap = *cap ? *cap * 2 : 1024;
		cache_ent *nt = jalloc(j, ncap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		for (size_t i = 0; i < *cap; i++) {
			if (!(*t)[i].used)
				continue;
			size_t k = mix(0, (*t)[i].key) & (ncap - 1);
			while (nt[k].used)
				k = (k + 1) & (ncap - 1);
			nt[k] = (*t)[i];
		}
		j->mem -= *cap * sizeof(**t);
		free(*t);
		*t = nt;
		*cap = ncap;
	}
	for (size_t i = mix(0, key) & (*cap - 1);; i = (i + 1) & (*cap - 1)) {
		if (!(*t)[i].used) {
			(*t)[i] = (cache_ent){key, val, 1};
			(*n)++;
			return 0;
		}
		if ((*t)[i].key == key)
			return 0;
	}
}

static void chunk_reset(jfr *j)
{
	j->mem -= j->poolcap * sizeof(pentry) + j->stkcap * sizeof(cache_ent) +
		  j->loccap * sizeof(cache_ent);
	free(j->pool);
	free(j->stk);
	free(j->loc);
	j->pool = NULL;
	j->stk = j->loc = NULL;
	j->npool = j->poolcap = j->nstk = j->stkcap = j->nloc = j->loccap = 0;
	meta_free(j);
	j->mem = 0; /* the metadata's bytes were counted too: a new chunk starts afresh */
}

/* Indexes the pools of one checkpoint event (r spans the event, at its start). */
static int read_checkpoint(jfr *j, rd *r)
{
	size_t at = r->pos;
	(void)rd_int(r);  /* size, the caller's bounds */
	(void)rd_long(r); /* type 1 */
	(void)rd_long(r); /* start */
	(void)rd_long(r); /* duration */
	(void)rd_long(r); /* delta to the previous checkpoint */
	(void)rd_u8(r);   /* type mask / flush flag */
	uint32_t npools = rd_count(r, 2);
	for (uint32_t i = 0; i < npools && !r->bad; i++) {
		uint64_t tid = (uint64_t)rd_long(r);
		uint32_t ci = cls_find(j, tid);
		uint32_t n = rd_count(r, 2);
		if (r->bad)
			break;
		if (ci == UINT32_MAX)
			return fail(j, r->pos, "checkpoint at %zu: pool of type %llu, which the "
					       "metadata does not describe",
				    at, (unsigned long long)tid);
		for (uint32_t e = 0; e < n && !r->bad; e++) {
			uint64_t key = (uint64_t)rd_long(r);
			size_t off = r->pos;
			if (skip_class(r, ci, 0) < 0)
				break;
			int x = pool_put(j, ci, key, off, off);
			if (x < 0)
				return x;
		}
	}
	return r->bad;
}

/* ---- stacks ------------------------------------------------------------------------------------ */

static uint32_t method_location(jfr *j, uint64_t mkey, int *err)
{
	uint32_t loc = cache_get(j->loc, j->loccap, mkey);
	if (loc != UINT32_MAX)
		return loc;
	const pentry *m = pool_find(j, j->c_method, mkey);
	char name[1024], cls[1024];
	size_t nl = 0, cl = 0;
	if (m) {
		*err = string_field(j, m->off, j->c_method, "name", name, sizeof(name), &nl, 0);
		if (*err)
			return 0;
		bool found;
		int64_t ckey = int_field(j, m->off, j->c_method, "type", &found);
		const pentry *c = found && j->c_class != UINT32_MAX
					  ? pool_find(j, j->c_class, (uint64_t)ckey)
					  : NULL;
		if (c && (*err = string_field(j, c->off, j->c_class, "name", cls, sizeof(cls), &cl, 0)))
			return 0;
	}
	char full[2100];
	int n;
	if (!m)
		n = snprintf(full, sizeof(full), "[unknown method %llu]", (unsigned long long)mkey);
	else if (cl)
		n = snprintf(full, sizeof(full), "%s.%s", cls, nl ? name : "[unknown]");
	else
		n = snprintf(full, sizeof(full), "%s", nl ? name : "[unknown]");
	loc = strobe_location_for_name(j->p, full, (size_t)n < sizeof(full) ? (size_t)n : sizeof(full) - 1);
	if (loc == UINT32_MAX || cache_put(j, &j->loc, &j->nloc, &j->loccap, mkey, loc) < 0) {
		*err = oom(j, m ? m->off : 0);
		return 0;
	}
	return loc;
}

/* The strobe stack of stack-trace key skey; 0 (the empty stack) when the pool lacks it. */
static int stack_of(jfr *j, uint64_t skey, uint32_t *out)
{
	uint32_t s = cache_get(j->stk, j->stkcap, skey);
	if (s != UINT32_MAX) {
		*out = s;
		return 0;
	}
	*out = 0;
	const pentry *e = j->c_stacktrace == UINT32_MAX ? NULL : pool_find(j, j->c_stacktrace, skey);
	if (!e)
		return 0;
	rd r = {j, e->off, j->cend, 0};
	const jfield *f = seek_field(&r, j->c_stacktrace, "frames");
	if (r.bad)
		return r.bad;
	if (!f || !f->array || f->cp || f->cls == UINT32_MAX)
		return 0;
	uint32_t n = rd_count(&r, 1);
	if (r.bad)
		return r.bad;
	/* Frames come leaf first; the stack is built from the root, so remember where each frame
	 * starts (only the first STROBE_MAX_DEPTH: deeper frames are the outermost callers, kept
	 * out as pprof writers do when they cap a stack). */
	uint32_t keep = n < STROBE_MAX_DEPTH ? n : STROBE_MAX_DEPTH;
	size_t *offs = malloc((keep + 1) * sizeof(*offs));
	if (!offs)
		return oom(j, e->off);
	for (uint32_t i = 0; i < keep && !r.bad; i++) {
		offs[i] = r.pos;
		skip_one(&r, f, 1);
	}
	int x = r.bad;
	uint32_t stack = 0;
	for (uint32_t i = keep; i-- > 0 && !x;) {
		bool found;
		int64_t mkey = int_field(j, offs[i], f->cls, "method", &found);
		if (!found)
			continue;
		uint32_t loc = method_location(j, (uint64_t)mkey, &x);
		if (x)
			break;
		if ((stack = strobe_stack_push(j->p, stack, loc)) == UINT32_MAX)
			x = oom(j, offs[i]);
	}
	free(offs);
	if (x)
		return x;
	if (cache_put(j, &j->stk, &j->nstk, &j->stkcap, skey, stack) < 0)
		return oom(j, e->off);
	*out = stack;
	return 0;
}

/* ---- events ------------------------------------------------------------------------------------ */

static int kind_of_event(const char *name)
{
	if (!strcmp(name, "jdk.ExecutionSample"))
		return K_CPU;
	if (!strcmp(name, "profiler.WallClockSample") || !strcmp(name, "jdk.NativeMethodSample"))
		return K_WALL;
	if (!strcmp(name, "jdk.ObjectAllocationInNewTLAB"))
		return K_TLAB;
	if (!strcmp(name, "jdk.ObjectAllocationOutsideTLAB"))
		return K_OUTSIDE;
	if (!strcmp(name, "jdk.ObjectAllocationSample"))
		return K_ASAMPLE;
	if (!strcmp(name, "jdk.JavaMonitorEnter"))
		return K_LOCK;
	if (!strcmp(name, "jdk.ThreadPark"))
		return K_PARK;
	return -1;
}

static int64_t ticks_to_ns(jfr *j, int64_t t)
{
	if (t <= 0 || j->ticks_per_sec <= 0)
		return 0;
	__int128 ns = (__int128)t * 1000000000 / j->ticks_per_sec;
	return ns > INT64_MAX ? INT64_MAX : (int64_t)ns;
}

static int ctx_cmp(const void *k, const void *e)
{
	int64_t a = *(const int64_t *)k, b = ((const strobe_jfr_context *)e)->id;
	return a < b ? -1 : a > b;
}

static int labels_of(jfr *j, int64_t ctx, uint32_t *out)
{
	*out = 0;
	if (!ctx || !j->opts || !j->opts->ncontexts)
		return 0;
	const strobe_jfr_context *c = bsearch(&ctx, j->opts->contexts, j->opts->ncontexts,
					      sizeof(*c), ctx_cmp);
	if (!c || !c->nlabels)
		return 0;
	strobe_label *l = calloc(c->nlabels, sizeof(*l));
	if (!l)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->nlabels; i++) {
		l[i].key = strobe_str_intern0(j->p, c->labels[i].name);
		l[i].str = strobe_str_intern0(j->p, c->labels[i].value);
		if (l[i].key == UINT32_MAX || l[i].str == UINT32_MAX) {
			free(l);
			return -ENOMEM;
		}
	}
	*out = strobe_labelset_intern(j->p, l, c->nlabels);
	free(l);
	return *out == UINT32_MAX ? -ENOMEM : 0;
}

/* One event of kind k of class ci whose fields start at off. */
static int read_event(jfr *j, int k, uint32_t ci, size_t off)
{
	bool found;
	int64_t skey = int_field(j, off, ci, "stackTrace", &found);
	uint32_t stack = 0;
	int x;
	if (found && (x = stack_of(j, (uint64_t)skey, &stack)) < 0)
		return x;
	int64_t v0 = 1, v1 = 0;
	switch (k) {
	case K_CPU:
		v0 = j->opts && j->opts->period_ns > 0 ? j->opts->period_ns : 1;
		break;
	case K_WALL: {
		int64_t n = int_field(j, off, ci, "samples", &found);
		if (!found || n <= 0)
			n = 1;
		v0 = n;
		if (j->opts && j->opts->period_ns > 0 &&
		    __builtin_mul_overflow(n, j->opts->period_ns, &v0))
			v0 = INT64_MAX;
		break;
	}
	case K_TLAB:
		v1 = int_field(j, off, ci, "tlabSize", NULL);
		break;
	case K_OUTSIDE:
		v1 = int_field(j, off, ci, "allocationSize", NULL);
		break;
	case K_ASAMPLE:
		v1 = int_field(j, off, ci, "weight", NULL);
		break;
	case K_LOCK:
	case K_PARK:
		v1 = ticks_to_ns(j, int_field(j, off, ci, "duration", NULL));
		break;
	}
	if (v1 < 0)
		v1 = 0;
	uint32_t labels = 0;
	int64_t ctx = int_field(j, off, ci, "contextId", &found);
	if (found && (x = labels_of(j, ctx, &labels)) < 0)
		return oom(j, off);
	memset(j->vals, 0, sizeof(j->vals));
	int64_t v[2] = {v0, v1};
	for (unsigned i = 0; i < kind_ncol[k]; i++) {
		unsigned c = kind_col[k] + i;
		if (v[i] > INT64_MAX - j->tot[c])
			v[i] = INT64_MAX - j->tot[c];
		j->tot[c] += v[i];
		j->vals[j->colmap[c]] = v[i];
	}
	if (strobe_sample_add(j->p, stack, labels, j->vals) < 0)
		return oom(j, off);
	return 0;
}

/* ---- chunks ------------------------------------------------------------------------------------ */

typedef struct chunk {
	size_t start, end, meta;
	int64_t start_ns, dur_ns, tps;
	bool compressed;
} chunk;

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static int chunk_header(jfr *j, size_t at, chunk *c)
{
	const uint8_t *h = j->buf + at;
	if (j->len - at < HDR_SIZE)
		return fail(j, at, "truncated chunk header (%zu of %u bytes)", j->len - at, HDR_SIZE);
	if (memcmp(h, "FLR\0", 4) != 0)
		return fail(j, at, "not a JFR chunk (no \"FLR\\0\" magic)");
	unsigned major = (unsigned)h[4] << 8 | h[5];
	if (major != 1 && major != 2)
		return fail(j, at + 4, "JFR format version %u is not supported (1 and 2 are)", major);
	uint64_t size = be64(h + 8), cpoff = be64(h + 16), moff = be64(h + 24);
	if (size < HDR_SIZE || size > j->len - at)
		return fail(j, at + 8, "chunk size %llu runs past the end of the input (%zu bytes left)",
			    (unsigned long long)size, j->len - at);
	if (moff < HDR_SIZE || moff >= size)
		return fail(j, at + 24, "metadata offset %llu is outside its chunk of %llu bytes",
			    (unsigned long long)moff, (unsigned long long)size);
	if (cpoff >= size)
		return fail(j, at + 16, "constant pool offset %llu is outside its chunk",
			    (unsigned long long)cpoff);
	c->start = at;
	c->end = at + size;
	c->meta = at + moff;
	c->start_ns = (int64_t)be64(h + 32);
	c->dur_ns = (int64_t)be64(h + 40);
	c->tps = (int64_t)be64(h + 56);
	/* Version 1 files have no feature flags and never compress integers. */
	c->compressed = major >= 2 && (h[67] & 1);
	return 0;
}

/* Walks the events of the chunk; pass 0 indexes checkpoints and notes which kinds occur, pass
 * 1 reads the samples. */
static int chunk_events(jfr *j, const chunk *c, int pass)
{
	size_t pos = c->start + HDR_SIZE;
	while (pos < c->end) {
		rd r = {j, pos, c->end, 0};
		int64_t size = rd_int(&r);
		if (r.bad)
			return r.bad;
		if (size <= 0 || (uint64_t)size > c->end - pos)
			return fail(j, pos, "event size %lld runs past its chunk", (long long)size);
		r.end = pos + (size_t)size;
		uint64_t type = (uint64_t)rd_long(&r);
		if (r.bad)
			return r.bad;
		if (type == 1 && pass == 0) {
			rd e = {j, pos, r.end, 0};
			int x = read_checkpoint(j, &e);
			if (x < 0)
				return x;
		} else if (type > 1) {
			uint32_t ci = cls_find(j, type);
			int k = ci == UINT32_MAX ? -1 : kind_of_event(j->classes[ci].name);
			if (k >= 0 && pass == 0) {
				j->seen[k] = true;
			} else if (k >= 0) {
				/* Field reads are bounded by the chunk: an event whose fields
				 * claim more than its size is read no further than the chunk. */
				int x = read_event(j, k, ci, r.pos);
				if (x < 0)
					return x;
			}
		}
		pos += (size_t)size;
	}
	return 0;
}

static int set_columns(jfr *j)
{
	uint32_t n = 0;
	strobe_value_type t[NCOLS];
	for (int k = 0; k < NKINDS; k++) {
		if (!j->seen[k])
			continue;
		for (unsigned c = kind_col[k]; c < (unsigned)kind_col[k] + kind_ncol[k]; c++) {
			const char *unit = kinds[c].unit;
			if ((k == K_CPU || k == K_WALL) && !(j->opts && j->opts->period_ns > 0))
				unit = "count";
			t[n].type = strobe_str_intern0(j->p, kinds[c].column);
			t[n].unit = strobe_str_intern0(j->p, unit);
			if (t[n].type == UINT32_MAX || t[n].unit == UINT32_MAX)
				return -ENOMEM;
			j->colmap[c] = n++;
		}
	}
	if (!n)
		return 0;
	int r = strobe_profile_set_types(j->p, t, n);
	if (r < 0)
		return r;
	j->p->default_type = 0;
	if (j->seen[K_CPU] && j->opts && j->opts->period_ns > 0) {
		j->p->period_type = (strobe_value_type){t[0].type, t[0].unit};
		j->p->period = j->opts->period_ns;
	}
	return 0;
}

int strobe_jfr_decode(const uint8_t *buf, size_t len, const char *name,
		      const strobe_jfr_options *opts, strobe_profile **out, strobe_err *err)
{
	*out = NULL;
	jfr j = {.buf = buf, .len = len, .name = name ? name : "jfr", .err = err, .opts = opts};
	j.max_mem = opts && opts->max_memory ? opts->max_memory : DEF_MAX_MEMORY;
	/* Every real value costs bytes; a few hundred visits per input byte covers the re-reads
	 * of both passes and of field lookups. */
	j.max_steps = (uint64_t)len * 256 + (1u << 20);
	j.c_string = j.c_stacktrace = j.c_method = j.c_class = UINT32_MAX;
	if (!strobe_jfr_is(buf, len))
		return strobe_errf(err, -EINVAL, "%s: byte 0: not a JFR file (no \"FLR\\0\" magic)",
				   j.name);
	if (!(j.p = strobe_profile_new()))
		return strobe_errf(err, -ENOMEM, "%s: out of memory", j.name);
	int r = 0;
	int64_t first_ns = 0, last_ns = 0;
	/* Two passes over the file: which kinds occur decides the columns before any sample. */
	for (int pass = 0; pass < 2 && r == 0; pass++) {
		if (pass == 1 && (r = set_columns(&j)) < 0) {
			r = oom(&j, 0);
			break;
		}
		for (size_t at = 0; at < len && r == 0;) {
			chunk c = {0};
			if ((r = chunk_header(&j, at, &c)) < 0)
				break;
			chunk_reset(&j);
			j.cstart = c.start;
			j.cend = c.end;
			j.compressed = c.compressed;
			j.ticks_per_sec = c.tps;
			if ((r = read_metadata(&j, c.meta)) < 0)
				break;
			if (pass == 1 && !j.p->ntypes)
				break;
			/* Pass 1 needs the pools again: they were dropped with the chunk. */
			if ((r = chunk_events(&j, &c, 0)) < 0)
				break;
			if (pass == 1 && (r = chunk_events(&j, &c, 1)) < 0)
				break;
			if (pass == 0) {
				if (!first_ns || (c.start_ns > 0 && c.start_ns < first_ns))
					first_ns = c.start_ns;
				int64_t e;
				if (!__builtin_add_overflow(c.start_ns, c.dur_ns, &e) && e > last_ns)
					last_ns = e;
			}
			at = c.end;
		}
	}
	chunk_reset(&j);
	if (r < 0) {
		strobe_profile_free(j.p);
		return r;
	}
	if (!j.p->ntypes) {
		strobe_profile_free(j.p);
		return strobe_errf(err, -EINVAL,
				   "%s: no execution, allocation or lock events in this JFR (record "
				   "with settings=profile, or async-profiler's jfr output)",
				   j.name);
	}
	j.p->time_nanos = first_ns;
	j.p->duration_nanos = last_ns > first_ns ? last_ns - first_ns : 0;
	*out = j.p;
	return 0;
}

/* ---- pyroscope-java's labels ------------------------------------------------------------------- */

static int ctx_sort(const void *a, const void *b)
{
	int64_t x = ((const strobe_jfr_context *)a)->id, y = ((const strobe_jfr_context *)b)->id;
	return x < y ? -1 : x > y;
}

static const char *snap_string(const LabelsSnapshot *s, int64_t id)
{
	for (size_t i = 0; i < s->n_strings; i++)
		if (s->strings[i]->key == id)
			return s->strings[i]->value ? s->strings[i]->value : "";
	return NULL;
}

void strobe_jfr_labels_free(strobe_jfr_labels *ls)
{
	if (!ls)
		return;
	free(ls->contexts);
	free(ls->labels_);
	if (ls->msg_)
		labels_snapshot__free_unpacked(ls->msg_, NULL);
	memset(ls, 0, sizeof(*ls));
}

int strobe_jfr_labels_decode(const uint8_t *buf, size_t len, strobe_jfr_labels *out,
			     strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	LabelsSnapshot *s = labels_snapshot__unpack(NULL, len, buf);
	if (!s)
		return strobe_errf(err, -EINVAL, "labels: not a LabelsSnapshot protobuf");
	out->msg_ = s;
	size_t nlab = 0;
	for (size_t i = 0; i < s->n_contexts; i++)
		if (s->contexts[i]->value)
			nlab += s->contexts[i]->value->n_labels;
	strobe_jfr_context *c = out->contexts = calloc(s->n_contexts + 1, sizeof(*c));
	strobe_jfr_label *l = out->labels_ = calloc(nlab + 1, sizeof(*l));
	if (!c || !l) {
		strobe_jfr_labels_free(out);
		return strobe_errf(err, -ENOMEM, "labels: out of memory");
	}
	size_t k = 0;
	for (size_t i = 0; i < s->n_contexts; i++) {
		const Context *x = s->contexts[i]->value;
		c[i].id = s->contexts[i]->key;
		c[i].labels = l + k;
		for (size_t m = 0; x && m < x->n_labels; m++) {
			const char *name = snap_string(s, x->labels[m]->key);
			const char *value = snap_string(s, x->labels[m]->value);
			if (!name || !value || !*name) {
				int64_t bad = !name || !*name ? x->labels[m]->key : x->labels[m]->value;
				int64_t id = c[i].id;
				strobe_jfr_labels_free(out);
				return strobe_errf(err, -EINVAL,
						   "labels: context %lld names string %lld, which the "
						   "string table lacks or holds empty",
						   (long long)id, (long long)bad);
			}
			l[k++] = (strobe_jfr_label){name, value};
			c[i].nlabels++;
		}
	}
	qsort(c, s->n_contexts, sizeof(*c), ctx_sort);
	for (size_t i = 1; i < s->n_contexts; i++)
		if (c[i].id == c[i - 1].id) {
			int64_t id = c[i].id;
			strobe_jfr_labels_free(out);
			return strobe_errf(err, -EINVAL, "labels: context %lld appears twice",
					   (long long)id);
		}
	out->n = s->n_contexts;
	return 0;
}
