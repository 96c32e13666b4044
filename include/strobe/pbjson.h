/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protobuf messages as JSON, by protobuf's canonical proto3 JSON mapping, for any message
 * protoc-c generated: Connect's application/json bodies (Grafana's Profiles Drilldown), OTLP's
 * JSON encoding. protobuf-c has no JSON support, so this walks protobuf-c's own descriptors with
 * jansson; nothing is written per message type.
 *
 * The mapping: field names in lowerCamelCase (the proto names are accepted too); 64-bit integers
 * as strings (numbers accepted); enums by name (numbers accepted); bytes as base64 (URL-safe
 * accepted), except bytes fields named trace_id or span_id, which OTLP writes as hex; map fields
 * as objects; null and absent mean the default; unknown fields are ignored, as protojson does with
 * DiscardUnknown. Output omits proto3 fields at their default values.
 */
#ifndef STROBE_PBJSON_H
#define STROBE_PBJSON_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "strobe/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nesting of messages in one document; deeper input is refused. */
#define STROBE_PBJSON_MAX_DEPTH 64u

/* Decodes the JSON text json[0..len) into a new message of type d. 0 and *out (free it with
 * protobuf_c_message_free_unpacked(*out, NULL)); -EINVAL with err naming the field path and the
 * problem; -ENOMEM. The text need not be NUL-terminated. */
int strobe_pbjson_decode(const ProtobufCMessageDescriptor *d, const char *json, size_t len,
			 ProtobufCMessage **out, strobe_err *err);

/* Encodes m as compact JSON: 0 and *out (malloc'd, NUL-terminated) with its length in *len;
 * -ENOMEM. */
int strobe_pbjson_encode(const ProtobufCMessage *m, char **out, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
