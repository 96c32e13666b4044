// SPDX-License-Identifier: Apache-2.0
/*
 * The proto3 JSON mapping over protobuf-c descriptors (see include/strobe/pbjson.h): one walker
 * for every generated message, so Connect's and OTLP's JSON bodies need no code per type.
 * protobuf-c writes no JSON and no C library does this mapping; jansson parses and prints, this
 * file only moves values between jansson's tree and protobuf-c's structs.
 *
 * Decoded messages are laid out as protobuf_c_message_unpack lays them out (strings, bytes and
 * arrays malloc'd, oneof cases set, has_ flags set), so protobuf_c_message_free_unpacked frees
 * them. The input is untrusted: nesting is capped, every number is range-checked for its field,
 * and errors name the field's path.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/pbjson.h"

#define MEMBER(T, m, off) (*(T *)((char *)(m) + (off)))

/* ---- small helpers ------------------------------------------------------------------------ */

/* snake_case -> lowerCamelCase, protoc's json_name rule. */
static void json_name(const char *proto, char *out, size_t cap)
{
	size_t o = 0;
	int up = 0;
	for (const char *p = proto; *p && o + 1 < cap; p++) {
		if (*p == '_') {
			up = 1;
			continue;
		}
		out[o++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
		up = 0;
	}
	out[o] = 0;
}

static int hex_field(const ProtobufCFieldDescriptor *f)
{
	return f->type == PROTOBUF_C_TYPE_BYTES &&
	       (!strcmp(f->name, "trace_id") || !strcmp(f->name, "span_id"));
}

/* A map<K,V> field: protoc makes it a repeated FooEntry message with key = 1 and value = 2. */
static int is_map(const ProtobufCFieldDescriptor *f)
{
	if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return 0;
	const ProtobufCMessageDescriptor *e = f->descriptor;
	size_t n = strlen(e->short_name);
	return e->n_fields == 2 && n > 5 && !strcmp(e->short_name + n - 5, "Entry") &&
	       e->fields[0].id == 1 && e->fields[1].id == 2;
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64 is a dozen lines and no dependency of lib/ offers it. */
static char *b64_encode(const uint8_t *p, size_t n)
{
	char *s = malloc((n + 2) / 3 * 4 + 1), *o = s;
	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		*o++ = B64[v >> 18 & 63];
		*o++ = B64[v >> 12 & 63];
		*o++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
		*o++ = i + 2 < n ? B64[v & 63] : '=';
	}
	*o = 0;
	return s;
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Standard or URL-safe, padded or not. */
static int b64_decode(const char *s, size_t n, ProtobufCBinaryData *out)
{
	while (n && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return -EINVAL;
	uint8_t *d = malloc(n / 4 * 3 + 3), *o = d;
	if (!d)
		return -ENOMEM;
	uint32_t acc = 0;
	unsigned bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_val(s[i]);
		if (v < 0) {
			free(d);
			return -EINVAL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (uint8_t)(acc >> bits);
		}
	}
	out->data = d;
	out->len = (size_t)(o - d);
	return 0;
}

static int hex_decode(const char *s, size_t n, ProtobufCBinaryData *out)
{
	if (n % 2)
		return -EINVAL;
	uint8_t *d = malloc(n / 2 + 1);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i += 2) {
		unsigned v;
		if (sscanf((char[3]){s[i], s[i + 1], 0}, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdefABCDEF", s[i]) || !strchr("0123456789abcdefABCDEF", s[i + 1])) {
			free(d);
			return -EINVAL;
		}
		d[i / 2] = (uint8_t)v;
	}
	out->data = d;
	out->len = n / 2;
	return 0;
}

/* ---- decoding ----------------------------------------------------------------------------- */

typedef struct dec {
	strobe_err *err;
	char path[256]; /* the field being decoded, for messages */
} dec;

static int dec_fail(dec *c, const char *what)
{
	return strobe_errf(c->err, -EINVAL, "JSON field %s: %s", c->path[0] ? c->path : "(top)", what);
}

/* A JSON integer, a string holding one, or an integral real, as a signed or unsigned 64-bit. */
static int dec_int(dec *c, json_t *j, int is_unsigned, int64_t *sv, uint64_t *uv)
{
	if (json_is_integer(j)) {
		json_int_t v = json_integer_value(j);
		if (is_unsigned && v < 0)
			return dec_fail(c, "a negative value for an unsigned field");
		*sv = v;
		*uv = (uint64_t)v;
		return 0;
	}
	if (json_is_real(j)) {
		double v = json_real_value(j);
		if (v != floor(v) || fabs(v) > 9007199254740992.0 || (is_unsigned && v < 0))
			return dec_fail(c, "not an integer in range");
		*sv = (int64_t)v;
		*uv = (uint64_t)(int64_t)v;
		return 0;
	}
	if (!json_is_string(j))
		return dec_fail(c, "expected an integer");
	const char *s = json_string_value(j);
	char *end;
	errno = 0;
	if (is_unsigned) {
		if (*s == '-')
			return dec_fail(c, "a negative value for an unsigned field");
		*uv = strtoull(s, &end, 10);
		*sv = (int64_t)*uv;
	} else {
		*sv = strtoll(s, &end, 10);
		*uv = (uint64_t)*sv;
	}
	if (!*s || *end || errno)
		return dec_fail(c, "not an integer in range");
	return 0;
}

static int dec_message(dec *c, const ProtobufCMessageDescriptor *d, json_t *obj, unsigned depth,
		       ProtobufCMessage **out);

/* One value of field f (a repeated field's element, or a singular field) into *slot. */
static int dec_value(dec *c, const ProtobufCFieldDescriptor *f, json_t *j, unsigned depth, void *slot)
{
	int64_t sv = 0;
	uint64_t uv = 0;
	int r;
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		if ((r = dec_int(c, j, 0, &sv, &uv)))
			return r;
		if (sv < INT32_MIN || sv > INT32_MAX)
			return dec_fail(c, "out of range for int32");
		*(int32_t *)slot = (int32_t)sv;
		return 0;
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		if ((r = dec_int(c, j, 1, &sv, &uv)))
			return r;
		if (uv > UINT32_MAX)
			return dec_fail(c, "out of range for uint32");
		*(uint32_t *)slot = (uint32_t)uv;
		return 0;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		if ((r = dec_int(c, j, 0, &sv, &uv)))
			return r;
		*(int64_t *)slot = sv;
		return 0;
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		if ((r = dec_int(c, j, 1, &sv, &uv)))
			return r;
		*(uint64_t *)slot = uv;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: {
		double v;
		if (json_is_number(j))
			v = json_number_value(j);
		else if (json_is_string(j) && !strcmp(json_string_value(j), "NaN"))
			v = NAN;
		else if (json_is_string(j) && !strcmp(json_string_value(j), "Infinity"))
			v = INFINITY;
		else if (json_is_string(j) && !strcmp(json_string_value(j), "-Infinity"))
			v = -INFINITY;
		else
			return dec_fail(c, "expected a number");
		if (f->type == PROTOBUF_C_TYPE_FLOAT)
			*(float *)slot = (float)v;
		else
			*(double *)slot = v;
		return 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (!json_is_boolean(j))
			return dec_fail(c, "expected true or false");
		*(protobuf_c_boolean *)slot = json_is_true(j);
		return 0;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *e = f->descriptor;
		if (json_is_string(j)) {
			const ProtobufCEnumValue *v =
				protobuf_c_enum_descriptor_get_value_by_name(e, json_string_value(j));
			if (!v)
				return dec_fail(c, "not a value of the enum");
			*(int32_t *)slot = v->value;
			return 0;
		}
		if ((r = dec_int(c, j, 0, &sv, &uv)))
			return r;
		if (sv < INT32_MIN || sv > INT32_MAX)
			return dec_fail(c, "out of range for an enum");
		*(int32_t *)slot = (int32_t)sv; /* proto3 enums are open: unknown numbers are kept */
		return 0;
	}
	case PROTOBUF_C_TYPE_STRING: {
		if (!json_is_string(j))
			return dec_fail(c, "expected a string");
		size_t n = json_string_length(j);
		if (memchr(json_string_value(j), 0, n))
			return dec_fail(c, "a string holding a NUL character");
		char *s = strdup(json_string_value(j));
		if (!s)
			return -ENOMEM;
		*(char **)slot = s;
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		if (!json_is_string(j))
			return dec_fail(c, hex_field(f) ? "expected a hex string" : "expected a base64 string");
		ProtobufCBinaryData b = {0};
		r = hex_field(f) ? hex_decode(json_string_value(j), json_string_length(j), &b)
				 : b64_decode(json_string_value(j), json_string_length(j), &b);
		if (r == -EINVAL)
			return dec_fail(c, hex_field(f) ? "not hex" : "not base64");
		if (r)
			return r;
		*(ProtobufCBinaryData *)slot = b;
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		return dec_message(c, f->descriptor, j, depth + 1, (ProtobufCMessage **)slot);
	}
	return dec_fail(c, "a field type this decoder does not know");
}

/* A map object {"k": v, ...} into repeated FooEntry messages. */
static int dec_map(dec *c, const ProtobufCFieldDescriptor *f, json_t *j, unsigned depth,
		   ProtobufCMessage **arr, size_t *n)
{
	const ProtobufCMessageDescriptor *e = f->descriptor;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v) {
		ProtobufCMessage *m = malloc(e->sizeof_message);
		if (!m)
			return -ENOMEM;
		e->message_init(m);
		arr[(*n)++] = m; /* owned by the array from here on, freed with it on failure */
		/* Keys are strings in JSON whatever their proto type; decode them as JSON would. */
		json_t *key = e->fields[0].type == PROTOBUF_C_TYPE_STRING ? json_string(k)
			    : e->fields[0].type == PROTOBUF_C_TYPE_BOOL ? json_boolean(!strcmp(k, "true"))
			    : json_string(k);
		if (!key)
			return dec_fail(c, "a map key that is not UTF-8");
		int r = dec_value(c, &e->fields[0], key, depth, (char *)m + e->fields[0].offset);
		json_decref(key);
		if (!r && !json_is_null(v))
			r = dec_value(c, &e->fields[1], v, depth, (char *)m + e->fields[1].offset);
		if (r)
			return r;
	}
	return 0;
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d, const char *key)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
	if (f)
		return f;
	char jn[128];
	for (unsigned i = 0; i < d->n_fields; i++) {
		json_name(d->fields[i].name, jn, sizeof jn);
		if (!strcmp(jn, key))
			return &d->fields[i];
	}
	return NULL;
}

static int dec_field(dec *c, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, json_t *v,
		     unsigned depth)
{
	if (json_is_null(v))
		return 0;
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		int map = is_map(f);
		if (map ? !json_is_object(v) : !json_is_array(v))
			return dec_fail(c, map ? "expected an object (a map)" : "expected an array");
		size_t want = map ? json_object_size(v) : json_array_size(v);
		if (MEMBER(void *, m, f->offset))
			return dec_fail(c, "given twice");
		if (!want)
			return 0;
		void *arr = calloc(want, elem_size(f));
		if (!arr)
			return -ENOMEM;
		/* The array belongs to the message at once, so a failure part way frees what was
		 * decoded so far through protobuf_c_message_free_unpacked. */
		MEMBER(void *, m, f->offset) = arr;
		size_t *n = &MEMBER(size_t, m, f->quantifier_offset);
		if (map)
			return dec_map(c, f, v, depth, arr, n);
		for (size_t i = 0; i < want; i++) {
			json_t *e = json_array_get(v, i);
			if (json_is_null(e))
				return dec_fail(c, "null inside an array");
			void *slot = (char *)arr + i * elem_size(f);
			int r = dec_value(c, f, e, depth, slot);
			/* A message that failed part way is already in its slot: count it, so it is
			 * freed with the rest. */
			if (!r || (f->type == PROTOBUF_C_TYPE_MESSAGE && *(void **)slot))
				(*n)++;
			if (r)
				return r;
		}
		return 0;
	}
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		uint32_t *cs = &MEMBER(uint32_t, m, f->quantifier_offset);
		if (*cs)
			return dec_fail(c, "more than one member of a oneof");
		int r = dec_value(c, f, v, depth, (char *)m + f->offset);
		if (!r || (f->type == PROTOBUF_C_TYPE_MESSAGE && MEMBER(void *, m, f->offset)))
			*cs = f->id; /* set on a part-filled message too, so that it is freed */
		return r;
	}
	/* A singular string, bytes or message already set (the same field under its two names)
	 * would leak: refuse it. */
	if ((f->type == PROTOBUF_C_TYPE_MESSAGE && MEMBER(void *, m, f->offset)) ||
	    (f->type == PROTOBUF_C_TYPE_STRING && MEMBER(char *, m, f->offset) &&
	     MEMBER(char *, m, f->offset) != f->default_value &&
	     MEMBER(char *, m, f->offset) != protobuf_c_empty_string) ||
	    (f->type == PROTOBUF_C_TYPE_BYTES && MEMBER(ProtobufCBinaryData, m, f->offset).data &&
	     (!f->default_value ||
	      MEMBER(ProtobufCBinaryData, m, f->offset).data != ((const ProtobufCBinaryData *)f->default_value)->data)))
		return dec_fail(c, "given twice");
	int r = dec_value(c, f, v, depth, (char *)m + f->offset);
	if (!r && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
	    f->type != PROTOBUF_C_TYPE_MESSAGE && f->quantifier_offset)
		MEMBER(protobuf_c_boolean, m, f->quantifier_offset) = 1;
	return r;
}

static int dec_message(dec *c, const ProtobufCMessageDescriptor *d, json_t *obj, unsigned depth,
		       ProtobufCMessage **out)
{
	if (depth > STROBE_PBJSON_MAX_DEPTH)
		return dec_fail(c, "messages nested too deep");
	if (!json_is_object(obj))
		return dec_fail(c, "expected an object");
	ProtobufCMessage *m = malloc(d->sizeof_message);
	if (!m)
		return -ENOMEM;
	d->message_init(m);
	*out = m; /* the caller frees it, whole or partly filled */
	size_t plen = strlen(c->path);
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		const ProtobufCFieldDescriptor *f = field_named(d, key);
		if (!f)
			continue;
		snprintf(c->path + plen, sizeof c->path - plen, "%s%s", plen ? "." : "", key);
		int r = dec_field(c, m, f, v, depth);
		if (r)
			return r;
		c->path[plen] = 0;
	}
	return 0;
}

int strobe_pbjson_decode(const ProtobufCMessageDescriptor *d, const char *json, size_t len,
			 ProtobufCMessage **out, strobe_err *err)
{
	*out = NULL;
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return strobe_errf(err, -EINVAL, "not JSON: %s at line %d column %d", je.text,
				   je.line, je.column);
	dec c = {.err = err};
	ProtobufCMessage *m = NULL;
	int r = dec_message(&c, d, root, 0, &m);
	json_decref(root);
	if (r) {
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		if (r == -ENOMEM)
			strobe_errf(err, r, "out of memory decoding JSON");
		return r;
	}
	*out = m;
	return 0;
}

/* ---- encoding ----------------------------------------------------------------------------- */

static json_t *enc_message(const ProtobufCMessage *m);

static json_t *enc_i64(int64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%lld", (long long)v);
	return json_string(b);
}

static json_t *enc_u64(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%llu", (unsigned long long)v);
	return json_string(b);
}

static json_t *enc_double(double v)
{
	if (isnan(v))
		return json_string("NaN");
	if (isinf(v))
		return json_string(v > 0 ? "Infinity" : "-Infinity");
	return json_real(v);
}

/* Strings from protobuf may hold bytes that are not UTF-8; jansson refuses those, so they are
 * written with U+FFFD in their place rather than dropped. */
static json_t *enc_string(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	size_t n = strlen(s);
	char *c = malloc(n * 3 + 1), *o = c;
	if (!c)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x80) {
			*o++ = (char)*p;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
		}
	}
	*o = 0;
	j = json_string(c);
	free(c);
	return j;
}

static json_t *enc_value(const ProtobufCFieldDescriptor *f, const void *slot)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)slot);
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)slot);
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		return enc_i64(*(const int64_t *)slot);
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return enc_u64(*(const uint64_t *)slot);
	case PROTOBUF_C_TYPE_FLOAT:
		return enc_double(*(const float *)slot);
	case PROTOBUF_C_TYPE_DOUBLE:
		return enc_double(*(const double *)slot);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)slot);
	case PROTOBUF_C_TYPE_ENUM: {
		int32_t v = *(const int32_t *)slot;
		const ProtobufCEnumValue *e = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		return e ? json_string(e->name) : json_integer(v);
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)slot;
		return enc_string(s ? s : "");
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = slot;
		char *s;
		if (hex_field(f)) {
			s = malloc(b->len * 2 + 1);
			for (size_t i = 0; s && i < b->len; i++)
				snprintf(s + 2 * i, 3, "%02x", b->data[i]);
			if (s)
				s[b->len * 2] = 0;
		} else {
			s = b64_encode(b->data, b->len);
		}
		json_t *j = s ? json_string(s) : NULL;
		free(s);
		return j;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sm = *(ProtobufCMessage *const *)slot;
		return sm ? enc_message(sm) : json_object();
	}
	}
	return NULL;
}

/* proto3 leaves a field out of the JSON at its default (no presence to keep). */
static int is_default(const ProtobufCFieldDescriptor *f, const void *slot)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)slot;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)slot)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)slot == NULL;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)slot == 0 && !signbit(*(const float *)slot);
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)slot == 0 && !signbit(*(const double *)slot);
	default: {
		size_t n = elem_size(f);
		static const char zero[8];
		return !memcmp(slot, zero, n);
	}
	}
}

static json_t *enc_message(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *o = json_object();
	if (!o)
		return NULL;
	char jn[128];
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *slot = (const char *)m + f->offset;
		json_t *v = NULL;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = MEMBER(size_t, m, f->quantifier_offset);
			if (!n)
				continue;
			const char *arr = *(char *const *)slot;
			if (is_map(f)) {
				v = json_object();
				const ProtobufCMessageDescriptor *e = f->descriptor;
				for (size_t k = 0; v && k < n; k++) {
					const ProtobufCMessage *em = ((ProtobufCMessage *const *)arr)[k];
					json_t *key = enc_value(&e->fields[0], (const char *)em + e->fields[0].offset);
					json_t *val = enc_value(&e->fields[1], (const char *)em + e->fields[1].offset);
					char kb[32];
					const char *ks = json_is_string(key) ? json_string_value(key)
						       : json_is_boolean(key) ? (json_is_true(key) ? "true" : "false")
						       : (snprintf(kb, sizeof kb, "%lld", (long long)json_integer_value(key)), kb);
					if (key && val)
						json_object_set(v, ks, val);
					json_decref(key);
					json_decref(val);
				}
			} else {
				v = json_array();
				for (size_t k = 0; v && k < n; k++)
					json_array_append_new(v, enc_value(f, arr + k * elem_size(f)));
			}
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (MEMBER(uint32_t, m, f->quantifier_offset) != f->id)
				continue;
			v = enc_value(f, slot);
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
			   f->type != PROTOBUF_C_TYPE_MESSAGE && f->quantifier_offset) {
			if (!MEMBER(protobuf_c_boolean, m, f->quantifier_offset))
				continue;
			v = enc_value(f, slot);
		} else {
			if (is_default(f, slot))
				continue;
			v = enc_value(f, slot);
		}
		if (!v) {
			json_decref(o);
			return NULL;
		}
		json_name(f->name, jn, sizeof jn);
		json_object_set_new(o, jn, v);
	}
	return o;
}

int strobe_pbjson_encode(const ProtobufCMessage *m, char **out, size_t *len)
{
	json_t *o = enc_message(m);
	if (!o)
		return -ENOMEM;
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}
