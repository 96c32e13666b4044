// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the Pyroscope /ingest parser (server/pyroscope.c) on arbitrary query
 * parameters, Content-Type and body, multipart forms included.
 *
 * Input layout: lines "key=value" up to the first empty line are the query parameters (the key
 * "content-type" sets the header instead), the rest is the body. Seeds in
 * tests/fuzz/corpus/fuzz_pyroscope/ cover folded, lines, raw and gzipped pprof and multipart with
 * prev_profile and sample_type_config.
 *
 * Besides not crashing, every answer must be well formed: a refusal carries a message, one of
 * the documented HTTP statuses and an empty batch; a success is a 200 whose items each hold a
 * one-type profile with samples, a five-part type name and sorted, unique labels with
 * service_name among them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/pyroscope.h"

#define MAX_PARAMS 16

static void check_item(const srv_pyro_item *it)
{
	int colons = 0;
	for (const char *c = it->type; *c; c++)
		colons += *c == ':';
	if (colons != 4 || !it->profile || it->profile->ntypes != 1 ||
	    strobe_nsamples(it->profile) == 0)
		abort();
	bool service = false;
	for (uint32_t i = 0; i < it->nlabels; i++) {
		if (i && strcmp(it->labels[i - 1].name, it->labels[i].name) >= 0)
			abort();
		service |= strcmp(it->labels[i].name, "service_name") == 0;
	}
	if (!service)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	srv_kv kv[MAX_PARAMS];
	char *copies[MAX_PARAMS];
	size_t n = 0;
	char *ct = NULL;
	const uint8_t *p = data, *end = data + size;
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		size_t len = (size_t)(nl - p);
		const uint8_t *line = p;
		p = nl + 1;
		if (!len)
			break;
		char *s = strndup((const char *)line, len);
		char *eq = s ? strchr(s, '=') : NULL;
		if (!eq || n == MAX_PARAMS) {
			free(s);
			continue;
		}
		*eq = 0;
		if (strcmp(s, "content-type") == 0) {
			free(ct);
			ct = strdup(eq + 1);
			free(s);
			continue;
		}
		copies[n] = s;
		kv[n] = (srv_kv){s, eq + 1};
		n++;
	}
	srv_pyro_limits lim = {.max_body = 1 << 20, .max_decompressed = 4 << 20};
	srv_pyro_request req = {kv, n, ct, p, (size_t)(end - p), 1700000000000000000LL, &lim};
	srv_pyro_batch b;
	strobe_err err = {{0}};
	int status = 0;
	int r = srv_pyro_parse(&req, &b, &status, &err);
	if (r < 0) {
		if (!err.msg[0] && status != 500)
			abort(); /* every refusal says why */
		if (status != 400 && status != 413 && status != 415 && status != 422 &&
		    status != 500)
			abort();
		if (b.nitems || b.items)
			abort();
	} else {
		if (status != 200)
			abort();
		for (size_t i = 0; i < b.nitems; i++)
			check_item(&b.items[i]);
		srv_pyro_batch_free(&b);
	}
	for (size_t i = 0; i < n; i++)
		free(copies[i]);
	free(ct);
	return 0;
}
