// SPDX-License-Identifier: Apache-2.0
/*
 * The stored form of one point: its (stack id, value) pairs as varints (stack ids delta-coded,
 * values zigzag), compressed with zstd. Stack ids are sorted so deltas stay small, and most
 * values of one profile share magnitude, so the varints compress well. Blobs are read back from
 * disk, so decoding checks every length and id as if the bytes were hostile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store_impl.h"

#define BLOB_VERSION 1
#define BLOB_MAX_RAW ((size_t)512 << 20) /* decompressed size cap */

static size_t put_uvarint(uint8_t *b, uint64_t v)
{
	size_t i = 0;
	while (v >= 0x80) {
		b[i++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b[i++] = (uint8_t)v;
	return i;
}

static int get_uvarint(const uint8_t *b, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return -EINVAL;
		uint8_t c = b[(*pos)++];
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EINVAL;
}

int store_blob_encode(const store_pair *p, size_t n, uint8_t **out, size_t *len)
{
	size_t cap = 1 + 10 + n * 15;
	uint8_t *raw = malloc(cap);
	if (!raw)
		return -ENOMEM;
	size_t pos = 0;
	raw[pos++] = BLOB_VERSION;
	pos += put_uvarint(raw + pos, n);
	uint32_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		pos += put_uvarint(raw + pos, p[i].stack - prev);
		prev = p[i].stack;
		uint64_t z = ((uint64_t)p[i].value << 1) ^ (uint64_t)(p[i].value >> 63);
		pos += put_uvarint(raw + pos, z);
	}
	size_t bound = ZSTD_compressBound(pos);
	uint8_t *z = malloc(bound);
	if (!z) {
		free(raw);
		return -ENOMEM;
	}
	size_t zl = ZSTD_compress(z, bound, raw, pos, 3);
	free(raw);
	if (ZSTD_isError(zl)) {
		free(z);
		return -EIO;
	}
	*out = z;
	*len = zl;
	return 0;
}

int store_blob_decode(const uint8_t *in, size_t len, uint32_t nstacks, store_pair **buf,
		      size_t *cap, size_t *n)
{
	unsigned long long rl = ZSTD_getFrameContentSize(in, len);
	if (rl == ZSTD_CONTENTSIZE_ERROR || rl == ZSTD_CONTENTSIZE_UNKNOWN || rl > BLOB_MAX_RAW ||
	    rl < 2)
		return -EINVAL;
	uint8_t *raw = malloc(rl);
	if (!raw)
		return -ENOMEM;
	size_t got = ZSTD_decompress(raw, rl, in, len);
	int r = 0;
	if (ZSTD_isError(got) || got != rl || raw[0] != BLOB_VERSION) {
		r = -EINVAL;
		goto out;
	}
	size_t pos = 1;
	uint64_t cnt;
	/* Each pair takes at least two bytes, which bounds a count read from the blob. */
	if (get_uvarint(raw, rl, &pos, &cnt) < 0 || cnt > (rl - pos) / 2) {
		r = -EINVAL;
		goto out;
	}
	if (cnt > *cap) {
		store_pair *nb = realloc(*buf, cnt * sizeof(*nb));
		if (!nb) {
			r = -ENOMEM;
			goto out;
		}
		*buf = nb;
		*cap = cnt;
	}
	uint64_t stack = 0;
	for (size_t i = 0; i < cnt; i++) {
		uint64_t d, z;
		if (get_uvarint(raw, rl, &pos, &d) < 0 || get_uvarint(raw, rl, &pos, &z) < 0) {
			r = -EINVAL;
			goto out;
		}
		stack += d;
		if (stack >= nstacks) {
			r = -EINVAL;
			goto out;
		}
		(*buf)[i].stack = (uint32_t)stack;
		(*buf)[i].value = (int64_t)((z >> 1) ^ (~(z & 1) + 1));
	}
	*n = cnt;
out:
	free(raw);
	return r;
}
