// SPDX-License-Identifier: Apache-2.0
/*
 * What keeps the server answering under more load than it can take, and against clients that
 * hold connections without finishing a request:
 *
 *  - admission control: at most limits.max_inflight_pushes pushes (push and /ingest, from
 *    the end of their body to their reply: a slow sender holds no slot) and
 *    limits.max_inflight_bytes of request bodies held at a time (counted as they arrive, and a
 *    body whose Content-Length does not fit is refused at its headers); a request past either
 *    is answered 503 with Retry-After (the rest of its body is read and dropped, so the client
 *    gets the answer), and nothing of it is stored. A push admitted is processed whole: a 200
 *    still means committed.
 *
 *  - room kept for reads: libmicrohttpd takes max_connections + srv_admit_reserve() connections,
 *    and a request other than a GET on a connection opened past max_connections is answered
 *    503 at once, so a storm of pushes leaves room for /ready, /metrics and queries (at its
 *    own cap libmicrohttpd closes new connections at once).
 *
 *  - a deadline per request: its headers and body must arrive within limits.request_timeout of
 *    the connection's start (or of the end of its previous request). libmicrohttpd's own
 *    timeout (limits.connection_timeout) is an idle one, which a client sending a byte a
 *    second never reaches. When the open connections reach 90 % of limits.max_connections, the
 *    deadline shrinks to a tenth (at least 1 s), so slow or silent clients cannot hold the
 *    slots that everyone else needs: these evictions are what frees slots for the clients
 *    that libmicrohttpd turned away at its cap, when they retry.
 *    A request being processed (a push waiting for its commit, a long query) is never cut.
 *
 * The deadline is enforced by a watchdog thread over the connections libmicrohttpd reports
 * (MHD_OPTION_NOTIFY_CONNECTION): it shuts the socket down, and the connection's own thread
 * then sees the end of the stream and closes it. The socket stays valid while it is listed:
 * libmicrohttpd reports the close before it closes the descriptor, and both sides hold mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server_impl.h"
#include "strobe/clock.h"

typedef struct srv_conn {
	struct srv_conn *prev, *next;
	int fd;
	int64_t since_ns; /* start of the request now being received */
	bool processing;  /* its request is complete and being answered */
	bool evicted;
	bool reserve;     /* opened past max_connections, in the room kept for reads */
} srv_conn;

struct srv_admit {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t watchdog;
	bool running, stop;
	srv_conn *head;
	size_t nconn;
	size_t pushes, bytes; /* in flight */
	size_t max_pushes, max_bytes, max_conns;
	int64_t timeout_ns, busy_timeout_ns;
	uint64_t evicted[2]; /* [0] past request_timeout, [1] early because busy */
	uint64_t peak_conns, peak_pushes, peak_bytes;
};

static void *watchdog_main(void *arg)
{
	srv_admit *a = arg;
	pthread_mutex_lock(&a->mu);
	while (!a->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
		if (a->stop)
			break;
		int64_t now = strobe_mono_ns();
		bool busy = a->nconn * 10 >= a->max_conns * 9;
		int64_t limit = busy ? a->busy_timeout_ns : a->timeout_ns;
		for (srv_conn *c = a->head; c; c = c->next) {
			if (c->processing || c->evicted || now - c->since_ns <= limit)
				continue;
			/* The connection's thread sees the end of the stream and closes it. */
			shutdown(c->fd, SHUT_RDWR);
			c->evicted = true;
			a->evicted[now - c->since_ns > a->timeout_ns ? 0 : 1]++;
		}
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

srv_admit *srv_admit_new(const strobe_server_config *c)
{
	srv_admit *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->max_pushes = c->max_inflight_pushes;
	a->max_bytes = c->max_inflight_bytes;
	a->max_conns = c->max_connections ? c->max_connections : 1;
	a->timeout_ns = c->request_timeout_ns;
	a->busy_timeout_ns = c->request_timeout_ns / 10;
	if (a->busy_timeout_ns < STROBE_NS_PER_S)
		a->busy_timeout_ns = STROBE_NS_PER_S;
	if (a->busy_timeout_ns > a->timeout_ns)
		a->busy_timeout_ns = a->timeout_ns;
	if (a->timeout_ns && pthread_create(&a->watchdog, NULL, watchdog_main, a) == 0)
		a->running = true;
	else if (a->timeout_ns) {
		srv_admit_free(a);
		return NULL;
	}
	return a;
}

void srv_admit_free(srv_admit *a)
{
	if (!a)
		return;
	if (a->running) {
		pthread_mutex_lock(&a->mu);
		a->stop = true;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->watchdog, NULL);
	}
	/* libmicrohttpd reported every close before the daemon stopped: the list is empty. */
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

int srv_admit_push(srv_admit *a)
{
	int r = 0;
	pthread_mutex_lock(&a->mu);
	if (a->max_pushes && a->pushes >= a->max_pushes)
		r = -EBUSY;
	else if (++a->pushes > a->peak_pushes)
		a->peak_pushes = a->pushes;
	pthread_mutex_unlock(&a->mu);
	return r;
}

void srv_admit_push_done(srv_admit *a)
{
	pthread_mutex_lock(&a->mu);
	a->pushes--;
	pthread_mutex_unlock(&a->mu);
}

int srv_admit_bytes(srv_admit *a, size_t n, bool take)
{
	int r = 0;
	pthread_mutex_lock(&a->mu);
	if (a->max_bytes && (a->bytes + n > a->max_bytes || a->bytes + n < a->bytes))
		r = -EBUSY;
	else if (take && (a->bytes += n) > a->peak_bytes)
		a->peak_bytes = a->bytes;
	pthread_mutex_unlock(&a->mu);
	return r;
}

void srv_admit_bytes_done(srv_admit *a, size_t n)
{
	pthread_mutex_lock(&a->mu);
	a->bytes -= n;
	pthread_mutex_unlock(&a->mu);
}

void srv_admit_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		    enum MHD_ConnectionNotificationCode toe)
{
	strobe_server *srv = cls;
	srv_admit *a = srv->admit;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		srv_conn *cn = ci ? calloc(1, sizeof(*cn)) : NULL;
		*socket_context = cn;
		if (!cn)
			return; /* not watched: only its idle timeout applies */
		cn->fd = ci->connect_fd;
		cn->since_ns = strobe_mono_ns();
		pthread_mutex_lock(&a->mu);
		cn->next = a->head;
		if (a->head)
			a->head->prev = cn;
		a->head = cn;
		if (++a->nconn > a->peak_conns)
			a->peak_conns = a->nconn;
		cn->reserve = a->nconn > a->max_conns;
		pthread_mutex_unlock(&a->mu);
		return;
	}
	srv_conn *cn = *socket_context;
	if (!cn)
		return;
	pthread_mutex_lock(&a->mu);
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		a->head = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	a->nconn--;
	pthread_mutex_unlock(&a->mu);
	free(cn);
	*socket_context = NULL;
}

void srv_admit_phase(srv_admit *a, struct MHD_Connection *c, bool processing)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	srv_conn *cn = ci ? ci->socket_context : NULL;
	if (!cn)
		return;
	pthread_mutex_lock(&a->mu);
	cn->processing = processing;
	cn->since_ns = strobe_mono_ns();
	pthread_mutex_unlock(&a->mu);
}

bool srv_admit_reserved(srv_admit *a, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	srv_conn *cn = ci ? ci->socket_context : NULL;
	pthread_mutex_lock(&a->mu);
	bool r = cn && cn->reserve;
	pthread_mutex_unlock(&a->mu);
	return r;
}

unsigned srv_admit_reserve(const strobe_server_config *c)
{
	return c->max_connections / 16 + 4;
}

void srv_admit_stats(srv_admit *a, srv_admit_counts *out)
{
	pthread_mutex_lock(&a->mu);
	*out = (srv_admit_counts){.conns = a->nconn, .pushes = a->pushes, .bytes = a->bytes,
				  .evicted_timeout = a->evicted[0], .evicted_busy = a->evicted[1],
				  .peak_conns = a->peak_conns, .peak_pushes = a->peak_pushes,
				  .peak_bytes = a->peak_bytes};
	pthread_mutex_unlock(&a->mu);
}
