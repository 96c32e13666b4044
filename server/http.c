// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP front of the server (libmicrohttpd): reading request bodies within the configured
 * limit, handing each request to the route table (server/routes.c: access class, auth, the
 * endpoint), and writing replies. Every error is JSON {"error": "...", "status": N}.
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
#include <unistd.h>

#include "server_impl.h"
#include "notify.h"
#include "strobe/buf.h"
#include "strobe/clock.h"

typedef struct conn {
	strobe_buf body; /* capped at max_body_bytes */
	bool too_big;
	bool started;      /* the handler has seen the request's headers */
	bool uri_too_long; /* the URL is longer than SRV_MAX_URL: a 414 */
	/* Admission (admit.c): a push slot and the body bytes reserved, given back when the
	 * request ends; busy names the limit that refused it (its body is read and dropped). */
	bool push_slot;
	size_t held;
	const char *busy;
	bool active; /* counted in the server's active requests until completed() */
	/* A body streamed to a file (debug-info uploads): fd, bytes written, the route's cap, and
	 * the errno that stopped the writing. */
	int fd;
	uint64_t flen, fcap;
	int ferr;
} conn;

/* The body of a file route: appended to the file, past the cap dropped (answered 413), a write
 * error remembered (answered with it). */
static void file_body(conn *cn, const char *p, size_t n)
{
	if (cn->too_big || cn->ferr)
		return;
	if (cn->flen + n > cn->fcap) {
		cn->too_big = true;
		return;
	}
	while (n) {
		ssize_t w = write(cn->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			cn->ferr = w < 0 ? errno : EIO;
			return;
		}
		p += w;
		n -= (size_t)w;
		cn->flen += (uint64_t)w;
	}
}

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
	    (strcmp(url, "/api/v1/push") != 0 && strcmp(url, "/ingest") != 0 &&
	     strcmp(url, "/v1development/profiles") != 0 &&
	     strcmp(url, "/push.v1.PusherService/Push") != 0))
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
	strobe_buf_free(&cn->body);
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
	/* The store's backend (backend.h): a feature it does not have yet, or its database out
	 * of reach (ClickHouse down: nothing was stored, the client retries). */
	if (code == -ENOTSUP)
		return srv_error(r, 501, "not implemented by this store: %s",
				 err->msg[0] ? err->msg : strerror(-code));
	if (code == -EAGAIN) {
		r->retry_after = SRV_RETRY_BUSY_S;
		return srv_error(r, 503, "the store is unavailable, nothing of this request was "
					 "stored; retry later (%s)",
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

/* Query arguments and headers into the request's arrays, up to their caps. */
typedef struct kv_vec {
	srv_kv *v;
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
		srv_kv *nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv) {
			a->over = true;
			return MHD_NO;
		}
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = (srv_kv){key ? key : "", value ? value : ""};
	return MHD_YES;
}

/* ---- the log of refused requests ----------------------------------------------------------------- */

/* Copies at most cap-1 bytes of text into out, control bytes and DEL shown as '?': a path or a
 * reason quotes what the client sent, and must not forge lines of the log. */
static void log_clean(char *out, size_t cap, const char *text)
{
	size_t i = 0;
	for (; text && text[i] && i + 1 < cap; i++) {
		unsigned char c = (unsigned char)text[i];
		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	out[i] = 0;
}

static int64_t mono_s(void)
{
	return strobe_mono_ns() / STROBE_NS_PER_S;
}

/* The summary of a second that has ended (srv->log_mu held): into sum, or "" when none. */
static void log_roll(strobe_server *srv, int64_t now, char *sum, size_t cap)
{
	sum[0] = 0;
	if (now == srv->log_second)
		return;
	if (srv->log_suppressed)
		snprintf(sum, cap,
			 "%llu rejected requests not logged (more than %u a second)",
			 (unsigned long long)srv->log_suppressed, STROBE_SERVER_LOG_PER_S);
	srv->log_second = now;
	srv->log_lines = 0;
	srv->log_suppressed = 0;
}

void strobe_server_log_flush(strobe_server *srv)
{
	if (!srv || !srv->cfg.log)
		return;
	char sum[128];
	pthread_mutex_lock(&srv->log_mu);
	log_roll(srv, mono_s(), sum, sizeof(sum));
	pthread_mutex_unlock(&srv->log_mu);
	if (sum[0])
		srv->cfg.log(sum);
}

/* One line for a refused request, within STROBE_SERVER_LOG_PER_S a second. The query is left
 * out: tokens and label values may be in it. */
static void log_rejected(strobe_server *srv, const srv_req *r)
{
	if (!srv->cfg.log || r->status < 400)
		return;
	char sum[128];
	pthread_mutex_lock(&srv->log_mu);
	log_roll(srv, mono_s(), sum, sizeof(sum));
	bool emit = srv->log_lines < STROBE_SERVER_LOG_PER_S;
	if (emit)
		srv->log_lines++;
	else
		srv->log_suppressed++;
	pthread_mutex_unlock(&srv->log_mu);
	if (sum[0])
		srv->cfg.log(sum);
	if (!emit)
		return;
	char method[16], path[256], tenant[80], line[600];
	log_clean(method, sizeof(method), r->method);
	log_clean(path, sizeof(path), r->url);
	/* Only a tenant that passed auth: what a client claimed may be anything, a token pasted
	 * into X-Scope-OrgID included, and the log must not keep it. */
	log_clean(tenant, sizeof(tenant), !r->tenant ? "-" : r->tenant_accepted ? r->tenant : "(not accepted)");
	char reason[sizeof(r->errmsg)];
	log_clean(reason, sizeof(reason), r->errmsg[0] ? r->errmsg : "-");
	snprintf(line, sizeof(line), "rejected %s %s %u tenant=%s: %s", method, path, r->status,
		 tenant, reason);
	srv->cfg.log(line);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	strobe_server *srv = cls;
	conn *cn = *con_cls;
	if (!cn || !cn->started) {
		/* Made by uri_seen, unless it could not allocate. */
		if (!cn && !(cn = calloc(1, sizeof(*cn))))
			return MHD_NO;
		*con_cls = cn;
		if (!cn->started)
			cn->fd = -1;
		cn->started = true;
		strobe_buf_init(&cn->body, srv->cfg.max_body_bytes);
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		if ((cn->fcap = srv_debuginfo_file_cap(srv, method, url))) {
			/* To disk as it comes, so no memory limit applies; the file's own cap does. */
			if (cl && strtoull(cl, NULL, 10) > cn->fcap)
				cn->too_big = true;
			else if ((cn->fd = srv_debuginfo_tmpfile(srv)) < 0)
				cn->ferr = -cn->fd;
			return MHD_YES;
		}
		if (cl && strtoull(cl, NULL, 10) > srv->cfg.max_body_bytes)
			cn->too_big = true;
		if (strcmp(method, "GET") != 0 && srv_admit_reserved(srv->admit, c))
			cn->busy = "max_connections"; /* the room past the cap is for reads */
		else
			admit_request(srv, cn, cl);
		return MHD_YES;
	}
	if (*upload_size && cn->fcap) {
		file_body(cn, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		/* Past the limit the rest is read and dropped, so the client gets the 413. */
		if (!cn->too_big && cn->body.len + *upload_size > srv->cfg.max_body_bytes)
			cn->too_big = true;
		if (!cn->too_big && !cn->busy && !cn->uri_too_long)
			admit_more(srv, cn, cn->body.len + *upload_size);
		if (!cn->too_big && !cn->busy && !cn->uri_too_long) {
			/* 64 KiB at first (within the cap): most bodies then take one allocation. */
			size_t first = cn->body.max < 65535 ? cn->body.max : 65535;
			if (!cn->body.p &&
			    strobe_buf_reserve(&cn->body, *upload_size > first ? *upload_size : first) < 0)
				return MHD_NO;
			if (strobe_buf_add(&cn->body, upload, *upload_size) < 0)
				return MHD_NO;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	srv_admit_phase(srv->admit, c, true); /* complete: no deadline while it is answered */
	/* counted before the stop flag is read, so a stop that saw no request active sees this
	 * one refused (both sequentially consistent) */
	if (!cn->active) {
		atomic_fetch_add(&srv->active, 1);
		cn->active = true;
	}
	if (atomic_load(&srv->stopping) && !cn->busy)
		cn->busy = "stopping";
	admit_push(srv, cn, url, method);
	int64_t t0 = strobe_mono_ns();
	kv_vec args = {.max = SRV_MAX_ARGS}, hdrs = {.max = SRV_MAX_HEADERS};
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_kv, &args);
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_kv, &hdrs);
	srv_req r = {.srv = srv, .url = url, .method = method, .args = args.v, .nargs = args.n,
		     .hdrs = hdrs.v, .nhdrs = hdrs.n, .body = (const uint8_t *)cn->body.p, .len = cn->body.len,
		     .now_ns = strobe_real_ns(),
		     .body_in_file = cn->fd >= 0, .body_fd = cn->fd, .body_fd_len = cn->flen};
	if (cn->uri_too_long)
		srv_error(&r, 414, "the URL is longer than %u bytes (the server's limit); give long "
				   "selectors in fewer or shorter parameters",
			  SRV_MAX_URL);
	else if (cn->too_big && cn->fcap)
		srv_error(&r, 413, "limit max_debuginfo_bytes: the file is larger than %llu bytes",
			  (unsigned long long)cn->fcap);
	else if (cn->too_big)
		srv_error(&r, 413, "limit max_body_bytes: the request body is larger than %zu bytes",
			  srv->cfg.max_body_bytes);
	else if (cn->ferr)
		srv_error(&r, cn->ferr == ENOSPC || cn->ferr == EDQUOT ? 507 : 500,
			  "cannot store the upload: %s", strerror(cn->ferr));
	else if (cn->busy) {
		r.retry_after = SRV_RETRY_BUSY_S;
		if (strcmp(cn->busy, "stopping") == 0)
			srv_error(&r, 503, "the server is stopping; nothing was stored, retry later");
		else
			srv_error(&r, 503, "limit %s: the server is busy (too many %s); nothing "
					   "was stored, retry later",
				  cn->busy,
				  strcmp(cn->busy, "max_inflight_pushes") == 0 ? "pushes in flight"
				  : strcmp(cn->busy, "max_connections") == 0   ? "connections"
									       : "bytes in flight");
	} else if (args.over || hdrs.over)
		srv_error(&r, 400, "more than %u query parameters or %u headers", SRV_MAX_ARGS,
			  SRV_MAX_HEADERS);
	else
		srv_handle(&r);
	int64_t t1 = strobe_mono_ns();
	log_rejected(srv, &r);
	srv_metrics_request(srv->metrics, srv_route_metric(url), r.status, r.errmsg,
			    (double)(t1 - t0) / 1e9);
	free(args.v);
	free(hdrs.v);
	struct MHD_Response *resp;
	if (r.out_is_fd) {
		free(r.out);
		/* libmicrohttpd owns the descriptor from here and closes it when done. */
		if (!(resp = MHD_create_response_from_fd64(r.out_fd_len, r.out_fd))) {
			close(r.out_fd);
			return MHD_NO;
		}
	} else {
		if (!r.out) /* out of memory while replying */
			return MHD_NO;
		resp = MHD_create_response_from_buffer(r.outlen, r.out, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(r.out);
			return MHD_NO;
		}
	}
	MHD_add_response_header(resp, "Content-Type", r.ctype);
	if (r.etag)
		MHD_add_response_header(resp, "ETag", r.etag);
	if (r.cache)
		MHD_add_response_header(resp, "Cache-Control", r.cache);
	if (r.cenc)
		MHD_add_response_header(resp, "Content-Encoding", r.cenc);
	if (r.retry_after) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%u", r.retry_after);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	enum MHD_Result ret = MHD_queue_response(c, r.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Called by libmicrohttpd with the request line's URL (path and query, as sent) before the
 * handler; what it returns is the handler's *con_cls. The length is judged here because the
 * handler sees the path and the parsed arguments only. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)c;
	conn *cn = calloc(1, sizeof(*cn));
	if (cn) {
		cn->fd = -1; /* completed() may see it before the handler does */
		cn->uri_too_long = strnlen(uri, SRV_MAX_URL + 1) > SRV_MAX_URL;
	}
	return cn;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	strobe_server *srv = cls;
	conn *cn = *con_cls;
	if (cn) {
		if (cn->active)
			atomic_fetch_sub(&srv->active, 1);
		if (cn->push_slot)
			srv_admit_push_done(srv->admit);
		if (cn->held)
			srv_admit_bytes_done(srv->admit, cn->held);
		strobe_buf_free(&cn->body);
		if (cn->fd >= 0)
			close(cn->fd); /* unlinked: whatever the endpoint did not link goes with it */
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

/* The key's text is wiped before it is freed. */
static void srv_tls_free(strobe_server *s)
{
	if (s->tls_key_pem)
		explicit_bzero(s->tls_key_pem, strlen(s->tls_key_pem));
	free(s->tls_key_pem);
	free(s->tls_cert_pem);
	s->tls_key_pem = s->tls_cert_pem = NULL;
}

strobe_server *strobe_server_start(const strobe_server_config *c, strobe_store *st,
				   strobe_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	bool v6;
	if (strobe_server_check_exposure(c, err) < 0) {
		errno = EPERM;
		return NULL;
	}
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
	pthread_mutex_init(&s->log_mu, NULL);
	int tr = srv_tls_load(c, &s->tls_cert_pem, &s->tls_key_pem, &s->tls_not_after, err);
	if (tr < 0) {
		free(s);
		errno = -tr;
		return NULL;
	}
	if (!(s->metrics = srv_metrics_new())) {
		srv_tls_free(s);
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
	if (!(s->admit = srv_admit_new(c)) || !(s->namers = srv_namers_new())) {
		srv_admit_free(s->admit);
		srv_metrics_free(s->metrics);
		srv_tls_free(s);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	/* HTTPS: libmicrohttpd with GnuTLS, given the PEM texts server/tls.c has checked. */
	struct MHD_OptionItem tls[] = {
		{MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert_pem},
		{MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key_pem},
		{MHD_OPTION_END, 0, NULL}};
	if (s->tls_cert_pem)
		flags |= MHD_USE_TLS;
	/* Past max_connections some room is kept for reads (admit.c); past that, libmicrohttpd
	 * closes new connections at once, and admit.c cuts the ones slow to send a request. */
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
				(struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, pool,
				MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_URI_LOG_CALLBACK, uri_seen, s,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, SRV_CONN_MEMORY,
				MHD_OPTION_NOTIFY_CONNECTION, srv_admit_conn, s,
				MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned)((c->connection_timeout_ns + STROBE_NS_PER_S - 1) /
					   STROBE_NS_PER_S),
				MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)c->max_connections + srv_admit_reserve(c),
				MHD_OPTION_ARRAY, s->tls_cert_pem ? tls : tls + 2, MHD_OPTION_END);
	if (!s->d) {
		int e = errno ? errno : EADDRINUSE;
		strobe_errf(err, -e, "cannot listen on %s: %s", listen, strerror(e));
		srv_namers_free(s->namers);
		srv_admit_free(s->admit);
		srv_metrics_free(s->metrics);
		srv_tls_free(s);
		free(s);
		errno = e;
		return NULL;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : 0;
	/* After the daemon: the notifier reads the store and config the server holds. */
	if (c->notify_json && !(s->notify = srv_notify_start(s, err))) {
		int e = EINVAL;
		strobe_server_stop(s);
		errno = e;
		return NULL;
	}
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
	srv_notify_stop(s->notify); /* first: it uses the store and namers */
	/* The requests being answered finish, their responses sent: stopping the daemon at once
	 * closed their connections, and a push the store had taken was retried by its agent as
	 * failed (stored twice, or counted dropped when its spool overflowed). New ones get a 503. */
	atomic_store(&s->stopping, true);
	for (int i = 0; i < SRV_STOP_DRAIN_MS / 10 && atomic_load(&s->active) > 0; i++)
		usleep(10000);
	MHD_stop_daemon(s->d);
	srv_namers_free(s->namers);
	srv_admit_free(s->admit);
	srv_metrics_free(s->metrics);
	srv_tls_free(s);
	pthread_mutex_destroy(&s->log_mu);
	free(s);
}
