// SPDX-License-Identifier: Apache-2.0
/*
 * The parts of an HTTP client to a strobe server that the agent and the CLI both need
 * (include/strobe/http_client.h): its headers, TLS verification, and the message for a failed
 * transfer. libcurl comes through net/curl_lazy.c, loaded on first use.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/http_client.h"

/* Appends the line PREFIX VALUE, whatever its length (a token can be long). */
static struct curl_slist *add(struct curl_slist *h, const char *prefix, const char *value)
{
	size_t n = strlen(prefix) + strlen(value) + 1;
	char *line = malloc(n);
	if (!line)
		return NULL;
	snprintf(line, n, "%s%s", prefix, value);
	struct curl_slist *r = curl_slist_append(h, line); /* copies */
	free(line);
	return r;
}

struct curl_slist *strobe_http_headers(const char *tenant, const char *token, const char *extra)
{
	struct curl_slist *h = curl_slist_append(NULL, "Expect:"), *n = h;
	if (n && extra)
		n = curl_slist_append(h, extra);
	if (n && tenant)
		n = add(h, "X-Scope-OrgID: ", tenant);
	if (n && token)
		n = add(h, "Authorization: Bearer ", token);
	if (!n) {
		curl_slist_free_all(h);
		return NULL;
	}
	return h;
}

void strobe_http_tls(CURL *c, const char *ca)
{
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, ca);
}

void strobe_http_error(char *buf, size_t cap, const char *where, const char *url, CURLcode cr,
		       const char *reason, const char *ca)
{
	/* A failed verification: curl's error buffer says which check failed (expired, wrong host
	 * name, unknown issuer). */
	bool tls = cr == CURLE_PEER_FAILED_VERIFICATION || cr == CURLE_SSL_CACERT_BADFILE ||
		   cr == CURLE_SSL_ISSUER_ERROR;
	snprintf(buf, cap, "%s: %s%s%s%s", where,
		 reason && reason[0] ? reason : curl_easy_strerror(cr),
		 tls ? " (the server's TLS certificate could not be verified with " : "",
		 tls ? (ca ? ca : "the system's CA certificates") : "",
		 tls ? (ca ? ", given by --ca)" : "; give its CA with --ca FILE)")
		 /* a TLS port answers plain HTTP with nothing */
		 : cr == CURLE_GOT_NOTHING && url && strncmp(url, "http://", 7) == 0
			 ? " (if the server serves TLS, its URL is https://...)"
			 : "");
}
