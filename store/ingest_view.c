// SPDX-License-Identifier: Apache-2.0
/*
 * Ingest of a pprof view (strobe/pprof_view.h): each sample's stack mapped straight to the
 * store's ids, without a profile model in between. The pprof's strings, functions, mappings and
 * locations are interned into the store's tables lazily, once per push and only those a sample
 * reaches (as store_map_stack does for a model), so what the store holds is the same either way.
 *
 * Stacks are where the time went: a sample 15 frames deep is 15 lookups in the stack table, for
 * a profile of 1,500 samples over 20,000 lookups. A service sends the same stacks again and
 * again, so the store keeps a cache of whole stacks, keyed by their store location ids root
 * first, to the store's stack id: one hash of the frames and one lookup per sample. A stack not
 * in it is pushed frame by frame (sharing the prefix of the previous one) and added.
 *
 * The cache holds store ids, so it is emptied whenever they are renumbered (symbol gc) and when
 * it outgrows SEQ_MAX_BYTES of keys (then it refills from the pushes that follow).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_impl.h"
#include "strobe/codec.h"
#include "strobe/pprof_view.h"

#define SEQ_MAX_BYTES ((size_t)64 << 20)

void store_seq_reset(strobe_store *s)
{
	strobe_itab_free(&s->seq);
	free(s->seq_stack);
	s->seq_stack = NULL;
	s->seq_cap = 0;
}

/* One push's view ids -> store ids, filled lazily: str UINT32_MAX, the others 0 = not yet
 * (every function, mapping and location of the store has an id >= 1). */
typedef struct vmap {
	const strobe_pprof_view *v;
	strobe_profile *dst;
	uint32_t *str, *fn, *map, *loc;
	strobe_line *lines;
	size_t lcap;
} vmap;

static uint32_t v_str(vmap *m, uint32_t i)
{
	if (m->str[i] == UINT32_MAX)
		m->str[i] = strobe_str_intern(m->dst, m->v->str[i].p, m->v->str[i].len);
	return m->str[i];
}

static uint32_t v_fn(vmap *m, uint32_t i)
{
	if (!i) /* no function (an OTLP line may have none; a pprof view never says 0) */
		return 0;
	if (m->fn[i])
		return m->fn[i];
	strobe_function f = m->v->fns[i - 1];
	if ((f.name = v_str(m, f.name)) == UINT32_MAX ||
	    (f.system_name = v_str(m, f.system_name)) == UINT32_MAX ||
	    (f.filename = v_str(m, f.filename)) == UINT32_MAX)
		return UINT32_MAX;
	uint32_t id = strobe_function_intern(m->dst, &f);
	return id == UINT32_MAX ? id : (m->fn[i] = id);
}

static uint32_t v_map(vmap *m, uint32_t i)
{
	if (m->map[i])
		return m->map[i];
	strobe_mapping mp = m->v->maps[i - 1];
	if ((mp.filename = v_str(m, mp.filename)) == UINT32_MAX ||
	    (mp.build_id = v_str(m, mp.build_id)) == UINT32_MAX)
		return UINT32_MAX;
	uint32_t id = strobe_mapping_intern(m->dst, &mp);
	return id == UINT32_MAX ? id : (m->map[i] = id);
}

static uint32_t v_loc(vmap *m, uint32_t i)
{
	if (m->loc[i])
		return m->loc[i];
	const strobe_pprof_loc *l = &m->v->locs[i - 1];
	uint32_t mp = l->mapping ? v_map(m, l->mapping) : 0;
	if (mp == UINT32_MAX)
		return UINT32_MAX;
	if (store_lines_reserve(&m->lines, &m->lcap, l->nline) < 0)
		return UINT32_MAX;
	for (uint32_t k = 0; k < l->nline; k++) {
		m->lines[k] = m->v->lines[l->line0 + k];
		if ((m->lines[k].function = v_fn(m, m->lines[k].function)) == UINT32_MAX)
			return UINT32_MAX;
	}
	uint32_t id = strobe_location_intern(m->dst, mp, l->address, m->lines, l->nline,
					     l->is_folded);
	return id == UINT32_MAX ? id : (m->loc[i] = id);
}

int store_map_view(strobe_store *s, const strobe_pprof_view *v, uint32_t *gst)
{
	if (s->seq.len > SEQ_MAX_BYTES)
		store_seq_reset(s);
	vmap m = {.v = v, .dst = s->sym};
	m.str = malloc(((size_t)v->nstr + 1) * sizeof(*m.str));
	m.fn = calloc((size_t)v->nfn + 1, sizeof(*m.fn));
	m.map = calloc((size_t)v->nmap + 1, sizeof(*m.map));
	m.loc = calloc((size_t)v->nloc + 1, sizeof(*m.loc));
	/* The frames of this sample root first, and of the last stack pushed frame by frame
	 * with the stack id of each of its prefixes. */
	uint32_t *key = malloc(3 * (size_t)STROBE_MAX_DEPTH * sizeof(*key));
	uint32_t *prev_loc = key + STROBE_MAX_DEPTH, *prev_stack = prev_loc + STROBE_MAX_DEPTH;
	uint32_t prev_depth = 0;
	int r = m.str && m.fn && m.map && m.loc && key ? 0 : -ENOMEM;
	if (m.str)
		memset(m.str, 0xff, ((size_t)v->nstr + 1) * sizeof(*m.str));
	for (uint32_t i = 0; r == 0 && i < v->nsamples; i++) {
		uint32_t n = v->soff[i + 1] - v->soff[i];
		const uint32_t *frames = v->sloc + v->soff[i]; /* leaf first */
		if (!n) {
			gst[i + 1] = 0;
			continue;
		}
		for (uint32_t k = 0; k < n; k++)
			if ((key[k] = v_loc(&m, frames[n - 1 - k])) == UINT32_MAX) {
				r = -ENOMEM;
				break;
			}
		uint32_t id;
		bool added;
		if (r < 0 || (r = strobe_itab_intern(&s->seq, key, n * sizeof(*key), &id, &added)) < 0)
			break;
		if (!added) {
			gst[i + 1] = s->seq_stack[id];
			continue;
		}
		if (id >= s->seq_cap) {
			size_t nc = s->seq_cap ? s->seq_cap * 2 : 1024;
			uint32_t *ns = realloc(s->seq_stack, nc * sizeof(*ns));
			if (!ns) {
				r = -ENOMEM;
				break;
			}
			s->seq_stack = ns;
			s->seq_cap = nc;
		}
		uint32_t stack = 0;
		bool shared = true;
		for (uint32_t k = 0; k < n; k++) {
			if (shared && k < prev_depth && prev_loc[k] == key[k]) {
				stack = prev_stack[k];
				continue;
			}
			shared = false;
			if ((stack = strobe_stack_push(s->sym, stack, key[k])) == UINT32_MAX) {
				r = -ENOMEM;
				break;
			}
			prev_loc[k] = key[k];
			prev_stack[k] = stack;
		}
		prev_depth = r < 0 ? 0 : n;
		if (r < 0)
			break;
		s->seq_stack[id] = gst[i + 1] = stack;
	}
	/* An entry added without its stack id would answer wrongly later: start over. */
	if (r < 0)
		store_seq_reset(s);
	free(m.str);
	free(m.fn);
	free(m.map);
	free(m.loc);
	free(m.lines);
	free(key);
	return r;
}
