/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the server's endpoint files share: the request as the router hands it over (tenant
 * resolved, body read within the limit), and the reply helpers. Each endpoint family lives in
 * its own file (push.c, read.c, labels.c) and is called from the route table in routes.c.
 */
#ifndef STROBE_SERVER_IMPL_H
#define STROBE_SERVER_IMPL_H

#include <stdatomic.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>

#include "multipart.h"
#include "pyroscope.h"
#include "strobe/server.h"
#include "strobe/symbolize.h"
#include "strobe/tree.h"

/* The server's own counters, served by GET /metrics (server/metrics.c). */
typedef struct srv_metrics srv_metrics;
enum { SRV_H_PUSH, SRV_H_INGEST, SRV_H_QUERY, SRV_H_DIFF, SRV_H_RANGE, SRV_H_LABELS,
       SRV_H_LABEL_VALUES, SRV_H_TYPES, SRV_H_SERIES, SRV_H_ADMIN, SRV_H_METRICS, SRV_H_OTHER,
       SRV_H_DEBUGINFO, SRV_H_OTLP, SRV_H_CONNECT, SRV_H_CONNECT_PUSH, SRV_H_RENDER,
       SRV_H_COST, SRV_H_LEAKS, /* server/cost.c, server/leaks.c */
       SRV_H_PGO, /* server/pgo.c */
       SRV_H_REGRESSIONS, /* server/regressions.c */
       SRV_H_N };
enum { SRV_SRC_PUSH, SRV_SRC_INGEST, SRV_SRC_OTLP, SRV_SRC_N };

struct strobe_server {
	struct MHD_Daemon *d;
	/* A stop waits for the requests being answered (active: from the handler's last call to
	 * completed()) so that a push is either stored and acknowledged or neither; one whose body
	 * is complete after the stop began is answered 503, nothing stored (strobe_server_stop). */
	atomic_bool stopping;
	atomic_int active;
	strobe_server_config cfg; /* shallow copy; the caller's strings outlive the server */
	strobe_store *store;
	uint16_t port;
	srv_metrics *metrics;
	strobe_server_scraper *scraper; /* for its counters in /metrics; may be NULL */
	struct srv_notify *notify;     /* regression notifier (notify.c); NULL when off */
	char *tls_cert_pem, *tls_key_pem; /* HTTPS when set (server/tls.c); libmicrohttpd reads them */
	int64_t tls_not_after;            /* the certificate's expiry, unix seconds, for /metrics */
	struct srv_admit *admit;        /* admission control, request deadlines (admit.c) */
	struct srv_namers *namers;      /* per-tenant symbolizers naming bare addresses (late_names.c) */
	/* The log of refused requests (http.c): lines in the current second, and those left
	 * out since the last summary. */
	pthread_mutex_t log_mu;
	int64_t log_second;
	unsigned log_lines;
	uint64_t log_suppressed;
};

/* Reads and checks c->tls_cert and c->tls_key (both or neither; server/tls.c): the PEM texts,
 * malloc'd, and the certificate's expiry; NULLs when TLS is off. -errno with err naming the
 * file and what is wrong with it. */
int srv_tls_load(const strobe_server_config *c, char **cert_pem, char **key_pem,
		 int64_t *not_after, strobe_err *err);

/* Admission control and request deadlines (server/admit.c). */
typedef struct srv_admit srv_admit;
typedef struct srv_admit_counts {
	size_t conns, pushes, bytes;
	uint64_t evicted_timeout, evicted_busy, peak_conns, peak_pushes, peak_bytes;
} srv_admit_counts;
srv_admit *srv_admit_new(const strobe_server_config *c);
void srv_admit_free(srv_admit *a);
/* A push (push, /ingest) whose body is in starts: 0, or -EBUSY at limits.max_inflight_pushes. */
int srv_admit_push(srv_admit *a);
void srv_admit_push_done(srv_admit *a);
/* Whether n more bytes of request bodies fit under limits.max_inflight_bytes: 0 (and, with
 * take, they are counted as held from now on) or -EBUSY. */
int srv_admit_bytes(srv_admit *a, size_t n, bool take);
void srv_admit_bytes_done(srv_admit *a, size_t n);
/* MHD_OPTION_NOTIFY_CONNECTION (cls: the server): watches each connection's deadline. */
void srv_admit_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode toe);
/* The connection's request is complete and being answered (true), or answered (false: the
 * deadline of its next request starts now). */
void srv_admit_phase(srv_admit *a, struct MHD_Connection *c, bool processing);
void srv_admit_stats(srv_admit *a, srv_admit_counts *out);
/* Connections kept past max_connections for reads, and whether c is one of them. */
unsigned srv_admit_reserve(const strobe_server_config *c);
bool srv_admit_reserved(srv_admit *a, struct MHD_Connection *c);
/* Retry-After of a request refused for load. */
#define SRV_RETRY_BUSY_S 1u
#define SRV_STOP_DRAIN_MS 5000 /* a stop waits this long at most for the requests being answered */

/* Caps on what one request may make the router hold. */
#define SRV_MAX_ARGS    1024u /* query parameters */
#define SRV_MAX_HEADERS 256u
/* The request URL (path and query) the server answers with a JSON 414 past this. The HTTP
 * library is given SRV_CONN_MEMORY per connection, well above it, so it hands such a URL to us
 * instead of answering its own HTML 414; only a URL past about half of that still gets the
 * library's answer. */
#define SRV_MAX_URL     (64u << 10)
#define SRV_CONN_MEMORY ((size_t)512 << 10)

/* Retry-After of a push refused because the disk is full: long enough not to hammer a full disk,
 * short enough that ingest resumes soon after space returns. */
#define SRV_RETRY_DISK_FULL_S 30u

/* The request as the endpoints see it: no libmicrohttpd connection in it, so tests and fuzzers
 * can build one by hand and hand it to srv_handle. */
typedef struct srv_req {
	strobe_server *srv;
	const char *url, *method, *tenant;
	bool tenant_accepted; /* auth passed for r->tenant (else it is what the client claimed) */
	const srv_kv *args; /* query parameters, percent-decoded, in request order */
	size_t nargs;
	const srv_kv *hdrs; /* request headers */
	size_t nhdrs;
	const uint8_t *body;
	size_t len;
	/* A route that takes large bodies (srv_debuginfo_file_cap) gets it in a file instead: an
	 * unlinked temporary file in the debug-info store, body_fd_len bytes, read from offset 0. */
	bool body_in_file;
	int body_fd;
	uint64_t body_fd_len;
	int64_t now_ns;
	const char *path_arg; /* the route's {name} segment (not terminated), or NULL */
	size_t path_arg_len;
	/* The reply, filled by an endpoint: status, content type, body (malloc'd). */
	char errmsg[160]; /* the start of the last error message, for /metrics' reasons */
	unsigned status;
	const char *ctype;
	char *out;
	size_t outlen;
	/* ... or a file's bytes: out_fd (the reply owns it) from offset 0, out_fd_len of them. */
	bool out_is_fd;
	int out_fd;
	uint64_t out_fd_len;
	const char *etag, *cache; /* ETag and Cache-Control headers when set (static files) */
	unsigned retry_after;     /* seconds, sent as Retry-After when set (507, 503) */
	const char *cenc;         /* Content-Encoding of the reply body when set ("gzip") */
} srv_req;

/* A query argument (the first when repeated), or NULL. */
const char *srv_arg(srv_req *r, const char *name);
/* A request header (name compared without case), or NULL. */
const char *srv_header(srv_req *r, const char *name);
/* Routes a request through the table of server/routes.c (its access class's checks, then the
 * endpoint) and makes sure it has a reply. */
void srv_handle(srv_req *r);

/* Who may call a route: anyone; a tenant (X-Scope-OrgID and its token), seeing only its own
 * data; or the operator (the config's admin_token), acting on the whole store. */
typedef enum srv_access { SRV_PUBLIC, SRV_TENANT, SRV_ADMIN } srv_access;
typedef struct srv_route {
	const char *method; /* "GET", "POST" */
	const char *path;   /* exact, one {name} segment (r->path_arg), or a trailing * */
	srv_access access;
	int metric; /* SRV_H_*: the /metrics histogram of its latency */
	int (*fn)(srv_req *r);
	unsigned flags; /* SRV_ROUTE_* */
} srv_route;
/* The route speaks the Connect protocol: every error it answers, the access checks' included,
 * is turned into Connect's error format (server/connect.c). */
#define SRV_ROUTE_CONNECT 1u
extern const srv_route srv_routes[];
extern const size_t srv_nroutes;
const char *srv_access_name(srv_access a);
/* The SRV_H_* histogram a URL's latency goes to (any method). */
int srv_route_metric(const char *url);
/* Compares a presented token with a configured one in time that does not depend on how much
 * of it matches. */
bool srv_secret_equal(const char *given, const char *secret);
/* A JSON error reply {"error": msg, "status": N}; returns 0 so endpoints can `return`. */
int srv_error(srv_req *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Maps a store/codec error code to an HTTP status and replies with err's message. */
int srv_fail(srv_req *r, int code, const strobe_err *err);
/* Sets the reply body (takes ownership of buf). */
void srv_reply(srv_req *r, unsigned status, const char *ctype, char *buf, size_t len);
/* Reads from/to (defaults now-1h, now) with the names given; replies 400 and returns -1 when
 * bad. */
int srv_window(srv_req *r, const char *fname, const char *tname, int64_t *from, int64_t *to);
/* Parses a selector argument; replies 400 and returns -1 when bad or missing. */
int srv_selector(srv_req *r, const char *name, bool required, strobe_selector *sel);
/* spans.c: span_id= and trace_id= of r (comma lists) as matchers added to sel (0, or -1 after
 * a 400); one ID's check (NULL or what is wrong); n IDs as name=~"(a|b)" added to sel. */
#define SRV_SPAN_IDS_MAX 1000u
int srv_span_args(srv_req *r, strobe_selector *sel);
const char *srv_span_id_check(const char *id, size_t len);
int srv_span_matcher(const char *name, const char *const *ids, size_t n, strobe_selector *sel,
		     strobe_err *err);
/* /api/v1/range's "exemplars": the steps that have any, each with its profiles. */
struct json_t *srv_exemplars_json(const strobe_exemplars *e, int64_t from, int64_t step);

/* A label name as the push accepts it: [a-zA-Z_][a-zA-Z0-9_.]*, not __-prefixed, <= max bytes. */
bool srv_label_name_ok(const char *s, size_t max);

/* A profile's samples grouped by their string labels (server/sample_labels.c): each group's
 * labels (sorted, strings of the profile) go on its own series, its sample labels (the request's
 * rsl with the samples' pid, comm...) on its point. A profile without sample labels
 * is one group with samples NULL (all of them). */
typedef struct srv_label_group {
	strobe_labelpair *labels;
	size_t nlabels;
	strobe_labelpair *slabels; /* sample labels (pid, comm...), sorted; for the point */
	size_t nslabels;
	uint32_t *samples; /* sample ids */
	uint32_t nsamples, cap;
} srv_label_group;
typedef struct srv_label_groups {
	srv_label_group *g;
	size_t n;
} srv_label_groups;
int srv_sample_groups(const strobe_profile *p, const strobe_server_config *c,
		      const strobe_labelpair *base, size_t nbase, const strobe_labelpair *rsl,
		      size_t nrsl, srv_label_groups *out, strobe_err *err);
void srv_label_groups_free(srv_label_groups *g);

int srv_push(srv_req *r);
int srv_series_labels_check(const strobe_server_config *c, const strobe_labelpair *l, size_t k,
			    char *why, size_t whylen);
int srv_otlp_profiles(srv_req *r); /* POST /v1development/profiles, server/otlp.c */
int srv_metrics_get(srv_req *r); /* GET /metrics, server/metrics.c */
srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
/* One stored push: profiles, request bytes as received, pprof samples. */
void srv_metrics_ingested(srv_metrics *m, const char *tenant, int source, uint64_t profiles,
			  uint64_t bytes, uint64_t samples);
/* One answered request (handler SRV_H_*): its latency, and for a refused push its reason,
 * taken from the error message's "limit NAME" or else from the status. */
void srv_metrics_request(srv_metrics *m, int handler, unsigned status, const char *errmsg,
			 double seconds);
/* The scraper's per-target counters in the Prometheus text format (scrape_targets.c). */
void srv_scrape_metrics(strobe_server_scraper *s, FILE *f);
int srv_pyroscope_ingest(srv_req *r); /* POST /ingest, server/ingest.c */
int srv_query(srv_req *r);
int srv_diff(srv_req *r);
int srv_pgo(srv_req *r); /* server/pgo.c: GET /api/v1/pgo */
/* GET /api/v1/regressions (regressions.c); the owners of label values (owners.c): the team of
 * the first (names[i], values[i]) the "owners" config maps, malloc'd, *label its name; NULL. */
int srv_regressions(srv_req *r);
char *srv_owner_of(const strobe_server_config *c, const char *const *names,
		   const char *const *values, size_t n, const char **label);
/* /api/v1/diff?format=top|functions: per-function changes with their significance (diff_sets.c). */
int srv_diff_functions(srv_req *r, strobe_profile *base, strobe_profile *cur, bool norm,
		       size_t limit, double conf, bool json, FILE *f);
int srv_range(srv_req *r);
int srv_labels(srv_req *r);
int srv_label_values(srv_req *r, const char *name);
int srv_profile_types(srv_req *r);
int srv_series(srv_req *r); /* GET /api/v1/series, server/labels.c */
int srv_cost(srv_req *r);  /* GET /api/v1/cost, server/cost.c */
int srv_leaks(srv_req *r); /* GET /api/v1/leaks, server/leaks.c */

/* Keeps roughly the max_nodes heaviest call-tree nodes of p (server/read.c). */
int srv_trim(strobe_profile *p, size_t max_nodes, strobe_err *err);

/* A push of series from a protocol other than the native one (push.v1): each series' labels
 * as given (validated as the native push's; __name__ names the profile, other __ labels are
 * dropped) and its pprof bodies (gzipped or not). All series are checked and decoded first and
 * stored in ONE transaction: all of them or nothing. On success a 200 is set (a caller replaces
 * it); errors are replied as srv_error, with *failed the index of the series at fault (SIZE_MAX
 * when the store refused the push as a whole). */
typedef struct srv_push_in {
	const strobe_labelpair *labels;
	size_t nlabels;
	const uint8_t *const *bodies;
	const size_t *lens;
	size_t nbodies;
} srv_push_in;
int srv_push_series(srv_req *r, const srv_push_in *in, size_t n, size_t *failed);

/* The Connect protocol (server/connect.c): POST /querier.v1.QuerierService/{name},
 * /settings.v1.SettingsService/Get, /push.v1.PusherService/Push; and Pyroscope's legacy GETs
 * /pyroscope/render, /pyroscope/render-diff, /pyroscope/label-values. */
int srv_connect_querier(srv_req *r);
int srv_connect_settings(srv_req *r);
int srv_connect_push(srv_req *r);
int srv_render(srv_req *r);
int srv_render_diff(srv_req *r);
int srv_render_label_values(srv_req *r);
/* Turns an error reply {"error": ..., "status": N} into Connect's {"code", "message"} with the
 * HTTP status Connect gives that code. */
void srv_connect_error_from_native(srv_req *r);

/* A flame graph in Grafana's rows (server/flamegraph.c): rows[d] holds the nodes at depth d,
 * left to right, 4 numbers each (x offset from the previous node's end, total, self, name index)
 * for one column, 7 for two (left offset, total, self, right offset, total, self, name). */
typedef struct srv_flame_row {
	int64_t *v;
	size_t n, cap;
	int64_t end[2]; /* where the row's last node ends, per column (building) */
} srv_flame_row;
typedef struct srv_flame {
	const char **names; /* names[0] = "total"; the others point into the tree */
	size_t nnames;
	srv_flame_row *rows;
	size_t nrows, depth; /* rows allocated, rows used */
	int ncol;
	int64_t total[2], max_self;
} srv_flame;
/* Nodes lighter than the max_nodes-th heaviest are left out (0 = keep all). */
int srv_flame_build(const strobe_tree *t, int ncol, size_t max_nodes, srv_flame *f);
void srv_flame_free(srv_flame *f);
void srv_fold_steps(const int64_t *fine, size_t nfine, size_t per_step, bool average,
		    double *out, bool *has, size_t nsteps);
/* GET / and /ui/...: the web UI's embedded files (server/ui.c); false when the URL is not one. */
bool srv_ui(srv_req *r);

/* The debug-info store (server/debuginfo.c). Uploads are streamed to a file, not held in memory:
 * the body cap of a request that goes there (max_debuginfo_bytes), 0 for every other request;
 * and a new unlinked file for such a body, in the store's directory (-errno). */
uint64_t srv_debuginfo_file_cap(const strobe_server *srv, const char *method, const char *url);
int srv_debuginfo_tmpfile(const strobe_server *srv);
/* Where a tenant's stored file of a build ID and role ("debuginfo", "executable") lives. */
int srv_debuginfo_path(const strobe_server *srv, const char *tenant, const char *bid,
		       const char *role, char *buf, size_t cap);
int srv_debuginfo_upload(srv_req *r);
int srv_debuginfo_stat(srv_req *r);
int srv_debuginfod(srv_req *r);

/* Naming at query time (server/late_names.c): a queried profile's bare addresses named from the
 * tenant's debug-info store; *p is replaced by the named profile when anything was named. Never
 * fails the query: what cannot be named stays an address. */
typedef struct srv_namers srv_namers;
srv_namers *srv_namers_new(void);
void srv_namers_free(srv_namers *n);
/* After an upload of build ID bid: the tenant's symbolizer is dropped, so the next query opens
 * the new file, and the names cached for bid are deleted. */
void srv_namers_forget(srv_namers *n, const char *data_dir, const char *tenant, const char *bid);
int srv_name_late(srv_req *r, strobe_profile **p);
/* The naming cache's counters, in /metrics's text form. */
void srv_namers_metrics(srv_namers *n, FILE *f);

/* The naming cache (server/name_cache.c): frames by (tenant, build ID, address in the object),
 * in <data_dir>/debuginfo/names.sqlite, at most max_rows rows (the oldest dropped first). */
typedef struct srv_name_cache srv_name_cache;
typedef struct srv_name_row {
	const char *build_id;
	uint64_t addr;
	void *blob; /* srv_name_cache_encode */
	size_t len;
} srv_name_row;
typedef struct srv_name_cache_stats {
	uint64_t hits, misses, stored, dropped;
} srv_name_cache_stats;
srv_name_cache *srv_name_cache_open(const char *data_dir, uint64_t max_rows);
void srv_name_cache_close(srv_name_cache *c);
/* The cached frames (count >= 0; their strings in buf, cap bytes), or -ENOENT (also when a
 * row does not decode or does not fit). */
int srv_name_cache_get(srv_name_cache *c, const char *tenant, const char *bid, uint64_t addr,
		       strobe_sym_frame *fr, int max, char *buf, size_t cap);
int srv_name_cache_put(srv_name_cache *c, const char *tenant, const srv_name_row *rows,
		       size_t n);
int srv_name_cache_forget(srv_name_cache *c, const char *tenant, const char *bid);
/* Whether any row of the build ID is cached for the tenant. */
bool srv_name_cache_has(srv_name_cache *c, const char *tenant, const char *bid);
void srv_name_cache_counts(srv_name_cache *c, srv_name_cache_stats *st);
void *srv_name_cache_encode(const strobe_sym_frame *fr, int n, size_t *len);
int srv_name_cache_decode(const void *blob, size_t len, char *buf, strobe_sym_frame *fr, int max);

#endif
