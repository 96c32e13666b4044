// SPDX-License-Identifier: Apache-2.0
/*
 * Naming on the server: a queried profile's bare addresses (locations without lines, in a
 * mapping with a build ID, as agents in --symbolize=server mode and stripped binaries send them)
 * are named from the tenant's debug-info store (server/debuginfo.c) with the recorder's own
 * symbolizer (libdw: demangled names, file:line, inlined frames), as the profile leaves the store.
 * The stored profiles are not changed, so debug info uploaded later names the profiles that came
 * before it, the way Parca does. Build IDs the tenant did not upload are asked of the debuginfod
 * servers the server was given (a few per query, with a timeout; a failure is not retried for a
 * minute), so a slow or dead debuginfod delays a query by its timeout at most and never ingest.
 *
 * One symbolizer per tenant, so a tenant's upload names only its own profiles (a build ID note
 * is easy to forge; another tenant's file must not name your addresses). It keeps each object's
 * tables and a cache of recent lookups, so a warm query costs bisections. An upload to a tenant
 * drops its symbolizer (the next query opens the new file: an executable named from its symbol
 * table alone must give way to the debug file uploaded after it). At most MAX_TENANTS symbolizers
 * are held, the least recently used dropped first, each with a DWARF budget per object.
 *
 * What a symbolizer finds is kept in the naming cache (server/name_cache.c, a SQLite table by
 * tenant, build ID and address), asked before any debug file is opened: an address is named
 * from debug info once, and the first query after a restart reads rows instead of opening the
 * files. An upload deletes its build ID's rows with the symbolizer (srv_namers_forget).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_impl.h"
#include "strobe/debuginfod.h"
#include "strobe/symbolize.h"

#define MAX_TENANTS 16
#define MAX_FETCHES 8       /* debuginfod lookups one query may wait for; the rest next time */
#define MISS_TTL_NS ((int64_t)60 * 1000000000) /* a failed lookup is not retried for a minute */
#define NMISS 256
#define DEBUG_BUDGET ((uint64_t)256 << 20) /* per object: DWARF beyond is dropped and reloaded */
/* Rows of the naming cache: about 100-200 bytes each on disk, so at most a few hundred MB. */
#define NAME_CACHE_ROWS 2000000u
#define NAME_BATCH_MAX 65536u /* new rows one query writes at most (the rest: next time) */
#define NAME_BUF (64u << 10)  /* the strings of one cached address (a longer row is a miss) */

typedef struct namer_slot {
	char tenant[65];
	strobe_symbolizer *sym;
	char *nowhere; /* the symbolizer's sysroot: a path that holds nothing (no host files) */
	uint64_t used;
	pthread_mutex_t mu; /* one query names with a symbolizer at a time */
} namer_slot;

/* A build ID debuginfod could not give (no server has it, or none answered), and until when
 * it is not asked for again: a server that is down costs one timeout a minute, not one per
 * query. (libdebuginfod itself remembers the misses a server answered, for 10 minutes.) */
typedef struct miss {
	char bid[129];
	int64_t until_ns;
} miss;

/* Lock order: mu, then a slot's mu (eviction, forget), then the cache's own. A query naming
 * with a slot (its mu held) takes only miss_mu and the cache's, never mu. */
struct srv_namers {
	pthread_mutex_t mu; /* the table, and opening the cache */
	srv_name_cache *cache; /* NULL until opened, or when it cannot be: names are then not kept */
	bool cache_tried;
	uint64_t tick;
	namer_slot slot[MAX_TENANTS];
	pthread_mutex_t miss_mu; /* the misses */
	miss misses[NMISS];
	unsigned next_miss;
};

srv_namers *srv_namers_new(void)
{
	srv_namers *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	pthread_mutex_init(&n->mu, NULL);
	pthread_mutex_init(&n->miss_mu, NULL);
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
	srv_name_cache_close(n->cache);
	pthread_mutex_destroy(&n->mu);
	pthread_mutex_destroy(&n->miss_mu);
	free(n);
}

/* The naming cache, opened at first use (n->mu held). */
static srv_name_cache *cache_of(srv_namers *n, const char *data_dir)
{
	if (!n->cache_tried) {
		n->cache_tried = true;
		n->cache = srv_name_cache_open(data_dir, NAME_CACHE_ROWS);
	}
	return n->cache;
}

void srv_namers_forget(srv_namers *n, const char *data_dir, const char *tenant, const char *bid)
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
	/* After the queries naming with the old file have written their rows (they held the slot),
	 * and before any new query starts (they take mu first): no stale row survives. */
	srv_name_cache_forget(cache_of(n, data_dir), tenant, bid);
	pthread_mutex_unlock(&n->mu);
}

void srv_namers_metrics(srv_namers *n, FILE *f)
{
	srv_name_cache_stats st = {0};
	pthread_mutex_lock(&n->mu);
	srv_name_cache_counts(n->cache, &st);
	pthread_mutex_unlock(&n->mu);
	fprintf(f, "# HELP strobe_name_cache_lookups_total Bare addresses looked up in the naming "
		   "cache, by result (a miss opens debug info).\n"
		   "# TYPE strobe_name_cache_lookups_total counter\n"
		   "strobe_name_cache_lookups_total{result=\"hit\"} %llu\n"
		   "strobe_name_cache_lookups_total{result=\"miss\"} %llu\n",
		(unsigned long long)st.hits, (unsigned long long)st.misses);
	fprintf(f, "# HELP strobe_name_cache_rows_total Rows written to the naming cache, and "
		   "dropped to keep it within its bound.\n"
		   "# TYPE strobe_name_cache_rows_total counter\n"
		   "strobe_name_cache_rows_total{op=\"stored\"} %llu\n"
		   "strobe_name_cache_rows_total{op=\"dropped\"} %llu\n",
		(unsigned long long)st.stored, (unsigned long long)st.dropped);
}

/* The tenant's slot, locked, its symbolizer made if needed; NULL on ENOMEM. The table's lock is
 * not held while waiting for a slot in use (another query of the same tenant naming), so other
 * tenants' queries go on; a slot given to another tenant meanwhile is looked for again. */
static namer_slot *slot_get(srv_namers *n, const char *data_dir, const char *tenant)
{
	namer_slot *s;
	for (;;) {
		pthread_mutex_lock(&n->mu);
		namer_slot *lru = &n->slot[0];
		s = NULL;
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
		cache_of(n, data_dir);
		pthread_mutex_unlock(&n->mu);
		pthread_mutex_lock(&s->mu);
		if (!strcmp(s->tenant, tenant))
			break;
		pthread_mutex_unlock(&s->mu);
	}
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
	srv_namers *namers;
	const strobe_server_config *cfg;
	int64_t now_ns;
	unsigned fetches; /* debuginfod lookups made for this query */
	const char *dir; /* <data_dir>/debuginfo/<tenant> */
	/* Per source mapping: 0 not looked at, 1 an object, 2 nothing to name with. */
	uint8_t *state;
	strobe_sym_object **obj;
	uint8_t *caller; /* per source location: 1 when it is some stack's caller frame */
	uint32_t named;
	/* The naming cache: per source mapping, 0 not asked, 1 it may hold rows of the build ID,
	 * 2 it holds none (its misses are not asked one by one); the rows found by this query. */
	srv_name_cache *cache;
	const char *tenant;
	uint8_t *cstate;
	srv_name_row *rows;
	size_t nrows, crows;
	char *buf; /* NAME_BUF bytes: the strings of the row read last */
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

static bool missed_lately(srv_namers *n, const char *bid, int64_t now)
{
	bool m = false;
	pthread_mutex_lock(&n->miss_mu);
	for (unsigned i = 0; i < NMISS && !m; i++)
		m = n->misses[i].until_ns > now && !strcmp(n->misses[i].bid, bid);
	pthread_mutex_unlock(&n->miss_mu);
	return m;
}

static void note_miss(srv_namers *n, const char *bid, int64_t now)
{
	pthread_mutex_lock(&n->miss_mu);
	miss *m = &n->misses[n->next_miss++ % NMISS];
	snprintf(m->bid, sizeof m->bid, "%s", bid);
	m->until_ns = now + MISS_TTL_NS;
	pthread_mutex_unlock(&n->miss_mu);
}

/* Keeps libdebuginfod's cache (a directory per build ID) under the configured size: the least
 * recently used entries go first. libdebuginfod bounds it by age only. */
static void cache_trim(uint64_t max)
{
	const char *root = getenv("DEBUGINFOD_CACHE_PATH");
	DIR *d = root ? opendir(root) : NULL;
	if (!d)
		return;
	typedef struct ent {
		char name[256];
		uint64_t size;
		int64_t used;
	} ent;
	ent *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[4096];
		struct stat st;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof v->name)
			continue;
		snprintf(p, sizeof p, "%s/%s/debuginfo", root, de->d_name);
		if (stat(p, &st) < 0)
			continue;
		if (n == cap) {
			ent *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
		v[n].size = (uint64_t)st.st_size;
		v[n].used = st.st_atime > st.st_mtime ? st.st_atime : st.st_mtime;
		total += v[n++].size;
	}
	closedir(d);
	while (total > max && n) {
		size_t old = 0;
		for (size_t i = 1; i < n; i++)
			if (v[i].used < v[old].used)
				old = i;
		char p[4096];
		snprintf(p, sizeof p, "%s/%s/debuginfo", root, v[old].name);
		unlink(p); /* a symbolizer holding it open keeps reading it */
		snprintf(p, sizeof p, "%s/%s", root, v[old].name);
		rmdir(p); /* fails while other files are there: they are small */
		total -= v[old].size;
		v[old] = v[--n];
	}
	free(v);
}

/* The separate debug file of a build ID from debuginfod, within this query's budget. */
static int fetch(late_ctx *c, const char *bid, char **path)
{
	if (!c->cfg->debuginfod_urls || c->fetches >= MAX_FETCHES ||
	    missed_lately(c->namers, bid, c->now_ns))
		return -ENOENT;
	c->fetches++;
	int r = strobe_debuginfod_find(bid, path);
	if (r < 0)
		note_miss(c->namers, bid, c->now_ns);
	else
		cache_trim(c->cfg->max_debuginfod_cache_bytes);
	return r;
}

/* The object that names a mapping: the uploaded debug file, else the executable (its symbol
 * table, when it kept one), else what debuginfod has. */
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
	char *path = NULL;
	strobe_sym_object *o = NULL;
	if (fetch(c, bid, &path) == 0 &&
	    strobe_sym_object_get(c->sym, path, 0, 0, 0, id, (size_t)idn, &o) == 0 &&
	    strobe_sym_object_has_symbols(o)) {
		c->state[mid] = 1;
		c->obj[mid] = o;
	}
	free(path);
	return c->state[mid] == 1 ? o : NULL;
}

static uint32_t intern(strobe_profile *dst, const char *s)
{
	return s ? strobe_str_intern(dst, s, strlen(s)) : 0;
}

/* Keeps what the symbolizer found for (build ID, address) to be written to the cache. */
static void remember(late_ctx *c, const char *bid, uint64_t addr, const strobe_sym_frame *fr,
		     int n)
{
	if (!c->cache || c->nrows >= NAME_BATCH_MAX)
		return;
	if (c->nrows == c->crows) {
		size_t nc = c->crows ? 2 * c->crows : 256;
		srv_name_row *v = realloc(c->rows, nc * sizeof(*v));
		if (!v)
			return;
		c->rows = v;
		c->crows = nc;
	}
	srv_name_row *r = &c->rows[c->nrows];
	r->build_id = bid;
	r->addr = addr;
	if ((r->blob = srv_name_cache_encode(fr, n, &r->len)))
		c->nrows++;
}

/* The cached frames of (mapping, address), or -ENOENT. A mapping's build ID with no rows at
 * all costs one lookup per query, not one per address. */
static int cached(late_ctx *c, uint32_t mid, const char *bid, uint64_t addr, strobe_sym_frame *fr,
		  int max)
{
	if (!c->cache || !c->buf || c->cstate[mid] == 2)
		return -ENOENT;
	int n = srv_name_cache_get(c->cache, c->tenant, bid, addr, fr, max, c->buf, NAME_BUF);
	if (!c->cstate[mid])
		c->cstate[mid] = n >= 0 || srv_name_cache_has(c->cache, c->tenant, bid) ? 1 : 2;
	return n;
}

static int name_one(void *ctx, strobe_profile *dst, const strobe_profile *src, uint32_t id,
		    const strobe_location *l, strobe_line *out, uint32_t max)
{
	late_ctx *c = ctx;
	if (!l->mapping)
		return 0;
	const strobe_mapping *m = strobe_mapping_get(src, l->mapping);
	const char *bid = m->build_id ? strobe_str(src, m->build_id) : NULL;
	if (!bid || !*bid || l->address <= m->start)
		return 0;
	/* A caller's address is where its call returns to, which may be the next line or, after
	 * a call that never returns, the next function: the call is the byte before (as the
	 * recorder looks it up). */
	uint64_t look = l->address - (c->caller[id] ? 1 : 0);
	uint64_t at = look - m->start + m->offset;
	strobe_sym_frame fr[STROBE_NAMER_MAX_LINES];
	int lim = (int)(max < STROBE_NAMER_MAX_LINES ? max : STROBE_NAMER_MAX_LINES);
	int n = cached(c, l->mapping, bid, at, fr, lim);
	if (n == -ENOENT) {
		strobe_sym_object *o = object_for(c, src, l->mapping);
		if (!o)
			return 0;
		n = strobe_sym_lookup(c->sym, o, at, fr, lim);
		if (n >= 0)
			remember(c, bid, at, fr, n);
	}
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
	if (dn < 0 || (size_t)dn >= sizeof dir ||
	    (stat(dir, &st) < 0 && !r->srv->cfg.debuginfod_urls))
		return 0; /* nothing uploaded by this tenant, and no debuginfod to ask */
	namer_slot *s = slot_get(r->srv->namers, r->srv->cfg.data_dir, r->tenant);
	if (!s)
		return 0; /* out of memory: the profile goes out as it is, unnamed */
	late_ctx c = {.sym = s->sym, .namers = r->srv->namers, .cfg = &r->srv->cfg,
		      .now_ns = r->now_ns, .dir = dir,
		      .cache = r->srv->namers->cache, .tenant = r->tenant,
		      .cstate = calloc(p->mappings.n, 1),
		      .buf = malloc(NAME_BUF),
		      .state = calloc(p->mappings.n, 1),
		      .obj = calloc(p->mappings.n, sizeof(*c.obj)),
		      .caller = calloc(p->locations.n, 1)};
	if (c.caller)
		for (uint32_t i = 1; i < p->stacks.n; i++) {
			uint32_t parent = strobe_stack_get(p, i)->parent;
			if (parent)
				c.caller[strobe_stack_get(p, parent)->location] = 1;
		}
	strobe_profile *named =
		c.state && c.obj && c.caller && c.cstate ? strobe_profile_new() : NULL;
	int rc = -ENOMEM;
	if (named) {
		strobe_err err = {{0}};
		rc = strobe_profile_merge_named(named, p, name_one, &c, &err);
	}
	/* Written while the slot is held: an upload's srv_namers_forget waits for it, so rows
	 * named from a file that was just replaced are deleted after they are written. A cache
	 * that cannot be written only costs lookups. */
	srv_name_cache_put(c.cache, r->tenant, c.rows, c.nrows);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < c.nrows; i++)
		free(c.rows[i].blob);
	free(c.rows);
	free(c.cstate);
	free(c.buf);
	free(c.state);
	free(c.obj);
	free(c.caller);
	if (rc < 0 || !c.named) {
		strobe_profile_free(named);
		return 0; /* unnamed is still an answer */
	}
	strobe_profile_free(p);
	*pp = named;
	return 0;
}
