// SPDX-License-Identifier: Apache-2.0
/*
 * AutoFDO export: LLVM's sample-profile text format (what `clang -fprofile-sample-use=FILE` and
 * `llvm-profdata merge --sample` read) from a merged CPU profile.
 *
 *   _Z3fooi:1200:40           function (linkage name) : total samples : head samples
 *    3: 700                   line offset from the function's first line : samples
 *    5.2: 100 _Z3bari:90      offset.discriminator : samples, then call targets : samples
 *    7: _Z3bazv:400           a callee inlined at offset 7, its own body nested one space in
 *     1: 400
 *
 * Without LBR there are no branch counts: each sample adds its value to the line of its leaf
 * frame and, because a caller's call line is "executing" for the whole call, to the call line of
 * every caller frame (with the callee as that line's call target). Counts are therefore time at a
 * line, not executions of it: a line with a slow instruction looks hotter than one executed as
 * often, and lines in the same basic block that were never the leaf of a sample get no count
 * (the compiler propagates from their neighbours). Lines are keyed by offset and LLVM's base
 * discriminator (the low component of what the DWARF line table holds; see
 * strobe_autofdo_base_discriminator), which is what clang's sample loader looks an instruction
 * up by. Head samples (entries) are estimated by the time spent in calls from other functions.
 *
 * A frame is keyed by its function's linkage name and Function.start_line; frames without either
 * (kernel, unsymbolized, no DWARF) are left out, and their callers still count.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/pgo.h"

/* Line offsets are 16 bits wide in LLVM's sample profiles (larger ones are dropped by it). */
#define OFFSET_MAX 0xffffu

/* off: line offset; disc: LLVM's base discriminator of that line (of the call, for an inlined
 * record). parent: record id + 1, 0 for a top-level function. */
typedef struct rec_key { uint32_t parent, off, name, disc; } rec_key;
typedef struct body_key { uint32_t rec, off, disc; } body_key;
typedef struct tgt_key { uint32_t rec, off, name, disc; } tgt_key;

typedef struct afdo {
	const strobe_profile *p;
	strobe_itab recs, bodies, tgts;
	int64_t *rec_total, *body, *tgt;
	size_t nrec_cap, nbody_cap, ntgt_cap;
	uint32_t *names; /* string id of the linkage name of function id, 0 = unusable */
} afdo;

static int grow(int64_t **a, size_t *cap, uint32_t n)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	while (nc <= n)
		nc *= 2;
	int64_t *x = realloc(*a, nc * sizeof(**a));
	if (!x)
		return -ENOMEM;
	memset(x + *cap, 0, (nc - *cap) * sizeof(**a));
	*a = x;
	*cap = nc;
	return 0;
}

/* A name LLVM's text reader can take back: no whitespace, no ':' (it splits on the last ones),
 * no '@' (a symbol version, as in __libc_start_main@@GLIBC_2.34: the source name is used). */
static bool name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == ':' || *s == '@')
			return false;
	return true;
}

static uint32_t fname(afdo *a, uint32_t fn)
{
	if (!fn)
		return 0;
	if (a->names[fn] != UINT32_MAX)
		return a->names[fn];
	const strobe_function *f = strobe_function_get(a->p, fn);
	uint32_t n = f->system_name && name_ok(strobe_str(a->p, f->system_name)) ? f->system_name
		     : name_ok(strobe_str(a->p, f->name))			    ? f->name
										    : 0;
	if (f->start_line <= 0)
		n = 0;
	return a->names[fn] = n;
}

uint32_t strobe_autofdo_base_discriminator(uint32_t d)
{
	/* LLVM's getUnsignedFromPrefixEncoding (llvm/Support/Discriminator.h): bit 0 set means
	 * the component is 0; else 5 bits follow, or 12 when bit 6 (the 0x20 after the shift) is
	 * set, split around that flag bit. */
	if (d & 1)
		return 0;
	d >>= 1;
	return (d & 0x20) ? (((d >> 1) & 0xfe0) | (d & 0x1f)) : (d & 0x1f);
}

static int rec_of(afdo *a, uint32_t parent, uint32_t off, uint32_t disc, uint32_t name,
		  uint32_t *id)
{
	rec_key k = {parent, off, name, disc};
	if (strobe_itab_intern(&a->recs, &k, sizeof k, id, NULL) < 0)
		return -ENOMEM;
	return grow(&a->rec_total, &a->nrec_cap, *id);
}

static int add_body(afdo *a, uint32_t rec, uint32_t off, uint32_t disc, int64_t v)
{
	body_key k = {rec, off, disc};
	uint32_t id;
	if (strobe_itab_intern(&a->bodies, &k, sizeof k, &id, NULL) < 0 ||
	    grow(&a->body, &a->nbody_cap, id) < 0)
		return -ENOMEM;
	a->body[id] += v;
	return 0;
}

static int add_tgt(afdo *a, uint32_t rec, uint32_t off, uint32_t disc, uint32_t name, int64_t v)
{
	tgt_key k = {rec, off, name, disc};
	uint32_t id;
	if (strobe_itab_intern(&a->tgts, &k, sizeof k, &id, NULL) < 0 ||
	    grow(&a->tgt, &a->ntgt_cap, id) < 0)
		return -ENOMEM;
	a->tgt[id] += v;
	return 0;
}

/* The innermost record of a location's inline chain, and the offset and base discriminator of
 * its line, adding v to the total of every record of the chain. 0 with *rec = UINT32_MAX when
 * the physical function is unusable or the innermost usable line is line 0; the chain is cut at
 * the first unusable inlined frame (its caller line counts). */
static int chain(afdo *a, const strobe_location *l, int64_t v, uint32_t *rec, uint32_t *off,
		 uint32_t *disc, uint32_t *phys)
{
	*rec = UINT32_MAX;
	if (!l->nline)
		return 0;
	const strobe_line *ln = l->line;
	uint32_t i = l->nline - 1;
	uint32_t nm = fname(a, ln[i].function);
	*phys = nm;
	if (!nm)
		return 0;
	uint32_t r;
	if (rec_of(a, 0, 0, 0, nm, &r) < 0)
		return -ENOMEM;
	for (;;) {
		const strobe_function *f = strobe_function_get(a->p, ln[i].function);
		int64_t o = ln[i].line - f->start_line;
		/* Line 0 (code the compiler made: clang's switch dispatch, merged blocks) is
		 * dropped, as create_llvm_prof drops any position before its function's start:
		 * the compiler looks a line-0 instruction up at offset (0 - start) & 0xffff,
		 * where only its own line-0 IR could match, and the binary's line-0 code is
		 * mostly made after that IR, in code generation. */
		if (ln[i].line <= 0 || o < 0 || o > OFFSET_MAX)
			return 0; /* no usable line: the chain tells nothing here */
		a->rec_total[r] += v;
		uint32_t d = strobe_autofdo_base_discriminator(ln[i].discriminator);
		uint32_t cn = i ? fname(a, ln[i - 1].function) : 0;
		if (!i || !cn || ln[i - 1].line <= 0) {
			*rec = r;
			*off = (uint32_t)o;
			*disc = d;
			return 0;
		}
		uint32_t child;
		if (rec_of(a, r + 1, (uint32_t)o, d, cn, &child) < 0)
			return -ENOMEM;
		r = child;
		i--;
	}
}

/* kind 0 body, 1 inline */
typedef struct ent { uint32_t off, disc, kind, id; const char *name; } ent;

static int cmp_ent(const void *x, const void *y)
{
	const ent *a = x, *b = y;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	if (a->disc != b->disc)
		return a->disc < b->disc ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int emit(afdo *a, strobe_buf *out, uint32_t rec, unsigned depth, ent *ents,
		const uint32_t *efirst, const uint32_t *enext, const uint32_t *tfirst,
		const uint32_t *tnext)
{
	/* gather this record's entries: its bodies and its inlined children */
	size_t n = 0;
	for (uint32_t e = efirst[rec]; e != UINT32_MAX; e = enext[e])
		n++;
	ent *v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	n = 0;
	for (uint32_t e = efirst[rec]; e != UINT32_MAX; e = enext[e])
		v[n++] = ents[e];
	qsort(v, n, sizeof(*v), cmp_ent);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		/* "offset: " or, on a discriminated line, "offset.discriminator: " */
		char at[24];
		if (v[i].disc)
			snprintf(at, sizeof(at), "%u.%u", v[i].off, v[i].disc);
		else
			snprintf(at, sizeof(at), "%u", v[i].off);
		if (v[i].kind == 0) {
			rc = strobe_buf_addf(out, "%*s%s: %lld", (int)depth + 1, "", at,
					     (long long)a->body[v[i].id]);
			for (uint32_t t = tfirst[v[i].id]; t != UINT32_MAX && rc == 0; t = tnext[t]) {
				const tgt_key *k = strobe_itab_get(&a->tgts, t, NULL);
				rc = strobe_buf_addf(out, " %s:%lld", strobe_str(a->p, k->name),
						     (long long)a->tgt[t]);
			}
			if (rc == 0)
				rc = strobe_buf_adds(out, "\n");
		} else {
			rc = strobe_buf_addf(out, "%*s%s: %s:%lld\n", (int)depth + 1, "", at,
					     v[i].name, (long long)a->rec_total[v[i].id]);
			if (rc == 0)
				rc = emit(a, out, v[i].id, depth + 1, ents, efirst, enext, tfirst,
					  tnext);
		}
	}
	free(v);
	return rc;
}

typedef struct top { uint32_t id; int64_t total; const char *name; } top;

static int cmp_top(const void *x, const void *y)
{
	const top *a = x, *b = y;
	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return strcmp(a->name, b->name);
}

int strobe_autofdo_write(const strobe_profile *p, int type, strobe_buf *out,
			 strobe_pgo_stats *stats, strobe_err *err)
{
	afdo a = {.p = p};
	a.recs.fixed = sizeof(rec_key);
	a.bodies.fixed = sizeof(body_key);
	a.tgts.fixed = sizeof(tgt_key);
	int rc = -ENOMEM;
	int64_t total = 0, used = 0, line0 = 0, discriminated = 0;
	uint32_t *efirst = NULL, *enext = NULL, *tfirst = NULL, *tnext = NULL;
	ent *ents = NULL;
	top *tops = NULL;
	a.names = malloc((p->functions.n + 1) * sizeof(*a.names));
	if (!a.names)
		goto out;
	memset(a.names, 0xff, (p->functions.n + 1) * sizeof(*a.names));
	if (grow(&a.rec_total, &a.nrec_cap, 0) < 0)
		goto out;

	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (v <= 0)
			continue;
		total += v;
		uint32_t callee = 0; /* physical function of the frame below (towards the leaf) */
		bool leaf = true, counted = false;
		for (uint32_t st = strobe_sample(p, s)->stack; st; leaf = false) {
			const strobe_stack_node *n = strobe_stack_get(p, st);
			st = n->parent;
			const strobe_location *l = strobe_location_get(p, n->location);
			uint32_t rec, off, disc = 0, phys = 0;
			if (chain(&a, l, v, &rec, &off, &disc, &phys) < 0)
				goto out;
			if (rec != UINT32_MAX) {
				if (add_body(&a, rec, off, disc, v) < 0 ||
				    (!leaf && callee && add_tgt(&a, rec, off, disc, callee, v) < 0))
					goto out;
				if (leaf) {
					counted = true;
					if (disc)
						discriminated += v;
				}
			} else if (leaf && phys && l->nline && l->line[0].line <= 0) {
				line0 += v;
			}
			callee = phys;
		}
		if (counted)
			used += v;
	}
	if (used == 0) {
		rc = strobe_errf(err, -ENODATA,
				 "no sampled frame has a line number and its function's start line "
				 "(DW_AT_decl_line), which AutoFDO keys lines by: build the program with "
				 "-g (DWARF) and record it with symbolization on");
		goto out;
	}

	/* Head samples: the calls into a function from its callers, per top-level record. */
	int64_t *head = calloc(a.recs.n + 1, sizeof(*head));
	if (!head)
		goto out;
	for (uint32_t t = 0; t < a.tgts.n; t++) {
		const tgt_key *k = strobe_itab_get(&a.tgts, t, NULL);
		rec_key rk = {0, 0, k->name, 0};
		uint32_t r = strobe_itab_find(&a.recs, &rk, sizeof rk);
		if (r != UINT32_MAX)
			head[r] += a.tgt[t];
	}

	/* Children lists: entries (bodies and inlined records) per record, targets per body. */
	uint32_t nent = a.bodies.n + a.recs.n;
	efirst = malloc((a.recs.n + 1) * sizeof(*efirst));
	enext = malloc((nent + 1) * sizeof(*enext));
	ents = malloc((nent + 1) * sizeof(*ents));
	tfirst = malloc((a.bodies.n + 1) * sizeof(*tfirst));
	tnext = malloc((a.tgts.n + 1) * sizeof(*tnext));
	tops = malloc((a.recs.n + 1) * sizeof(*tops));
	if (!efirst || !enext || !ents || !tfirst || !tnext || !tops) {
		free(head);
		goto out;
	}
	memset(efirst, 0xff, (a.recs.n + 1) * sizeof(*efirst));
	memset(tfirst, 0xff, (a.bodies.n + 1) * sizeof(*tfirst));
	uint32_t e = 0;
	for (uint32_t b = 0; b < a.bodies.n; b++, e++) {
		const body_key *k = strobe_itab_get(&a.bodies, b, NULL);
		ents[e] = (ent){k->off, k->disc, 0, b, ""};
		enext[e] = efirst[k->rec];
		efirst[k->rec] = e;
	}
	uint32_t ntop = 0;
	for (uint32_t r = 0; r < a.recs.n; r++) {
		const rec_key *k = strobe_itab_get(&a.recs, r, NULL);
		const char *nm = strobe_str(p, k->name);
		if (!k->parent) {
			tops[ntop++] = (top){r, a.rec_total[r], nm};
			continue;
		}
		ents[e] = (ent){k->off, k->disc, 1, r, nm};
		enext[e] = efirst[k->parent - 1];
		efirst[k->parent - 1] = e++;
	}
	/* targets, heaviest first on each line (a stable order for equal weights: by name) */
	for (uint32_t t = a.tgts.n; t-- > 0;) {
		const tgt_key *k = strobe_itab_get(&a.tgts, t, NULL);
		body_key bk = {k->rec, k->off, k->disc};
		uint32_t b = strobe_itab_find(&a.bodies, &bk, sizeof bk);
		uint32_t *pp = &tfirst[b];
		while (*pp != UINT32_MAX) {
			const tgt_key *o = strobe_itab_get(&a.tgts, *pp, NULL);
			if (a.tgt[*pp] < a.tgt[t] ||
			    (a.tgt[*pp] == a.tgt[t] &&
			     strcmp(strobe_str(p, o->name), strobe_str(p, k->name)) > 0))
				break;
			pp = &tnext[*pp];
		}
		tnext[t] = *pp;
		*pp = t;
	}
	qsort(tops, ntop, sizeof(*tops), cmp_top);
	rc = 0;
	for (uint32_t i = 0; i < ntop && rc == 0; i++) {
		rc = strobe_buf_addf(out, "%s:%lld:%lld\n", tops[i].name, (long long)tops[i].total,
				     (long long)head[tops[i].id]);
		if (rc == 0)
			rc = emit(&a, out, tops[i].id, 0, ents, efirst, enext, tfirst, tnext);
	}
	free(head);
	if (rc < 0)
		strobe_errf(err, rc, "writing the AutoFDO profile: %s",
			    rc == -E2BIG ? "it is larger than the output's cap" : "out of memory");
	if (stats)
		*stats = (strobe_pgo_stats){total, used, ntop, line0, discriminated};
out:
	if (rc == -ENOMEM && (!err || !err->msg[0]))
		strobe_errf(err, rc, "out of memory writing the AutoFDO profile");
	free(efirst);
	free(enext);
	free(ents);
	free(tfirst);
	free(tnext);
	free(tops);
	free(a.names);
	free(a.rec_total);
	free(a.body);
	free(a.tgt);
	strobe_itab_free(&a.recs);
	strobe_itab_free(&a.bodies);
	strobe_itab_free(&a.tgts);
	return rc;
}
