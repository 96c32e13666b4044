// SPDX-License-Identifier: Apache-2.0
/*
 * Naming on the server: a queried profile's bare addresses (locations without lines, in a
 * mapping with a build ID, as agents in --symbolize=server mode and stripped binaries send them)
 * are named from the tenant's debug-info store (server/debuginfo.c) with the recorder's own
 * symbolizer (libdw: demangled names, file:line, inlined frames), as the profile leaves the store.
 * The stored profiles are not changed, so debug info uploaded later names the profiles that came
 * before it, the way Parca does.
 *
 * One symbolizer per tenant, so a tenant's upload names only its own profiles (a build ID note
 * is easy to forge; another tenant's file must not name your addresses). It keeps each object's
 * tables and a cache of recent lookups, so a warm query costs bisections. An upload to a tenant
 * drops its symbolizer (the next query opens the new file: an executable named from its symbol
 * table alone must give way to the debug file uploaded after it). At most MAX_TENANTS symbolizers
 * are held, the least recently used dropped first, each with a DWARF budget per object.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server_impl.h"
#include "strobe/symbolize.h"

#define MAX_TENANTS 16
#define DEBUG_BUDGET ((uint64_t)256 << 20) /* per object: DWARF beyond is dropped and reloaded */

typedef struct namer_slot {
	char tenant[65];
	strobe_symbolizer *sym;
	char *nowhere; /* the symbolizer's sysroot: a path that holds nothing (no host files) */
	uint64_t used;
	pthread_mutex_t mu; /* one query names with a symbolizer at a time */
} namer_slot;

struct srv_namers {
	pthread_mutex_t mu; /* the table */
	uint64_t tick;
	namer_slot slot[MAX_TENANTS];
};

srv_namers *srv_namers_new(void)
{
	srv_namers *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	pthread_mutex_init(&n->mu, NULL);
	for (int i = 0; i < MAX_TENANTS; i++)
		pthread_mutex_init(&n->slot[i].mu, NULL);
	return n;
}

static void slot_clear(namer_slot *s)
{
	strobe_symbolizer_free(s->sym);
	free(s->nowhere);
	s->sym = NULL;
	s->nowhere = NULL;
	s->tenant[0] = 0;
}

void srv_namers_free(srv_namers *n)
{
	if (!n)
		return;
	for (int i = 0; i < MAX_TENANTS; i++) {
		slot_clear(&n->slot[i]);
		pthread_mutex_destroy(&n->slot[i].mu);
	}
	pthread_mutex_destroy(&n->mu);
	free(n);
}

void srv_namers_forget(srv_namers *n, const char *tenant)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	for (int i = 0; i < MAX_TENANTS; i++) {
		namer_slot *s = &n->slot[i];
		if (strcmp(s->tenant, tenant) != 0)
			continue;
		pthread_mutex_lock(&s->mu); /* not while a query names with it */
		slot_clear(s);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&n->mu);
}

/* The tenant's slot, locked, its symbolizer made if needed; NULL on ENOMEM. */
static namer_slot *slot_get(srv_namers *n, const char *data_dir, const char *tenant)
{
	pthread_mutex_lock(&n->mu);
	namer_slot *s = NULL, *lru = &n->slot[0];
	for (int i = 0; i < MAX_TENANTS && !s; i++) {
		if (!strcmp(n->slot[i].tenant, tenant))
			s = &n->slot[i];
		else if (n->slot[i].used < lru->used)
			lru = &n->slot[i];
	}
	if (!s) {
		s = lru;
		pthread_mutex_lock(&s->mu);
		slot_clear(s);
		snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
		pthread_mutex_unlock(&s->mu);
	}
	s->used = ++n->tick;
	pthread_mutex_lock(&s->mu);
	pthread_mutex_unlock(&n->mu);
	if (!s->sym) {
		if (asprintf(&s->nowhere, "%s/debuginfo/%s/.no-sysroot", data_dir, tenant) < 0)
			s->nowhere = NULL;
		strobe_sym_opts o = {.sysroot = s->nowhere, .no_kernel = true,
				     .max_debug_bytes = DEBUG_BUDGET};
		if (!s->nowhere || !(s->sym = strobe_symbolizer_new(&o))) {
			pthread_mutex_unlock(&s->mu);
			return NULL;
		}
	}
	return s;
}

typedef struct late_ctx {
	strobe_symbolizer *sym;
	const char *dir; /* <data_dir>/debuginfo/<tenant> */
	/* Per source mapping: 0 not looked at, 1 an object, 2 nothing to name with. */
	uint8_t *state;
	strobe_sym_object **obj;
	uint32_t named;
} late_ctx;

static int unhex(const char *h, uint8_t *out, size_t cap)
{
	size_t n = strlen(h);
	if (n < 2 || n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdef", h[2 * i]) ||
		    !strchr("0123456789abcdef", h[2 * i + 1]))
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)(n / 2);
}

/* The object that names a mapping: the uploaded debug file, else the executable (its symbol
 * table, when it kept one). */
static strobe_sym_object *object_for(late_ctx *c, const strobe_profile *src, uint32_t mid)
{
	if (c->state[mid])
		return c->state[mid] == 1 ? c->obj[mid] : NULL;
	c->state[mid] = 2;
	const strobe_mapping *m = strobe_mapping_get(src, mid);
	const char *bid = m->build_id ? strobe_str(src, m->build_id) : "";
	uint8_t id[64];
	int idn = unhex(bid, id, sizeof id);
	if (idn <= 0)
		return NULL;
	static const char *const role[] = {"debuginfo", "executable"};
	for (int i = 0; i < 2; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s.%s", c->dir, bid, role[i]);
		strobe_sym_object *o = NULL;
		if (strobe_sym_object_get(c->sym, path, 0, 0, 0, id, (size_t)idn, &o) == 0 &&
		    strobe_sym_object_has_symbols(o)) {
			c->state[mid] = 1;
			c->obj[mid] = o;
			return o;
		}
	}
	return NULL;
}

static uint32_t intern(strobe_profile *dst, const char *s)
{
	return s ? strobe_str_intern(dst, s, strlen(s)) : 0;
}

static int name_one(void *ctx, strobe_profile *dst, const strobe_profile *src,
		    const strobe_location *l, strobe_line *out, uint32_t max)
{
	late_ctx *c = ctx;
	if (!l->mapping)
		return 0;
	strobe_sym_object *o = object_for(c, src, l->mapping);
	const strobe_mapping *m = strobe_mapping_get(src, l->mapping);
	if (!o || l->address < m->start)
		return 0;
	strobe_sym_frame fr[STROBE_NAMER_MAX_LINES];
	int n = strobe_sym_lookup(c->sym, o, l->address - m->start + m->offset, fr,
				  (int)(max < STROBE_NAMER_MAX_LINES ? max : STROBE_NAMER_MAX_LINES));
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		strobe_function f = {.name = intern(dst, fr[i].function ? fr[i].function : "??"),
				     .system_name = intern(dst, fr[i].system_name),
				     .filename = intern(dst, fr[i].file),
				     .start_line = fr[i].start_line};
		if (f.name == UINT32_MAX || f.system_name == UINT32_MAX || f.filename == UINT32_MAX)
			return -ENOMEM;
		uint32_t fid = strobe_function_intern(dst, &f);
		if (fid == UINT32_MAX)
			return -ENOMEM;
		out[i] = (strobe_line){.function = fid, .line = fr[i].line, .column = fr[i].column};
	}
	c->named++;
	return n;
}

/* Whether any location is a bare address in a mapping with a build ID: most profiles arrive
 * named, and those cost this scan only. */
static bool has_bare(const strobe_profile *p)
{
	for (uint32_t i = 1; i < p->locations.n; i++) {
		const strobe_location *l = strobe_location_get(p, i);
		if (!l->nline && !l->is_folded && l->mapping &&
		    strobe_mapping_get(p, l->mapping)->build_id)
			return true;
	}
	return false;
}

int srv_name_late(srv_req *r, strobe_profile **pp)
{
	strobe_profile *p = *pp;
	if (!r->srv->namers || !r->tenant || !has_bare(p))
		return 0;
	char dir[4096];
	int dn = snprintf(dir, sizeof dir, "%s/debuginfo/%s", r->srv->cfg.data_dir, r->tenant);
	struct stat st;
	if (dn < 0 || (size_t)dn >= sizeof dir || stat(dir, &st) < 0)
		return 0; /* nothing uploaded by this tenant */
	namer_slot *s = slot_get(r->srv->namers, r->srv->cfg.data_dir, r->tenant);
	if (!s)
		return 0; /* out of memory: the profile goes out as it is, unnamed */
	late_ctx c = {.sym = s->sym, .dir = dir,
		      .state = calloc(p->mappings.n, 1),
		      .obj = calloc(p->mappings.n, sizeof(*c.obj))};
	strobe_profile *named = c.state && c.obj ? strobe_profile_new() : NULL;
	int rc = -ENOMEM;
	if (named) {
		strobe_err err = {{0}};
		rc = strobe_profile_merge_named(named, p, name_one, &c, &err);
	}
	pthread_mutex_unlock(&s->mu);
	free(c.state);
	free(c.obj);
	if (rc < 0 || !c.named) {
		strobe_profile_free(named);
		return 0; /* unnamed is still an answer */
	}
	strobe_profile_free(p);
	*pp = named;
	return 0;
}
