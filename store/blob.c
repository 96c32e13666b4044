// SPDX-License-Identifier: Apache-2.0
/*
 * The stored form of one point: its (stack id, value) pairs as varints, compressed with zstd: the
 * stack ids delta-coded (sorted, so deltas stay small), then the values zigzag-coded after
 * division by their greatest common divisor (a CPU profile's nanoseconds are multiples of the
 * period). Columns rather than pairs, so that like bytes sit together for zstd. Blobs are read back from
 * disk, so decoding checks every length and id as if the bytes were hostile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store_impl.h"
#include "strobe/wire.h"

#define BLOB_VERSION 2 /* 1: (delta, value) pairs interleaved, no divisor; still read */
#define BLOB_MAX_RAW ((size_t)512 << 20) /* decompressed size cap */

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* One compression context per thread, kept: ZSTD_compress makes and frees a context's
 * workspace at every call, a third of the cost of compressing a profile's few kilobytes.
 * Freed when the thread ends (the server's threads come and go with connections). */
static pthread_key_t cctx_key;
static pthread_once_t cctx_once = PTHREAD_ONCE_INIT;
static bool cctx_ok;

static void cctx_free(void *c)
{
	ZSTD_freeCCtx(c);
}

static void cctx_key_make(void)
{
	cctx_ok = pthread_key_create(&cctx_key, cctx_free) == 0;
}

static ZSTD_CCtx *thread_cctx(void)
{
	pthread_once(&cctx_once, cctx_key_make);
	if (!cctx_ok)
		return NULL;
	ZSTD_CCtx *c = pthread_getspecific(cctx_key);
	if (!c && (c = ZSTD_createCCtx()) && pthread_setspecific(cctx_key, c) != 0) {
		ZSTD_freeCCtx(c);
		c = NULL;
	}
	return c;
}

/* And one decompression context per thread, for the same reason: ZSTD_decompress makes and
 * frees one at every call, which was half the time of a flame graph over many small profiles
 * (500 processes' roll-ups of an hour: 53 % of the query in zstd's context set-up). */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static bool dctx_ok;

static void dctx_free(void *c)
{
	ZSTD_freeDCtx(c);
}

static void dctx_key_make(void)
{
	dctx_ok = pthread_key_create(&dctx_key, dctx_free) == 0;
}

static ZSTD_DCtx *thread_dctx(void)
{
	pthread_once(&dctx_once, dctx_key_make);
	if (!dctx_ok)
		return NULL;
	ZSTD_DCtx *c = pthread_getspecific(dctx_key);
	if (!c && (c = ZSTD_createDCtx()) && pthread_setspecific(dctx_key, c) != 0) {
		ZSTD_freeDCtx(c);
		c = NULL;
	}
	return c;
}

int store_blob_encode(const store_pair *p, size_t n, uint8_t **out, size_t *len)
{
	size_t cap = 1 + 3 * 10 + n * 15;
	uint8_t *raw = malloc(cap);
	if (!raw)
		return -ENOMEM;
	/* Version 2: the stack deltas, then the values divided by their common divisor, each as
	 * its own column: a CPU profile's nanoseconds are whole multiples of the period, so they
	 * shrink to the sample counts, and like bytes sit together for zstd. */
	uint64_t g = 0;
	for (size_t i = 0; i < n; i++)
		g = gcd64(g, p[i].value < 0 ? (uint64_t)0 - (uint64_t)p[i].value : (uint64_t)p[i].value);
	if (!g)
		g = 1;
	uint8_t *o = raw;
	*o++ = BLOB_VERSION;
	o = strobe_wire_put_varint(o, n);
	o = strobe_wire_put_varint(o, g);
	uint32_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		o = strobe_wire_put_varint(o, p[i].stack - prev);
		prev = p[i].stack;
	}
	for (size_t i = 0; i < n; i++)
		o = strobe_wire_put_varint(o, strobe_wire_zigzag((int64_t)(p[i].value / (int64_t)g)));
	size_t pos = (size_t)(o - raw);
	size_t bound = ZSTD_compressBound(pos);
	uint8_t *z = malloc(bound);
	if (!z) {
		free(raw);
		return -ENOMEM;
	}
	ZSTD_CCtx *cc = thread_cctx();
	size_t zl = cc ? ZSTD_compressCCtx(cc, z, bound, raw, pos, 3) : ZSTD_compress(z, bound, raw, pos, 3);
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
	ZSTD_DCtx *dc = thread_dctx();
	size_t got = dc ? ZSTD_decompressDCtx(dc, raw, rl, in, len) : ZSTD_decompress(raw, rl, in, len);
	int r = 0;
	if (ZSTD_isError(got) || got != rl || (raw[0] != 1 && raw[0] != 2)) {
		r = -EINVAL;
		goto out;
	}
	strobe_wire w = {raw + 1, raw + rl};
	uint64_t cnt;
	/* Each pair takes at least two bytes, which bounds a count read from the blob. */
	if (!strobe_wire_varint(&w, &cnt) || cnt > (uint64_t)(w.end - w.p) / 2) {
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
	uint64_t stack = 0, g = 1;
	bool v2 = raw[0] == 2;
	if (v2 && (!strobe_wire_varint(&w, &g) || g == 0)) {
		r = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < cnt; i++) {
		uint64_t d, z = 0;
		if (!strobe_wire_varint(&w, &d) || (!v2 && !strobe_wire_varint(&w, &z))) {
			r = -EINVAL;
			goto out;
		}
		stack += d;
		if (stack >= nstacks) {
			r = -EINVAL;
			goto out;
		}
		(*buf)[i].stack = (uint32_t)stack;
		if (!v2)
			(*buf)[i].value = strobe_wire_unzigzag(z);
	}
	for (size_t i = 0; v2 && i < cnt; i++) {
		uint64_t z;
		if (!strobe_wire_varint(&w, &z)) {
			r = -EINVAL;
			goto out;
		}
		/* Wraps rather than overflows on hostile bytes (unsigned arithmetic). */
		(*buf)[i].value = (int64_t)(((z >> 1) ^ (~(z & 1) + 1)) * g);
	}
	*n = cnt;
out:
	free(raw);
	return r;
}
