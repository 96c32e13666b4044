/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pyroscope's push API, POST /ingest, as a pure function: the request's query parameters,
 * Content-Type and body in; a batch of series (profile type, labels, time range, a one-type
 * profile, aggregation) or an error with the HTTP status to answer out. No HTTP library is
 * called here, so the endpoint in server/ stays a thin adapter and this file can be unit-tested
 * and fuzzed on its own.
 *
 * What is accepted, as Grafana Pyroscope's ingest handler does it (pkg/ingester/pyroscope and
 * pkg/og in github.com/grafana/pyroscope; docs/pyroscope.md has the details and the deviations):
 *   name=app.cpu{k=v,...}   the application name, a profile-type suffix (.cpu, .alloc_objects,
 *                           ...; folded and lines bodies only) and labels in braces
 *   from, until             unix seconds, ms, us or ns (told apart by the number of digits),
 *                           YYYYMMDD, or now-1h style offsets; missing means now
 *   format                  folded (default; "groups"), lines, pprof; a multipart/form-data body
 *                           (parts profile, prev_profile, sample_type_config) is pprof too;
 *                           jfr: the recording, raw or a form with parts jfr and labels
 *                           (server/pyroscope_jfr.h); trie, tree and speedscope are refused
 *                           with 415
 *   sampleRate              Hz of folded/lines CPU and wall samples (default 100): values become
 *                           nanoseconds, period 1e9/sampleRate
 *   spyName                 becomes the label pyroscope_spy (default "unknown")
 *   units, aggregationType  units are informational; aggregationType sum|average
 *
 * Profile types are named as Pyroscope and Parca name them:
 * <name>:<sample_type>:<sample_unit>:<period_type>:<period_unit>, for example
 * process_cpu:cpu:nanoseconds:cpu:nanoseconds or memory:alloc_space:bytes:space:bytes.
 *
 * Ownership: the request is only read. A batch owns its items, their labels and profiles; take a
 * profile out of an item by setting item->profile to NULL before srv_pyro_batch_free.
 * Errors: 0/-errno; on error *status holds the HTTP status (400 bad parameter, 413 too large,
 * 415 unsupported format, 422 undecodable body, 500 out of memory) and err a one-line message
 * naming the parameter or the part of the body at fault.
 */
#ifndef STROBE_SERVER_PYROSCOPE_H
#define STROBE_SERVER_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A profile type name fits in this many bytes, NUL included; longer parts are refused. */
#define STROBE_PTYPE_MAX 256

typedef enum srv_agg {
	STROBE_AGG_SUM = 0,     /* profiles of one series in a time range add up (CPU, allocs) */
	STROBE_AGG_AVERAGE = 1, /* they are snapshots and average (in-use memory, goroutines) */
} srv_agg;

/* One query parameter, already percent-decoded (libmicrohttpd's MHD_get_connection_values
 * hands them out so). When a key repeats, the first one counts, as in Go's url.Values.Get. */
typedef struct srv_kv {
	const char *key, *value;
} srv_kv;

/* Caps on what one request may make us hold. Zero fields take the defaults in brackets. */
typedef struct srv_pyro_limits {
	size_t max_body;          /* request body bytes [16 MiB] -> 413 */
	size_t max_decompressed;  /* one pprof after gunzip [64 MiB] -> 413 */
	uint32_t max_labels;      /* labels in name{...} [30] -> 400 */
	uint32_t max_label_name;  /* bytes of a label name [1024] -> 400 */
	uint32_t max_label_value; /* bytes of a label value and of the app name [2048] -> 400 */
} srv_pyro_limits;

typedef struct srv_pyro_request {
	const srv_kv *params; /* query parameters */
	size_t nparams;
	const char *content_type;   /* the Content-Type header, or NULL */
	const uint8_t *body;
	size_t body_len;
	int64_t now_ns;             /* "now" for missing and relative from/until; 0 = the clock */
	const srv_pyro_limits *limits; /* NULL = defaults */
} srv_pyro_request;

/* A series label; both strings are owned by the batch. */
typedef struct srv_pyro_label {
	char *name, *value;
} srv_pyro_label;

typedef struct srv_pyro_item {
	char type[STROBE_PTYPE_MAX]; /* e.g. "process_cpu:cpu:nanoseconds:cpu:nanoseconds" */
	srv_pyro_label *labels;   /* sorted by name, names unique; service_name always there */
	uint32_t nlabels;
	int64_t from_ns, until_ns;   /* the request's time range */
	strobe_profile *profile;     /* exactly one sample type (the type's), no zero samples */
	srv_agg aggregation;
} srv_pyro_item;

typedef struct srv_pyro_batch {
	srv_pyro_item *items; /* one per sample type of the upload that has any value */
	size_t nitems;
} srv_pyro_batch;

/* Parses one POST /ingest. On success *out holds zero or more items (an empty profile is a
 * success with nothing to store, as in Pyroscope) and *status is 200. */
int srv_pyro_parse(const srv_pyro_request *req, srv_pyro_batch *out, int *status,
		      strobe_err *err);
void srv_pyro_batch_free(srv_pyro_batch *b);

/* ---- pieces the push API and the scraper share ------------------------------------------------ */

/* One entry of a sample_type_config (the JSON object the Pyroscope Go SDK sends, keyed by
 * sample type: {"alloc_space":{"units":"bytes","aggregation":"average","display-name":"...",
 * "cumulative":true,"sampled":false}}). */
typedef struct srv_pyro_stc {
	char type[64];         /* the sample type it applies to */
	char units[32];        /* informational */
	char display[64];      /* display-name: decides the profile name (mutex_count -> mutex) */
	int aggregation;       /* -1 unset, else a srv_agg */
	bool cumulative;       /* values count from process start: diff with prev_profile */
	bool sampled;
} srv_pyro_stc;

/* Parses a sample_type_config document into *out (malloc'd, *n entries). -EINVAL with a message
 * on anything but an object of objects; unknown fields are ignored. */
int srv_pyro_stc_parse(const char *json, size_t len, srv_pyro_stc **out, size_t *n,
			  strobe_err *err);

/* Parses Pyroscope's application name "app.name{key=value,...}" into the app name (*app,
 * malloc'd) and labels (*labels, malloc'd strings, *nlabels of them, in input order; a repeated
 * key keeps its last value). Braces are optional; there is no escaping: values cannot hold ','
 * or '}', and surrounding spaces are trimmed. The app name may use [A-Za-z0-9_.-/], label names
 * [A-Za-z0-9_.]; reserved names (__name__) are refused. limits may be NULL. -EINVAL with a
 * message on bad input. */
int srv_pyro_parse_name(const char *name, const srv_pyro_limits *limits, char **app,
			   srv_pyro_label **labels, uint32_t *nlabels, strobe_err *err);

/* Pyroscope's from/until syntax (see above) as unix nanoseconds; now_ns is "now". Never fails:
 * what cannot be read is "now", as in Pyroscope. */
int64_t srv_pyro_parse_time(const char *s, int64_t now_ns);

#ifdef __cplusplus
}
#endif
#endif
