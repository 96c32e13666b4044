/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile store: what the server keeps and how it is asked for it. This header is the whole
 * interface between the HTTP layer and storage, so that the embedded store (store/, SQLite in
 * one directory) can later be joined by a distributed backend behind the same calls.
 *
 * Model. A series is (tenant, profile type, label set); a profile type is named as Parca and
 * Pyroscope name it, <name>:<sample_type>:<unit>:<period_type>:<period_unit> (a Go CPU profile
 * is process_cpu:cpu:nanoseconds:cpu:nanoseconds and process_cpu:samples:count:cpu:nanoseconds).
 * One pushed pprof with N sample types becomes N series points. A point is a time and a list of
 * (stack id, value) pairs; stacks, locations, functions, mappings and strings are stored once for
 * the whole store and shared by every point, tenant and time.
 *
 * Merging over time. Gauge types (inuse_*, goroutine) are averaged per series over the window
 * (a heap profile taken every 10 s is still one heap), then summed across series; every other
 * type (counters, deltas: cpu, samples, alloc_*, contentions, delay) is summed.
 *
 * Threads. Every call takes the store's lock, so one store may be used from many threads.
 * Pushes from many threads are committed together (group commit, store/commit.c): each still
 * returns only once its own data is durable.
 *
 * Errors. 0 or -errno; messages in strobe_err. -EINVAL: bad input; -EDQUOT: a limit was hit
 * (the message names it); -ENOENT: nothing matched where something must.
 */
#ifndef STROBE_STORE_H
#define STROBE_STORE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"
#include "strobe/profile_type.h" /* type names, STROBE_TYPE_MAX */

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_NS_PER_S 1000000000LL

/* ---- selectors (parsed by strobe_selector_parse in strobe/server.h) -------------------------- */

typedef enum strobe_match_op {
	STROBE_MATCH_EQ,  /* =  */
	STROBE_MATCH_NEQ, /* != */
	STROBE_MATCH_RE,  /* =~ (fully anchored, POSIX ERE) */
	STROBE_MATCH_NRE, /* !~ */
} strobe_match_op;

typedef struct strobe_matcher {
	char *name, *value;
	strobe_match_op op;
	bool has_re;
	regex_t re; /* compiled "^(value)$" for RE/NRE */
} strobe_matcher;

/* `type{name="v", ...}`: type may be NULL (any type, for the label APIs). */
typedef struct strobe_selector {
	char *type;
	strobe_matcher *m;
	size_t n;
} strobe_selector;

/* A label set is matched with Prometheus's rules: an absent label has the value "". */
typedef struct strobe_labelpair {
	const char *name, *value;
} strobe_labelpair;
bool strobe_selector_match_labels(const strobe_selector *s, const strobe_labelpair *l, size_t n);
/* Labels that name a process, a thread or a request (pid, comm, exe, span_id...): they ride on
 * samples, never on series (cardinality), and a selector's matcher on one of them that a series
 * lacks is applied to the samples' labels of its points. */
bool strobe_sample_label_name(const char *name);
#define STROBE_SAMPLE_LABELS_MAX 16 /* sample labels kept on one point */

/* ---- the store ------------------------------------------------------------------------------- */

typedef struct strobe_store strobe_store;

typedef struct strobe_store_opts {
	const char *dir;          /* created if missing; the SQLite file is DIR/strobe.db */
	int64_t retention_ns;     /* points older than now - retention are deleted; 0 = forever */
	uint32_t max_series;      /* per tenant; 0 = unlimited */
	uint32_t max_stacks;      /* distinct stacks held (they are mirrored in memory); 0 = no cap */
	/* distinct values of one series label name in a tenant (a pid or a request id made a
	 * series label would exhaust the store); 0 = no cap */
	uint32_t max_label_values;
	bool sync_normal;         /* synchronous=NORMAL instead of FULL (see store.c) */
	/* Query cost caps: stored rows (profiles or roll-ups) and compressed bytes one query or
	 * range may read; beyond, -EDQUOT naming the limit. 0 = no cap. Roll-ups count one row
	 * each, so a long window that roll-ups cover stays cheap. */
	uint64_t max_query_points, max_query_bytes;
	/* What is checked at open, before anything is written (a damaged file refuses to open,
	 * -EIO naming the file and the damage): QUICK checks the structure of the schema and of
	 * every table the store loads at open, and of the points too when the file is at most
	 * STROBE_STORE_CHECK_ALL_MAX bytes; FULL runs SQLite's integrity_check over everything
	 * (every page, and the indexes against their tables); OFF checks nothing. */
	enum { STROBE_STORE_CHECK_QUICK, STROBE_STORE_CHECK_FULL, STROBE_STORE_CHECK_OFF } check;
	/* The backend: NULL or "" = SQLite in dir; "clickhouse://HOST:PORT[,HOST:PORT...]/DB
	 * [?cluster=NAME]" = a ClickHouse cluster (store/clickhouse/, docs/clickhouse.md): hosts
	 * tried in order (failover), schema and retention applied on each. */
	const char *store;
} strobe_store_opts;

#define STROBE_STORE_CHECK_ALL_MAX (256ull << 20)

strobe_store *strobe_store_open(const strobe_store_opts *o, strobe_err *err);
void strobe_store_close(strobe_store *s);

typedef struct strobe_push_item {
	const strobe_profile *profile;
	const char *name; /* profile name (process_cpu, memory, mutex...); NULL = guessed */
	int64_t time_ns;  /* 0 = the profile's time_nanos, or now when it has none */
	bool average;     /* series this push creates merge over time by average, as gauges do
			   * (Pyroscope's aggregationType=average); a series keeps the aggregation
			   * it was created with */
	const strobe_labelpair *labels; /* more series labels for this item (per-sample labels),
					 * sorted by name, none named as a request label */
	size_t nlabels;
	/* Sample labels shared by these samples (pid, comm, exe...): stored with the point, not
	 * on the series, so they make no series; selectors match them at query time
	 * (strobe_sample_label_name). Sorted by name. */
	const strobe_labelpair *slabels;
	size_t nslabels;
	const uint32_t *samples; /* only these samples of the profile (ids); NULL = all */
	uint32_t nsamples;
	/* Instead of the profile's samples and symbols: a simple pprof view
	 * (strobe/pprof_view.h), mapped straight into the store's tables; `profile` is then its
	 * header (view->hdr) and `samples` must be NULL. */
	const struct strobe_pprof_view *view;
} strobe_push_item;

typedef struct strobe_push_req {
	const char *tenant;
	const strobe_labelpair *labels; /* series labels, validated by the caller */
	size_t nlabels;
	const strobe_push_item *items;
	size_t nitems;
	int64_t now_ns;
} strobe_push_req;

typedef struct strobe_push_accepted {
	char type[STROBE_TYPE_MAX];
	int64_t time_ns;
	uint32_t stacks; /* distinct stacks with a non-zero value */
	int64_t total;
} strobe_push_accepted;

typedef struct strobe_push_result {
	strobe_push_accepted *acc; /* malloc'd; one per stored (item, sample type) */
	size_t n;
} strobe_push_result;

/* Stores every item in one transaction, committed (durably) before it returns 0; on any error
 * nothing is stored. */
int strobe_store_push(strobe_store *s, const strobe_push_req *r, strobe_push_result *res,
		      strobe_err *err);
void strobe_push_result_free(strobe_push_result *r);


typedef struct strobe_query {
	const char *tenant;
	const strobe_selector *sel; /* sel->type required for profile queries */
	int64_t from_ns, to_ns;     /* [from, to) */
} strobe_query;

/* The merged profile of every matching series over the window: one sample type, labels none.
 * An empty profile (no samples) when nothing matched. */
int strobe_store_query(strobe_store *s, const strobe_query *q, strobe_profile **out,
		       strobe_err *err);

typedef struct strobe_range_group {
	char *value;     /* the group_by label's value ("" when absent or no grouping); with
			  * several group_by labels the first one's */
	int64_t *values; /* nsteps values */
	char **by;       /* with several group_by labels: each one's value ("" when absent), in
			  * group_by's order; NULL otherwise */
	size_t nby;
} strobe_range_group;
typedef struct strobe_range_result {
	strobe_range_group *g;
	size_t n, nsteps;
} strobe_range_result;

/* Totals per step [from + i*step, from + (i+1)*step) for each value of group_by (NULL = one
 * group), counting only stacks that contain function `function` when given. group_by may name
 * several labels separated by commas ("service_name,region"): one group per distinct
 * combination of their values, as Pyroscope's SelectSeries groups. */
int strobe_store_range(strobe_store *s, const strobe_query *q, int64_t step_ns,
		       const char *group_by, const char *function, strobe_range_result *out,
		       strobe_err *err);
void strobe_range_result_free(strobe_range_result *r);

/* Exemplars: per step of a range, the stored profiles (raw points) that weigh most in it, with
 * their span and trace IDs where their samples carry them, so a spike on a timeline leads to
 * the flame graph of that exact profile (strobe_store_profile_by_id) or span. */
#define STROBE_EXEMPLARS_MAX 20 /* per step */
typedef struct strobe_exemplar {
	int64_t id;       /* the stored profile's id; 0: an empty slot */
	int64_t time_ns;
	int64_t value;    /* the sum of its values */
	char span_id[72], trace_id[72]; /* "" when it has none */
} strobe_exemplar;
typedef struct strobe_exemplars {
	strobe_exemplar *v; /* nsteps * per_step, step by step, heaviest first */
	size_t nsteps, per_step;
} strobe_exemplars;
int strobe_store_exemplars(strobe_store *s, const strobe_query *q, int64_t step_ns,
			   size_t per_step, strobe_exemplars *out, strobe_err *err);
void strobe_exemplars_free(strobe_exemplars *e);
/* One stored profile by its id (an exemplar's), if it is the tenant's and matches q's selector
 * (else -ENOENT); q's window is not applied. */
int strobe_store_profile_by_id(strobe_store *s, const strobe_query *q, int64_t id,
			       strobe_profile **out, strobe_err *err);

/* Sorted, distinct label names / values / profile types of the tenant's series that have points
 * in the window and match sel (NULL or a selector without type = any). *out is a malloc'd array
 * of malloc'd strings; free with strobe_strv_free. */
int strobe_store_label_names(strobe_store *s, const strobe_query *q, char ***out, size_t *n,
			     strobe_err *err);
int strobe_store_label_values(strobe_store *s, const strobe_query *q, const char *name,
			      char ***out, size_t *n, strobe_err *err);
int strobe_store_profile_types(strobe_store *s, const strobe_query *q, char ***out, size_t *n,
			       strobe_err *err);
void strobe_strv_free(char **v, size_t n);

/* The series of the tenant that match any of sels (none = every series) and have points in
 * [from, to): their types and label sets (labels sorted by name), sorted. More than max (0 =
 * no cap) is -EDQUOT with a message naming the limit. Free with strobe_series_list_free. */
typedef struct strobe_series_info {
	const char *type;
	const strobe_labelpair *labels;
	size_t nlabels;
	void *mem_; /* the one allocation holding the above */
} strobe_series_info;
typedef struct strobe_series_list {
	strobe_series_info *v;
	size_t n;
} strobe_series_list;
int strobe_store_series(strobe_store *s, const char *tenant, const strobe_selector *sels,
			size_t nsel, int64_t from_ns, int64_t to_ns, size_t max,
			strobe_series_list *out, strobe_err *err);
void strobe_series_list_free(strobe_series_list *l);

/* Maintenance, run periodically by the server (and by tests with chosen clocks). compact folds
 * raw points of closed 1-minute and 1-hour buckets into roll-ups; retain deletes points older
 * than the retention, then series left empty, then gives the freed pages back to the file
 * system. Each returns the number of rows written or deleted, or -errno. */
int strobe_store_compact(strobe_store *s, int64_t now_ns, strobe_err *err);
int strobe_store_retain(strobe_store *s, int64_t now_ns, strobe_err *err);
/* Symbol garbage collection: deletes the stacks, locations, functions, mappings and strings no
 * stored point reaches any more, renumbering the rest (every point is rewritten, in one
 * transaction). retain runs it itself after deleting points, at most once an hour. Returns the
 * number of symbol rows deleted, or -errno (the store unchanged). */
int strobe_store_gc(strobe_store *s, int64_t now_ns, strobe_err *err);
/* Roll-ups are used by queries unless this is off (tests compare both ways). */
void strobe_store_use_rollups(strobe_store *s, bool on);
/* Ranges without a function filter sum the per-point totals kept at ingest unless this is off
 * (then they decode the profiles, as a range with a function does; tests compare both ways). */
void strobe_store_use_totals(strobe_store *s, bool on);
/* Ranges whose selector and group-by name only service_name (or nothing) read the totals summed
 * per service at ingest (store/groups.c) unless this is off (then the series' totals; tests
 * compare both ways). The embedded store only. */
void strobe_store_use_group_totals(strobe_store *s, bool on);
/* Ranges read the hours' lists of points (store/hour_lists.c: one row per hour that a step
 * cuts, instead of its minutes) unless this is off (then the minutes, as before them; tests
 * compare both ways). The embedded store only. */
void strobe_store_use_hour_lists(strobe_store *s, bool on);
/* Queries that select span_id or trace_id read the span index (store/spans.c) unless this is
 * off (then they scan the window's points: tests and the benchmark compare both ways). */
void strobe_store_use_span_index(strobe_store *s, bool on);

/* The times (ns) of the tenant's oldest and newest stored profiles; both 0 when it has none.
 * -ENOTSUP from a backend that cannot tell yet. */
int strobe_store_time_span(strobe_store *s, const char *tenant, int64_t *oldest, int64_t *newest,
			   strobe_err *err);

typedef struct strobe_store_stats {
	uint64_t series, points, rollups, stacks, locations, functions, mappings, strings;
	/* Bytes on disk where the backend keeps them away from the data dir (ClickHouse: its
	 * active parts on every host); 0 for the SQLite store, whose files are measured. */
	uint64_t disk_bytes;
} strobe_store_stats;
int strobe_store_stats_get(strobe_store *s, strobe_store_stats *st);
/* Group commit counters since open: transactions committed and the pushes they held. */
int strobe_store_commit_stats(strobe_store *s, uint64_t *commits, uint64_t *pushes);

#ifdef __cplusplus
}
#endif
#endif
