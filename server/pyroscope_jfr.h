/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /ingest?format=jfr (server/pyroscope_jfr.c): a JFR body, raw or as multipart/form-data
 * with a `jfr` part and an optional `labels` part (pyroscope-java's LabelsSnapshot), into one
 * single-type profile per JFR column, each with the profile type Pyroscope gives it
 * (process_cpu:cpu:nanoseconds:cpu:nanoseconds, memory:alloc_in_new_tlab_bytes:bytes:space:bytes,
 * mutex:delay:nanoseconds:mutex:count, ...). server/pyroscope.c adds the series labels and
 * makes them batch items, as for pprof.
 */
#ifndef STROBE_SERVER_PYROSCOPE_JFR_H
#define STROBE_SERVER_PYROSCOPE_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyroscope.h"

typedef struct srv_jfr_item {
	char type[STROBE_PTYPE_MAX];
	strobe_profile *profile; /* one sample type, no zero samples */
} srv_jfr_item;

/* Decodes the body; *items is malloc'd (*n entries, possibly none). On error *status holds the
 * HTTP status (413 too large, 422 undecodable, 500 out of memory). */
int srv_pyro_jfr(const char *content_type, const uint8_t *body, size_t len, bool multipart,
		 size_t max_decompressed, int64_t sample_rate, srv_jfr_item **items, size_t *n,
		 int *status, strobe_err *err);
void srv_jfr_items_free(srv_jfr_item *items, size_t n);

#endif
