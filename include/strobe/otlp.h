/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OpenTelemetry profiles (OTLP, opentelemetry.proto.profiles.v1development) to and from the
 * profile model.
 *
 * A request is a dictionary shared by everything in it plus resource -> scope -> profile ->
 * sample, where each OTLP profile carries ONE sample type. Decoding turns it into series: a
 * series is a label set (the resource's and the scope's attributes and the profile's own, names
 * with dots and other characters a label name cannot hold turned into '_', so service.name
 * becomes service_name) and one strobe profile; OTLP profiles of one scope with the same labels,
 * time and duration but different sample types become one strobe profile with several types,
 * so a pprof of cpu + samples comes back as it went. Sample attributes become sample labels
 * (process.pid -> pid, thread.id -> tid, thread.name -> thread, a link -> trace_id/span_id).
 *
 * The input is untrusted: every index is checked against its table (0 is the reserved "none"
 * entry), every count is capped (strobe_otlp_limits), and the work is linear in the input:
 * stacks, locations and functions are converted once per series and cached by index.
 */
#ifndef STROBE_OTLP_H
#define STROBE_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strobe_otlp_limits {
	uint32_t max_profiles; /* OTLP profiles in a request (0 = 10000) */
	uint32_t max_labels;   /* series labels of one series (0 = 64) */
	uint32_t max_name_len, max_value_len; /* of a label (0 = 1024, 4096): longer ones refuse
					       * the series, as the push refuses them */
	/* Series the store can take as pprof views (no sample attributes or links, no type named
	 * by its leaves) come as a view instead of a profile: the server's ingest, which then skips
	 * the model (lib/otlp_view.c). A view points into the request: with
	 * strobe_otlp_decode_msg the message must outlive the batch. */
	bool views;
} strobe_otlp_limits;

typedef struct strobe_otlp_label {
	char *name, *value;
} strobe_otlp_label;

/* One series of a request: its labels (sorted by name, unique) and its profile. A series whose
 * labels break a limit has profile NULL and refused set (the caller counts it as rejected, as
 * OTLP's partial success wants); nprofiles says how many OTLP profiles went into it. */
typedef struct strobe_otlp_series {
	strobe_otlp_label *labels;
	size_t nlabels;
	strobe_profile *profile;
	/* Instead of profile, with strobe_otlp_limits.views: a simple pprof view (its hdr the
	 * header a profile would have), owned by the batch. */
	struct strobe_pprof_view *view;
	uint32_t nprofiles;
	char *refused; /* why, or NULL */
} strobe_otlp_series;

typedef struct strobe_otlp_batch {
	strobe_otlp_series *s;
	size_t n;
	uint32_t nprofiles; /* OTLP profiles in the request */
	void *priv_;        /* what views point into */
} strobe_otlp_batch;

void strobe_otlp_batch_free(strobe_otlp_batch *b);

/* Decodes a serialized ExportProfilesServiceRequest (binary protobuf, not gzipped). A request
 * with a broken structure (bad index, bad table, over a cap) is refused whole: -EINVAL or
 * -E2BIG with a message. lim may be NULL (defaults). */
int strobe_otlp_decode(const uint8_t *buf, size_t len, const strobe_otlp_limits *lim,
		       strobe_otlp_batch *out, strobe_err *err);
/* The same for its OTLP/JSON form (lowerCamelCase names, trace and span ids as hex). */
int strobe_otlp_decode_json(const char *json, size_t len, const strobe_otlp_limits *lim,
			    strobe_otlp_batch *out, strobe_err *err);
/* An already unpacked request (ExportProfilesServiceRequest *, as a ProtobufCMessage). */
struct ProtobufCMessage;
int strobe_otlp_decode_msg(const struct ProtobufCMessage *req, const strobe_otlp_limits *lim,
			   strobe_otlp_batch *out, strobe_err *err);

/* All series of a batch merged into one profile (for the CLI): profiles whose types differ are
 * merged by type as strobe_profile_merge allows; -EINVAL when they cannot be. */
int strobe_otlp_batch_merge(strobe_otlp_batch *b, strobe_profile **out, strobe_err *err);

/* Encodes p as an ExportProfilesServiceRequest: one resource with the given labels as its
 * attributes (service_name is written as service.name), one scope "strobe", one OTLP profile
 * per sample type; sample labels become sample attributes. *out is malloc'd. */
int strobe_otlp_encode(const strobe_profile *p, const strobe_otlp_label *labels, size_t nlabels,
		       uint8_t **out, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
