// SPDX-License-Identifier: Apache-2.0
/*
 * The pprof codec: profile.proto <-> the profile model, through protobuf-c.
 *
 * Decoding trusts nothing: every string index, every id a sample or location names, and every
 * value count is checked, and a violation is an error that says which entity and which id, so a
 * corrupt upload is rejected with a reason rather than half-read. pprof ids are arbitrary
 * uint64s; they are mapped to the model's dense ids through an interning table keyed by the id.
 *
 * Encoding writes the model's tables as they are: model ids become pprof ids (dense, from 1),
 * the string table is the model's in id order (index 0 is ""), location lists are leaf first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile.pb-c.h"
#include "strobe/codec.h"

typedef Perftools__Profiles__Profile PbProfile;

typedef struct dec {
	const PbProfile *pb;
	strobe_profile *p;
	const char *name;
	strobe_err *err;
	uint32_t *str;        /* pprof string index -> model string id */
	strobe_itab fn_ids, map_ids, loc_ids; /* pprof id -> index in the pb array */
	uint32_t *fn, *map, *loc; /* index in the pb array -> model id */
} dec;

static int bad(dec *d, const char *fmt, const char *what, size_t idx, uint64_t v)
{
	char msg[200];
	snprintf(msg, sizeof(msg), fmt, what, idx, (unsigned long long)v);
	return strobe_errf(d->err, -EINVAL, "%s: invalid pprof: %s", d->name, msg);
}

/* A string index as a model string id, or UINT32_MAX (after setting the error) when out of
 * range. */
static uint32_t sref(dec *d, int64_t idx, const char *what, size_t which)
{
	if (idx < 0 || (uint64_t)idx >= d->pb->n_string_table) {
		bad(d, "%s %zu refers to string %lld, outside the string table",
		    what, which, (uint64_t)idx);
		return UINT32_MAX;
	}
	return d->str[idx];
}

/* Model id of the entity with pprof id `id` (0 = none), or UINT32_MAX after an error. */
static uint32_t idref(dec *d, const strobe_itab *t, const uint32_t *model, uint64_t id,
		      const char *what, size_t which, const char *target)
{
	if (id == 0)
		return 0;
	uint32_t i = strobe_itab_find(t, &id, sizeof(id));
	if (i == UINT32_MAX) {
		strobe_errf(d->err, -EINVAL,
			    "%s: invalid pprof: %s %zu refers to %s id %llu that does not exist",
			    d->name, what, which, target, (unsigned long long)id);
		return UINT32_MAX;
	}
	return model[i];
}

/* Strings, functions, mappings and locations, in dependency order. */
static int decode_tables(dec *d)
{
	const PbProfile *pb = d->pb;
	strobe_profile *p = d->p;
	int r;
	if (pb->n_string_table && pb->string_table[0][0] != '\0')
		return strobe_errf(d->err, -EINVAL,
				   "%s: invalid pprof: string_table[0] must be the empty string",
				   d->name);
	d->str = malloc((pb->n_string_table + 1) * sizeof(*d->str));
	d->fn = malloc((pb->n_function + 1) * sizeof(*d->fn));
	d->map = malloc((pb->n_mapping + 1) * sizeof(*d->map));
	d->loc = malloc((pb->n_location + 1) * sizeof(*d->loc));
	if (!d->str || !d->fn || !d->map || !d->loc)
		return -ENOMEM;
	for (size_t i = 0; i < pb->n_string_table; i++) {
		const char *s = pb->string_table[i];
		if ((d->str[i] = strobe_str_intern(p, s, strlen(s))) == UINT32_MAX)
			return -ENOMEM;
	}
	/* Functions. */
	for (size_t i = 0; i < pb->n_function; i++) {
		uint64_t id = pb->function[i]->id;
		uint32_t got;
		bool added;
		if (id == 0)
			return bad(d, "%s %zu has id %llu (ids start at 1)", "function", i, id);
		if ((r = strobe_itab_intern(&d->fn_ids, &id, sizeof(id), &got, &added)) < 0)
			return r;
		if (!added)
			return bad(d, "%s %zu repeats id %llu", "function", i, id);
		const Perftools__Profiles__Function *f = pb->function[i];
		strobe_function m = {0};
		if ((m.name = sref(d, f->name, "function", i)) == UINT32_MAX ||
		    (m.system_name = sref(d, f->system_name, "function", i)) == UINT32_MAX ||
		    (m.filename = sref(d, f->filename, "function", i)) == UINT32_MAX)
			return -EINVAL;
		m.start_line = f->start_line;
		if ((d->fn[i] = strobe_function_intern(p, &m)) == UINT32_MAX)
			return -ENOMEM;
	}
	/* Mappings. */
	for (size_t i = 0; i < pb->n_mapping; i++) {
		const Perftools__Profiles__Mapping *mp = pb->mapping[i];
		uint64_t id = mp->id;
		uint32_t got;
		bool added;
		if (id == 0)
			return bad(d, "%s %zu has id %llu (ids start at 1)", "mapping", i, id);
		if ((r = strobe_itab_intern(&d->map_ids, &id, sizeof(id), &got, &added)) < 0)
			return r;
		if (!added)
			return bad(d, "%s %zu repeats id %llu", "mapping", i, id);
		strobe_mapping m = {.start = mp->memory_start, .limit = mp->memory_limit,
				    .offset = mp->file_offset,
				    .has_functions = mp->has_functions != 0,
				    .has_filenames = mp->has_filenames != 0,
				    .has_line_numbers = mp->has_line_numbers != 0,
				    .has_inline_frames = mp->has_inline_frames != 0};
		if ((m.filename = sref(d, mp->filename, "mapping", i)) == UINT32_MAX ||
		    (m.build_id = sref(d, mp->build_id, "mapping", i)) == UINT32_MAX)
			return -EINVAL;
		if ((d->map[i] = strobe_mapping_intern(p, &m)) == UINT32_MAX)
			return -ENOMEM;
	}
	/* Locations. */
	strobe_line *lines = NULL;
	size_t lines_cap = 0;
	r = 0;
	for (size_t i = 0; i < pb->n_location && !r; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		uint64_t id = l->id;
		uint32_t got, mapping;
		bool added;
		if (id == 0) {
			r = bad(d, "%s %zu has id %llu (ids start at 1)", "location", i, id);
			break;
		}
		if ((r = strobe_itab_intern(&d->loc_ids, &id, sizeof(id), &got, &added)) < 0)
			break;
		if (!added) {
			r = bad(d, "%s %zu repeats id %llu", "location", i, id);
			break;
		}
		if ((mapping = idref(d, &d->map_ids, d->map, l->mapping_id, "location", i,
				     "mapping")) == UINT32_MAX) {
			r = -EINVAL;
			break;
		}
		if (l->n_line > STROBE_MAX_DEPTH) {
			r = bad(d, "%s %zu has %llu lines (inlined frames)", "location", i,
				l->n_line);
			break;
		}
		if (l->n_line > lines_cap) {
			lines_cap = l->n_line * 2;
			free(lines);
			if (!(lines = malloc(lines_cap * sizeof(*lines)))) {
				r = -ENOMEM;
				break;
			}
		}
		for (size_t j = 0; j < l->n_line && !r; j++) {
			memset(&lines[j], 0, sizeof(lines[j]));
			lines[j].function = idref(d, &d->fn_ids, d->fn, l->line[j]->function_id,
						  "location", i, "function");
			if (lines[j].function == UINT32_MAX)
				r = -EINVAL;
			lines[j].line = l->line[j]->line;
			lines[j].column = l->line[j]->column;
		}
		if (!r && (d->loc[i] = strobe_location_intern(p, mapping, l->address, lines,
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
	int r = 0;
	for (size_t i = 0; i < pb->n_sample && !r; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		if (s->n_value != p->ntypes) {
			r = strobe_errf(d->err, -EINVAL,
					"%s: invalid pprof: sample %zu has %zu values for %u sample "
					"types",
					d->name, i, s->n_value, p->ntypes);
			break;
		}
		if (s->n_location_id > STROBE_MAX_DEPTH) {
			r = strobe_errf(d->err, -EINVAL,
					"%s: invalid pprof: sample %zu is %zu frames deep (limit %u)",
					d->name, i, s->n_location_id, STROBE_MAX_DEPTH);
			break;
		}
		uint32_t stack = 0;
		for (size_t j = s->n_location_id; j-- > 0;) { /* leaf first in pprof */
			uint64_t id = s->location_id[j];
			if (id == 0) {
				r = strobe_errf(d->err, -EINVAL,
						"%s: invalid pprof: sample %zu refers to location id 0",
						d->name, i);
				break;
			}
			uint32_t loc = idref(d, &d->loc_ids, d->loc, id, "sample", i, "location");
			if (loc == UINT32_MAX) {
				r = -EINVAL;
				break;
			}
			if ((stack = strobe_stack_push(p, stack, loc)) == UINT32_MAX) {
				r = -ENOMEM;
				break;
			}
		}
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
			if ((labels[j].key = sref(d, l->key, "sample label of sample", i)) ==
				    UINT32_MAX ||
			    (labels[j].str = sref(d, l->str, "sample label of sample", i)) ==
				    UINT32_MAX ||
			    (labels[j].num_unit = sref(d, l->num_unit, "sample label of sample", i)) ==
				    UINT32_MAX) {
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
	free(labels);
	return r;
}

int strobe_pprof_decode(const uint8_t *buf, size_t len, const char *name, strobe_profile **out,
			strobe_err *err)
{
	dec d = {.name = name, .err = err};
	PbProfile *pb = perftools__profiles__profile__unpack(NULL, len, buf);
	if (!pb)
		return strobe_errf(err, -EINVAL,
				   "%s: not a valid pprof profile (protobuf decode failed)", name);
	d.pb = pb;
	int r = -ENOMEM;
	if (!(d.p = strobe_profile_new()))
		goto out;
	if ((r = decode_tables(&d)) < 0)
		goto out;
	for (size_t i = 0; i < pb->n_sample_type; i++) {
		strobe_value_type vt;
		if ((vt.type = sref(&d, pb->sample_type[i]->type, "sample_type", i)) == UINT32_MAX ||
		    (vt.unit = sref(&d, pb->sample_type[i]->unit, "sample_type", i)) == UINT32_MAX) {
			r = -EINVAL;
			goto out;
		}
		strobe_value_type *t = realloc(d.p->types, (d.p->ntypes + 1) * sizeof(*t));
		if (!t) {
			r = -ENOMEM;
			goto out;
		}
		t[d.p->ntypes++] = vt;
		d.p->types = t;
	}
	if (pb->period_type &&
	    ((d.p->period_type.type = sref(&d, pb->period_type->type, "period_type", 0)) ==
		     UINT32_MAX ||
	     (d.p->period_type.unit = sref(&d, pb->period_type->unit, "period_type", 0)) ==
		     UINT32_MAX)) {
		r = -EINVAL;
		goto out;
	}
	uint32_t dst = 0;
	if ((d.p->drop_frames = sref(&d, pb->drop_frames, "drop_frames", 0)) == UINT32_MAX ||
	    (d.p->keep_frames = sref(&d, pb->keep_frames, "keep_frames", 0)) == UINT32_MAX ||
	    (dst = sref(&d, pb->default_sample_type, "default_sample_type", 0)) == UINT32_MAX) {
		r = -EINVAL;
		goto out;
	}
	if (dst)
		for (uint32_t t = 0; t < d.p->ntypes; t++)
			if (d.p->types[t].type == dst) {
				d.p->default_type = (int32_t)t;
				break;
			}
	if (pb->n_comment) {
		if (!(d.p->comments = malloc(pb->n_comment * sizeof(*d.p->comments)))) {
			r = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < pb->n_comment; i++) {
			if ((d.p->comments[i] = sref(&d, pb->comment[i], "comment", i)) == UINT32_MAX) {
				r = -EINVAL;
				goto out;
			}
			d.p->ncomments++;
		}
	}
	d.p->period = pb->period;
	d.p->time_nanos = pb->time_nanos;
	d.p->duration_nanos = pb->duration_nanos;
	/* Reserve the sample and stack tables once: at most one stack node per location id. */
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
	perftools__profiles__profile__free_unpacked(pb, NULL);
	free(d.str);
	free(d.fn);
	free(d.map);
	free(d.loc);
	strobe_itab_free(&d.fn_ids);
	strobe_itab_free(&d.map_ids);
	strobe_itab_free(&d.loc_ids);
	if (r < 0) {
		strobe_profile_free(d.p);
		return r;
	}
	*out = d.p;
	return 0;
}

/* ---- encoding ---------------------------------------------------------------------------- */

int strobe_pprof_encode(const strobe_profile *p, uint8_t **out, size_t *outlen)
{
	PbProfile pb = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType *vts = NULL, period_type =
		PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__Function *fns = NULL;
	Perftools__Profiles__Mapping *maps = NULL;
	Perftools__Profiles__Location *locs = NULL;
	Perftools__Profiles__Line *lines = NULL, **line_ptrs = NULL;
	Perftools__Profiles__Sample *samples = NULL;
	Perftools__Profiles__Label *labels = NULL, **label_ptrs = NULL;
	uint64_t *loc_ids = NULL;
	int64_t *comments = NULL;
	uint8_t *raw = NULL;
	int r = -ENOMEM;
	uint32_t nfn = p->functions.n - 1, nmap = p->mappings.n - 1, nloc = p->locations.n - 1;
	uint32_t nsamp = strobe_nsamples(p);

	pb.n_string_table = p->strings.n;
	pb.string_table = malloc(p->strings.n * sizeof(char *));
	pb.n_sample_type = p->ntypes;
	pb.sample_type = malloc((p->ntypes + 1) * sizeof(*pb.sample_type));
	vts = calloc(p->ntypes + 1, sizeof(*vts));
	pb.function = malloc((nfn + 1) * sizeof(*pb.function));
	fns = calloc(nfn + 1, sizeof(*fns));
	pb.mapping = malloc((nmap + 1) * sizeof(*pb.mapping));
	maps = calloc(nmap + 1, sizeof(*maps));
	pb.location = malloc((nloc + 1) * sizeof(*pb.location));
	locs = calloc(nloc + 1, sizeof(*locs));
	pb.sample = malloc((nsamp + 1) * sizeof(*pb.sample));
	samples = calloc(nsamp + 1, sizeof(*samples));
	if (!pb.string_table || !pb.sample_type || !vts || !pb.function || !fns || !pb.mapping ||
	    !maps || !pb.location || !locs || !pb.sample || !samples)
		goto out;
	for (uint32_t i = 0; i < p->strings.n; i++)
		pb.string_table[i] = (char *)strobe_str(p, i);
	for (uint32_t t = 0; t < p->ntypes; t++) {
		perftools__profiles__value_type__init(&vts[t]);
		vts[t].type = p->types[t].type;
		vts[t].unit = p->types[t].unit;
		pb.sample_type[t] = &vts[t];
	}
	if (p->period_type.type || p->period_type.unit) {
		period_type.type = p->period_type.type;
		period_type.unit = p->period_type.unit;
		pb.period_type = &period_type;
	}
	pb.n_function = nfn;
	for (uint32_t i = 0; i < nfn; i++) {
		const strobe_function *f = strobe_function_get(p, i + 1);
		perftools__profiles__function__init(&fns[i]);
		fns[i].id = i + 1;
		fns[i].name = f->name;
		fns[i].system_name = f->system_name;
		fns[i].filename = f->filename;
		fns[i].start_line = f->start_line;
		pb.function[i] = &fns[i];
	}
	pb.n_mapping = nmap;
	for (uint32_t i = 0; i < nmap; i++) {
		const strobe_mapping *m = strobe_mapping_get(p, i + 1);
		perftools__profiles__mapping__init(&maps[i]);
		maps[i].id = i + 1;
		maps[i].memory_start = m->start;
		maps[i].memory_limit = m->limit;
		maps[i].file_offset = m->offset;
		maps[i].filename = m->filename;
		maps[i].build_id = m->build_id;
		maps[i].has_functions = m->has_functions;
		maps[i].has_filenames = m->has_filenames;
		maps[i].has_line_numbers = m->has_line_numbers;
		maps[i].has_inline_frames = m->has_inline_frames;
		pb.mapping[i] = &maps[i];
	}
	size_t total_lines = 0;
	for (uint32_t i = 0; i < nloc; i++)
		total_lines += strobe_location_get(p, i + 1)->nline;
	lines = calloc(total_lines + 1, sizeof(*lines));
	line_ptrs = malloc((total_lines + 1) * sizeof(*line_ptrs));
	if (!lines || !line_ptrs)
		goto out;
	pb.n_location = nloc;
	for (uint32_t i = 0, li = 0; i < nloc; i++) {
		const strobe_location *l = strobe_location_get(p, i + 1);
		perftools__profiles__location__init(&locs[i]);
		locs[i].id = i + 1;
		locs[i].mapping_id = l->mapping;
		locs[i].address = l->address;
		locs[i].is_folded = l->is_folded;
		locs[i].n_line = l->nline;
		locs[i].line = &line_ptrs[li];
		for (uint32_t j = 0; j < l->nline; j++, li++) {
			perftools__profiles__line__init(&lines[li]);
			lines[li].function_id = l->line[j].function;
			lines[li].line = l->line[j].line;
			lines[li].column = l->line[j].column;
			line_ptrs[li] = &lines[li];
		}
		pb.location[i] = &locs[i];
	}
	/* Samples: location ids leaf first, walked up the stack tree; labels from the label set. */
	size_t total_depth = 0, total_labels = 0;
	for (uint32_t s = 1; s <= nsamp; s++) {
		uint32_t n;
		total_depth += strobe_stack_depth(p, strobe_sample(p, s)->stack);
		strobe_labelset_get(p, strobe_sample(p, s)->labels, &n);
		total_labels += n;
	}
	loc_ids = malloc((total_depth + 1) * sizeof(*loc_ids));
	labels = calloc(total_labels + 1, sizeof(*labels));
	label_ptrs = malloc((total_labels + 1) * sizeof(*label_ptrs));
	if (!loc_ids || !labels || !label_ptrs)
		goto out;
	pb.n_sample = nsamp;
	size_t di = 0, lbi = 0;
	for (uint32_t s = 1; s <= nsamp; s++) {
		Perftools__Profiles__Sample *ps = &samples[s - 1];
		const strobe_sample_key *k = strobe_sample(p, s);
		perftools__profiles__sample__init(ps);
		ps->location_id = &loc_ids[di];
		for (uint32_t st = k->stack; st; st = strobe_stack_get(p, st)->parent)
			loc_ids[di++] = strobe_stack_get(p, st)->location;
		ps->n_location_id = (size_t)(&loc_ids[di] - ps->location_id);
		ps->n_value = p->ntypes;
		ps->value = strobe_sample_values(p, s);
		uint32_t n;
		const strobe_label *l = strobe_labelset_get(p, k->labels, &n);
		ps->n_label = n;
		ps->label = &label_ptrs[lbi];
		for (uint32_t j = 0; j < n; j++, lbi++) {
			perftools__profiles__label__init(&labels[lbi]);
			labels[lbi].key = l[j].key;
			labels[lbi].str = l[j].str;
			labels[lbi].num = l[j].num;
			labels[lbi].num_unit = l[j].num_unit;
			label_ptrs[lbi] = &labels[lbi];
		}
		pb.sample[s - 1] = ps;
	}
	if (p->ncomments) {
		if (!(comments = malloc(p->ncomments * sizeof(*comments))))
			goto out;
		for (uint32_t i = 0; i < p->ncomments; i++)
			comments[i] = p->comments[i];
		pb.n_comment = p->ncomments;
		pb.comment = comments;
	}
	pb.drop_frames = p->drop_frames;
	pb.keep_frames = p->keep_frames;
	pb.time_nanos = p->time_nanos;
	pb.duration_nanos = p->duration_nanos;
	pb.period = p->period;
	if (p->default_type >= 0 && (uint32_t)p->default_type < p->ntypes)
		pb.default_sample_type = p->types[p->default_type].type;
	size_t len = perftools__profiles__profile__get_packed_size(&pb);
	if (!(raw = malloc(len ? len : 1)))
		goto out;
	perftools__profiles__profile__pack(&pb, raw);
	r = strobe_gzip(raw, len, out, outlen);
out:
	free(raw);
	free(pb.string_table);
	free(pb.sample_type);
	free(vts);
	free(pb.function);
	free(fns);
	free(pb.mapping);
	free(maps);
	free(pb.location);
	free(locs);
	free(lines);
	free(line_ptrs);
	free(pb.sample);
	free(samples);
	free(loc_ids);
	free(labels);
	free(label_ptrs);
	free(comments);
	return r;
}
