/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading (and writing) the protobuf wire format by hand: base-128 varints, keys, and
 * length-delimited fields, for the readers that walk pprof bytes without protobuf-c (the view's
 * fast path, the streaming `top`, the string table's exact lengths) and for the store's varint
 * blobs. Header-only: these run once per byte of every profile, and inlined they cost what the
 * hand-written copies they replace did.
 *
 * Ownership: a strobe_wire is a borrowed window [p, end) into a buffer the caller owns; nothing
 * here allocates, and a sub-reader from strobe_wire_bytes points into the same buffer. The bytes
 * are untrusted: every read checks the window and answers false rather than read past it.
 */
#ifndef STROBE_WIRE_H
#define STROBE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct strobe_wire {
	const uint8_t *p, *end;
} strobe_wire;

enum { STROBE_WIRE_VARINT = 0, STROBE_WIRE_I64 = 1, STROBE_WIRE_LEN = 2, STROBE_WIRE_I32 = 5 };

/* A varint of at most 10 bytes; one whose value does not fit in 64 bits (a 10th byte above 1)
 * is refused, as protobuf's own readers refuse it. */
static inline bool strobe_wire_varint(strobe_wire *r, uint64_t *v)
{
	const uint8_t *p = r->p;
	uint64_t x = 0;
	for (unsigned sh = 0; sh < 64 && p < r->end; sh += 7) {
		uint8_t c = *p++;
		x |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80)) {
			if (sh == 63 && c > 1)
				return false;
			r->p = p;
			*v = x;
			return true;
		}
	}
	return false;
}

/* A key or a length prefix: at most 5 bytes, as protobuf-c reads them. The encoding allows
 * longer, non-minimal varints there and no writer emits them; protobuf-c refuses them, and it is
 * the reference the hand-written readers must agree with (a 6-byte length of 0 once made the
 * pprof view accept a profile the decoder refused). */
static inline bool strobe_wire_key(strobe_wire *r, uint64_t *v)
{
	strobe_wire c = {r->p, r->end - r->p > 5 ? r->p + 5 : r->end};
	if (!strobe_wire_varint(&c, v))
		return false;
	r->p = c.p;
	return true;
}

/* A length-delimited field's contents as a sub-reader; r moves past them. */
static inline bool strobe_wire_bytes(strobe_wire *r, strobe_wire *sub)
{
	uint64_t n;
	if (!strobe_wire_key(r, &n) || n > (uint64_t)(r->end - r->p))
		return false;
	sub->p = r->p;
	sub->end = r->p + n;
	r->p += n;
	return true;
}

/* The next field: its number and wire type; a varint's value in *v; a length-delimited
 * field's contents in *sub (and their length in *v); fixed 32- and 64-bit fields are skipped.
 * false at a malformed field or a group (not in proto3 nor in profile.proto). */
static inline bool strobe_wire_field(strobe_wire *r, uint32_t *num, uint32_t *wt, uint64_t *v,
				     strobe_wire *sub)
{
	uint64_t key;
	if (!strobe_wire_key(r, &key) || key >> 3 > UINT32_MAX)
		return false;
	*num = (uint32_t)(key >> 3);
	*wt = (uint32_t)(key & 7);
	switch (*wt) {
	case STROBE_WIRE_VARINT:
		return strobe_wire_varint(r, v);
	case STROBE_WIRE_I64:
		if (r->end - r->p < 8)
			return false;
		r->p += 8;
		return true;
	case STROBE_WIRE_I32:
		if (r->end - r->p < 4)
			return false;
		r->p += 4;
		return true;
	case STROBE_WIRE_LEN:
		if (!strobe_wire_bytes(r, sub))
			return false;
		*v = (uint64_t)(sub->end - sub->p);
		return true;
	default:
		return false;
	}
}

/* Bytes of v as a varint (1 to 10). */
static inline size_t strobe_wire_varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Writes v as a varint at o (room for strobe_wire_varint_size(v) bytes); returns the end. */
static inline uint8_t *strobe_wire_put_varint(uint8_t *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

static inline uint64_t strobe_wire_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t strobe_wire_unzigzag(uint64_t z)
{
	return (int64_t)((z >> 1) ^ (~(z & 1) + 1));
}

#endif
