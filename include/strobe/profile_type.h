/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile type names (lib/profile_type.c): the name of the profile a pprof is, and its full
 * type names "<name>:<sample_type>:<unit>:<period_type>:<period_unit>", as Parca and Pyroscope
 * write them (a Go CPU profile is process_cpu:cpu:nanoseconds:cpu:nanoseconds and
 * process_cpu:samples:count:cpu:nanoseconds). Model logic, used by the store and by every way a
 * profile comes in.
 *
 * Ownership: nothing is allocated. A returned name is the hint, a literal or one of p's strings,
 * valid as long as they are; full names go into the caller's STROBE_TYPE_MAX-byte buffer.
 */
#ifndef STROBE_PROFILE_TYPE_H
#define STROBE_PROFILE_TYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "strobe/profile.h"

#define STROBE_TYPE_MAX 256 /* longest profile type name, NUL included */

/* The profile name of p (the first part of its types), the one rule for every way in (push,
 * Pyroscope /ingest, scraping). A hint decides when given: a profile name, or a Go /debug/pprof
 * endpoint (cpu, profile -> process_cpu; heap, allocs -> memory; goroutines -> goroutine).
 * Otherwise: a sample type "wall" -> wall; period type cpu -> process_cpu; then the first sample
 * type that tells (its display name display[t] when given, Pyroscope's sample_type_config):
 * containing cpu -> process_cpu; alloc_, inuse_, space, objects -> memory; mutex_ -> mutex;
 * block_ -> block; contentions or delay -> mutex when a sample's leaf frame is an Unlock (Go
 * records contention at Unlock), else block; goroutine -> goroutine. Else the period type's name,
 * else the first sample type's. The string is the hint, a literal or one of p's. */
const char *strobe_profile_name(const strobe_profile *p, const char *hint,
				const char *const *display);
/* The full type of sample type i, "<name>:<type>:<unit>:<period_type>:<period_unit>" into out
 * (STROBE_TYPE_MAX bytes), name as strobe_profile_name(p, name, NULL) decides; an empty unit is
 * "count", an empty period type is the sample type's. -EINVAL when a part cannot be in a type
 * name (empty, longer than 60 bytes, ':', space, braces, quotes, =!~, control bytes). */
int strobe_profile_type_names(const strobe_profile *p, const char *name, uint32_t i, char *out,
			      strobe_err *err);
/* Names the value of a one-column profile (folded input, whose lines carry no unit) from a
 * "NAME[:UNIT]" spec such as "cpu:nanoseconds" (UNIT defaults to count); the period type becomes
 * the same. -EINVAL, with a message naming --type, for a bad spec or a profile with several
 * value columns. */
int strobe_profile_set_value_type(strobe_profile *p, const char *spec, strobe_err *err);
/* Whether a full type is a gauge (a snapshot: points of one series average over time, never
 * sum): any `inuse_*` sample type, goroutine counts, and a memory profile's bare `space` and
 * `objects`, the in-use heap as @datadog/pprof (Node) names it. */
bool strobe_type_is_gauge(const char *full_type);

#endif
