/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every HTTP client of a strobe server shares (the agent's sender, `strobe push` and
 * `strobe query`), and the scraper's TLS settings: the tenant and token headers, certificate
 * verification against an optional CA file, and one wording for a failed transfer that says
 * what to do about it. Requests themselves stay with their callers, whose timeouts, bodies and
 * retries differ.
 *
 * Ownership: strobe_http_headers returns a list the caller frees with curl_slist_free_all after
 * the last transfer that uses it; strings passed in are copied.
 */
#ifndef STROBE_HTTP_CLIENT_H
#define STROBE_HTTP_CLIENT_H

#include <stddef.h>

#include <curl/curl.h>

/* "Expect:" (no 100-continue round trip before a body), "X-Scope-OrgID: TENANT" and
 * "Authorization: Bearer TOKEN" when given, and extra (a whole header line) when not NULL.
 * NULL when out of memory. */
struct curl_slist *strobe_http_headers(const char *tenant, const char *token, const char *extra);

/* https: the server's certificate and host name are verified (libcurl's default, said here so
 * that no change of default can turn it off), against the CA file ca when not NULL. */
void strobe_http_tls(CURL *c, const char *ca);

/* Why a transfer to url failed, into buf: "WHERE: " then reason (curl's error buffer; when empty,
 * curl's message for cr), and for a certificate that could not be verified, or nothing back from
 * a plain http:// URL, what to do about it (ca: the CA file given, or NULL). */
void strobe_http_error(char *buf, size_t cap, const char *where, const char *url, CURLcode cr,
		       const char *reason, const char *ca);

#endif
