/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's backends: what a store other than the embedded SQLite one implements, so that the
 * public strobe_store_* calls (include/strobe/store.h) stay the only interface the server sees.
 *
 * Why a vtable below the public calls rather than above them: the server and the CLI keep
 * calling strobe_store_push(), strobe_store_query()... unchanged, and the SQLite store keeps its
 * code where it was (each public function starts with STORE_BACKEND_CALL, a no-op for SQLite).
 * A store opened with `store = "clickhouse://..."` is a struct strobe_store with `be` set: every
 * public call is forwarded to be->fn(s->be_ctx, ...).
 *
 * A backend answers -ENOTSUP (with a message naming the feature) for what it does not do yet;
 * the server answers those 501. -EAGAIN means the backend's database is unreachable or refused
 * the request for a reason that may pass (the server answers 503 with Retry-After: agents spool
 * and retry).
 */
#ifndef STROBE_STORE_BACKEND_H
#define STROBE_STORE_BACKEND_H

#include "strobe/store.h"

typedef struct store_backend {
	const char *name;
	void (*close)(void *ctx);
	int (*push)(void *ctx, const strobe_push_req *r, strobe_push_result *res, strobe_err *err);
	int (*query)(void *ctx, const strobe_query *q, strobe_profile **out, strobe_err *err);
	int (*range)(void *ctx, const strobe_query *q, int64_t step_ns, const char *group_by,
		     const char *function, strobe_range_result *out, strobe_err *err);
	int (*label_names)(void *ctx, const strobe_query *q, char ***out, size_t *n,
			   strobe_err *err);
	int (*label_values)(void *ctx, const strobe_query *q, const char *name, char ***out,
			    size_t *n, strobe_err *err);
	int (*profile_types)(void *ctx, const strobe_query *q, char ***out, size_t *n,
			     strobe_err *err);
	int (*exemplars)(void *ctx, const strobe_query *q, int64_t step_ns, size_t per_step,
			 strobe_exemplars *out, strobe_err *err);
	int (*profile_by_id)(void *ctx, const strobe_query *q, int64_t id, strobe_profile **out,
			     strobe_err *err);
	int (*series)(void *ctx, const char *tenant, const strobe_selector *sels, size_t nsel,
		      int64_t from_ns, int64_t to_ns, size_t max, strobe_series_list *out,
		      strobe_err *err);
	int (*compact)(void *ctx, int64_t now_ns, strobe_err *err);
	int (*retain)(void *ctx, int64_t now_ns, strobe_err *err);
	int (*gc)(void *ctx, int64_t now_ns, strobe_err *err);
	void (*use_rollups)(void *ctx, bool on);
	void (*use_totals)(void *ctx, bool on);
	int (*stats_get)(void *ctx, strobe_store_stats *st);
	int (*commit_stats)(void *ctx, uint64_t *commits, uint64_t *pushes);
	int (*time_span)(void *ctx, const char *tenant, int64_t *oldest, int64_t *newest,
			 strobe_err *err);
} store_backend;

/* store/clickhouse/ch_store.c: opens the ClickHouse backend for o->store ("clickhouse://...");
 * its context, or NULL with err set. */
extern const store_backend store_ch_backend;
void *store_ch_open(const strobe_store_opts *o, strobe_err *err);

/* At the top of each public function: forwards to the backend when the store has one. */
#define STORE_BACKEND_CALL(s, fn, ...)                                                             \
	do {                                                                                       \
		if ((s)->be)                                                                       \
			return (s)->be->fn((s)->be_ctx, __VA_ARGS__);                              \
	} while (0)

/* For a public call no other backend has yet: -ENOTSUP (answered 501) naming `what`, before
 * anything of the SQLite store is touched. (For a void call: `if (s->be) return;`.) */
#define STORE_SQLITE_ONLY(s, err, what)                                                            \
	do {                                                                                       \
		if ((s)->be)                                                                       \
			return strobe_errf((err), -ENOTSUP, "%s is not supported by the %s store yet", \
					   (what), (s)->be->name);                                  \
	} while (0)

#endif
