// SPDX-License-Identifier: Apache-2.0
/*
 * The pprof codec: profile.proto <-> the profile model, through protobuf-c.
 *
 * Decoding trusts nothing: every string index, every id a sample or location names, and every
 * value count is checked, and a violation is an error that says which entity and which id, so a
 * corrupt upload is rejected with a reason rather than half-read. The rules are those of the
 * reference reader (github.com/google/pprof/profile: postDecode + CheckValid), made stricter
 * where it silently drops a dangling reference: a profile strobe accepts is one `go tool pprof`
 * accepts, and so is everything strobe writes from it. pprof ids are arbitrary uint64s; they are
 * mapped to the model's dense ids through an interning table keyed by the id.
 *
 * Encoding writes the model's tables as they are: model ids become pprof ids (dense, from 1),
 * the string table is the model's in id order (index 0 is ""), location lists are leaf first.
 *
 * Strings are carried with their exact length both ways (protobuf-c itself hands strings out as
 * NUL-terminated C strings, which would cut a label value with a NUL byte in it short), so a
 * profile read and written again keeps every byte of every string.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.pb-c.h"
#include "strobe/codec.h"
#include "strobe/pprof_view.h"
#include "strobe/wire.h"

typedef Perftools__Profiles__Profile PbProfile;

/* Profile.string_table is field 6, length-delimited: tag (6 << 3) | 2. */
#define STRING_TABLE_TAG 0x32u

typedef struct span {
	const uint8_t *p;
	size_t len;
} span;

/* pprof ids of one table -> model ids. Writers number their entities 1..n in table order (Go's
 * runtime and strobe both do), and then the pb index is id - 1 with no lookup at all: that is
 * half the hashing of a decode, one lookup per frame of every sample. Any other numbering goes
 * through the interning table. */
typedef struct idmap {
	strobe_itab ids;   /* pprof id -> index in the pb array */
	uint32_t *model;   /* index in the pb array -> model id */
	size_t n;          /* entities registered so far */
	bool dense;        /* so far, entity i has id i + 1 */
} idmap;

typedef struct dec {
	const PbProfile *pb;
	strobe_profile *p;
	const char *name;
	strobe_err *err;
	uint32_t *str;        /* pprof string index -> model string id */
	idmap fn, map, loc;
	/* The view (strobe_pprof_view_open): strings are interned into the header model only
	 * when something refers to them (str[i] == UINT32_MAX: not yet), from these spans. */
	const span *lazy;
} dec;

/* -EINVAL with "<name>: invalid pprof: <what>". */
__attribute__((format(printf, 2, 3))) static int bad(dec *d, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return strobe_errf(d->err, -EINVAL, "%s: invalid pprof: %s", d->name, msg);
}

/* A string index as a model string id, or UINT32_MAX (after setting the error) when out of
 * range. `what` and `which` name the entity for the message, `field` its field. */
static uint32_t sref(dec *d, int64_t idx, const char *what, size_t which, const char *field)
{
	if (idx < 0 || (uint64_t)idx >= d->pb->n_string_table) {
		bad(d, "%s %zu refers to string %lld (%s), outside the string table of %zu", what,
		    which, (long long)idx, field, d->pb->n_string_table);
		return UINT32_MAX;
	}
	if (d->lazy && d->str[idx] == UINT32_MAX) {
		d->str[idx] = strobe_str_intern(d->p, (const char *)d->lazy[idx].p, d->lazy[idx].len);
		if (d->str[idx] == UINT32_MAX) /* out of memory: the view gives up, see there */
			bad(d, "out of memory");
	}
	return d->str[idx];
}

/* Model id of the entity with pprof id `id` (0 = none), or UINT32_MAX after an error. */
static uint32_t idref(dec *d, const idmap *m, uint64_t id, const char *what, size_t which,
		      const char *target)
{
	if (id == 0)
		return 0;
	uint32_t i;
	if (m->dense)
		i = id <= m->n ? (uint32_t)(id - 1) : UINT32_MAX;
	else
		i = strobe_itab_find(&m->ids, &id, sizeof(id));
	if (i == UINT32_MAX) {
		bad(d, "%s %zu refers to %s id %llu that does not exist", what, which, target,
		    (unsigned long long)id);
		return UINT32_MAX;
	}
	return m->model[i];
}

/* Registers the pprof id of entity i (registered in order) of a table; ids must be non-zero
 * and unique. The interning table is filled only once the numbering stops being dense. */
static int add_id(dec *d, idmap *m, uint64_t id, const char *what, size_t i)
{
	uint32_t got;
	bool added;
	if (id == 0)
		return bad(d, "%s %zu has id 0 (ids start at 1)", what, i);
	if (m->dense && id == i + 1) {
		m->n = i + 1;
		return 0;
	}
	if (m->dense) { /* first id out of line: the ones before it go into the table now */
		m->dense = false;
		for (uint64_t k = 1; k <= i; k++) {
			int r = strobe_itab_intern(&m->ids, &k, sizeof(k), &got, NULL);
			if (r < 0)
				return r;
		}
	}
	int r = strobe_itab_intern(&m->ids, &id, sizeof(id), &got, &added);
	if (r < 0)
		return r;
	if (!added)
		return bad(d, "%s %zu repeats id %llu", what, i, (unsigned long long)id);
	m->n = i + 1;
	return 0;
}

/* ---- the string table with exact lengths ---------------------------------------------------- */

/* Finds the n string_table entries among the message's top-level fields. Runs only on a buffer
 * protobuf-c has already accepted, so a walk that disagrees with it (-EINVAL) means "use what
 * protobuf-c gave", never a rejection. */
static int string_spans(const uint8_t *b, size_t len, span *out, size_t n)
{
	strobe_wire r = {b, b + len}, sub;
	size_t k = 0;
	while (r.p < r.end) {
		uint32_t num, wt;
		uint64_t v;
		if (!strobe_wire_field(&r, &num, &wt, &v, &sub))
			return -EINVAL;
		if (wt == STROBE_WIRE_LEN && ((uint64_t)num << 3 | wt) == STRING_TABLE_TAG) {
			if (k == n)
				return -EINVAL;
			out[k++] = (span){sub.p, (size_t)v};
		}
	}
	return k == n ? 0 : -EINVAL;
}

/* ---- decoding ------------------------------------------------------------------------------- */

static int decode_strings(dec *d, const uint8_t *buf, size_t len)
{
	const PbProfile *pb = d->pb;
	/* Go's reader refuses a profile without the leading "", and every profile refers to
	 * string 0 (drop_frames and friends default to it), so an empty table is no profile. */
	if (!pb->n_string_table)
		return bad(d, "the string table is empty (string_table[0] must be the empty string)");
	span *sp = malloc(pb->n_string_table * sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	if (string_spans(buf, len, sp, pb->n_string_table) < 0)
		for (size_t i = 0; i < pb->n_string_table; i++)
			sp[i] = (span){(const uint8_t *)pb->string_table[i],
				       strlen(pb->string_table[i])};
	if (sp[0].len != 0) {
		free(sp);
		return bad(d, "string_table[0] must be the empty string");
	}
	int r = 0;
	for (size_t i = 0; i < pb->n_string_table; i++) {
		if (sp[i].len > STROBE_MAX_INPUT) { /* cannot happen; keeps the cast honest */
			r = -EINVAL;
			break;
		}
		d->str[i] = strobe_str_intern(d->p, (const char *)sp[i].p, sp[i].len);
		if (d->str[i] == UINT32_MAX) {
			r = -ENOMEM;
			break;
		}
	}
	free(sp);
	return r;
}

/* Functions, mappings and locations, in dependency order. */
static int decode_tables(dec *d)
{
	const PbProfile *pb = d->pb;
	strobe_profile *p = d->p;
	int r;
	for (size_t i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];
		if ((r = add_id(d, &d->fn, f->id, "function", i)) < 0)
			return r;
		strobe_function m = {0};
		if ((m.name = sref(d, f->name, "function", i, "name")) == UINT32_MAX ||
		    (m.system_name = sref(d, f->system_name, "function", i, "system_name")) ==
			    UINT32_MAX ||
		    (m.filename = sref(d, f->filename, "function", i, "filename")) == UINT32_MAX)
			return -EINVAL;
		m.start_line = f->start_line;
		if ((d->fn.model[i] = strobe_function_intern(p, &m)) == UINT32_MAX)
			return -ENOMEM;
	}
	for (size_t i = 0; i < pb->n_mapping; i++) {
		const Perftools__Profiles__Mapping *mp = pb->mapping[i];
		if ((r = add_id(d, &d->map, mp->id, "mapping", i)) < 0)
			return r;
		strobe_mapping m = {.start = mp->memory_start, .limit = mp->memory_limit,
				    .offset = mp->file_offset,
				    .has_functions = mp->has_functions != 0,
				    .has_filenames = mp->has_filenames != 0,
				    .has_line_numbers = mp->has_line_numbers != 0,
				    .has_inline_frames = mp->has_inline_frames != 0};
		if ((m.filename = sref(d, mp->filename, "mapping", i, "filename")) == UINT32_MAX ||
		    (m.build_id = sref(d, mp->build_id, "mapping", i, "build_id")) == UINT32_MAX)
			return -EINVAL;
		if ((d->map.model[i] = strobe_mapping_intern(p, &m)) == UINT32_MAX)
			return -ENOMEM;
	}
	/* Locations. Their lines go through one buffer sized for the largest. */
	size_t maxline = 0;
	for (size_t i = 0; i < pb->n_location; i++)
		if (pb->location[i]->n_line > maxline)
			maxline = pb->location[i]->n_line;
	if (maxline > STROBE_MAX_DEPTH)
		maxline = STROBE_MAX_DEPTH; /* a longer one is rejected below */
	strobe_line *lines = malloc((maxline + 1) * sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	r = 0;
	for (size_t i = 0; i < pb->n_location && !r; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		uint32_t mapping;
		if ((r = add_id(d, &d->loc, l->id, "location", i)) < 0)
			break;
		if ((mapping = idref(d, &d->map, l->mapping_id, "location", i,
				     "mapping")) == UINT32_MAX) {
			r = -EINVAL;
			break;
		}
		if (l->n_line > STROBE_MAX_DEPTH) {
			r = bad(d, "location %zu has %zu lines (inlined frames; limit %u)", i,
				l->n_line, STROBE_MAX_DEPTH);
			break;
		}
		for (size_t j = 0; j < l->n_line && !r; j++) {
			memset(&lines[j], 0, sizeof(lines[j]));
			/* A line without a function is one Go's reader rejects ("a line with nil
			 * function"): refuse it here rather than write it out again. */
			if (l->line[j]->function_id == 0) {
				r = bad(d, "location %zu line %zu has no function (function id 0)", i,
					j);
				break;
			}
			lines[j].function = idref(d, &d->fn, l->line[j]->function_id,
						  "location", i, "function");
			if (lines[j].function == UINT32_MAX)
				r = -EINVAL;
			lines[j].line = l->line[j]->line;
			lines[j].column = l->line[j]->column;
			lines[j].discriminator = l->line[j]->discriminator;
		}
		if (!r && (d->loc.model[i] = strobe_location_intern(p, mapping, l->address, lines,
							       (uint32_t)l->n_line,
							       l->is_folded)) == UINT32_MAX)
			r = -ENOMEM;
	}
	free(lines);
	return r;
}

static int decode_samples(dec *d)
{
	const PbProfile *pb = d->pb;
	strobe_profile *p = d->p;
	strobe_label *labels = NULL;
	size_t labels_cap = 0;
	/* The previous sample's frames root first and the stack id of each prefix: consecutive
	 * samples mostly share their outer frames (main, the thread's entry, the runtime), and a
	 * shared prefix needs no lookup in the stack table, the costliest step of a decode. */
	uint32_t *prev_loc = malloc(2 * STROBE_MAX_DEPTH * sizeof(*prev_loc));
	uint32_t *prev_stack = prev_loc + STROBE_MAX_DEPTH;
	size_t prev_depth = 0;
	if (!prev_loc)
		return -ENOMEM;
	int r = 0;
	for (size_t i = 0; i < pb->n_sample && !r; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		if (s->n_value != p->ntypes) {
			r = bad(d, "sample %zu has %zu values for %u sample types", i, s->n_value,
				p->ntypes);
			break;
		}
		if (s->n_location_id > STROBE_MAX_DEPTH) {
			r = bad(d, "sample %zu is %zu frames deep (limit %u)", i, s->n_location_id,
				STROBE_MAX_DEPTH);
			break;
		}
		/* pprof lists the leaf first; the stack tree is built from the root down. */
		uint32_t stack = 0;
		bool shared = true;
		for (size_t j = s->n_location_id, k = 0; j-- > 0; k++) {
			uint64_t id = s->location_id[j];
			if (id == 0) {
				r = bad(d, "sample %zu refers to location id 0", i);
				break;
			}
			uint32_t loc = idref(d, &d->loc, id, "sample", i, "location");
			if (loc == UINT32_MAX) {
				r = -EINVAL;
				break;
			}
			if (shared && k < prev_depth && prev_loc[k] == loc) {
				stack = prev_stack[k];
				continue;
			}
			shared = false;
			if ((stack = strobe_stack_push(p, stack, loc)) == UINT32_MAX) {
				r = -ENOMEM;
				break;
			}
			prev_loc[k] = loc;
			prev_stack[k] = stack;
		}
		prev_depth = r ? 0 : s->n_location_id;
		if (r)
			break;
		if (s->n_label > labels_cap) {
			labels_cap = s->n_label * 2;
			free(labels);
			if (!(labels = malloc(labels_cap * sizeof(*labels)))) {
				r = -ENOMEM;
				break;
			}
		}
		for (size_t j = 0; j < s->n_label; j++) {
			const Perftools__Profiles__Label *l = s->label[j];
			memset(&labels[j], 0, sizeof(labels[j]));
			if ((labels[j].key = sref(d, l->key, "sample", i, "label key")) ==
				    UINT32_MAX ||
			    (labels[j].str = sref(d, l->str, "sample", i, "label str")) ==
				    UINT32_MAX ||
			    (labels[j].num_unit = sref(d, l->num_unit, "sample", i,
						       "label num_unit")) == UINT32_MAX) {
				r = -EINVAL;
				break;
			}
			labels[j].num = l->num;
		}
		if (r)
			break;
		uint32_t ls = strobe_labelset_intern(p, labels, (uint32_t)s->n_label);
		if (ls == UINT32_MAX) {
			r = -ENOMEM;
			break;
		}
		r = strobe_sample_add(p, stack, ls, s->value);
	}
	free(prev_loc);
	free(labels);
	return r;
}

/* Sample types, period, comments and the other scalars of the Profile message. */
static int decode_header(dec *d)
{
	const PbProfile *pb = d->pb;
	strobe_profile *p = d->p;
	if (pb->n_sample && !pb->n_sample_type)
		return bad(d, "%zu samples but no sample types", pb->n_sample);
	if (pb->n_sample_type > UINT32_MAX / 2)
		return bad(d, "%zu sample types", pb->n_sample_type);
	strobe_value_type *vt = malloc((pb->n_sample_type + 1) * sizeof(*vt));
	if (!vt)
		return -ENOMEM;
	for (size_t i = 0; i < pb->n_sample_type; i++)
		if ((vt[i].type = sref(d, pb->sample_type[i]->type, "sample_type", i, "type")) ==
			    UINT32_MAX ||
		    (vt[i].unit = sref(d, pb->sample_type[i]->unit, "sample_type", i, "unit")) ==
			    UINT32_MAX) {
			free(vt);
			return -EINVAL;
		}
	int r = strobe_profile_set_types(p, vt, (uint32_t)pb->n_sample_type);
	free(vt);
	if (r < 0)
		return r;
	if (pb->period_type &&
	    ((p->period_type.type = sref(d, pb->period_type->type, "period_type", 0, "type")) ==
		     UINT32_MAX ||
	     (p->period_type.unit = sref(d, pb->period_type->unit, "period_type", 0, "unit")) ==
		     UINT32_MAX))
		return -EINVAL;
	uint32_t dst;
	if ((p->drop_frames = sref(d, pb->drop_frames, "profile", 0, "drop_frames")) ==
		    UINT32_MAX ||
	    (p->keep_frames = sref(d, pb->keep_frames, "profile", 0, "keep_frames")) ==
		    UINT32_MAX ||
	    (dst = sref(d, pb->default_sample_type, "profile", 0, "default_sample_type")) ==
		    UINT32_MAX)
		return -EINVAL;
	/* Stored as an index into types; a name no type has is as good as none (pprof falls
	 * back to the last type then too). */
	p->default_type = -1;
	if (dst)
		for (uint32_t t = 0; t < p->ntypes; t++)
			if (p->types[t].type == dst) {
				p->default_type = (int32_t)t;
				break;
			}
	if (pb->n_comment) {
		if (!(p->comments = malloc(pb->n_comment * sizeof(*p->comments))))
			return -ENOMEM;
		for (size_t i = 0; i < pb->n_comment; i++) {
			if ((p->comments[i] = sref(d, pb->comment[i], "comment", i, "text")) ==
			    UINT32_MAX)
				return -EINVAL;
			p->ncomments++;
		}
	}
	p->period = pb->period;
	p->time_nanos = pb->time_nanos;
	p->duration_nanos = pb->duration_nanos;
	return 0;
}

/* protobuf-c's unpacked message is thousands of small allocations (one per sample, location,
 * line, label) freed together: an arena takes them from a few large blocks and frees those, which
 * was a fifth of the server's ingest CPU in malloc and free. */
typedef struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	_Alignas(16) unsigned char mem[];
} arena_block;

typedef struct arena {
	arena_block *head;
	size_t next_cap;
} arena;

static void *arena_alloc(void *ud, size_t size)
{
	arena *a = ud;
	size = (size + 15) & ~(size_t)15;
	arena_block *b = a->head;
	if (!b || b->cap - b->used < size) {
		size_t cap = a->next_cap > size ? a->next_cap : size;
		if (!(b = malloc(sizeof(*b) + cap)))
			return NULL;
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
		if (a->next_cap < ((size_t)64 << 20))
			a->next_cap *= 2;
	}
	void *p = b->mem + b->used;
	b->used += size;
	return p;
}

static void arena_free_one(void *ud, void *p)
{
	(void)ud;
	(void)p; /* everything goes at once in arena_release */
}

static void arena_release(arena *a)
{
	while (a->head) {
		arena_block *n = a->head->next;
		free(a->head);
		a->head = n;
	}
}

int strobe_pprof_decode(const uint8_t *buf, size_t len, const char *name, strobe_profile **out,
			strobe_err *err)
{
	dec d = {.name = name, .err = err, .fn.dense = true, .map.dense = true, .loc.dense = true};
	*out = NULL;
	/* The unpacked form is a few times the encoded size: start there. */
	arena ar = {NULL, len * 4 + 4096};
	ProtobufCAllocator alloc = {arena_alloc, arena_free_one, &ar};
	PbProfile *pb = perftools__profiles__profile__unpack(&alloc, len, buf);
	if (!pb) {
		arena_release(&ar);
		return strobe_errf(err, -EINVAL,
				   "%s: not a valid pprof profile (protobuf decode failed)", name);
	}
	d.pb = pb;
	int r = -ENOMEM;
	d.str = malloc((pb->n_string_table + 1) * sizeof(*d.str));
	d.fn.model = malloc((pb->n_function + 1) * sizeof(*d.fn.model));
	d.map.model = malloc((pb->n_mapping + 1) * sizeof(*d.map.model));
	d.loc.model = malloc((pb->n_location + 1) * sizeof(*d.loc.model));
	if (!d.str || !d.fn.model || !d.map.model || !d.loc.model || !(d.p = strobe_profile_new()))
		goto out;
	if ((r = decode_strings(&d, buf, len)) < 0 || (r = decode_header(&d)) < 0 ||
	    (r = decode_tables(&d)) < 0)
		goto out;
	/* Size the stack and sample tables once: at most one stack node per location id. */
	size_t nodes = 1;
	for (size_t i = 0; i < pb->n_sample; i++)
		nodes += pb->sample[i]->n_location_id;
	if (nodes < UINT32_MAX / 2 && pb->n_sample < UINT32_MAX / 2 &&
	    (strobe_itab_reserve(&d.p->stacks, (uint32_t)nodes, nodes * 8) < 0 ||
	     strobe_itab_reserve(&d.p->samples, (uint32_t)pb->n_sample + 1,
				 (pb->n_sample + 1) * 8) < 0)) {
		r = -ENOMEM;
		goto out;
	}
	r = decode_samples(&d);
out:
	if (r == -ENOMEM)
		strobe_errf(err, r, "%s: out of memory", name);
	arena_release(&ar); /* the unpacked message */
	free(d.str);
	free(d.fn.model);
	free(d.map.model);
	free(d.loc.model);
	strobe_itab_free(&d.fn.ids);
	strobe_itab_free(&d.map.ids);
	strobe_itab_free(&d.loc.ids);
	if (r < 0) {
		strobe_profile_free(d.p);
		return r;
	}
	*out = d.p;
	return 0;
}

/* ---- the view: checked and flattened, not interned (include/strobe/pprof_view.h) -------- */

typedef struct view_mem {
	strobe_pprof_view v;
	arena ar;
	span *sp;
	strobe_pprof_str *str;
	strobe_function *fns;
	strobe_mapping *maps;
	strobe_pprof_loc *locs;
	strobe_line *lines;
	uint32_t *soff, *sloc;
	int64_t *values;
} view_mem;

/* A string index of the view: checked, not interned (the store interns what it uses). */
static bool sok(const dec *d, int64_t idx)
{
	return idx >= 0 && (uint64_t)idx < d->pb->n_string_table;
}

void strobe_pprof_view_free(strobe_pprof_view *v)
{
	if (!v)
		return;
	view_mem *m = v->priv_;
	arena_release(&m->ar);
	strobe_profile_free(v->hdr);
	free(m->sp);
	free(m->str);
	free(m->fns);
	free(m->maps);
	free(m->locs);
	free(m->lines);
	free(m->soff);
	free(m->sloc);
	free(m->values);
	free(m);
}

/* The checks of decode_tables and decode_samples, in the same order of entities; every id
 * becomes a 1-based index into the view's arrays (0 = none). */
static int view_tables(dec *d, view_mem *m)
{
	const PbProfile *pb = d->pb;
	int r;
	for (size_t i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];
		if ((r = add_id(d, &d->fn, f->id, "function", i)) < 0)
			return r;
		if (!sok(d, f->name) || !sok(d, f->system_name) || !sok(d, f->filename))
			return -EINVAL;
		m->fns[i] = (strobe_function){.name = (uint32_t)f->name,
					      .system_name = (uint32_t)f->system_name,
					      .filename = (uint32_t)f->filename,
					      .start_line = f->start_line};
		d->fn.model[i] = (uint32_t)i + 1;
	}
	for (size_t i = 0; i < pb->n_mapping; i++) {
		const Perftools__Profiles__Mapping *mp = pb->mapping[i];
		if ((r = add_id(d, &d->map, mp->id, "mapping", i)) < 0)
			return r;
		if (!sok(d, mp->filename) || !sok(d, mp->build_id))
			return -EINVAL;
		m->maps[i] = (strobe_mapping){.start = mp->memory_start, .limit = mp->memory_limit,
					      .offset = mp->file_offset,
					      .filename = (uint32_t)mp->filename,
					      .build_id = (uint32_t)mp->build_id,
					      .has_functions = mp->has_functions != 0,
					      .has_filenames = mp->has_filenames != 0,
					      .has_line_numbers = mp->has_line_numbers != 0,
					      .has_inline_frames = mp->has_inline_frames != 0};
		d->map.model[i] = (uint32_t)i + 1;
	}
	uint32_t nl = 0;
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		if ((r = add_id(d, &d->loc, l->id, "location", i)) < 0)
			return r;
		uint32_t mapping = idref(d, &d->map, l->mapping_id, "location", i, "mapping");
		if (mapping == UINT32_MAX || l->n_line > STROBE_MAX_DEPTH)
			return -EINVAL;
		m->locs[i] = (strobe_pprof_loc){.address = l->address, .mapping = mapping,
						.line0 = nl, .nline = (uint32_t)l->n_line,
						.is_folded = l->is_folded != 0};
		for (size_t j = 0; j < l->n_line; j++, nl++) {
			uint32_t fn = l->line[j]->function_id == 0
					      ? UINT32_MAX
					      : idref(d, &d->fn, l->line[j]->function_id,
						      "location", i, "function");
			if (fn == UINT32_MAX)
				return -EINVAL;
			m->lines[nl] = (strobe_line){.function = fn,
						     .discriminator = l->line[j]->discriminator,
						     .line = l->line[j]->line,
						     .column = l->line[j]->column};
		}
		d->loc.model[i] = (uint32_t)i + 1;
	}
	uint32_t nt = m->v.hdr->ntypes, k = 0;
	for (size_t i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		if (s->n_value != nt || s->n_location_id > STROBE_MAX_DEPTH)
			return -EINVAL;
		m->soff[i] = k;
		for (size_t j = 0; j < s->n_location_id; j++) {
			uint64_t id = s->location_id[j];
			/* Dense ids (Go's) are their own 1-based index: no call per frame. */
			uint32_t loc = d->loc.dense && id - 1 < d->loc.n ? (uint32_t)id
				       : id == 0 ? UINT32_MAX
						 : idref(d, &d->loc, id, "sample", i, "location");
			if (loc == UINT32_MAX)
				return -EINVAL;
			m->sloc[k++] = loc;
		}
		for (size_t j = 0; j < s->n_label; j++)
			if (!sok(d, s->label[j]->key) || !sok(d, s->label[j]->str) ||
			    !sok(d, s->label[j]->num_unit))
				return -EINVAL;
		if (s->n_label)
			m->v.simple = false;
		if (nt)
			memcpy(m->values + i * nt, s->value, nt * sizeof(*m->values));
	}
	m->soff[pb->n_sample] = k;
	return 0;
}

/* ---- the view's reader for the usual encoding ------------------------------------------------
 *
 * protobuf-c's generic unpacking was a quarter of the server's CPU per push once the double
 * intern was gone. This reads the encoding every pprof writer produces (Go's runtime, pprof,
 * strobe: packed repeated scalars, known fields, each singular message once) straight into the
 * same generated structs, allocated from the same arena, so everything after it is the same
 * code. Anything else, and anything it does not like, answers -EAGAIN and protobuf-c reads the
 * buffer instead: it stays the reference, and fuzz_pprof checks that both agree. */

/* The varints of a packed field: as many as bytes without the continuation bit. */
static size_t packed_count(strobe_wire s)
{
	size_t n = 0;
	for (const uint8_t *p = s.p; p < s.end; p++)
		n += !(*p & 0x80);
	return n;
}

static bool rd_packed(strobe_wire s, uint64_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strobe_wire_varint(&s, &out[i]))
			return false;
	return s.p == s.end;
}

/* Fields 1..n of a message of varint fields only, into vals[1..n]. */
static bool rd_scalars(strobe_wire s, uint64_t *vals, unsigned n)
{
	while (s.p < s.end) {
		uint64_t k, x;
		if (!strobe_wire_key(&s, &k) || (k & 7) != 0 || (k >> 3) < 1 || (k >> 3) > n ||
		    !strobe_wire_varint(&s, &x))
			return false;
		vals[k >> 3] = x;
	}
	return true;
}

/* A Line: fields 1-3 as rd_scalars, and strobe's discriminator (field 100, a uint32: a larger
 * value is left to protobuf-c, which reads it as the schema's uint32 says). */
static bool rd_line(strobe_wire s, uint64_t *vals, uint64_t *disc)
{
	while (s.p < s.end) {
		uint64_t k, x;
		if (!strobe_wire_key(&s, &k) || (k & 7) != 0 || !strobe_wire_varint(&s, &x))
			return false;
		if ((k >> 3) == 100 && x <= UINT32_MAX)
			*disc = x;
		else if ((k >> 3) >= 1 && (k >> 3) <= 3)
			vals[k >> 3] = x;
		else
			return false;
	}
	return true;
}

static int fast_sample(strobe_wire s, arena *a, Perftools__Profiles__Sample *o)
{
	strobe_wire locs = {0}, vals = {0};
	bool hl = false, hv = false;
	while (s.p < s.end) {
		uint64_t k;
		strobe_wire sub;
		if (!strobe_wire_key(&s, &k) || (k & 7) != 2 || !strobe_wire_bytes(&s, &sub))
			return -EAGAIN;
		if ((k >> 3) == 1 && !hl)
			locs = sub, hl = true;
		else if ((k >> 3) == 2 && !hv)
			vals = sub, hv = true;
		else
			return -EAGAIN; /* labels, or a field given twice */
	}
	o->n_location_id = packed_count(locs);
	o->n_value = packed_count(vals);
	o->location_id = arena_alloc(a, (o->n_location_id + 1) * sizeof(uint64_t));
	o->value = arena_alloc(a, (o->n_value + 1) * sizeof(int64_t));
	if (!o->location_id || !o->value)
		return -ENOMEM;
	return rd_packed(locs, o->location_id, o->n_location_id) &&
			       rd_packed(vals, (uint64_t *)o->value, o->n_value)
		       ? 0
		       : -EAGAIN;
}

static int fast_location(strobe_wire s, arena *a, Perftools__Profiles__Location *o)
{
	size_t nl = 0;
	for (strobe_wire c = s; c.p < c.end;) {
		uint64_t k, x;
		strobe_wire sub;
		if (!strobe_wire_key(&c, &k))
			return -EAGAIN;
		if ((k >> 3) == 4 && (k & 7) == 2) {
			if (!strobe_wire_bytes(&c, &sub))
				return -EAGAIN;
			nl++;
		} else if ((k >> 3) >= 1 && (k >> 3) <= 5 && (k >> 3) != 4 && (k & 7) == 0) {
			if (!strobe_wire_varint(&c, &x))
				return -EAGAIN;
			if ((k >> 3) == 1)
				o->id = x;
			else if ((k >> 3) == 2)
				o->mapping_id = x;
			else if ((k >> 3) == 3)
				o->address = x;
			else
				o->is_folded = x != 0;
		} else {
			return -EAGAIN;
		}
	}
	o->n_line = nl;
	o->line = arena_alloc(a, (nl + 1) * sizeof(*o->line));
	Perftools__Profiles__Line *lines = arena_alloc(a, (nl + 1) * sizeof(*lines));
	if (!o->line || !lines)
		return -ENOMEM;
	size_t i = 0;
	while (s.p < s.end) {
		uint64_t k = 0, x = 0;
		strobe_wire sub = {0}; /* set below; gcc cannot see it through rd_line */
		strobe_wire_key(&s, &k); /* checked above */
		if ((k & 7) == 0) {
			strobe_wire_varint(&s, &x);
			continue;
		}
		strobe_wire_bytes(&s, &sub);
		uint64_t v[4] = {0}, disc = 0;
		if (!rd_line(sub, v, &disc))
			return -EAGAIN;
		lines[i] = (Perftools__Profiles__Line)PERFTOOLS__PROFILES__LINE__INIT;
		lines[i].function_id = v[1];
		lines[i].line = (int64_t)v[2];
		lines[i].column = (int64_t)v[3];
		lines[i].discriminator = (uint32_t)disc;
		o->line[i] = &lines[i];
		i++;
	}
	return 0;
}

/* The whole Profile message, or -EAGAIN for protobuf-c. *spans: the string table. */
static int fast_profile(const uint8_t *buf, size_t len, arena *a, PbProfile **out, span **spans)
{
	size_t n[16] = {0};
	bool has_pt = false;
	strobe_wire top = {buf, buf + len};
	for (strobe_wire c = top; c.p < c.end;) {
		uint64_t k, x;
		strobe_wire sub;
		if (!strobe_wire_key(&c, &k) || (k >> 3) < 1 || (k >> 3) > 15)
			return -EAGAIN;
		unsigned f = (unsigned)(k >> 3);
		if ((k & 7) == 2 && (f <= 6 || f == 11 || f == 13)) {
			if (!strobe_wire_bytes(&c, &sub))
				return -EAGAIN;
			if (f == 11 && has_pt)
				return -EAGAIN; /* protobuf-c would merge the two */
			has_pt |= f == 11;
			n[f] += f == 13 ? packed_count(sub) : 1;
		} else if ((k & 7) == 0 && f >= 7 && f != 11) {
			if (!strobe_wire_varint(&c, &x))
				return -EAGAIN;
			n[f] += f == 13;
		} else {
			return -EAGAIN;
		}
	}
	PbProfile *pb = arena_alloc(a, sizeof(*pb));
	span *sp = arena_alloc(a, (n[6] + 1) * sizeof(*sp));
	if (!pb || !sp)
		return -ENOMEM;
	*pb = (PbProfile)PERFTOOLS__PROFILES__PROFILE__INIT;
	pb->sample_type = arena_alloc(a, (n[1] + 1) * sizeof(void *));
	pb->sample = arena_alloc(a, (n[2] + 1) * sizeof(void *));
	pb->mapping = arena_alloc(a, (n[3] + 1) * sizeof(void *));
	pb->location = arena_alloc(a, (n[4] + 1) * sizeof(void *));
	pb->function = arena_alloc(a, (n[5] + 1) * sizeof(void *));
	pb->comment = arena_alloc(a, (n[13] + 1) * sizeof(int64_t));
	Perftools__Profiles__ValueType *vts = arena_alloc(a, (n[1] + 2) * sizeof(*vts));
	Perftools__Profiles__Sample *smp = arena_alloc(a, (n[2] + 1) * sizeof(*smp));
	Perftools__Profiles__Mapping *mps = arena_alloc(a, (n[3] + 1) * sizeof(*mps));
	Perftools__Profiles__Location *lcs = arena_alloc(a, (n[4] + 1) * sizeof(*lcs));
	Perftools__Profiles__Function *fns = arena_alloc(a, (n[5] + 1) * sizeof(*fns));
	if (!pb->sample_type || !pb->sample || !pb->mapping || !pb->location || !pb->function ||
	    !pb->comment || !vts || !smp || !mps || !lcs || !fns)
		return -ENOMEM;
	int r = 0;
	for (strobe_wire c = top; r == 0 && c.p < c.end;) {
		uint64_t k = 0, x = 0, v[11];
		strobe_wire sub;
		strobe_wire_key(&c, &k); /* the first pass checked the framing */
		unsigned f = (unsigned)(k >> 3);
		if ((k & 7) == 0) {
			strobe_wire_varint(&c, &x);
			switch (f) {
			case 7: pb->drop_frames = (int64_t)x; break;
			case 8: pb->keep_frames = (int64_t)x; break;
			case 9: pb->time_nanos = (int64_t)x; break;
			case 10: pb->duration_nanos = (int64_t)x; break;
			case 12: pb->period = (int64_t)x; break;
			case 13: pb->comment[pb->n_comment++] = (int64_t)x; break;
			case 14: pb->default_sample_type = (int64_t)x; break;
			case 15: pb->doc_url = (int64_t)x; break;
			}
			continue;
		}
		strobe_wire_bytes(&c, &sub);
		/* ValueType, Mapping and Function hold only scalars: fields 1..nscalar[f] into v[] */
		static const unsigned nscalar[16] = {[1] = 2, [3] = 10, [5] = 5, [11] = 2};
		if (f < 16 && nscalar[f]) {
			memset(v, 0, sizeof(v));
			if (!rd_scalars(sub, v, nscalar[f])) {
				r = -EAGAIN;
				break;
			}
		}
		switch (f) {
		case 1:
		case 11: {
			Perftools__Profiles__ValueType *o = f == 1 ? &vts[pb->n_sample_type] : &vts[n[1]];
			*o = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
			o->type = (int64_t)v[1];
			o->unit = (int64_t)v[2];
			if (f == 1)
				pb->sample_type[pb->n_sample_type++] = o;
			else
				pb->period_type = o;
			break;
		}
		case 2: {
			Perftools__Profiles__Sample *o = &smp[pb->n_sample];
			*o = (Perftools__Profiles__Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
			r = fast_sample(sub, a, o);
			pb->sample[pb->n_sample++] = o;
			break;
		}
		case 3: {
			Perftools__Profiles__Mapping *o = &mps[pb->n_mapping];
			*o = (Perftools__Profiles__Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
			o->id = v[1];
			o->memory_start = v[2];
			o->memory_limit = v[3];
			o->file_offset = v[4];
			o->filename = (int64_t)v[5];
			o->build_id = (int64_t)v[6];
			o->has_functions = v[7] != 0;
			o->has_filenames = v[8] != 0;
			o->has_line_numbers = v[9] != 0;
			o->has_inline_frames = v[10] != 0;
			pb->mapping[pb->n_mapping++] = o;
			break;
		}
		case 4: {
			Perftools__Profiles__Location *o = &lcs[pb->n_location];
			*o = (Perftools__Profiles__Location)PERFTOOLS__PROFILES__LOCATION__INIT;
			r = fast_location(sub, a, o);
			pb->location[pb->n_location++] = o;
			break;
		}
		case 5: {
			Perftools__Profiles__Function *o = &fns[pb->n_function];
			*o = (Perftools__Profiles__Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
			o->id = v[1];
			o->name = (int64_t)v[2];
			o->system_name = (int64_t)v[3];
			o->filename = (int64_t)v[4];
			o->start_line = (int64_t)v[5];
			pb->function[pb->n_function++] = o;
			break;
		}
		case 6:
			sp[pb->n_string_table++] = (span){sub.p, (size_t)(sub.end - sub.p)};
			break;
		case 13: {
			size_t cn = packed_count(sub);
			if (!rd_packed(sub, (uint64_t *)pb->comment + pb->n_comment, cn))
				r = -EAGAIN;
			pb->n_comment += cn;
			break;
		}
		}
	}
	if (r < 0)
		return r;
	*out = pb;
	*spans = sp;
	return 0;
}

static int view_open(const uint8_t *buf, size_t len, bool fast, strobe_pprof_view **out);

static strobe_pprof_view *view_opened(int r, strobe_pprof_view *v)
{
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	return v;
}

strobe_pprof_view *strobe_pprof_view_open(const uint8_t *buf, size_t len)
{
	strobe_pprof_view *v;
	int r = view_open(buf, len, true, &v);
	return view_opened(r, v);
}

strobe_pprof_view *strobe_pprof_view_open_pbc(const uint8_t *buf, size_t len)
{
	strobe_pprof_view *v;
	int r = view_open(buf, len, false, &v);
	return view_opened(r, v);
}

static int view_open(const uint8_t *buf, size_t len, bool fast, strobe_pprof_view **out)
{
	*out = NULL;
	view_mem *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->v.priv_ = m;
	m->ar = (arena){NULL, len * 4 + 4096};
	strobe_err err; /* the decoder says why, if asked */
	dec d = {.name = "", .err = &err, .fn.dense = true, .map.dense = true, .loc.dense = true};
	ProtobufCAllocator alloc = {arena_alloc, arena_free_one, &m->ar};
	PbProfile *fpb = NULL;
	span *fsp = NULL;
	int r = fast ? fast_profile(buf, len, &m->ar, &fpb, &fsp) : -EAGAIN;
	if (r == -ENOMEM) {
		strobe_pprof_view_free(&m->v);
		return r;
	}
	if (r < 0) { /* protobuf-c reads it, in a fresh arena */
		arena_release(&m->ar);
		m->ar = (arena){NULL, len * 4 + 4096};
		fpb = NULL;
	}
	const PbProfile *pb = fpb ? fpb : perftools__profiles__profile__unpack(&alloc, len, buf);
	r = -EINVAL;
	if (!pb || !pb->n_string_table || pb->n_string_table > UINT32_MAX / 2 ||
	    pb->n_function > UINT32_MAX / 2 || pb->n_mapping > UINT32_MAX / 2 ||
	    pb->n_location > UINT32_MAX / 2 || pb->n_sample > UINT32_MAX / 2)
		goto out;
	d.pb = pb;
	/* Counts are bounded by the input's length (every entry takes bytes), so these sums
	 * cannot overflow; a sample whose value count is wrong is refused before sizing. */
	size_t nl = 0, nsl = 0;
	for (size_t i = 0; i < pb->n_location; i++)
		nl += pb->location[i]->n_line;
	for (size_t i = 0; i < pb->n_sample; i++) {
		nsl += pb->sample[i]->n_location_id;
		if (pb->sample[i]->n_value != pb->n_sample_type)
			goto out;
	}
	if (nl > UINT32_MAX / 2 || nsl > UINT32_MAX / 2)
		goto out;
	r = -ENOMEM;
	size_t ns = pb->n_string_table;
	m->sp = malloc(ns * sizeof(*m->sp));
	m->str = malloc(ns * sizeof(*m->str));
	d.str = malloc(ns * sizeof(*d.str));
	d.fn.model = malloc((pb->n_function + 1) * sizeof(*d.fn.model));
	d.map.model = malloc((pb->n_mapping + 1) * sizeof(*d.map.model));
	d.loc.model = malloc((pb->n_location + 1) * sizeof(*d.loc.model));
	m->fns = malloc((pb->n_function + 1) * sizeof(*m->fns));
	m->maps = malloc((pb->n_mapping + 1) * sizeof(*m->maps));
	m->locs = malloc((pb->n_location + 1) * sizeof(*m->locs));
	m->lines = malloc((nl + 1) * sizeof(*m->lines));
	m->soff = malloc((pb->n_sample + 1) * sizeof(*m->soff));
	m->sloc = malloc((nsl + 1) * sizeof(*m->sloc));
	m->values = malloc((pb->n_sample * pb->n_sample_type + 1) * sizeof(*m->values));
	if (!m->sp || !m->str || !d.str || !d.fn.model || !d.map.model || !d.loc.model ||
	    !m->fns || !m->maps || !m->locs || !m->lines || !m->soff || !m->sloc || !m->values ||
	    !(m->v.hdr = strobe_profile_new()))
		goto out;
	if (fpb)
		memcpy(m->sp, fsp, ns * sizeof(*m->sp));
	else if (string_spans(buf, len, m->sp, ns) < 0)
		for (size_t i = 0; i < ns; i++)
			m->sp[i] = (span){(const uint8_t *)pb->string_table[i],
					  strlen(pb->string_table[i])};
	r = -EINVAL;
	if (m->sp[0].len != 0)
		goto out;
	for (size_t i = 0; i < ns; i++) {
		if (m->sp[i].len > UINT32_MAX / 2)
			goto out;
		m->str[i] = (strobe_pprof_str){(const char *)m->sp[i].p, (uint32_t)m->sp[i].len};
	}
	memset(d.str, 0xff, ns * sizeof(*d.str));
	d.str[0] = 0;
	d.lazy = m->sp;
	d.p = m->v.hdr;
	m->v.simple = true;
	if ((r = decode_header(&d)) < 0 || (r = view_tables(&d, m)) < 0)
		goto out;
	/* Go's mutex and block profiles are told apart by their leaves (strobe_profile_name):
	 * those need the model. */
	for (uint32_t t = 0; t < m->v.hdr->ntypes; t++) {
		const char *st = strobe_str(m->v.hdr, m->v.hdr->types[t].type);
		if (!strcmp(st, "contentions") || !strcmp(st, "delay"))
			m->v.simple = false;
	}
	m->v.nstr = (uint32_t)ns;
	m->v.nfn = (uint32_t)pb->n_function;
	m->v.nmap = (uint32_t)pb->n_mapping;
	m->v.nloc = (uint32_t)pb->n_location;
	m->v.nsamples = (uint32_t)pb->n_sample;
	m->v.str = m->str;
	m->v.fns = m->fns;
	m->v.maps = m->maps;
	m->v.locs = m->locs;
	m->v.lines = m->lines;
	m->v.soff = m->soff;
	m->v.sloc = m->sloc;
	m->v.values = m->values;
	r = 0;
out:
	free(d.str);
	free(d.fn.model);
	free(d.map.model);
	free(d.loc.model);
	strobe_itab_free(&d.fn.ids);
	strobe_itab_free(&d.map.ids);
	strobe_itab_free(&d.loc.ids);
	if (r < 0) {
		strobe_pprof_view_free(&m->v);
		return r == -ENOMEM ? r : -EINVAL;
	}
	*out = &m->v;
	return 0;
}

/* ---- encoding ---------------------------------------------------------------------------- */

/* The protobuf-c message (all but the string table), packed, followed by the string table
 * written by hand with each string's exact length. Field order is free in protobuf, and every
 * reader (Go's included) resolves string indices after the whole message is read. */
static int pack_with_strings(const strobe_profile *p, const PbProfile *pb, uint8_t **out,
			     size_t *outlen)
{
	size_t len = perftools__profiles__profile__get_packed_size(pb);
	for (uint32_t i = 0; i < p->strings.n; i++) {
		size_t n = strobe_str_len(p, i);
		len += 1 + strobe_wire_varint_size(n) + n;
	}
	uint8_t *raw = malloc(len ? len : 1);
	if (!raw)
		return -ENOMEM;
	uint8_t *o = raw + perftools__profiles__profile__pack(pb, raw);
	for (uint32_t i = 0; i < p->strings.n; i++) {
		size_t n = strobe_str_len(p, i);
		*o++ = STRING_TABLE_TAG;
		o = strobe_wire_put_varint(o, n);
		memcpy(o, strobe_str(p, i), n);
		o += n;
	}
	*out = raw;
	*outlen = (size_t)(o - raw);
	return 0;
}

/* What the encoder builds: protobuf-c's message tree over the model, every node and pointer
 * array allocated once for the whole profile (one malloc per kind, not per node), and freed
 * together by enc_free. */
typedef struct encoder {
	const strobe_profile *p;
	PbProfile pb;
	Perftools__Profiles__ValueType *vts, period_type;
	Perftools__Profiles__Function *fns;
	Perftools__Profiles__Mapping *maps;
	Perftools__Profiles__Location *locs;
	Perftools__Profiles__Line *lines, **line_ptrs;
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Label *labels, **label_ptrs;
	uint64_t *loc_ids;
	int64_t *comments;
} encoder;

static void enc_free(encoder *e)
{
	free(e->pb.sample_type);
	free(e->vts);
	free(e->pb.function);
	free(e->fns);
	free(e->pb.mapping);
	free(e->maps);
	free(e->pb.location);
	free(e->locs);
	free(e->lines);
	free(e->line_ptrs);
	free(e->pb.sample);
	free(e->samples);
	free(e->loc_ids);
	free(e->labels);
	free(e->label_ptrs);
	free(e->comments);
}

static int enc_types(encoder *e)
{
	const strobe_profile *p = e->p;
	e->pb.n_sample_type = p->ntypes;
	e->pb.sample_type = malloc((p->ntypes + 1) * sizeof(*e->pb.sample_type));
	e->vts = calloc(p->ntypes + 1, sizeof(*e->vts));
	if (!e->pb.sample_type || !e->vts)
		return -ENOMEM;
	for (uint32_t t = 0; t < p->ntypes; t++) {
		perftools__profiles__value_type__init(&e->vts[t]);
		e->vts[t].type = p->types[t].type;
		e->vts[t].unit = p->types[t].unit;
		e->pb.sample_type[t] = &e->vts[t];
	}
	perftools__profiles__value_type__init(&e->period_type);
	if (p->period_type.type || p->period_type.unit) {
		e->period_type.type = p->period_type.type;
		e->period_type.unit = p->period_type.unit;
		e->pb.period_type = &e->period_type;
	}
	return 0;
}

static int enc_functions(encoder *e)
{
	uint32_t nfn = e->p->functions.n - 1;
	e->pb.function = malloc((nfn + 1) * sizeof(*e->pb.function));
	e->fns = calloc(nfn + 1, sizeof(*e->fns));
	if (!e->pb.function || !e->fns)
		return -ENOMEM;
	e->pb.n_function = nfn;
	for (uint32_t i = 0; i < nfn; i++) {
		const strobe_function *f = strobe_function_get(e->p, i + 1);
		Perftools__Profiles__Function *o = &e->fns[i];
		perftools__profiles__function__init(o);
		o->id = i + 1;
		o->name = f->name;
		o->system_name = f->system_name;
		o->filename = f->filename;
		o->start_line = f->start_line;
		e->pb.function[i] = o;
	}
	return 0;
}

static int enc_mappings(encoder *e)
{
	uint32_t nmap = e->p->mappings.n - 1;
	e->pb.mapping = malloc((nmap + 1) * sizeof(*e->pb.mapping));
	e->maps = calloc(nmap + 1, sizeof(*e->maps));
	if (!e->pb.mapping || !e->maps)
		return -ENOMEM;
	e->pb.n_mapping = nmap;
	for (uint32_t i = 0; i < nmap; i++) {
		const strobe_mapping *m = strobe_mapping_get(e->p, i + 1);
		Perftools__Profiles__Mapping *o = &e->maps[i];
		perftools__profiles__mapping__init(o);
		o->id = i + 1;
		o->memory_start = m->start;
		o->memory_limit = m->limit;
		o->file_offset = m->offset;
		o->filename = m->filename;
		o->build_id = m->build_id;
		o->has_functions = m->has_functions;
		o->has_filenames = m->has_filenames;
		o->has_line_numbers = m->has_line_numbers;
		o->has_inline_frames = m->has_inline_frames;
		e->pb.mapping[i] = o;
	}
	return 0;
}

static int enc_locations(encoder *e)
{
	const strobe_profile *p = e->p;
	uint32_t nloc = p->locations.n - 1;
	size_t total_lines = 0;
	for (uint32_t i = 0; i < nloc; i++)
		total_lines += strobe_location_get(p, i + 1)->nline;
	e->pb.location = malloc((nloc + 1) * sizeof(*e->pb.location));
	e->locs = calloc(nloc + 1, sizeof(*e->locs));
	e->lines = calloc(total_lines + 1, sizeof(*e->lines));
	e->line_ptrs = malloc((total_lines + 1) * sizeof(*e->line_ptrs));
	if (!e->pb.location || !e->locs || !e->lines || !e->line_ptrs)
		return -ENOMEM;
	e->pb.n_location = nloc;
	for (uint32_t i = 0, li = 0; i < nloc; i++) {
		const strobe_location *l = strobe_location_get(p, i + 1);
		Perftools__Profiles__Location *o = &e->locs[i];
		perftools__profiles__location__init(o);
		o->id = i + 1;
		o->mapping_id = l->mapping;
		o->address = l->address;
		o->is_folded = l->is_folded;
		o->line = &e->line_ptrs[li];
		for (uint32_t j = 0; j < l->nline; j++) {
			/* Only an API caller can make a line without a function (the decoder
			 * refuses one), and Go's reader rejects the whole profile for it: leave
			 * the line out instead. */
			if (!l->line[j].function)
				continue;
			perftools__profiles__line__init(&e->lines[li]);
			e->lines[li].function_id = l->line[j].function;
			e->lines[li].line = l->line[j].line;
			e->lines[li].column = l->line[j].column;
			e->lines[li].discriminator = l->line[j].discriminator;
			e->line_ptrs[li] = &e->lines[li];
			li++;
			o->n_line++;
		}
		e->pb.location[i] = o;
	}
	return 0;
}

/* Samples: location ids leaf first, walked up the stack tree; labels from the label set. */
static int enc_samples(encoder *e)
{
	const strobe_profile *p = e->p;
	uint32_t nsamp = strobe_nsamples(p);
	size_t total_depth = 0, total_labels = 0;
	for (uint32_t s = 1; s <= nsamp; s++) {
		uint32_t n;
		total_depth += strobe_stack_depth(p, strobe_sample(p, s)->stack);
		strobe_labelset_get(p, strobe_sample(p, s)->labels, &n);
		total_labels += n;
	}
	e->pb.sample = malloc((nsamp + 1) * sizeof(*e->pb.sample));
	e->samples = calloc(nsamp + 1, sizeof(*e->samples));
	e->loc_ids = malloc((total_depth + 1) * sizeof(*e->loc_ids));
	e->labels = calloc(total_labels + 1, sizeof(*e->labels));
	e->label_ptrs = malloc((total_labels + 1) * sizeof(*e->label_ptrs));
	if (!e->pb.sample || !e->samples || !e->loc_ids || !e->labels || !e->label_ptrs)
		return -ENOMEM;
	e->pb.n_sample = nsamp;
	size_t di = 0, lbi = 0;
	for (uint32_t s = 1; s <= nsamp; s++) {
		Perftools__Profiles__Sample *ps = &e->samples[s - 1];
		const strobe_sample_key *k = strobe_sample(p, s);
		perftools__profiles__sample__init(ps);
		ps->location_id = &e->loc_ids[di];
		for (uint32_t st = k->stack; st; st = strobe_stack_get(p, st)->parent)
			e->loc_ids[di++] = strobe_stack_get(p, st)->location;
		ps->n_location_id = (size_t)(&e->loc_ids[di] - ps->location_id);
		ps->n_value = p->ntypes;
		ps->value = strobe_sample_values(p, s);
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, k->labels, &n);
		ps->n_label = n;
		ps->label = &e->label_ptrs[lbi];
		for (uint32_t j = 0; j < n; j++, lbi++) {
			perftools__profiles__label__init(&e->labels[lbi]);
			e->labels[lbi].key = l[j].key;
			e->labels[lbi].str = l[j].str;
			e->labels[lbi].num = l[j].num;
			e->labels[lbi].num_unit = l[j].num_unit;
			e->label_ptrs[lbi] = &e->labels[lbi];
		}
		e->pb.sample[s - 1] = ps;
	}
	return 0;
}

/* The profile-wide fields: comments, frame filters, time, period, default type. */
static int enc_header(encoder *e)
{
	const strobe_profile *p = e->p;
	if (p->ncomments) {
		if (!(e->comments = malloc(p->ncomments * sizeof(*e->comments))))
			return -ENOMEM;
		for (uint32_t i = 0; i < p->ncomments; i++)
			e->comments[i] = p->comments[i];
		e->pb.n_comment = p->ncomments;
		e->pb.comment = e->comments;
	}
	e->pb.drop_frames = p->drop_frames;
	e->pb.keep_frames = p->keep_frames;
	e->pb.time_nanos = p->time_nanos;
	e->pb.duration_nanos = p->duration_nanos;
	e->pb.period = p->period;
	if (p->default_type >= 0 && (uint32_t)p->default_type < p->ntypes)
		e->pb.default_sample_type = p->types[p->default_type].type;
	return 0;
}

int strobe_pprof_encode(const strobe_profile *p, uint8_t **out, size_t *outlen)
{
	return strobe_pprof_encode_level(p, 6, out, outlen);
}

int strobe_pprof_encode_level(const strobe_profile *p, int level, uint8_t **out, size_t *outlen)
{
	encoder e = {.p = p, .pb = PERFTOOLS__PROFILES__PROFILE__INIT};
	uint8_t *raw = NULL;
	size_t rawlen = 0;
	int r;
	if ((r = enc_types(&e)) == 0 && (r = enc_functions(&e)) == 0 &&
	    (r = enc_mappings(&e)) == 0 && (r = enc_locations(&e)) == 0 &&
	    (r = enc_samples(&e)) == 0 && (r = enc_header(&e)) == 0 &&
	    (r = pack_with_strings(p, &e.pb, &raw, &rawlen)) == 0) {
		if (level == 0) { /* the serialized protobuf itself */
			*out = raw, *outlen = rawlen;
			raw = NULL;
		} else {
			r = strobe_gzip_level(raw, rawlen, level, out, outlen);
		}
	}
	free(raw);
	enc_free(&e);
	return r;
}
