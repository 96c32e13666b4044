// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP front of the server (libmicrohttpd): reading request bodies within the configured
 * limit, resolving the tenant (X-Scope-OrgID, checked against the configured tokens), routing to
 * the endpoint files, and writing replies. Every error is JSON {"error": "...", "status": N}.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server_impl.h"

typedef struct conn {
	uint8_t *buf;
	size_t len, cap;
	bool too_big;
	/* Admission (admit.c): a push slot and the body bytes reserved, given back when the
	 * request ends; busy names the limit that refused it (its body is read and dropped). */
	bool push_slot;
	size_t held;
	const char *busy;
} conn;

/* At a request's headers: a body that would not fit in what is left of max_inflight_bytes is
 * refused at once (answered when it has been read and dropped). Nothing is reserved on the
 * strength of a Content-Length: a client that announces 16 MiB and sends a byte a second holds
 * only the byte. */
static void admit_request(strobe_server *srv, conn *cn, const char *cl)
{
	size_t n = cl && !cn->too_big ? (size_t)strtoull(cl, NULL, 10) : 0;
	if (n && srv_admit_bytes(srv->admit, n, false) < 0)
		cn->busy = "max_inflight_bytes";
}

/* At the end of a push's body: it takes a slot for its processing, or is refused. A slot is
 * not taken earlier, so slow senders cannot hold the slots. */
static void admit_push(strobe_server *srv, conn *cn, const char *url, const char *method)
{
	if (cn->busy || cn->too_big || strcmp(method, "POST") != 0 ||
	    (strcmp(url, "/api/v1/push") != 0 && strcmp(url, "/ingest") != 0))
		return;
	if (srv_admit_push(srv->admit) < 0)
		cn->busy = "max_inflight_pushes";
	else
		cn->push_slot = true;
}

/* More of a body arrived: it is held from now on, or, past max_inflight_bytes, the request is
 * refused and lets go of what it held. */
static void admit_more(strobe_server *srv, conn *cn, size_t upto)
{
	if (upto <= cn->held)
		return;
	if (srv_admit_bytes(srv->admit, upto - cn->held, true) == 0) {
		cn->held = upto;
		return;
	}
	cn->busy = "max_inflight_bytes";
	free(cn->buf);
	cn->buf = NULL;
	cn->len = cn->cap = 0;
}

const char *srv_arg(srv_req *r, const char *name)
{
	for (size_t i = 0; i < r->nargs; i++)
		if (strcmp(r->args[i].key, name) == 0)
			return r->args[i].value;
	return NULL;
}

const char *srv_header(srv_req *r, const char *name)
{
	for (size_t i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hdrs[i].key, name) == 0)
			return r->hdrs[i].value;
	return NULL;
}

void srv_reply(srv_req *r, unsigned status, const char *ctype, char *buf, size_t len)
{
	free(r->out);
	r->status = status;
	r->ctype = ctype;
	r->out = buf;
	r->outlen = len;
}

int srv_error(srv_req *r, unsigned status, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t ml = strnlen(msg, sizeof(r->errmsg) - 1); /* the start is enough for a reason */
	memcpy(r->errmsg, msg, ml);
	r->errmsg[ml] = 0;
	json_t *j = json_pack("{s:s, s:i}", "error", msg, "status", (int)status);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s) {
		/* The message was not valid UTF-8 (it quotes input): say so without it. */
		s = strdup("{\"error\":\"invalid request (message not printable)\"}");
	}
	json_decref(j);
	srv_reply(r, status, "application/json", s, s ? strlen(s) : 0);
	return 0;
}

int srv_fail(srv_req *r, int code, const strobe_err *err)
{
	if (code == -ENOSPC) {
		/* The disk is full: nothing of the request was stored, and nothing has to be
		 * given up; the client keeps it and comes back (agents retry every 5xx). */
		r->retry_after = SRV_RETRY_DISK_FULL_S;
		return srv_error(r, 507, "disk full: the store has no space left, nothing of this "
					 "request was stored; retry later (%s)",
				 err->msg[0] ? err->msg : strerror(-code));
	}
	unsigned st = code == -EINVAL || code == -ERANGE ? 400
		      : code == -EDQUOT			 ? 429
		      : code == -EFBIG			 ? 413
		      : code == -ENOENT			 ? 404
							 : 500;
	return srv_error(r, st, "%s", err->msg[0] ? err->msg : strerror(-code));
}

int srv_window(srv_req *r, const char *fname, const char *tname, int64_t *from, int64_t *to)
{
	const char *f = srv_arg(r, fname), *t = srv_arg(r, tname);
	strobe_err err = {{0}};
	*from = r->now_ns - 3600 * STROBE_NS_PER_S;
	*to = r->now_ns;
	if ((f && strobe_time_parse(f, r->now_ns, from, &err) < 0) ||
	    (t && strobe_time_parse(t, r->now_ns, to, &err) < 0)) {
		srv_error(r, 400, "%s: %s", f && err.msg[0] && !t ? fname : "from/to", err.msg);
		return -1;
	}
	if (*to <= *from) {
		srv_error(r, 400, "%s must be after %s", tname, fname);
		return -1;
	}
	return 0;
}

int srv_selector(srv_req *r, const char *name, bool required, strobe_selector *sel)
{
	const char *q = srv_arg(r, name);
	memset(sel, 0, sizeof(*sel));
	if (!q) {
		if (required) {
			srv_error(r, 400, "missing parameter '%s' (a selector like "
					  "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"})",
				  name);
			return -1;
		}
		return 0;
	}
	strobe_err err = {{0}};
	if (strobe_selector_parse(q, strlen(q), sel, &err) < 0) {
		srv_error(r, 400, "%s: %s", name, err.msg);
		return -1;
	}
	return 0;
}

/* Tenant ids go into paths of future backends and into logs: keep them plain. */
static bool tenant_ok(const char *t)
{
	size_t n = strlen(t);
	if (!n || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* Compares without an early exit, so the time taken says nothing about the token. */
static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return d == 0;
}

static int auth(srv_req *r)
{
	const char *t = srv_header(r, "X-Scope-OrgID");
	r->tenant = t ? t : "anonymous";
	if (!tenant_ok(r->tenant)) {
		srv_error(r, 400, "X-Scope-OrgID must be 1 to 64 of [A-Za-z0-9_.-]");
		return -1;
	}
	const strobe_server_config *c = &r->srv->cfg;
	if (!c->ntenants)
		return 0;
	for (size_t i = 0; i < c->ntenants; i++) {
		if (strcmp(c->tenants[i].id, r->tenant) != 0)
			continue;
		if (!c->tenants[i].token)
			return 0;
		const char *h = srv_header(r, "Authorization");
		if (h && strncmp(h, "Bearer ", 7) == 0 && same_secret(h + 7, c->tenants[i].token))
			return 0;
		srv_error(r, 401, "missing or wrong bearer token for tenant '%s'", r->tenant);
		return -1;
	}
	srv_error(r, 401, "unknown tenant '%s'", r->tenant);
	return -1;
}

static void route(srv_req *r)
{
	bool get = strcmp(r->method, "GET") == 0, post = strcmp(r->method, "POST") == 0;
	const char *u = r->url;
	if (get && (strcmp(u, "/ready") == 0 || strcmp(u, "/healthz") == 0)) {
		char *ok = strdup("ok\n");
		srv_reply(r, 200, "text/plain", ok, ok ? 3 : 0);
		return;
	}
	if (get && strcmp(u, "/metrics") == 0) {
		srv_metrics_get(r); /* unauthenticated, as Prometheus scrapes it: server/metrics.c */
		return;
	}
	/* The UI's files are public (no tenant data): the API calls they make carry the auth. */
	if (get && srv_ui(r))
		return;
	if (auth(r) < 0)
		return;
	if (post && strcmp(u, "/api/v1/push") == 0) {
		srv_push(r);
	} else if (post && strcmp(u, "/ingest") == 0) {
		strobe_pyroscope_ingest(r); /* Pyroscope's protocol: server/ingest.c */
	} else if (get && strcmp(u, "/api/v1/query") == 0) {
		srv_query(r);
	} else if (get && strcmp(u, "/api/v1/diff") == 0) {
		srv_diff(r);
	} else if (get && strcmp(u, "/api/v1/range") == 0) {
		srv_range(r);
	} else if (get && strcmp(u, "/api/v1/labels") == 0) {
		srv_labels(r);
	} else if (get && strcmp(u, "/api/v1/profile_types") == 0) {
		srv_profile_types(r);
	} else if (get && strcmp(u, "/api/v1/series") == 0) {
		srv_series(r);
	} else if (get && strncmp(u, "/api/v1/label/", 14) == 0 && strlen(u) > 21 &&
		   strcmp(u + strlen(u) - 7, "/values") == 0) {
		size_t nl = strlen(u) - 21;
		char name[STROBE_LABEL_NAME_MAX + 1];
		if (nl > STROBE_LABEL_NAME_MAX) {
			srv_error(r, 400, "label name longer than %u bytes", STROBE_LABEL_NAME_MAX);
			return;
		}
		memcpy(name, u + 14, nl);
		name[nl] = 0;
		srv_label_values(r, name);
	} else if (post && strcmp(u, "/api/v1/admin/compact") == 0) {
		strobe_err err = {{0}};
		int n = strobe_store_compact(r->srv->store, r->now_ns, &err);
		/* Retention even when compaction failed: on a full disk it is what frees pages. */
		strobe_err err2 = {{0}};
		int d = strobe_store_retain(r->srv->store, r->now_ns, n < 0 ? &err2 : &err);
		if (n < 0 || d < 0) {
			srv_fail(r, n < 0 ? n : d, &err);
			return;
		}
		char *s = NULL;
		int len = asprintf(&s, "{\"buckets_compacted\":%d,\"rows_deleted\":%d}\n", n, d);
		srv_reply(r, 200, "application/json", len < 0 ? NULL : s, len < 0 ? 0 : (size_t)len);
	} else {
		srv_error(r, 404, "no endpoint %s %s", r->method, u);
	}
}

/* Which histogram of /metrics a request's latency goes to. */
static int handler_of(const char *url)
{
	static const struct {
		const char *path;
		int h;
	} t[] = {{"/api/v1/push", SRV_H_PUSH},	    {"/ingest", SRV_H_INGEST},
		 {"/api/v1/query", SRV_H_QUERY},    {"/api/v1/diff", SRV_H_DIFF},
		 {"/api/v1/range", SRV_H_RANGE},    {"/api/v1/labels", SRV_H_LABELS},
		 {"/api/v1/profile_types", SRV_H_TYPES}, {"/api/v1/series", SRV_H_SERIES},
		 {"/metrics", SRV_H_METRICS}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(url, t[i].path) == 0)
			return t[i].h;
	if (strncmp(url, "/api/v1/label/", 14) == 0)
		return SRV_H_LABEL_VALUES;
	if (strncmp(url, "/api/v1/admin/", 14) == 0)
		return SRV_H_ADMIN;
	return SRV_H_OTHER;
}

void srv_handle(srv_req *r)
{
	route(r);
	if (!r->status)
		srv_error(r, 500, "internal error: no reply");
}

/* Query arguments and headers into the request's arrays, up to their caps. */
typedef struct kv_vec {
	strobe_kv *v;
	size_t n, cap, max;
	bool over;
} kv_vec;

static enum MHD_Result collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	(void)kind;
	kv_vec *a = cls;
	if (a->n == a->max) {
		a->over = true;
		return MHD_NO;
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		strobe_kv *nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv) {
			a->over = true;
			return MHD_NO;
		}
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = (strobe_kv){key ? key : "", value ? value : ""};
	return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	strobe_server *srv = cls;
	conn *cn = *con_cls;
	if (!cn) {
		if (!(cn = calloc(1, sizeof(*cn))))
			return MHD_NO;
		*con_cls = cn;
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if (cl && strtoull(cl, NULL, 10) > srv->cfg.max_body_bytes)
			cn->too_big = true;
		if (strcmp(method, "GET") != 0 && srv_admit_reserved(srv->admit, c))
			cn->busy = "max_connections"; /* the room past the cap is for reads */
		else
			admit_request(srv, cn, cl);
		return MHD_YES;
	}
	if (*upload_size) {
		/* Past the limit the rest is read and dropped, so the client gets the 413. */
		if (!cn->too_big && cn->len + *upload_size > srv->cfg.max_body_bytes)
			cn->too_big = true;
		if (!cn->too_big && !cn->busy)
			admit_more(srv, cn, cn->len + *upload_size);
		if (!cn->too_big && !cn->busy) {
			if (cn->len + *upload_size > cn->cap) {
				size_t nc = cn->cap ? cn->cap : 65536;
				while (nc < cn->len + *upload_size)
					nc *= 2;
				uint8_t *nb = realloc(cn->buf, nc);
				if (!nb)
					return MHD_NO;
				cn->buf = nb;
				cn->cap = nc;
			}
			memcpy(cn->buf + cn->len, upload, *upload_size);
			cn->len += *upload_size;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	srv_admit_phase(srv->admit, c, true); /* complete: no deadline while it is answered */
	admit_push(srv, cn, url, method);
	struct timespec ts, t0, t1;
	clock_gettime(CLOCK_REALTIME, &ts);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kv_vec args = {.max = SRV_MAX_ARGS}, hdrs = {.max = SRV_MAX_HEADERS};
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_kv, &args);
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_kv, &hdrs);
	srv_req r = {.srv = srv, .url = url, .method = method, .args = args.v, .nargs = args.n,
		     .hdrs = hdrs.v, .nhdrs = hdrs.n, .body = cn->buf, .len = cn->len,
		     .now_ns = ts.tv_sec * STROBE_NS_PER_S + ts.tv_nsec};
	if (cn->too_big)
		srv_error(&r, 413, "limit max_body_bytes: the request body is larger than %zu bytes",
			  srv->cfg.max_body_bytes);
	else if (cn->busy) {
		r.retry_after = SRV_RETRY_BUSY_S;
		srv_error(&r, 503, "limit %s: the server is busy (too many %s); nothing was "
				   "stored, retry later",
			  cn->busy, strcmp(cn->busy, "max_inflight_pushes") == 0 ? "pushes in flight"
				    : strcmp(cn->busy, "max_connections") == 0   ? "connections"
										 : "bytes in flight");
	} else if (args.over || hdrs.over)
		srv_error(&r, 400, "more than %u query parameters or %u headers", SRV_MAX_ARGS,
			  SRV_MAX_HEADERS);
	else
		srv_handle(&r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	srv_metrics_request(srv->metrics, handler_of(url), r.status, r.errmsg,
			    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(args.v);
	free(hdrs.v);
	if (!r.out) /* out of memory while replying */
		return MHD_NO;
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(r.outlen, r.out, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(r.out);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", r.ctype);
	if (r.etag)
		MHD_add_response_header(resp, "ETag", r.etag);
	if (r.cache)
		MHD_add_response_header(resp, "Cache-Control", r.cache);
	if (r.retry_after) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%u", r.retry_after);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	enum MHD_Result ret = MHD_queue_response(c, r.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	strobe_server *srv = cls;
	conn *cn = *con_cls;
	if (cn) {
		if (cn->push_slot)
			srv_admit_push_done(srv->admit);
		if (cn->held)
			srv_admit_bytes_done(srv->admit, cn->held);
		free(cn->buf);
		free(cn);
		*con_cls = NULL;
	}
	srv_admit_phase(srv->admit, c, false); /* its next request's deadline starts now */
}

/* "host:port" or "[v6]:port" into a socket address. */
static int parse_listen(const char *l, struct sockaddr_storage *ss, socklen_t *sl, bool *v6)
{
	char host[128];
	const char *colon = strrchr(l, ':');
	if (!colon || (size_t)(colon - l) >= sizeof(host))
		return -EINVAL;
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535 || colon[1] == 0)
		return -EINVAL;
	memcpy(host, l, (size_t)(colon - l));
	host[colon - l] = 0;
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[') {
		size_t hl = strlen(host);
		if (hl < 2 || host[hl - 1] != ']')
			return -EINVAL;
		host[hl - 1] = 0;
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -EINVAL;
		*sl = sizeof(*a);
		*v6 = true;
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -EINVAL;
	*sl = sizeof(*a);
	*v6 = false;
	return 0;
}

bool strobe_listen_is_loopback(const char *listen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	bool v6;
	if (parse_listen(listen ? listen : "127.0.0.1:4100", &ss, &sl, &v6) < 0)
		return false;
	if (v6)
		return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
}

const char *strobe_server_config_open_tenant(const strobe_server_config *c)
{
	if (!c->ntenants)
		return "any";
	for (size_t i = 0; i < c->ntenants; i++)
		if (!c->tenants[i].token)
			return c->tenants[i].id;
	return NULL;
}

strobe_server *strobe_server_start(const strobe_server_config *c, strobe_store *st,
				   strobe_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	bool v6;
	const char *listen = c->listen ? c->listen : "127.0.0.1:4100";
	if (parse_listen(listen, &ss, &sl, &v6) < 0) {
		strobe_errf(err, -EINVAL, "listen address '%s' is not host:port (IPv4 or [IPv6])",
			    listen);
		errno = EINVAL;
		return NULL;
	}
	strobe_server *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->cfg = *c;
	s->store = st;
	if (!(s->metrics = srv_metrics_new())) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	/* A push blocks its thread until its group commit is on disk, so by default each
	 * connection has a thread of its own: the pushes waiting for one commit are exactly the
	 * concurrent ones, and a slow one holds up nobody else. */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | (c->threads ? 0 : MHD_USE_THREAD_PER_CONNECTION);
	/* poll or epoll, not select: select cannot watch a descriptor past 1024, which a
	 * thousand connections reach. */
	flags |= MHD_USE_AUTO;
	if (v6)
		flags |= MHD_USE_IPv6;
	unsigned pool = c->threads ? c->threads : 0;
	if (!(s->admit = srv_admit_new(c))) {
		srv_metrics_free(s->metrics);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	/* Past max_connections some room is kept for reads (admit.c); past that, libmicrohttpd
	 * closes new connections at once, and admit.c cuts the ones slow to send a request. */
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
				(struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, pool,
				MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, srv_admit_conn, s,
				MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned)((c->connection_timeout_ns + STROBE_NS_PER_S - 1) /
					   STROBE_NS_PER_S),
				MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)c->max_connections + srv_admit_reserve(c),
				MHD_OPTION_END);
	if (!s->d) {
		int e = errno ? errno : EADDRINUSE;
		strobe_errf(err, -e, "cannot listen on %s: %s", listen, strerror(e));
		srv_admit_free(s->admit);
		srv_metrics_free(s->metrics);
		free(s);
		errno = e;
		return NULL;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : 0;
	return s;
}

uint16_t strobe_server_port(const strobe_server *s)
{
	return s->port;
}

void strobe_server_stop(strobe_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	srv_admit_free(s->admit);
	srv_metrics_free(s->metrics);
	free(s);
}
