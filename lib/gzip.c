// SPDX-License-Identifier: Apache-2.0
/*
 * gzip and gunzip of whole buffers. gzip: the pprof encoder's (lib/pprof.c), for every profile
 * written or pushed. gunzip, the one every reader uses: files and stdin (cmd_collapse, io.c),
 * request bodies (push, Pyroscope ingest) and scraped responses. Every caller hands it bytes it
 * does not trust, so the output has a cap and the inflate gives up as soon as it passes it: a
 * small hostile body cannot make us allocate gigabytes.
 *
 * Two paths. The fast one inflates with libdeflate in one call, sized by the gzip trailer's
 * ISIZE (the size mod 2^32): two to three times faster than zlib's streaming inflate, which was
 * a tenth of the server's CPU per push. It only answers when the buffer is exactly one member and
 * the trailer told the truth; anything else (several members, as `cat a.gz b.gz` makes, a zlib
 * stream, a lying or wrapped trailer, corrupt data, more than the cap) goes to zlib, whose
 * limits and messages are the reference.
 */
#include <errno.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <zlib.h>

#include "strobe/codec.h"

/* libdeflate when the buffer is one gzip member whose trailer tells its size; -EAGAIN: use
 * zlib. */
static int gunzip_fast(const uint8_t *in, size_t len, size_t cap, uint8_t **out, size_t *olen)
{
	if (len < 18 || in[0] != 0x1f || in[1] != 0x8b)
		return -EAGAIN;
	size_t isize = (size_t)in[len - 4] | (size_t)in[len - 3] << 8 | (size_t)in[len - 2] << 16 |
		       (size_t)in[len - 1] << 24;
	/* DEFLATE expands at most about 1032:1, so a trailer claiming more is a lie that must
	 * not make us allocate what it says. */
	if (isize > cap || isize / 1032 > len)
		return -EAGAIN;
	struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
	uint8_t *buf = malloc(isize + 1); /* + 1: the NUL callers may rely on */
	if (!d || !buf) {
		libdeflate_free_decompressor(d);
		free(buf);
		return -ENOMEM;
	}
	size_t used = 0, got = 0;
	enum libdeflate_result r =
		libdeflate_gzip_decompress_ex(d, in, len, buf, isize, &used, &got);
	libdeflate_free_decompressor(d);
	/* used < len: more members (or trailing bytes) follow, which zlib's loop decides on. */
	if (r != LIBDEFLATE_SUCCESS || got != isize || used != len) {
		free(buf);
		return -EAGAIN;
	}
	buf[got] = 0;
	*out = buf;
	*olen = got;
	return 0;
}

static int too_big(strobe_err *err, const char *what, size_t cap)
{
	return what ? strobe_errf(err, -E2BIG, "%s: more than %zu bytes after gunzip", what, cap)
		    : strobe_errf(err, -E2BIG, "more than %zu bytes after gunzip", cap);
}

int strobe_gunzip_capped(const uint8_t *in, size_t inlen, size_t cap, uint8_t **out,
			 size_t *outlen, const char *what, strobe_err *err)
{
	*out = NULL;
	*outlen = 0;
	int fr = gunzip_fast(in, inlen, cap, out, outlen);
	if (fr != -EAGAIN)
		return fr;
	z_stream z = {0};
	/* 15 + 32: a gzip or a zlib header, detected. */
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -ENOMEM;
	/* room: output bytes the buffer holds (one more is kept for the NUL). It grows to at most
	 * cap + 1, so that a stream of exactly cap bytes fits and one byte more is seen. */
	size_t room = inlen < (SIZE_MAX - 1024) / 4 ? inlen * 4 + 1024 : SIZE_MAX / 2;
	if (room > cap + 1)
		room = cap + 1;
	size_t len = 0;
	uint8_t *buf = malloc(room + 1);
	int r = -ENOMEM;
	if (!buf)
		goto out;
	const uint8_t *p = in;
	size_t left = inlen;
	for (;;) {
		if (len == room) {
			if (room > cap) {
				r = too_big(err, what, cap);
				goto out;
			}
			size_t nr = room > (cap + 1) / 2 ? cap + 1 : room * 2;
			uint8_t *nb = realloc(buf, nr + 1);
			if (!nb)
				goto out;
			buf = nb;
			room = nr;
		}
		/* zlib's counters are 32-bit: at most 1 GiB each way per call. */
		uInt ci = left > (1u << 30) ? (1u << 30) : (uInt)left;
		uInt co = room - len > (1u << 30) ? (1u << 30) : (uInt)(room - len);
		z.next_in = (Bytef *)(uintptr_t)p;
		z.avail_in = ci;
		z.next_out = buf + len;
		z.avail_out = co;
		int zr = inflate(&z, Z_NO_FLUSH);
		p += ci - z.avail_in;
		left -= ci - z.avail_in;
		len += co - z.avail_out;
		if (zr == Z_STREAM_END) {
			/* Concatenated gzip members are one stream; other trailing bytes are
			 * ignored, as gzip -d does with a warning. */
			if (left && *p == 0x1f) {
				inflateReset(&z);
				continue;
			}
			break;
		}
		if (zr == Z_MEM_ERROR)
			goto out;
		if (zr == Z_BUF_ERROR && left == 0 && z.avail_out > 0) {
			size_t at = (size_t)(p - in);
			r = what ? strobe_errf(err, -EINVAL,
					       "%s: truncated gzip data (input ends at byte %zu before "
					       "the end of the compressed stream)",
					       what, at)
				 : strobe_errf(err, -EINVAL,
					       "truncated gzip data (input ends at byte %zu before the "
					       "end of the compressed stream)",
					       at);
			goto out;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			const char *m = z.msg ? z.msg : "inflate failed";
			size_t at = (size_t)(p - in);
			r = what ? strobe_errf(err, -EINVAL, "%s: corrupt gzip data near byte %zu: %s",
					       what, at, m)
				 : strobe_errf(err, -EINVAL, "corrupt gzip data near byte %zu: %s", at,
					       m);
			goto out;
		}
	}
	if (len > cap) {
		r = too_big(err, what, cap);
		goto out;
	}
	buf[len] = 0;
	*out = buf;
	*outlen = len;
	buf = NULL;
	r = 0;
out:
	inflateEnd(&z);
	free(buf);
	return r;
}

/* gzip goes through libdeflate with one compressor per thread and level, kept for the thread's
 * life: the agent compresses one small pprof per process every interval, and zlib's
 * deflateInit/End (about 256 KiB of state allocated and its hash table cleared per call) cost
 * more than the compression of a few KiB. libdeflate's level 6 compresses about as well as
 * zlib's, with no setup per call. The thread-local pointer keeps the compressors reachable;
 * the key's destructor frees them when a thread exits. */
#define GZ_LEVELS 13 /* libdeflate's 0 (stored) to 12; 0 is not offered */
typedef struct gz_comps {
	struct libdeflate_compressor *c[GZ_LEVELS];
} gz_comps;

static pthread_key_t gz_key;
static pthread_once_t gz_once = PTHREAD_ONCE_INIT;
static int gz_key_rc = -1;
static _Thread_local gz_comps *gz_mine;

static void gz_free(void *p)
{
	gz_comps *g = p;
	for (int i = 0; i < GZ_LEVELS; i++)
		if (g->c[i])
			libdeflate_free_compressor(g->c[i]);
	free(g);
}
static void gz_key_init(void) { gz_key_rc = pthread_key_create(&gz_key, gz_free); }

static struct libdeflate_compressor *gz_compressor(int level)
{
	if (gz_mine && gz_mine->c[level])
		return gz_mine->c[level];
	if (!gz_mine) {
		pthread_once(&gz_once, gz_key_init);
		if (gz_key_rc != 0)
			return NULL;
		gz_comps *g = calloc(1, sizeof(*g));
		if (!g)
			return NULL;
		if (pthread_setspecific(gz_key, g) != 0) {
			free(g);
			return NULL;
		}
		gz_mine = g;
	}
	return gz_mine->c[level] = libdeflate_alloc_compressor(level);
}

int strobe_gzip_level(const uint8_t *in, size_t inlen, int level, uint8_t **out, size_t *outlen)
{
	if (level < 1 || level >= GZ_LEVELS)
		return -EINVAL;
	struct libdeflate_compressor *c = gz_compressor(level);
	if (!c)
		return -ENOMEM;
	size_t cap = libdeflate_gzip_compress_bound(c, inlen);
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	size_t n = libdeflate_gzip_compress(c, in, inlen, buf, cap);
	if (!n) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*outlen = n;
	return 0;
}

int strobe_gzip(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen)
{
	return strobe_gzip_level(in, inlen, 6, out, outlen);
}
