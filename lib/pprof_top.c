// SPDX-License-Identifier: Apache-2.0
/*
 * Per-function flat and cumulative values read straight from serialized pprof, for `top` on
 * profiles too big to hold as a model: the full decoder (lib/pprof.c) has protobuf-c unpack the
 * whole message and then builds every stack, several times the input in memory; this reads the
 * protobuf wire format in place, keeps only the string, function and location tables, and
 * streams over the samples. protobuf-c has no streaming reader, hence the hand-written wire
 * walk (varints and length-delimited fields only; every length is checked against the buffer).
 *
 * It validates only what it reads; anything odd returns -EINVAL and the caller falls back to
 * the full decoder, which validates everything and says what is wrong. The numbers are the
 * same as strobe_fnstats() on the decoded profile at function granularity (a test compares).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/transform.h"
#include "strobe/wire.h"

typedef struct str {
	const uint8_t *p;
	uint32_t n;
} str;

typedef struct tables {
	str *strings;
	size_t nstrings, cap_strings;
	uint32_t types[64][2]; /* sample types: type, unit string indices */
	uint32_t ntypes;
	int64_t default_type, duration;
	strobe_itab fn_ids, loc_ids; /* pprof id -> index */
	uint64_t *fn_name;           /* per function: name string index */
	size_t nfn, cap_fn;
	struct loc_ref {
		uint32_t start, len; /* its lines' function ids: loc_fns[start, start + len) */
		uint64_t address, mapping_id;
	} *locs;
	size_t nloc, cap_loc;
	strobe_itab map_ids;
	struct map_ref {
		uint64_t start, offset, filename;
	} *maps;
	size_t nmap, cap_map;
	uint64_t *loc_fns;
	size_t nlocfns, cap_locfns;
} tables;

#define GROW(arr, n, cap)                                                                         \
	do {                                                                                      \
		if ((n) == (cap)) {                                                               \
			size_t nc_ = (cap) ? (cap) * 2 : 256;                                     \
			void *np_ = realloc((arr), nc_ * sizeof(*(arr)));                         \
			if (!np_)                                                                 \
				return -ENOMEM;                                                   \
			(arr) = np_;                                                              \
			(cap) = nc_;                                                              \
		}                                                                                 \
	} while (0)

static int add_id(strobe_itab *t, uint64_t id, size_t expect)
{
	uint32_t got;
	bool added;
	int r = strobe_itab_intern(t, &id, sizeof(id), &got, &added);
	if (r < 0)
		return r;
	return added && got == expect ? 0 : -EINVAL;
}

/* Pass 1: everything but the samples. */
static int read_tables(const uint8_t *buf, size_t len, tables *T)
{
	strobe_wire r = {buf, buf + len}, sub;
	uint32_t num, wt;
	uint64_t v;
	T->fn_ids.fixed = T->loc_ids.fixed = T->map_ids.fixed = sizeof(uint64_t);
	while (r.p < r.end) {
		if (!strobe_wire_field(&r, &num, &wt, &v, &sub))
			return -EINVAL;
		if (num == 6 && wt == 2) {
			GROW(T->strings, T->nstrings, T->cap_strings);
			T->strings[T->nstrings++] = (str){sub.p, (uint32_t)v};
		} else if (num == 1 && wt == 2) {
			if (T->ntypes == 64)
				return -EINVAL;
			uint32_t *vt = T->types[T->ntypes++];
			vt[0] = vt[1] = 0;
			for (uint32_t fn, fw; sub.p < sub.end;) {
				strobe_wire s2;
				if (!strobe_wire_field(&sub, &fn, &fw, &v, &s2))
					return -EINVAL;
				if ((fn == 1 || fn == 2) && fw == 0)
					vt[fn - 1] = (uint32_t)v;
			}
		} else if (num == 5 && wt == 2) {
			uint64_t id = 0, name = 0;
			for (uint32_t fn, fw; sub.p < sub.end;) {
				strobe_wire s2;
				if (!strobe_wire_field(&sub, &fn, &fw, &v, &s2))
					return -EINVAL;
				if (fn == 1 && fw == 0)
					id = v;
				else if (fn == 2 && fw == 0)
					name = v;
			}
			int e = add_id(&T->fn_ids, id, T->nfn);
			if (e < 0)
				return e;
			GROW(T->fn_name, T->nfn, T->cap_fn);
			T->fn_name[T->nfn++] = name;
		} else if (num == 3 && wt == 2) {
			uint64_t id = 0;
			struct map_ref m = {0, 0, 0};
			for (uint32_t fn, fw; sub.p < sub.end;) {
				strobe_wire s2;
				if (!strobe_wire_field(&sub, &fn, &fw, &v, &s2))
					return -EINVAL;
				if (fw != 0)
					continue;
				if (fn == 1)
					id = v;
				else if (fn == 2)
					m.start = v;
				else if (fn == 4)
					m.offset = v;
				else if (fn == 5)
					m.filename = v;
			}
			int e = add_id(&T->map_ids, id, T->nmap);
			if (e < 0)
				return e;
			GROW(T->maps, T->nmap, T->cap_map);
			T->maps[T->nmap++] = m;
		} else if (num == 4 && wt == 2) {
			uint64_t id = 0, address = 0, mapping_id = 0;
			size_t start = T->nlocfns;
			for (uint32_t fn, fw; sub.p < sub.end;) {
				strobe_wire s2;
				if (!strobe_wire_field(&sub, &fn, &fw, &v, &s2))
					return -EINVAL;
				if (fn == 1 && fw == 0) {
					id = v;
				} else if (fn == 2 && fw == 0) {
					mapping_id = v;
				} else if (fn == 3 && fw == 0) {
					address = v;
				} else if (fn == 4 && fw == 2) { /* Line: function_id = 1 */
					uint64_t fid = 0;
					for (uint32_t ln, lw; s2.p < s2.end;) {
						strobe_wire s3;
						if (!strobe_wire_field(&s2, &ln, &lw, &v, &s3))
							return -EINVAL;
						if (ln == 1 && lw == 0)
							fid = v;
					}
					GROW(T->loc_fns, T->nlocfns, T->cap_locfns);
					T->loc_fns[T->nlocfns++] = fid;
				}
			}
			int e = add_id(&T->loc_ids, id, T->nloc);
			if (e < 0)
				return e;
			GROW(T->locs, T->nloc, T->cap_loc);
			T->locs[T->nloc++] = (struct loc_ref){(uint32_t)start,
							      (uint32_t)(T->nlocfns - start), address,
							      mapping_id};
		} else if (num == 10 && wt == 0) {
			T->duration = (int64_t)v;
		} else if (num == 14 && wt == 0) {
			T->default_type = (int64_t)v;
		}
	}
	return T->nstrings && T->strings[0].n == 0 ? 0 : -EINVAL;
}

static bool str_is(const tables *T, uint64_t idx, const char *s)
{
	size_t n = strlen(s);
	return idx < T->nstrings && T->strings[idx].n == n && memcmp(T->strings[idx].p, s, n) == 0;
}

/* The state of one strobe_pprof_fnstats pass, freed by fn_free. */
typedef struct fnpass {
	tables T;
	strobe_itab names;     /* function name text -> name slot */
	uint32_t *fn_slot;     /* function index -> name slot */
	uint32_t *loc_slots;   /* per location line: name slot */
	int64_t *flat, *cum;   /* per name slot */
	uint32_t *seen;        /* per name slot: the last sample that counted it in cum */
	uint64_t *ids;         /* one sample's location ids */
	size_t ids_cap;
	int64_t total;
} fnpass;

static void fn_free(fnpass *f)
{
	free(f->T.strings);
	strobe_itab_free(&f->T.fn_ids);
	strobe_itab_free(&f->T.loc_ids);
	free(f->T.fn_name);
	free(f->T.locs);
	free(f->T.maps);
	strobe_itab_free(&f->T.map_ids);
	free(f->T.loc_fns);
	strobe_itab_free(&f->names);
	free(f->fn_slot);
	free(f->loc_slots);
	free(f->flat);
	free(f->cum);
	free(f->seen);
	free(f->ids);
}

/* The sample type: by name, by number, or pprof's default (else the last); -1 when none. */
static int fn_pick_type(const tables *T, const char *sample_index)
{
	int type = -1;
	if (sample_index) {
		for (uint32_t t = 0; t < T->ntypes && type < 0; t++)
			if (str_is(T, T->types[t][0], sample_index))
				type = (int)t;
		char *e;
		long k = strtol(sample_index, &e, 10);
		if (type < 0 && *sample_index && !*e && k >= 0 && k < (long)T->ntypes)
			type = (int)k;
	} else {
		for (uint32_t t = 0; t < T->ntypes && T->default_type && type < 0; t++)
			if (T->types[t][0] == T->default_type)
				type = (int)t;
		if (type < 0)
			type = (int)T->ntypes - 1;
	}
	return type;
}

/* Name slots: functions with the same name text are one row, as in strobe_fnstats(). Each
 * location's frames become name slots, leaf first; a line whose function has no name, or a
 * location with no lines, is named after its mapping and address exactly as
 * strobe_stack_frames() names it. The slots replace the function ids in place. */
static int fn_name_slots(fnpass *f)
{
	tables *T = &f->T;
	int r;
	if (!(f->fn_slot = malloc((T->nfn + 1) * sizeof(*f->fn_slot))) ||
	    !(f->loc_slots = malloc((T->nlocfns + T->nloc + 1) * sizeof(*f->loc_slots))))
		return -ENOMEM;
	for (size_t i = 0; i < T->nfn; i++) {
		if (T->fn_name[i] >= T->nstrings)
			return -EINVAL;
		str s = T->strings[T->fn_name[i]];
		if ((r = strobe_itab_intern(&f->names, s.p, s.n, &f->fn_slot[i], NULL)) < 0)
			return r;
	}
	size_t nslots = 0;
	for (size_t li = 0; li < T->nloc; li++) {
		struct loc_ref *L = &T->locs[li];
		uint32_t unnamed = UINT32_MAX, start = (uint32_t)nslots;
		for (uint32_t j = 0; j < (L->len ? L->len : 1); j++) {
			uint32_t slot;
			uint64_t fid = L->len ? T->loc_fns[L->start + j] : 0;
			uint32_t k = fid ? strobe_itab_find(&T->fn_ids, &fid, sizeof(fid)) : UINT32_MAX;
			if (L->len && k == UINT32_MAX)
				return -EINVAL;
			if (L->len && T->strings[T->fn_name[k]].n) {
				slot = f->fn_slot[k];
			} else {
				if (unnamed == UINT32_MAX) {
					char file[4096] = "", nm[4200];
					uint64_t mstart = 0, moff = 0;
					if (L->mapping_id) {
						uint64_t mid = L->mapping_id;
						uint32_t m = strobe_itab_find(&T->map_ids, &mid, sizeof(mid));
						if (m == UINT32_MAX || T->maps[m].filename >= T->nstrings)
							return -EINVAL;
						str fl = T->strings[T->maps[m].filename];
						snprintf(file, sizeof(file), "%.*s", (int)fl.n,
							 (const char *)fl.p);
						mstart = T->maps[m].start;
						moff = T->maps[m].offset;
					}
					size_t nl = strobe_unnamed_frame(nm, sizeof(nm), file, L->address,
									 mstart, moff);
					if ((r = strobe_itab_intern(&f->names, nm, nl, &unnamed, NULL)) < 0)
						return r;
				}
				slot = unnamed;
			}
			f->loc_slots[nslots++] = slot;
		}
		L->start = start;
		L->len = (uint32_t)nslots - start;
	}
	return 0;
}

/* Pass 2: every sample's value of `type` added to its leaf's flat and, once per sample, to
 * the cum of every name on its stack. */
static int fn_sum_samples(fnpass *f, const uint8_t *buf, size_t len, int type)
{
	const tables *T = &f->T;
	/* locals: with -fno-strict-aliasing every store into these arrays would otherwise make
	 * the compiler load their addresses from f again */
	int64_t *flat = f->flat, *cum = f->cum;
	uint32_t *seen = f->seen;
	const uint32_t *loc_slots = f->loc_slots;
	uint32_t sample_no = 0;
	strobe_wire rr = {buf, buf + len}, sub;
	uint32_t num, wt;
	uint64_t v;
	while (rr.p < rr.end) {
		if (!strobe_wire_field(&rr, &num, &wt, &v, &sub))
			return -EINVAL;
		if (num != 2 || wt != 2)
			continue;
		size_t nids = 0;
		uint32_t nvals = 0;
		int64_t value = 0;
		for (uint32_t fn, fw; sub.p < sub.end;) {
			strobe_wire s2;
			if (!strobe_wire_field(&sub, &fn, &fw, &v, &s2))
				return -EINVAL;
			if (fn == 1) { /* location ids, packed or not */
				strobe_wire q = fw == 2 ? s2 : (strobe_wire){NULL, NULL};
				uint64_t x = v;
				do {
					if (fw == 2 && !strobe_wire_varint(&q, &x))
						return -EINVAL;
					if (nids == f->ids_cap) {
						size_t nc = f->ids_cap ? f->ids_cap * 2 : 64;
						uint64_t *ni = realloc(f->ids, nc * sizeof(*ni));
						if (!ni)
							return -ENOMEM;
						f->ids = ni;
						f->ids_cap = nc;
					}
					f->ids[nids++] = x;
				} while (fw == 2 && q.p < q.end);
			} else if (fn == 2) { /* values, packed or not */
				strobe_wire q = fw == 2 ? s2 : (strobe_wire){NULL, NULL};
				uint64_t x = v;
				do {
					if (fw == 2 && !strobe_wire_varint(&q, &x))
						return -EINVAL;
					if (nvals == (uint32_t)type)
						value = (int64_t)x;
					nvals++;
				} while (fw == 2 && q.p < q.end);
			}
		}
		if (nvals != T->ntypes || nids > STROBE_MAX_DEPTH)
			return -EINVAL;
		sample_no++;
		f->total += value < 0 ? -value : value;
		if (!value)
			continue;
		bool leaf = true;
		for (size_t i = 0; i < nids; i++) {
			uint32_t li = strobe_itab_find(&T->loc_ids, &f->ids[i], sizeof(f->ids[i]));
			if (li == UINT32_MAX)
				return -EINVAL;
			for (uint32_t j = 0; j < T->locs[li].len; j++) {
				uint32_t slot = loc_slots[T->locs[li].start + j];
				if (leaf)
					flat[slot] += value;
				leaf = false;
				if (seen[slot] != sample_no) {
					seen[slot] = sample_no;
					cum[slot] += value;
				}
			}
		}
	}
	return 0;
}

/* The rows, names copied into one arena as C strings, the type's name and unit after them. */
static int fn_rows(const fnpass *f, int type, strobe_fnstat **out, size_t *nout,
		   char **arena_out, strobe_top_info *info)
{
	const tables *T = &f->T;
	size_t k = 0, bytes = 0;
	for (uint32_t i = 0; i < f->names.n; i++)
		if (f->flat[i] || f->cum[i]) {
			k++;
			size_t l;
			strobe_itab_get(&f->names, i, &l);
			bytes += l + 1;
		}
	const char *tname = (const char *)T->strings[T->types[type][0]].p,
		   *uname = (const char *)T->strings[T->types[type][1]].p;
	uint32_t tl = T->strings[T->types[type][0]].n, ul = T->strings[T->types[type][1]].n;
	char *arena = malloc(bytes + tl + ul + 2);
	strobe_fnstat *st = malloc((k ? k : 1) * sizeof(*st));
	if (!arena || !st) {
		free(arena);
		free(st);
		return -ENOMEM;
	}
	char *a = arena;
	k = 0;
	for (uint32_t i = 0; i < f->names.n; i++) {
		if (!f->flat[i] && !f->cum[i])
			continue;
		size_t l;
		const void *s = strobe_itab_get(&f->names, i, &l);
		memcpy(a, s, l);
		a[l] = 0;
		st[k++] = (strobe_fnstat){a, f->flat[i], f->cum[i]};
		a += l + 1;
	}
	memcpy(a, tname, tl);
	a[tl] = 0;
	info->type = a;
	a += tl + 1;
	memcpy(a, uname, ul);
	a[ul] = 0;
	info->unit = a;
	info->total = f->total;
	info->duration_nanos = T->duration;
	*out = st;
	*nout = k;
	*arena_out = arena;
	return 0;
}

int strobe_pprof_fnstats(const uint8_t *buf, size_t len, const char *sample_index,
			 strobe_fnstat **out, size_t *nout, char **arena_out, strobe_top_info *info)
{
	fnpass f = {.T = {.default_type = 0}};
	int r = read_tables(buf, len, &f.T);
	if (r < 0)
		goto out;
	int type = fn_pick_type(&f.T, sample_index);
	r = -ENOENT;
	if (type < 0)
		goto out;
	r = -EINVAL;
	for (uint32_t t = 0; t < f.T.ntypes; t++)
		if (f.T.types[t][0] >= f.T.nstrings || f.T.types[t][1] >= f.T.nstrings)
			goto out;
	if ((r = fn_name_slots(&f)) < 0)
		goto out;
	r = -ENOMEM;
	f.flat = calloc(f.names.n + 1, sizeof(*f.flat));
	f.cum = calloc(f.names.n + 1, sizeof(*f.cum));
	f.seen = calloc(f.names.n + 1, sizeof(*f.seen));
	if (!f.flat || !f.cum || !f.seen)
		goto out;
	if ((r = fn_sum_samples(&f, buf, len, type)) == 0)
		r = fn_rows(&f, type, out, nout, arena_out, info);
out:
	fn_free(&f);
	return r;
}
