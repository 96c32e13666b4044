/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the ClickHouse backend (docs/clickhouse.md), shared by its files: the connection
 * (HTTP through libcurl, a pool of reused handles, hosts tried in order), RowBinary writing and
 * reading, and the in-memory caches of what is known to be stored already.
 */
#ifndef STROBE_STORE_CH_H
#define STROBE_STORE_CH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "strobe/buf.h"
#include "strobe/store.h"

#define CH_HOSTS_MAX 16
#define CH_POOL_MAX 32
/* What one answer of ClickHouse may be: a query's rows are read into memory whole. */
#define CH_ANSWER_MAX (512u << 20)
/* Hashes remembered as stored (symbols, series) before the caches are emptied. */
#define CH_KNOWN_MAX (4u << 20)

typedef struct ch_known { /* a set of 64-bit hashes, open addressing; 0 is never a member */
	uint64_t *slot;
	size_t n, cap;
} ch_known;

/* One push waiting to be written (ch_push.c): its rows per table, in the order they are
 * inserted (functions, locations, stacks, series, points). */
enum { CH_T_FUNCTIONS, CH_T_LOCATIONS, CH_T_STACKS, CH_T_SERIES, CH_T_POINTS, CH_NT };
typedef struct ch_pending {
	strobe_buf *rows[CH_NT];
	size_t nrows; /* (stack, value) pairs of its points */
	bool done;
	int r;
	strobe_err err;
	pthread_cond_t cv;
	struct ch_pending *next;
} ch_pending;
/* (stack, value) pairs of one batch at most: bounds a batch in memory, and keeps its point rows
 * (one per series and time, far fewer) below ClickHouse's max_insert_block_size (1,048,576), so
 * that a batch's points are one block, one part, whole or absent. */
#define CH_BATCH_ROWS 1000000u

typedef struct ch_store {
	char *host[CH_HOSTS_MAX]; /* "HOST:PORT" */
	size_t nhosts, good;      /* good: the host that answered last, tried first */
	/* Shards (with a cluster: the URL's comma-separated groups, in the cluster's order; each
	 * group's '|'-separated hosts are replicas of the shard). A push is written straight into
	 * the local tables of its shard (ch_push.c); reads go through the Distributed tables on
	 * any host. Without a cluster, one shard whose hosts are all alternatives. */
	size_t shard_of[CH_HOSTS_MAX], nshards;
	char *db, *cluster;       /* cluster NULL: one server, local tables read and written */
	int insert_quorum;        /* > 1: sent with every insert (replicas) */
	bool replicated;          /* replicated=1: Replicated*MergeTree local tables */
	strobe_store_opts o;
	pthread_mutex_t mu;
	void *pool[CH_POOL_MAX]; /* idle CURL handles: their connections are reused */
	size_t npool;
	ch_known known_sym, known_series; /* under mu */
	bool use_rollups;
	uint64_t id_seed, id_next; /* ch_point_id, id_next under mu */
	uint64_t inserts, pushes; /* batches written (group commits) and the pushes they held */
	/* Group commit per shard (ch_push.c), under mu: the pushes waiting, and whether one of
	 * them is writing a batch now (the leader). */
	ch_pending *qhead[CH_HOSTS_MAX], **qtail[CH_HOSTS_MAX];
	bool leader[CH_HOSTS_MAX];
	int64_t last_gc_ns;  /* the last symbol collection (ch_gc.c), under mu */
	int64_t known_at_s;  /* when known_sym was last emptied (CLOCK_MONOTONIC s), under mu */
} ch_store;
/* ch_gc.c: a symbol is deleted when unreached in two marks this far apart (a push in flight
 * between its symbols and its points), and the collection runs after a retention drop at most
 * once per CH_GC_INTERVAL_NS, as the SQLite store's. */
#define CH_GC_GRACE_MS 5000
#define CH_GC_INTERVAL_NS (3600 * STROBE_NS_PER_S)
/* How long a server trusts its memory of what symbols are stored before it writes them again
 * (another server's collection may have deleted them). */
#define CH_KNOWN_TTL_S 600

/* The table name to read or write: the Distributed one with a cluster, the local one without. */
const char *ch_tab(const ch_store *c, const char *base, char *buf, size_t cap);

/* One request: sql (a SELECT's text, or an INSERT's head "INSERT INTO t FORMAT RowBinary" with
 * its rows in body, gzip'd on the way). *out (may be NULL) receives the answer. 0; -EAGAIN when
 * no host could be reached or ClickHouse refused for a reason that may pass (a shard down, too
 * many parts); -EIO for any other refusal, with ClickHouse's message. */
int ch_exec(ch_store *c, const char *sql, const void *body, size_t blen, strobe_buf *out,
	    strobe_err *err);
/* The same on the hosts of one shard, in order until one answers (writes). */
int ch_exec_shard(ch_store *c, size_t shard, const char *sql, const void *body, size_t blen,
		  strobe_err *err);
/* The local table of a base name ("samples" -> DB.samples_l). */
const char *ch_local(const ch_store *c, const char *base, char *buf, size_t cap);
/* The same on one given host (schema, retention). */
int ch_exec_on(ch_store *c, size_t host, const char *sql, const void *body, size_t blen,
	       strobe_buf *out, strobe_err *err);

/* RowBinary: little-endian integers, strings and arrays as a LEB128 length and then the bytes. */
int rb_u8(strobe_buf *b, uint8_t v);
int rb_u64(strobe_buf *b, uint64_t v);
int rb_i64(strobe_buf *b, int64_t v);
int rb_str(strobe_buf *b, const char *s, size_t n);
int rb_len(strobe_buf *b, uint64_t n);

typedef struct rb_rd {
	const uint8_t *p, *end;
	bool bad;
} rb_rd;
uint8_t rd_u8(rb_rd *r);
uint64_t rd_u64(rb_rd *r);
int64_t rd_i64(rb_rd *r);
uint64_t rd_len(rb_rd *r);
/* A string in place (not NUL-terminated), length in *n. */
const char *rd_str(rb_rd *r, size_t *n);
static inline bool rd_more(const rb_rd *r) { return !r->bad && r->p < r->end; }
/* A reader over an answer (an empty one has no buffer at all). */
static inline rb_rd rd_of(const strobe_buf *b)
{
	static const uint8_t none[1];
	const uint8_t *p = b->p ? (const uint8_t *)b->p : none;
	return (rb_rd){p, p + (b->p ? b->len : 0), false};
}

/* A SQL string literal of s ('...' with \ and ' escaped) appended to b. */
int ch_quote(strobe_buf *b, const char *s);
/* The filter that every query of a tenant's rows starts with, appended to q (after WHERE):
 * "tenant = 'T'", then " AND type = 'X'" unless type is NULL, then " AND COL >= from AND
 * COL < to" unless col is NULL (time, or minute for the roll-ups). One builder, so that every
 * read keeps tenants apart the same way. */
int ch_where(strobe_buf *q, const char *tenant, const char *type, const char *col, int64_t from,
	     int64_t to);
/* ids appended to q as "a,b,c" (an IN list's inside). */
int ch_ids(strobe_buf *q, const uint64_t *ids, size_t n);

bool ch_known_has(const ch_known *k, uint64_t h);
int ch_known_add(ch_known *k, uint64_t h);
void ch_known_free(ch_known *k);

uint64_t ch_hash(uint64_t seed, const void *p, size_t n);
/* A new point's id: positive, random, below 2^53 (a seed drawn at open, and a counter). */
int64_t ch_point_id(ch_store *c);
static inline uint64_t ch_hash_str(uint64_t seed, const char *s)
{
	return ch_hash(seed, s, strlen(s) + 1);
}

/* ch_limits.c: a series a push would make (its id and labels), for the limits. */
typedef struct ch_newseries {
	uint64_t id;
	const strobe_labelpair *labels;
	size_t nlabels;
} ch_newseries;
/* The push limits (max_series_per_tenant, max_label_values_per_name, max_stacks) for the
 * series ns[] and the stacks[] that this server has not written: 0, or -EDQUOT naming the limit
 * as the SQLite store does. */
int ch_push_limits(ch_store *c, const char *tenant, const ch_newseries *ns, size_t nns,
		   const uint64_t *stacks, size_t nstacks, strobe_err *err);
/* The query caps (max_query_profiles, max_query_bytes) over the rows a query or range of the
 * series that series_cond (" AND (series IN ...)") picks would read: 0, or -EDQUOT naming the
 * cap. */
int ch_query_caps(ch_store *c, const char *tenant, const char *type, int64_t from, int64_t to,
		  bool rollup, const char *series_cond, bool range, strobe_err *err);

/* ch_gc.c: the symbol collection; the number of dead ids whose deletion was asked for. */
int ch_gc(void *ctx, int64_t now_ns, strobe_err *err);

/* ch_push.c, ch_query.c */
int ch_push(void *ctx, const strobe_push_req *r, strobe_push_result *res, strobe_err *err);
int ch_query(void *ctx, const strobe_query *q, strobe_profile **out, strobe_err *err);
int ch_range(void *ctx, const strobe_query *q, int64_t step_ns, const char *group_by,
	     const char *function, strobe_range_result *out, strobe_err *err);
int ch_label_names(void *ctx, const strobe_query *q, char ***out, size_t *n, strobe_err *err);
int ch_label_values(void *ctx, const strobe_query *q, const char *name, char ***out, size_t *n,
		    strobe_err *err);
int ch_profile_types(void *ctx, const strobe_query *q, char ***out, size_t *n, strobe_err *err);
int ch_exemplars(void *ctx, const strobe_query *q, int64_t step_ns, size_t per_step,
		 strobe_exemplars *out, strobe_err *err);
int ch_profile_by_id(void *ctx, const strobe_query *q, int64_t id, strobe_profile **out,
		     strobe_err *err);
int ch_series(void *ctx, const char *tenant, const strobe_selector *sels, size_t nsel,
	      int64_t from_ns, int64_t to_ns, size_t max, strobe_series_list *out,
	      strobe_err *err);

#endif
