/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Java Flight Recorder files (lib/jfr.c) into the profile model: the recordings of JDK 11+
 * (`-XX:StartFlightRecording`, `jcmd JFR.dump`) and of async-profiler / pyroscope-java.
 *
 * One JFR gives one profile with a column (sample type) per kind of event it holds, only those
 * present, in this order: cpu (jdk.ExecutionSample), wall (profiler.WallClockSample,
 * jdk.NativeMethodSample), alloc_in_new_tlab_objects/_bytes, alloc_outside_tlab_objects/_bytes,
 * alloc_sample_objects/_bytes (jdk.ObjectAllocationSample), lock_count/lock_duration
 * (jdk.JavaMonitorEnter), park_count/park_duration (jdk.ThreadPark). Columns of other kinds hold
 * zeros in a sample. The default type is cpu when present. strobe_jfr_kind() tells, per
 * column, the profile Pyroscope makes of it (metric, sample type, period type), so the server
 * stores what Pyroscope would. Frames are named as Pyroscope shows them: the class's JVM name
 * and the method, "java/util/HashMap.put".
 *
 * Errors: -EINVAL naming the input and the byte offset; -E2BIG past opts->max_memory.
 */
#ifndef STROBE_JFR_H
#define STROBE_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A JFR starts with "FLR\0". */
bool strobe_jfr_is(const uint8_t *buf, size_t len);

/* The dynamic labels of one context id (pyroscope-java's LabelsSnapshot, decoded). */
typedef struct strobe_jfr_label {
	const char *name, *value;
} strobe_jfr_label;
typedef struct strobe_jfr_context {
	int64_t id;
	const strobe_jfr_label *labels;
	uint32_t nlabels;
} strobe_jfr_context;

typedef struct strobe_jfr_options {
	/* cpu and wall values: 0 = sample counts (unit count); else nanoseconds, each sample
	 * worth this period (Pyroscope: 1e9 / sampleRate). */
	int64_t period_ns;
	const strobe_jfr_context *contexts; /* sorted by id; events' contextId looks up here */
	size_t ncontexts;
	size_t max_memory; /* bytes of the parser's own tables; 0 = 1 GiB */
} strobe_jfr_options;

int strobe_jfr_decode(const uint8_t *buf, size_t len, const char *name,
		      const strobe_jfr_options *opts, strobe_profile **out, strobe_err *err);

/* How Pyroscope names the profile of a column (jfr-parser's pprof builders). */
typedef struct strobe_jfr_kind {
	const char *column;      /* the column's type in strobe_jfr_decode's profile */
	const char *metric;      /* process_cpu, wall, memory, mutex, block */
	const char *type, *unit; /* Pyroscope's sample type and unit */
	const char *period_type, *period_unit;
} strobe_jfr_kind;
/* The kind of a column type name, or NULL. */
const strobe_jfr_kind *strobe_jfr_kind_of(const char *column);

/* pyroscope-java's LabelsSnapshot protobuf, decoded: contexts sorted by id, their strings held
 * by the decoded message. -EINVAL with a message on a bad message, a string id the table lacks,
 * or a context id given twice. */
typedef struct strobe_jfr_labels {
	strobe_jfr_context *contexts;
	size_t n;
	void *msg_, *labels_; /* private */
} strobe_jfr_labels;
int strobe_jfr_labels_decode(const uint8_t *buf, size_t len, strobe_jfr_labels *out,
			     strobe_err *err);
void strobe_jfr_labels_free(strobe_jfr_labels *ls);

#ifdef __cplusplus
}
#endif
#endif
