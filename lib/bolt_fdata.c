// SPDX-License-Identifier: Apache-2.0
/*
 * BOLT export: the no-LBR profile `llvm-bolt -data=FILE` reads, the file `perf2bolt -nl` writes
 * from `perf record` without branch records:
 *
 *   no_lbr cycles:
 *   1 main 2f 120          1 = the location is a symbol; symbol; hex offset into it; samples
 *   1 helper/1 8 37        a local symbol, named as BOLT names locals (NAME/N)
 *
 * Only the samples' leaf addresses count (the instruction the CPU was at); BOLT infers block and
 * edge counts from them, less precisely than from LBR (docs/pgo.md). The caller's resolver turns
 * an address into BOLT's symbol name and offset, because that needs the executable itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/pgo.h"

typedef struct site { uint32_t name, pad_; uint64_t off; } site;
typedef struct row { const char *name; uint64_t off; int64_t v; } row;

static int cmp_row(const void *x, const void *y)
{
	const row *a = x, *b = y;
	int c = strcmp(a->name, b->name);
	if (c)
		return c;
	return a->off < b->off ? -1 : a->off > b->off;
}

int strobe_bolt_fdata_write(const strobe_profile *p, int type, strobe_bolt_resolver resolve,
			    void *ctx, strobe_buf *out, strobe_pgo_stats *stats, strobe_err *err)
{
	strobe_itab names = {0}, sites = {.fixed = sizeof(site)};
	int64_t *vals = NULL;
	size_t cap = 0;
	row *rows = NULL;
	int64_t total = 0, used = 0;
	int rc = -ENOMEM;
	for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
		int64_t v = strobe_sample_values(p, s)[type];
		if (v <= 0)
			continue;
		total += v;
		const strobe_stack_node *n = strobe_stack_get(p, strobe_sample(p, s)->stack);
		if (!n->location)
			continue;
		const strobe_location *l = strobe_location_get(p, n->location);
		if (!l->address || !l->mapping)
			continue;
		const char *sym;
		uint64_t off;
		int r = resolve(ctx, p, l, &sym, &off);
		if (r < 0) {
			rc = strobe_errf(err, r, "naming sampled addresses for BOLT failed");
			goto out;
		}
		if (r == 0)
			continue;
		site k = {0, 0, off};
		if (strobe_itab_intern(&names, sym, strlen(sym) + 1, &k.name, NULL) < 0)
			goto out;
		uint32_t id;
		if (strobe_itab_intern(&sites, &k, sizeof k, &id, NULL) < 0)
			goto out;
		if (id >= cap) {
			size_t nc = cap ? cap * 2 : 1024;
			int64_t *x = realloc(vals, nc * sizeof(*x));
			if (!x)
				goto out;
			memset(x + cap, 0, (nc - cap) * sizeof(*x));
			vals = x;
			cap = nc;
		}
		vals[id] += v;
		used += v;
	}
	if (used == 0) {
		rc = strobe_errf(err, -ENODATA,
				 "none of the sampled addresses lies in the executable given (matched by "
				 "build ID) or in a symbol of it: give the binary that ran, with its "
				 "symbol table (not stripped), and a profile recorded with addresses "
				 "(any strobe record or agent profile has them)");
		goto out;
	}
	if (!(rows = malloc(sites.n * sizeof(*rows))))
		goto out;
	for (uint32_t i = 0; i < sites.n; i++) {
		const site *k = strobe_itab_get(&sites, i, NULL);
		rows[i] = (row){strobe_itab_get(&names, k->name, NULL), k->off, vals[i]};
	}
	qsort(rows, sites.n, sizeof(*rows), cmp_row);
	rc = strobe_buf_adds(out, "no_lbr cycles:\n");
	for (uint32_t i = 0; i < sites.n && rc == 0; i++)
		rc = strobe_buf_addf(out, "1 %s %llx %lld\n", rows[i].name,
				     (unsigned long long)rows[i].off, (long long)rows[i].v);
	if (rc < 0) {
		strobe_errf(err, rc, "writing the BOLT profile: %s",
			    rc == -E2BIG ? "it is larger than the output's cap" : "out of memory");
		goto out;
	}
	if (stats)
		*stats = (strobe_pgo_stats){.total = total, .used = used, .records = sites.n};
	rc = 0;
out:
	if (rc == -ENOMEM && (!err || !err->msg[0]))
		strobe_errf(err, rc, "out of memory writing the BOLT profile");
	free(rows);
	free(vals);
	strobe_itab_free(&names);
	strobe_itab_free(&sites);
	return rc;
}
