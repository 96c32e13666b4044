// SPDX-License-Identifier: Apache-2.0
/*
 * Whole-buffer gunzip with libdeflate, for request bodies: a push is one gzip member in memory,
 * and libdeflate inflates a whole buffer two to three times faster than zlib's streaming
 * inflate (a tenth of the server's CPU per push was zlib). The gzip trailer's ISIZE (the size
 * mod 2^32) sizes the output; when it is not the whole truth (a lying or wrapped trailer, more
 * than the cap, corrupt data) this answers -EAGAIN and the caller runs its zlib path, whose
 * limits and error messages stay the reference. Like that path, data after the first member is
 * ignored.
 */
#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>

#include "pyroscope.h"

int srv_gunzip_fast(const uint8_t *in, size_t len, size_t cap, uint8_t **out, size_t *olen)
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
	uint8_t *buf = malloc(isize + 1); /* + 1: callers may NUL-terminate text */
	if (!d || !buf) {
		libdeflate_free_decompressor(d);
		free(buf);
		return -ENOMEM;
	}
	size_t used = 0, got = 0;
	enum libdeflate_result r =
		libdeflate_gzip_decompress_ex(d, in, len, buf, isize, &used, &got);
	libdeflate_free_decompressor(d);
	if (r != LIBDEFLATE_SUCCESS || got != isize) {
		free(buf);
		return -EAGAIN;
	}
	*out = buf;
	*olen = got;
	return 0;
}
