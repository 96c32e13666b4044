// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the shared HTTP client pieces (net/http_client.c): the header list with and
 * without tenant, token and an extra line (a long token kept whole), and the wording of failed
 * transfers: curl's reason, the TLS hint with and without --ca, the plain-http hint.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/http_client.h"

static void test_headers(void **state)
{
	(void)state;
	char token[2000];
	memset(token, 't', sizeof(token) - 1);
	token[sizeof(token) - 1] = 0;
	struct curl_slist *h = strobe_http_headers("team-a", token, "Content-Type: x/y");
	assert_non_null(h);
	const char *want[] = {"Expect:", "Content-Type: x/y", "X-Scope-OrgID: team-a", NULL};
	size_t i = 0;
	struct curl_slist *l = h;
	for (; want[i]; i++, l = l->next) {
		assert_non_null(l);
		assert_string_equal(l->data, want[i]);
	}
	assert_non_null(l);
	assert_int_equal(strncmp(l->data, "Authorization: Bearer ttt", 25), 0);
	assert_int_equal(strlen(l->data), strlen("Authorization: Bearer ") + sizeof(token) - 1);
	assert_null(l->next);
	curl_slist_free_all(h);
	h = strobe_http_headers(NULL, NULL, NULL);
	assert_non_null(h);
	assert_string_equal(h->data, "Expect:");
	assert_null(h->next);
	curl_slist_free_all(h);
}

static void test_errors(void **state)
{
	(void)state;
	char m[1024];
	strobe_http_error(m, sizeof(m), "http://h:1", "http://h:1", CURLE_COULDNT_CONNECT,
			  "Failed to connect to h port 1", NULL);
	assert_string_equal(m, "http://h:1: Failed to connect to h port 1");
	strobe_http_error(m, sizeof(m), "https://h", "https://h", CURLE_PEER_FAILED_VERIFICATION,
			  "certificate has expired", "/etc/ca.pem");
	assert_string_equal(m, "https://h: certificate has expired (the server's TLS certificate "
			       "could not be verified with /etc/ca.pem, given by --ca)");
	strobe_http_error(m, sizeof(m), "https://h", "https://h", CURLE_SSL_CACERT_BADFILE, "", NULL);
	assert_non_null(strstr(m, "the system's CA certificates; give its CA with --ca FILE)"));
	strobe_http_error(m, sizeof(m), "srv", "http://h:4100", CURLE_GOT_NOTHING, "Empty reply",
			  NULL);
	assert_string_equal(m, "srv: Empty reply (if the server serves TLS, its URL is https://...)");
	strobe_http_error(m, sizeof(m), "srv", "https://h:4100", CURLE_GOT_NOTHING, "Empty reply",
			  NULL);
	assert_string_equal(m, "srv: Empty reply");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
