/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ingest into ClickHouse: a push becomes at most five INSERTs (functions, locations, stacks and
 * series that this server does not know to be stored yet, then the samples), shared with the
 * other pushes to the same shard waiting at the same time (group commit, commit()), each one block of
 * RowBinary rows, gzip'd, into the local tables of the push's shard, so that strobe_store_push
 * returns 0 only once ClickHouse has every row.
 *
 * Ids are hashes of content (a function of its names and file, a location of its address,
 * mapping and lines, a stack of its locations, a series of its tenant, type and labels): any
 * strobe server computes the same ids for the same things without asking anyone, and the
 * symbol tables deduplicate by merging (ReplacingMergeTree).
 *
 * Whole or nothing: the samples go last, in one block to one shard (the shard of a push is a hash
 * of the tenant and the push's labels, scaled to the number of shards: a series stays on one shard),
 * written straight into that shard's local table, which MergeTree writes as one part or not at
 * all; 200 then means the shard has the rows (through a Distributed table, 18.16 would queue them
 * on the host it was sent to, or, with insert_distributed_sync, need every shard up). Symbols or series written by a push whose samples then failed are
 * harmless: nothing refers to them, and the label and series APIs only list series with samples
 * in the window.
 *
 * The symbols are normalised first through a scratch copy of the SQLite store's mapping code
 * (store_map_stack, store_map_view into a profile of this push alone), so both backends read
 * profiles and pprof views the same way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../store_impl.h"
#include "ch.h"
#include "strobe/clock.h"
#include "strobe/pprof_view.h"

typedef struct pcol {
	char type[STROBE_TYPE_MAX];
	uint64_t series;
	size_t item;
	uint32_t ty;
	int64_t time;
	bool gauge, add_series;
	const strobe_labelpair *labels; /* merged series labels (owned by the push) */
	size_t nlabels;
} pcol;

typedef struct spair {
	uint64_t stack;
	int64_t value;
} spair;

static int cmp_spair(const void *a, const void *b)
{
	uint64_t x = ((const spair *)a)->stack, y = ((const spair *)b)->stack;
	return x < y ? -1 : x > y;
}

static uint64_t series_id(const char *tenant, const char *type, const strobe_labelpair *l,
			  size_t n)
{
	uint64_t h = ch_hash_str(0x5e, tenant);
	h = ch_hash_str(h, type);
	for (size_t i = 0; i < n; i++)
		h = ch_hash_str(ch_hash_str(h, l[i].name), l[i].value);
	return h;
}

/* Content hashes of every function, location and stack of the scratch profile p. */
typedef struct symh {
	uint64_t *fn, *loc, *stack;
} symh;

static int hash_symbols(const strobe_profile *p, symh *h)
{
	h->fn = calloc(p->functions.n, sizeof(uint64_t));
	h->loc = calloc(p->locations.n, sizeof(uint64_t));
	h->stack = calloc(p->stacks.n, sizeof(uint64_t));
	if (!h->fn || !h->loc || !h->stack)
		return -ENOMEM;
	for (uint32_t i = 1; i < p->functions.n; i++) {
		const strobe_function *f = strobe_function_get(p, i);
		uint64_t x = ch_hash_str(0xf1, strobe_str(p, f->name));
		x = ch_hash_str(x, strobe_str(p, f->system_name));
		x = ch_hash_str(x, strobe_str(p, f->filename));
		h->fn[i] = ch_hash(x, &f->start_line, sizeof(f->start_line));
	}
	for (uint32_t i = 1; i < p->locations.n; i++) {
		const strobe_location *l = strobe_location_get(p, i);
		uint64_t x = ch_hash(0x10c, &l->address, sizeof(l->address));
		if (l->mapping) {
			const strobe_mapping *m = strobe_mapping_get(p, l->mapping);
			x = ch_hash_str(x, strobe_str(p, m->filename));
			x = ch_hash_str(x, strobe_str(p, m->build_id));
			x = ch_hash(x, &m->start, sizeof(m->start));
		}
		x = ch_hash(x, &l->is_folded, 1);
		for (uint32_t k = 0; k < l->nline; k++) {
			uint64_t f = l->line[k].function ? h->fn[l->line[k].function] : 0;
			x = ch_hash(x, &f, sizeof(f));
			x = ch_hash(x, &l->line[k].line, sizeof(l->line[k].line));
		}
		h->loc[i] = x;
	}
	/* Parents come before their children (a stack is pushed onto an existing one). */
	for (uint32_t i = 1; i < p->stacks.n; i++) {
		const strobe_stack_node *sn = strobe_stack_get(p, i);
		uint64_t x = sn->parent ? h->stack[sn->parent] : 0x57ac;
		h->stack[i] = ch_hash(x, &h->loc[sn->location], sizeof(uint64_t));
	}
	return 0;
}

/* The rows of the symbols of p this server has not stored yet (by hash, under c->mu). A
 * location's functions and lines are two parallel arrays, leaf first as in pprof. */
static int symbol_rows(ch_store *c, const strobe_profile *p, const symh *h, uint64_t shard,
		       strobe_buf *fb, strobe_buf *lb, strobe_buf *sb, size_t nrows[3])
{
	int r = 0;
	uint32_t *chain = NULL;
	size_t ccap = 0;
	int64_t now_s = strobe_mono_ns() / STROBE_NS_PER_S;
	pthread_mutex_lock(&c->mu);
	/* Forget now and then: another server's symbol collection (ch_gc.c) may have deleted
	 * what this one wrote; the cost is writing a push's symbols again (deduplicated). */
	if (now_s - c->known_at_s >= CH_KNOWN_TTL_S) {
		ch_known_free(&c->known_sym);
		c->known_at_s = now_s;
	}
	for (uint32_t i = 1; r == 0 && i < p->functions.n; i++) {
		if (ch_known_has(&c->known_sym, h->fn[i]))
			continue;
		const strobe_function *f = strobe_function_get(p, i);
		r = rb_u64(fb, h->fn[i]);
		const uint32_t s3[3] = {f->name, f->system_name, f->filename};
		for (int k = 0; r == 0 && k < 3; k++)
			r = rb_str(fb, strobe_str(p, s3[k]), strobe_str_len(p, s3[k]));
		if (r == 0 && (r = rb_i64(fb, f->start_line)) == 0)
			r = rb_u64(fb, shard);
		nrows[0]++;
	}
	for (uint32_t i = 1; r == 0 && i < p->locations.n; i++) {
		if (ch_known_has(&c->known_sym, h->loc[i]))
			continue;
		const strobe_location *l = strobe_location_get(p, i);
		strobe_mapping none = {0};
		const strobe_mapping *m = l->mapping ? strobe_mapping_get(p, l->mapping) : &none;
		r = rb_u64(lb, h->loc[i]);
		if (r == 0)
			r = rb_u64(lb, l->address);
		if (r == 0)
			r = rb_str(lb, strobe_str(p, m->filename), strobe_str_len(p, m->filename));
		if (r == 0)
			r = rb_str(lb, strobe_str(p, m->build_id), strobe_str_len(p, m->build_id));
		if (r == 0)
			r = rb_u64(lb, m->start);
		if (r == 0)
			r = rb_u64(lb, m->limit);
		if (r == 0)
			r = rb_u64(lb, m->offset);
		if (r == 0)
			r = rb_u8(lb, (uint8_t)(m->has_functions | m->has_filenames << 1 |
						m->has_line_numbers << 2 | m->has_inline_frames << 3));
		if (r == 0)
			r = rb_u8(lb, l->is_folded);
		if (r == 0)
			r = rb_len(lb, l->nline);
		for (uint32_t k = 0; r == 0 && k < l->nline; k++)
			r = rb_u64(lb, l->line[k].function ? h->fn[l->line[k].function] : 0);
		if (r == 0)
			r = rb_len(lb, l->nline);
		for (uint32_t k = 0; r == 0 && k < l->nline; k++)
			r = rb_i64(lb, l->line[k].line);
		if (r == 0)
			r = rb_u64(lb, shard);
		nrows[1]++;
	}
	for (uint32_t i = 1; r == 0 && i < p->stacks.n; i++) {
		if (ch_known_has(&c->known_sym, h->stack[i]))
			continue;
		size_t n = 0;
		for (uint32_t s = i; s; s = strobe_stack_get(p, s)->parent) {
			if (n == ccap) {
				size_t nc = ccap ? 2 * ccap : 64;
				uint32_t *x = realloc(chain, nc * sizeof(*x));
				if (!x) {
					r = -ENOMEM;
					break;
				}
				chain = x;
				ccap = nc;
			}
			chain[n++] = strobe_stack_get(p, s)->location;
		}
		if (r < 0)
			break;
		/* Root first, as strobe_stack_push builds them back. */
		r = rb_u64(sb, h->stack[i]);
		if (r == 0)
			r = rb_len(sb, n);
		for (size_t k = n; r == 0 && k-- > 0;)
			r = rb_u64(sb, h->loc[chain[k]]);
		if (r == 0)
			r = rb_u64(sb, shard);
		nrows[2]++;
	}
	pthread_mutex_unlock(&c->mu);
	free(chain);
	return r;
}

static void remember_symbols(ch_store *c, const strobe_profile *p, const symh *h)
{
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 1; i < p->functions.n; i++)
		ch_known_add(&c->known_sym, h->fn[i]);
	for (uint32_t i = 1; i < p->locations.n; i++)
		ch_known_add(&c->known_sym, h->loc[i]);
	for (uint32_t i = 1; i < p->stacks.n; i++)
		ch_known_add(&c->known_sym, h->stack[i]);
	pthread_mutex_unlock(&c->mu);
}

static int insert(ch_store *c, size_t shard, const char *base, strobe_buf *rows,
		  strobe_err *err)
{
	if (!rows->len)
		return 0;
	char sql[256], t[128];
	snprintf(sql, sizeof sql, "INSERT INTO %s FORMAT RowBinary", ch_local(c, base, t, sizeof t));
	return ch_exec_shard(c, shard, sql, rows->p, rows->len, err);
}

static const char *const tab_names[CH_NT] = {"functions", "locations", "stacks", "series",
					     "points"};

/* Writes a batch of pushes of one shard: one INSERT per table for all of them, samples last. */
static int write_batch(ch_store *c, size_t shard, ch_pending *first, size_t n, strobe_err *err)
{
	int r = 0;
	for (int t = 0; r == 0 && t < CH_NT; t++) {
		strobe_buf all;
		strobe_buf_init(&all, SIZE_MAX);
		ch_pending *p = first;
		for (size_t k = 0; r == 0 && k < n; k++, p = p->next)
			if (p->rows[t]->len)
				r = strobe_buf_add(&all, p->rows[t]->p, p->rows[t]->len);
		if (r < 0)
			r = strobe_errf(err, -ENOMEM, "out of memory");
		else
			r = insert(c, shard, tab_names[t], &all, err);
		strobe_buf_free(&all);
	}
	/* a batch written is one commit of the group-commit counters (/metrics), as one SQLite
	 * transaction is */
	if (r == 0) {
		pthread_mutex_lock(&c->mu);
		c->inserts++;
		pthread_mutex_unlock(&c->mu);
	}
	return r;
}

/* Group commit: the push joins its shard's queue; the first push to find no batch being written
 * becomes the leader, takes what is queued (up to CH_BATCH_ROWS sample rows) and writes it; the
 * others wait for their batch's outcome. Under concurrent pushes this makes one INSERT per table
 * for many pushes (ClickHouse makes a part per INSERT, the cost that dominates small ones). */
static int commit(ch_store *c, size_t shard, ch_pending *me, strobe_err *err)
{
	pthread_cond_init(&me->cv, NULL);
	pthread_mutex_lock(&c->mu);
	if (!c->qtail[shard])
		c->qtail[shard] = &c->qhead[shard];
	*c->qtail[shard] = me;
	c->qtail[shard] = &me->next;
	while (!me->done) {
		if (c->leader[shard] || c->qhead[shard] != me) {
			pthread_cond_wait(&me->cv, &c->mu);
			continue;
		}
		/* the head of the queue with no batch in flight: lead one */
		c->leader[shard] = true;
		ch_pending *first = me, *p = me;
		size_t n = 1, rows = me->nrows;
		while (p->next && rows + p->next->nrows <= CH_BATCH_ROWS) {
			p = p->next;
			rows += p->nrows;
			n++;
		}
		c->qhead[shard] = p->next;
		if (!p->next)
			c->qtail[shard] = &c->qhead[shard];
		p->next = NULL;
		pthread_mutex_unlock(&c->mu);
		strobe_err e = {{0}};
		int r = write_batch(c, shard, first, n, &e);
		pthread_mutex_lock(&c->mu);
		for (p = first; p; p = p->next) {
			p->r = r;
			p->err = e;
			p->done = true;
			pthread_cond_signal(&p->cv);
		}
		c->leader[shard] = false;
		if (c->qhead[shard]) /* the next batch's head leads it */
			pthread_cond_signal(&c->qhead[shard]->cv);
	}
	pthread_mutex_unlock(&c->mu);
	pthread_cond_destroy(&me->cv);
	if (me->r < 0)
		*err = me->err;
	return me->r;
}

int ch_push(void *ctx, const strobe_push_req *rq, strobe_push_result *res, strobe_err *err)
{
	ch_store *c = ctx;
	memset(res, 0, sizeof(*res));
	size_t ncols = 0;
	for (size_t i = 0; i < rq->nitems; i++)
		ncols += rq->items[i].profile->ntypes;
	pcol *cols = calloc(ncols ? ncols : 1, sizeof(*cols));
	strobe_labelpair **merged = calloc(rq->nitems ? rq->nitems : 1, sizeof(*merged));
	uint32_t **gst = calloc(rq->nitems ? rq->nitems : 1, sizeof(*gst));
	res->acc = calloc(ncols ? ncols : 1, sizeof(*res->acc));
	/* The scratch store: only what store_map_stack and store_map_view touch. */
	strobe_store scratch;
	memset(&scratch, 0, sizeof(scratch));
	scratch.sym = strobe_profile_new();
	symh h = {0};
	strobe_buf fb, lb, sb, seb, smb;
	strobe_buf_init(&fb, SIZE_MAX);
	strobe_buf_init(&lb, SIZE_MAX);
	strobe_buf_init(&sb, SIZE_MAX);
	strobe_buf_init(&seb, SIZE_MAX);
	strobe_buf_init(&smb, SIZE_MAX);
	spair *pairs = NULL;
	int r = cols && merged && gst && res->acc && scratch.sym ? 0 : -ENOMEM;
	/* The sharding key: the tenant and the push's labels. */
	uint64_t shard = ch_hash_str(0x5a, rq->tenant ? rq->tenant : "");
	for (size_t i = 0; i < rq->nlabels; i++)
		shard = ch_hash_str(ch_hash_str(shard, rq->labels[i].name), rq->labels[i].value);
	size_t c0 = 0, maxns = 0;
	for (size_t it = 0; r == 0 && it < rq->nitems; it++) {
		const strobe_push_item *item = &rq->items[it];
		const strobe_profile *p = item->profile;
		int64_t t = item->time_ns ? item->time_ns : p->time_nanos ? p->time_nanos : rq->now_ns;
		if (c->o.retention_ns && t < rq->now_ns - c->o.retention_ns) {
			r = strobe_errf(err, -EDQUOT, "limit retention: the profile's time is older "
					"than the retention period; give a later time");
			break;
		}
		if (p->ntypes == 0) {
			r = strobe_errf(err, -EINVAL, "the profile has no sample types");
			break;
		}
		uint32_t ns = item->view ? item->view->nsamples
			      : item->samples ? item->nsamples : strobe_nsamples(p);
		if (ns > maxns)
			maxns = ns;
		if (!(gst[it] = malloc(((size_t)ns + 1) * sizeof(**gst)))) {
			r = -ENOMEM;
			break;
		}
		if (item->view) {
			r = store_map_view(&scratch, item->view, gst[it]);
		} else {
			store_remap m;
			r = store_remap_init(&m, p) < 0 ? -ENOMEM : 0;
			for (uint32_t i = 1; r == 0 && i <= ns; i++) {
				uint32_t sid = item->samples ? item->samples[i - 1] : i;
				if ((gst[it][i] = store_map_stack(scratch.sym, p, &m,
								  strobe_sample(p, sid)->stack)) ==
				    UINT32_MAX)
					r = -ENOMEM;
			}
			store_remap_free(&m);
		}
		const strobe_labelpair *labels = rq->labels;
		size_t nlabels = rq->nlabels;
		if (r == 0 && item->nlabels) {
			strobe_labelpair *mg = merged[it] =
				malloc((rq->nlabels + item->nlabels) * sizeof(*mg));
			if (!mg) {
				r = -ENOMEM;
				break;
			}
			size_t a = 0, b = 0;
			nlabels = 0;
			while (a < rq->nlabels || b < item->nlabels)
				mg[nlabels++] = b == item->nlabels ||
							(a < rq->nlabels &&
							 strcmp(rq->labels[a].name, item->labels[b].name) < 0)
						? rq->labels[a++]
						: item->labels[b++];
			labels = mg;
		}
		for (uint32_t ty = 0; r == 0 && ty < p->ntypes; ty++, c0++) {
			pcol *pc = &cols[c0];
			pc->item = it;
			pc->ty = ty;
			pc->time = t;
			pc->labels = labels;
			pc->nlabels = nlabels;
			if ((r = strobe_profile_type_names(p, item->name, ty, pc->type, err)) < 0)
				break;
			pc->series = series_id(rq->tenant, pc->type, labels, nlabels);
			pc->gauge = strobe_type_is_gauge(pc->type) || item->average;
		}
	}
	if (r == 0)
		r = hash_symbols(scratch.sym, &h);
	size_t nrows[3] = {0};
	if (r == 0)
		r = symbol_rows(c, scratch.sym, &h, shard, &fb, &lb, &sb, nrows);
	/* Series rows, for those this server has not written yet. */
	for (size_t k = 0; r == 0 && k < ncols; k++) {
		pcol *pc = &cols[k];
		pthread_mutex_lock(&c->mu);
		bool known = ch_known_has(&c->known_series, pc->series);
		pthread_mutex_unlock(&c->mu);
		if (known)
			continue;
		pc->add_series = true;
		r = rb_str(&seb, rq->tenant, strlen(rq->tenant));
		if (r == 0)
			r = rb_str(&seb, pc->type, strlen(pc->type));
		if (r == 0)
			r = rb_u64(&seb, pc->series);
		if (r == 0)
			r = rb_len(&seb, pc->nlabels);
		for (size_t i = 0; r == 0 && i < pc->nlabels; i++)
			r = rb_str(&seb, pc->labels[i].name, strlen(pc->labels[i].name));
		if (r == 0)
			r = rb_len(&seb, pc->nlabels);
		for (size_t i = 0; r == 0 && i < pc->nlabels; i++)
			r = rb_str(&seb, pc->labels[i].value, strlen(pc->labels[i].value));
		if (r == 0)
			r = rb_u8(&seb, pc->gauge);
		if (r == 0)
			r = rb_i64(&seb, rq->items[pc->item].profile->period);
		if (r == 0)
			r = rb_i64(&seb, rq->now_ns);
		if (r == 0)
			r = rb_u64(&seb, shard);
	}
	/* The samples: per column, values summed per stack, zeros dropped (as the SQLite store's
	 * points hold them). */
	size_t nsrows = 0;
	if (r == 0 && !(pairs = malloc((maxns + 1) * sizeof(*pairs))))
		r = -ENOMEM;
	for (size_t k = 0; r == 0 && k < ncols; k++) {
		pcol *pc = &cols[k];
		const strobe_push_item *item = &rq->items[pc->item];
		const strobe_profile *p = item->profile;
		const int64_t *vv = item->view ? item->view->values : NULL;
		uint32_t ns = item->view ? item->view->nsamples
			      : item->samples ? item->nsamples : strobe_nsamples(p);
		size_t w = 0;
		int64_t total = 0;
		for (uint32_t i = 1; i <= ns; i++) {
			uint32_t sid = item->samples ? item->samples[i - 1] : i;
			int64_t v = vv ? vv[(size_t)(i - 1) * p->ntypes + pc->ty]
				       : strobe_sample_values(p, sid)[pc->ty];
			if (!v)
				continue;
			total = (int64_t)((uint64_t)total + (uint64_t)v);
			pairs[w++] = (spair){h.stack[gst[pc->item][i]], v};
		}
		qsort(pairs, w, sizeof(*pairs), cmp_spair);
		size_t nz = 0;
		for (size_t i = 0; i < w;) {
			spair s = pairs[i++];
			while (i < w && pairs[i].stack == s.stack)
				s.value = (int64_t)((uint64_t)s.value + (uint64_t)pairs[i++].value);
			if (s.value)
				pairs[nz++] = s;
		}
		/* Sample labels: name\0value\0..., as the SQLite store keeps them. */
		strobe_buf sl;
		strobe_buf_init(&sl, 1u << 16);
		for (size_t i = 0; r == 0 && i < item->nslabels && i < STROBE_SAMPLE_LABELS_MAX; i++) {
			r = strobe_buf_add(&sl, item->slabels[i].name, strlen(item->slabels[i].name) + 1);
			if (r == 0)
				r = strobe_buf_add(&sl, item->slabels[i].value,
						   strlen(item->slabels[i].value) + 1);
		}
		/* One row for the point: its stacks (sorted) and their values as two arrays. A
		 * point with no value left writes no row (as before: it counts as no point). */
		if (r == 0 && nz) {
			r = rb_str(&smb, rq->tenant, strlen(rq->tenant));
			if (r == 0)
				r = rb_str(&smb, pc->type, strlen(pc->type));
			if (r == 0)
				r = rb_u64(&smb, pc->series);
			if (r == 0)
				r = rb_i64(&smb, pc->time);
			if (r == 0)
				r = rb_len(&smb, nz);
			for (size_t i = 0; r == 0 && i < nz; i++)
				r = rb_u64(&smb, pairs[i].stack);
			if (r == 0)
				r = rb_len(&smb, nz);
			for (size_t i = 0; r == 0 && i < nz; i++)
				r = rb_i64(&smb, pairs[i].value);
			if (r == 0)
				r = rb_str(&smb, sl.p ? sl.p : "", sl.len);
			if (r == 0)
				r = rb_u64(&smb, shard);
			if (r == 0)
				r = rb_i64(&smb, ch_point_id(c));
		}
		strobe_buf_free(&sl);
		nsrows += nz;
		strobe_push_accepted *a = &res->acc[k];
		snprintf(a->type, sizeof(a->type), "%s", pc->type);
		a->time_ns = pc->time;
		a->stacks = (uint32_t)nz;
		a->total = total;
	}
	if (r == -ENOMEM || r == -EFBIG)
		r = strobe_errf(err, -ENOMEM, "out of memory");
	/* The limits, before anything is written (a refused push leaves nothing behind): on the
	 * series and stacks this server has not written, the only ones that can be new. */
	if (r == 0 && (c->o.max_series || c->o.max_label_values || c->o.max_stacks)) {
		ch_newseries *nsv = calloc(ncols ? ncols : 1, sizeof(*nsv));
		uint64_t *nst = calloc(scratch.sym->stacks.n ? scratch.sym->stacks.n : 1,
				       sizeof(*nst));
		size_t nns = 0, nnst = 0;
		r = nsv && nst ? 0 : strobe_errf(err, -ENOMEM, "out of memory");
		for (size_t k = 0; r == 0 && k < ncols; k++)
			if (cols[k].add_series)
				nsv[nns++] = (ch_newseries){cols[k].series, cols[k].labels,
							    cols[k].nlabels};
		pthread_mutex_lock(&c->mu);
		for (uint32_t i = 1; r == 0 && c->o.max_stacks && i < scratch.sym->stacks.n; i++)
			if (!ch_known_has(&c->known_sym, h.stack[i]))
				nst[nnst++] = h.stack[i];
		pthread_mutex_unlock(&c->mu);
		if (r == 0)
			r = ch_push_limits(c, rq->tenant, nsv, nns, nst, nnst, err);
		free(nsv);
		free(nst);
	}
	/* The push's shard: the hash's high half scaled to the number of shards. */
	size_t si = (size_t)(((shard >> 32) * c->nshards) >> 32);
	/* Symbols and series first, samples last: see the top of this file. */
	ch_pending pend = {.rows = {&fb, &lb, &sb, &seb, &smb}, .nrows = nsrows};
	if (r == 0 && nsrows > CH_BATCH_ROWS)
		r = strobe_errf(err, -EFBIG, "limit: the push makes %zu sample rows, at most %u "
				"for the ClickHouse store", nsrows, CH_BATCH_ROWS);
	if (r == 0)
		r = commit(c, si, &pend, err);
	if (r == 0) {
		remember_symbols(c, scratch.sym, &h);
		pthread_mutex_lock(&c->mu);
		for (size_t k = 0; k < ncols; k++)
			if (cols[k].add_series)
				ch_known_add(&c->known_series, cols[k].series);
		c->pushes++;
		pthread_mutex_unlock(&c->mu);
		res->n = ncols;
	} else {
		/* Nothing of the push is acknowledged: with ClickHouse down (-EAGAIN, 503) the
		 * client keeps it and retries. */
		strobe_push_result_free(res);
	}
	free(pairs);
	strobe_buf_free(&fb);
	strobe_buf_free(&lb);
	strobe_buf_free(&sb);
	strobe_buf_free(&seb);
	strobe_buf_free(&smb);
	free(h.fn);
	free(h.loc);
	free(h.stack);
	for (size_t i = 0; gst && i < rq->nitems; i++)
		free(gst[i]);
	for (size_t i = 0; merged && i < rq->nitems; i++)
		free(merged[i]);
	free(gst);
	free(merged);
	free(cols);
	store_seq_reset(&scratch);
	strobe_profile_free(scratch.sym);
	return r;
}
