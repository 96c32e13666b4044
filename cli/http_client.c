// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP client side of the CLI (`strobe push`, `strobe query`): one request with libcurl,
 * the response body collected in memory up to a cap, the server's JSON error message extracted
 * so the user sees "strobe query: limit max_labels: ..." rather than a status code.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cli.h"
#include "strobe/buf.h"
#include "strobe/http_client.h"

#define MAX_RESPONSE (1u << 30) /* a merged profile of a big window; more is a broken server */

typedef struct sink {
	strobe_buf b;
	bool too_big;
} sink;

static size_t collect(char *p, size_t size, size_t n, void *ctx)
{
	sink *s = ctx;
	int r = strobe_buf_add(&s->b, p, size * n);
	s->too_big |= r == -E2BIG;
	return r < 0 ? 0 : size * n; /* 0 makes curl fail the transfer */
}

int cli_http(const char *cmd, const cli_http_req *rq, char **body, size_t *len)
{
	*body = NULL;
	*len = 0;
	static bool inited;
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = true;
	}
	CURL *c = curl_easy_init();
	if (!c) {
		cli_err(cmd, "cannot start an HTTP client");
		return -1;
	}
	sink s = {.too_big = false};
	strobe_buf_init(&s.b, MAX_RESPONSE - 1);
	struct curl_slist *h = strobe_http_headers(rq->tenant, rq->token, NULL);
	if (!h) {
		curl_easy_cleanup(c);
		cli_err(cmd, "out of memory");
		return -1;
	}
	curl_easy_setopt(c, CURLOPT_URL, rq->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, rq->timeout_s > 0 ? rq->timeout_s : 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	char errbuf[CURL_ERROR_SIZE];
	errbuf[0] = 0;
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	strobe_http_tls(c, rq->ca);
	if (rq->body) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)rq->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->len);
	}
	CURLcode cr = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (cr != CURLE_OK) {
		char msg[CURL_ERROR_SIZE + 512];
		strobe_http_error(msg, sizeof(msg), rq->url, rq->url, cr,
				  s.too_big ? "the response is larger than 1 GiB" : errbuf, rq->ca);
		cli_err(cmd, "%s", msg);
		strobe_buf_free(&s.b);
		return -1;
	}
	if (rq->status)
		*rq->status = status;
	if (status != 200 && !rq->status) {
		/* The server's errors are {"error": "...", "status": N}. */
		json_t *j = s.b.p ? json_loadb(s.b.p, s.b.len, 0, NULL) : NULL;
		const char *msg = j ? json_string_value(json_object_get(j, "error")) : NULL;
		cli_err(cmd, "%s: HTTP %ld: %s", rq->url, status,
			msg ? msg : s.b.p ? s.b.p : "(no body)");
		json_decref(j);
		strobe_buf_free(&s.b);
		return -1;
	}
	if (!s.b.p) { /* an empty body */
		*body = NULL;
		*len = 0;
		return 0;
	}
	*body = strobe_buf_take(&s.b, len);
	return 0;
}

int cli_ca_check(const char *cmd, const char *ca)
{
	if (!ca)
		return 0;
	/* Said now, by name, rather than as libcurl's "error setting certificate file" after a
	 * connection was made. */
	FILE *f = fopen(ca, "rb");
	if (!f) {
		cli_err(cmd, "--ca %s: %s", ca, strerror(errno));
		return -1;
	}
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (!strstr(buf, "-----BEGIN CERTIFICATE-----")) {
		cli_err(cmd, "--ca %s: not a PEM file of CA certificates (-----BEGIN CERTIFICATE-----)",
			ca);
		return -1;
	}
	return 0;
}
