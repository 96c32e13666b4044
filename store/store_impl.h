/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the embedded store, shared by its files: the in-memory mirror of the symbol tables
 * and series (so ingest never SELECTs per frame or per series), the point blob codec, and the
 * SQLite statements.
 */
#ifndef STROBE_STORE_IMPL_H
#define STROBE_STORE_IMPL_H

#include <pthread.h>
#include <sqlite3.h>

#include "strobe/store.h"

/* Roll-up levels: 0 raw, 1 one minute, 2 one hour. A raw row's `rolled` bit (1 << (level-1))
 * says it has been folded into that level's roll-up row of its bucket. */
#define STORE_LEVELS 3
extern const int64_t store_level_width[STORE_LEVELS];

/* Symbol tables mirrored from SQLite, in the profile model's order. */
enum { TAB_STRINGS, TAB_FUNCTIONS, TAB_MAPPINGS, TAB_LOCATIONS, TAB_STACKS, NTABS };

typedef struct store_series {
	int64_t id;        /* row id == index + 1 */
	char *tenant, *type;
	strobe_labelpair *labels; /* sorted by name; strings in one allocation with the array */
	uint32_t nlabels;
	int64_t period;
	bool gauge, dead;
} store_series;

struct strobe_store {
	sqlite3 *db;
	pthread_mutex_t mu;
	strobe_store_opts o;
	char *dir;
	/* Every string, function, mapping, location and stack ever stored: ids here are row ids in
	 * SQLite. saved[t] = how many entries of table t are in the database (the rest were
	 * interned by a push whose transaction failed and are written by the next one). */
	strobe_profile *sym;
	uint32_t saved[NTABS];
	store_series *series;
	size_t nseries, capseries;
	strobe_itab series_key; /* "tenant\0type\0name\0value\0..." -> index */
	bool use_rollups;
	int64_t last_gc_ns; /* when symbol gc last ran (symgc.c) */
};

static inline uint32_t tab_n(const strobe_profile *p, int t)
{
	const strobe_itab *tabs[NTABS] = {&p->strings, &p->functions, &p->mappings, &p->locations,
					  &p->stacks};
	return tabs[t]->n;
}

/* One point's (stack id, value) pairs, sorted by stack, no zero values. */
typedef struct store_pair {
	uint32_t stack;
	int64_t value;
} store_pair;

/* zstd of varints; *out malloc'd. */
int store_blob_encode(const store_pair *p, size_t n, uint8_t **out, size_t *len);
/* Decodes into *buf (grown with realloc, capacity *cap); stacks are checked < nstacks. */
int store_blob_decode(const uint8_t *in, size_t len, uint32_t nstacks, store_pair **buf,
		      size_t *cap, size_t *n);

/* Maps of one profile's ids to another's (a push into the store's tables, the store's tables
 * into a query's result), filled lazily; 0 = not yet mapped (id 0 always maps to 0). */
typedef struct store_remap {
	uint32_t *str, *fn, *map, *loc, *stack;
	strobe_line *lines;
	size_t lcap;
} store_remap;
int store_remap_init(store_remap *m, const strobe_profile *src);
void store_remap_free(store_remap *m);
/* The stack `id` of src, copied with its locations, functions, mappings and strings into dst;
 * UINT32_MAX on ENOMEM. */
uint32_t store_map_stack(strobe_profile *dst, const strobe_profile *src, store_remap *m,
			 uint32_t id);

int store_exec(strobe_store *s, const char *sql, strobe_err *err);
/* Writes p's symbol rows from saved[t] on, table by table (store.c). */
int store_save_symbols(strobe_store *s, const strobe_profile *p, const uint32_t *saved,
		       strobe_err *err);
/* Symbol gc with the lock held (symgc.c); the number of rows freed or -errno. */
int store_gc_locked(strobe_store *s, int64_t now_ns, strobe_err *err);
#define STORE_GC_INTERVAL (3600 * STROBE_NS_PER_S)
int store_sqlerr(strobe_store *s, strobe_err *err, const char *what);
/* Series matching: indices of live series of the tenant that match q (type and matchers). */
int store_match_series(strobe_store *s, const char *tenant, const strobe_selector *sel,
		       size_t **out, size_t *n, strobe_err *err);

#endif
