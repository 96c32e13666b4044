// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's sender thread: takes the oldest profile out of the spool and POSTs it to the
 * server's push API (libcurl, one connection kept alive). A profile leaves the spool only when
 * the server said 200 (stored durably) or refused it for good (a 4xx other than 408/429: sending
 * it again cannot help). Anything else (no connection, timeout, 5xx, 429) is retried after an
 * exponential backoff with jitter, 0.5 s doubling to 30 s, while the spool keeps filling (and
 * dropping its oldest) behind it. A 429 or 503 with a Retry-After header (seconds or an HTTP
 * date) is the server saying when it can take more: the sender waits at least that long (plus
 * up to a tenth more, so that agents told the same time do not return together) instead.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent_impl.h"
#include "strobe/http_client.h"

size_t agent_resp_keep(char *p, size_t size, size_t n, void *ctx)
{
	agent_resp *r = ctx;
	size_t add = size * n, room = sizeof(r->buf) - 1 - r->len;
	memcpy(r->buf + r->len, p, add < room ? add : room);
	r->len += add < room ? add : room;
	r->buf[r->len] = 0;
	return add;
}

/* The Retry-After header of the answer (of its last response, should a 1xx come first). */
typedef struct hdrs {
	char retry_after[64];
	bool have;
} hdrs;

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	hdrs *h = ctx;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		h->have = false; /* a new response's status line */
	} else if (len > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
		size_t i = sizeof(name) - 1, e = len;
		while (i < e && (p[i] == ' ' || p[i] == '\t'))
			i++;
		while (e > i && isspace((unsigned char)p[e - 1]))
			e--;
		/* longer than any date or sane number: not one we can read */
		h->have = e - i < sizeof(h->retry_after);
		if (h->have) {
			memcpy(h->retry_after, p + i, e - i);
			h->retry_after[e - i] = 0;
		}
	}
	return len;
}

int64_t strobe_retry_after_ms(const char *v, int64_t now_unix_ms)
{
	int64_t ms;
	size_t nd = strspn(v, "0123456789");
	if (nd && !v[nd]) {
		/* delay-seconds; more digits than fit are as good as "very long" */
		ms = nd > 9 ? STROBE_RETRY_AFTER_MAX_MS : (int64_t)strtol(v, NULL, 10) * 1000;
	} else if (nd) {
		return -1; /* "5s", "1.5": neither form */
	} else {
		time_t t = curl_getdate(v, NULL);
		if (t == (time_t)-1)
			return -1;
		ms = (int64_t)t * 1000 - now_unix_ms;
	}
	if (ms <= 0)
		return -1;
	return ms > STROBE_RETRY_AFTER_MAX_MS ? STROBE_RETRY_AFTER_MAX_MS : ms;
}

static int64_t unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 0: stored; 1: refused for good; -1: try again later, not before *retry_ms when that is not
 * -1 (the server's Retry-After on a 429 or 503). msg gets why. */
static int push_one(strobe_agent *a, CURL *c, const char *meta, const void *body, size_t len,
		    int64_t *retry_ms, char *msg, size_t cap)
{
	*retry_ms = -1;
	const strobe_agent_opts *o = a->o;
	size_t sl = strlen(o->server);
	char *url = malloc(sl + strlen(meta) + 32);
	if (!url) {
		snprintf(msg, cap, "out of memory");
		return -1;
	}
	sprintf(url, "%s%sapi/v1/push?%s", o->server, sl && o->server[sl - 1] == '/' ? "" : "/", meta);
	agent_resp r = {.len = 0};
	hdrs h = {.have = false};
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, agent_resp_keep);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	/* Stopping: what is left of the grace period, so a hung server cannot hold up a stop
	 * (systemd's TimeoutStopSec); what is not sent stays in the spool. */
	long limit = 30;
	if (atomic_load(&a->sender_stop)) {
		int64_t left = (a->sender_deadline_ns - strobe_mono_ns()) / 1000000000;
		limit = left < 1 ? 1 : left < 30 ? (long)left : 30;
	}
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, limit < 5 ? limit : 5L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, limit);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	char errbuf[CURL_ERROR_SIZE];
	errbuf[0] = 0;
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	CURLcode cr = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL); /* errbuf goes out of scope */
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	free(url);
	if (cr != CURLE_OK) {
		/* a failed verification is retried like any failed push, never dropped */
		strobe_http_error(msg, cap, o->server, o->server, cr, errbuf, o->ca);
		return -1;
	}
	if (status == 200)
		return 0;
	if ((status == 429 || status == 503) && h.have)
		*retry_ms = strobe_retry_after_ms(h.retry_after, unix_ms());
	snprintf(msg, cap, "%s: HTTP %ld: %.300s", o->server, status, r.buf);
	return status >= 400 && status < 500 && status != 408 && status != 429 ? 1 : -1;
}

static void *sender_main(void *arg)
{
	strobe_agent *a = arg;
	CURL *c = curl_easy_init();
	/* The request headers, the same for every push: built once per sender. */
	struct curl_slist *headers =
		strobe_http_headers(a->o->tenant, a->o->token, "Content-Type: application/octet-stream");
	if (!headers && c) {
		curl_easy_cleanup(c);
		c = NULL; /* out of memory: nothing is sent, the spool keeps the profiles */
	}
	if (c) {
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
		strobe_http_tls(c, a->o->ca);
	}
	strobe_backoff bo;
	strobe_backoff_init(&bo, 500, 30000, (uint64_t)strobe_mono_ns() ^ (uint64_t)getpid());
	bool failing = false;
	uint64_t fails_in_row = 0, rng = (uint64_t)strobe_mono_ns() | 1;
	char msg[512];
	while (c) {
		bool stopping = atomic_load(&a->sender_stop);
		if (stopping && strobe_mono_ns() >= a->sender_deadline_ns)
			break;
		uint64_t id;
		char *meta;
		void *body;
		size_t len;
		/* A profile added and a stop both wake the wait: the timeout is only a safety
		 * net, long so that an idle sender does not wake the CPU twice a second. */
		int rc = strobe_spool_peek(a->spool, stopping ? 0 : 5000, &id, &meta, &body, &len);
		if (rc == -ENOENT) {
			if (stopping)
				break;
			continue;
		}
		if (rc < 0) {
			usleep(100000);
			continue;
		}
		int64_t retry_ms;
		int pr = push_one(a, c, meta, body, len, &retry_ms, msg, sizeof(msg));
		free(meta);
		free(body);
		if (pr >= 0) {
			strobe_spool_remove(a->spool, id);
			strobe_backoff_reset(&bo);
			pthread_mutex_lock(&a->mu);
			if (pr == 0) {
				a->st.pushes++;
				a->st.bytes_sent += len;
				a->st.last_push_unix = time(NULL);
			} else {
				a->st.push_rejected++;
				snprintf(a->st.last_error, sizeof(a->st.last_error), "%.255s", msg);
			}
			a->st.server_up = true;
			a->st.next_push_unix_ms = 0;
			pthread_mutex_unlock(&a->mu);
			if (pr == 1)
				agent_log(a, STROBE_LOG_WARN, "push refused, profile dropped: %s", msg);
			if (failing)
				agent_log(a, STROBE_LOG_INFO, "server reachable again after %" PRIu64
					  " failed pushes; sending the spool", fails_in_row);
			failing = false;
			fails_in_row = 0;
			continue;
		}
		strobe_spool_release(a->spool, id);
		fails_in_row++;
		uint64_t wait;
		if (retry_ms > 0) {
			/* the server's time, never less; up to a tenth more (at most 5 s) of jitter */
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			uint64_t spread = (uint64_t)retry_ms / 10 < 5000 ? (uint64_t)retry_ms / 10 : 5000;
			wait = (uint64_t)retry_ms + rng % (spread + 1);
		} else {
			wait = strobe_backoff_next(&bo);
		}
		pthread_mutex_lock(&a->mu);
		a->st.push_failures++;
		a->st.server_up = false;
		if (retry_ms > 0) {
			a->st.retry_after++;
			a->st.retry_after_last_s = (double)retry_ms / 1000;
		}
		a->st.next_push_by_server = retry_ms > 0;
		a->st.next_push_unix_ms = unix_ms() + (int64_t)wait;
		snprintf(a->st.last_error, sizeof(a->st.last_error), "%.255s", msg);
		pthread_mutex_unlock(&a->mu);
		if (!failing && retry_ms > 0)
			agent_log(a, STROBE_LOG_WARN, "push deferred: the server asks to retry after "
				  "%.1f s: %s", (double)retry_ms / 1000, msg);
		else if (!failing)
			agent_log(a, STROBE_LOG_WARN, "push failed, will retry with backoff: %s", msg);
		failing = true;
		agent_log(a, STROBE_LOG_DEBUG, "push retry in %" PRIu64 " ms%s: %s", wait,
			  retry_ms > 0 ? " (Retry-After)" : "", msg);
		/* the backoff in one sleep, which only a stop ends early (then the rest of the grace
		 * period): not woken by each profile the spool takes meanwhile */
		for (int64_t end = strobe_mono_ns() + (int64_t)wait * 1000000, now;
		     (now = strobe_mono_ns()) < end;) {
			bool stop = atomic_load(&a->sender_stop);
			if (stop && now >= a->sender_deadline_ns)
				break;
			int64_t until = stop && a->sender_deadline_ns < end ? a->sender_deadline_ns : end;
			strobe_spool_sleep(a->spool, (int)((until - now) / 1000000) + 1);
		}
	}
	if (c)
		curl_easy_cleanup(c);
	curl_slist_free_all(headers);
	return NULL;
}

int agent_sender_start(strobe_agent *a, strobe_err *err)
{
	static atomic_int inited;
	if (atomic_exchange(&inited, 1) == 0)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = pthread_create(&a->sender, NULL, sender_main, a);
	if (rc)
		return strobe_errf(err, -rc, "cannot start the sender thread: %s", strerror(rc));
	a->sender_started = true;
	return 0;
}

void agent_sender_finish(strobe_agent *a, int grace_ms)
{
	if (!a->sender_started)
		return;
	a->sender_deadline_ns = strobe_mono_ns() + (int64_t)grace_ms * 1000000;
	atomic_store(&a->sender_stop, 1);
	strobe_spool_wake(a->spool);
	pthread_join(a->sender, NULL);
	a->sender_started = false;
}
