// SPDX-License-Identifier: Apache-2.0
/*
 * Go PGO export: the default.pgo file `go build -pgo=FILE` reads (Go 1.21 and later), from a
 * merged CPU profile.
 *
 * What Go's compiler uses of a profile (cmd/compile/internal/pgo): one sample type, samples/count
 * or cpu/nanoseconds; the call edges between consecutive frames of each stack, every inlined
 * frame a frame of its own, each edge keyed by caller name, callee name and the call line's
 * offset from Function.start_line. Without start lines it refuses the whole profile; without
 * names or lines the edges match nothing and the profile is silently ignored
 * (grafana/pyroscope#2254), so frames lacking either end the stack here and a profile with none
 * is refused with the reason.
 *
 * Trimming, as Pyroscope's go-pgo export does: addresses, mappings and labels are dropped (Go
 * matches by name and line), each stack is cut to its leaf-most frames, where the hot call edges
 * are, and the lightest stacks are dropped while the rest keep keep_share of the total. The result
 * is typically 10-100x smaller than the merged profile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/pgo.h"

#define GO_FRAMES_MAX 64u

static bool frame_ok(const strobe_profile *p, const strobe_line *ln)
{
	if (!ln->function || ln->line <= 0)
		return false;
	const strobe_function *f = strobe_function_get(p, ln->function);
	return f->start_line > 0 && *strobe_str(p, f->name);
}

static uint32_t copy_fn(strobe_profile *q, const strobe_profile *p, uint32_t fn)
{
	const strobe_function *f = strobe_function_get(p, fn);
	strobe_function g = {
		.name = strobe_str_intern0(q, strobe_str(p, f->name)),
		.system_name = strobe_str_intern0(q, strobe_str(p, f->system_name ? f->system_name
										  : f->name)),
		.filename = strobe_str_intern0(q, strobe_str(p, f->filename)),
		.start_line = f->start_line,
	};
	if (g.name == UINT32_MAX || g.system_name == UINT32_MAX || g.filename == UINT32_MAX)
		return UINT32_MAX;
	return strobe_function_intern(q, &g);
}

typedef struct kept { uint32_t stack; int64_t v; } kept;

static int cmp_kept(const void *x, const void *y)
{
	const kept *a = x, *b = y;
	if (a->v != b->v)
		return a->v > b->v ? -1 : 1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* The stack of q (a trimmed copy of p's stack st), 0 when its leaf frame is unusable. */
static int trim_stack(strobe_profile *q, const strobe_profile *p, uint32_t st, unsigned keep,
		      uint32_t *out)
{
	uint32_t locs[GO_FRAMES_MAX];
	unsigned nloc = 0, frames = 0;
	strobe_line lines[STROBE_NAMER_MAX_LINES];
	*out = 0;
	for (; st && frames < keep && nloc < GO_FRAMES_MAX;) {
		const strobe_stack_node *n = strobe_stack_get(p, st);
		st = n->parent;
		const strobe_location *l = strobe_location_get(p, n->location);
		/* the usable inner part of the location: stop at the first unusable frame, from the
		 * physical function inwards, so that no edge skips a frame */
		uint32_t k = 0;
		while (k < l->nline && k < STROBE_NAMER_MAX_LINES && frame_ok(p, &l->line[l->nline - 1 - k]))
			k++;
		if (k == 0)
			break;
		for (uint32_t i = 0; i < k; i++) {
			const strobe_line *ln = &l->line[l->nline - k + i];
			uint32_t fn = copy_fn(q, p, ln->function);
			if (fn == UINT32_MAX)
				return -ENOMEM;
			lines[i] = (strobe_line){.function = fn, .line = ln->line};
		}
		uint32_t loc = strobe_location_intern(q, 0, 0, lines, k, false);
		if (loc == UINT32_MAX)
			return -ENOMEM;
		locs[nloc++] = loc;
		frames += k;
		if (k < l->nline)
			break; /* an unusable inlined frame: what lies above it is cut */
	}
	uint32_t s = 0;
	for (unsigned i = nloc; i-- > 0;)
		if ((s = strobe_stack_push(q, s, locs[i])) == UINT32_MAX)
			return -ENOMEM;
	*out = s;
	return 0;
}

int strobe_pgo_go_write(const strobe_profile *p, int type, const strobe_pgo_go_opts *o,
			strobe_buf *out, strobe_pgo_stats *stats, strobe_err *err)
{
	unsigned keep = o && o->keep_frames ? o->keep_frames : 5;
	double share = o && o->keep_share > 0 ? o->keep_share : 0.99;
	if (keep > GO_FRAMES_MAX)
		keep = GO_FRAMES_MAX;
	const char *tn = strobe_str(p, p->types[type].type), *un = strobe_str(p, p->types[type].unit);
	strobe_profile *q = strobe_profile_new(), *r = NULL;
	kept *ks = NULL;
	uint8_t *pb = NULL;
	size_t pblen = 0;
	int rc = -ENOMEM;
	if (!q || strobe_profile_add_type(q, tn, un) < 0)
		goto out;
	int64_t total = 0, used = 0;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (v <= 0)
			continue;
		total += v;
		uint32_t st;
		if ((rc = trim_stack(q, p, strobe_sample(p, s)->stack, keep, &st)) < 0)
			goto out;
		rc = -ENOMEM;
		if (st && strobe_sample_add(q, st, 0, &v) < 0)
			goto out;
	}
	uint32_t n = strobe_nsamples(q);
	if (n == 0) {
		rc = strobe_errf(err, -ENODATA,
				 "no sample has a leaf frame with a function name, a line number and "
				 "Function.start_line, which Go's PGO matches call edges by (Go ignores "
				 "or refuses such a profile): profile Go 1.20 or later (its runtime/pprof "
				 "writes start lines), or record native code built with -g (DWARF)");
		goto out;
	}
	if (!(ks = malloc(n * sizeof(*ks))))
		goto out;
	int64_t qtotal = 0;
	for (uint32_t s = 1; s <= n; s++) {
		ks[s - 1] = (kept){strobe_sample(q, s)->stack, strobe_sample_values(q, s)[0]};
		qtotal += ks[s - 1].v;
	}
	qsort(ks, n, sizeof(*ks), cmp_kept);
	/* Rebuild with only the heaviest stacks: a second profile, so that nothing of the dropped
	 * ones (locations, functions, strings) is written. */
	if (!(r = strobe_profile_new()) || strobe_profile_add_type(r, tn, un) < 0)
		goto out;
	r->period_type.type = strobe_str_intern0(r, "cpu");
	r->period_type.unit = strobe_str_intern0(r, "nanoseconds");
	r->period = p->period;
	r->time_nanos = p->time_nanos;
	r->duration_nanos = p->duration_nanos;
	uint32_t nk = 0;
	for (; nk < n && (used < (int64_t)(share * (double)qtotal) || nk == 0); nk++) {
		uint32_t locs[GO_FRAMES_MAX], nl = 0;
		for (uint32_t st = ks[nk].stack; st && nl < GO_FRAMES_MAX;) {
			const strobe_stack_node *sn = strobe_stack_get(q, st);
			st = sn->parent;
			const strobe_location *l = strobe_location_get(q, sn->location);
			strobe_line lines[STROBE_NAMER_MAX_LINES];
			for (uint32_t i = 0; i < l->nline; i++) {
				uint32_t fn = copy_fn(r, q, l->line[i].function);
				if (fn == UINT32_MAX)
					goto out;
				lines[i] = (strobe_line){.function = fn, .line = l->line[i].line};
			}
			if ((locs[nl++] = strobe_location_intern(r, 0, 0, lines, l->nline, false)) ==
			    UINT32_MAX)
				goto out;
		}
		uint32_t s = 0;
		for (uint32_t i = nl; i-- > 0;)
			if ((s = strobe_stack_push(r, s, locs[i])) == UINT32_MAX)
				goto out;
		if (strobe_sample_add(r, s, 0, &ks[nk].v) < 0)
			goto out;
		used += ks[nk].v;
	}
	if (strobe_profile_add_comment(r, "strobe pgo go: trimmed to the hot call edges") < 0)
		goto out;
	if ((rc = strobe_pprof_encode(r, &pb, &pblen)) < 0) /* gzipped, as Go writes them */
		goto out;
	if ((rc = strobe_buf_add(out, pb, pblen)) < 0) {
		strobe_errf(err, rc, "the Go profile (%zu bytes) is larger than the output's cap",
			    pblen);
		goto out;
	}
	if (stats)
		*stats = (strobe_pgo_stats){.total = total, .used = used, .records = nk};
	rc = 0;
out:
	if (rc == -ENOMEM && (!err || !err->msg[0]))
		strobe_errf(err, rc, "out of memory writing the Go profile");
	free(ks);
	free(pb);
	strobe_profile_free(q);
	strobe_profile_free(r);
	return rc;
}
