// SPDX-License-Identifier: Apache-2.0
/*
 * The growable buffer (include/strobe/buf.h). It doubles, from 256 bytes, and never allocates
 * more than its maximum (plus the NUL) however it is asked, so a hostile length only ever costs
 * up to the cap.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/buf.h"

#define MIN_CAP 256

void strobe_buf_init(strobe_buf *b, size_t max)
{
	*b = (strobe_buf){.max = max};
}

void strobe_buf_free(strobe_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void strobe_buf_reset(strobe_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = 0;
}

/* A failure empties the buffer: see the header. */
static int fail(strobe_buf *b, int r)
{
	strobe_buf_free(b);
	return r;
}

int strobe_buf_reserve(strobe_buf *b, size_t n)
{
	if (n > b->max || b->len > b->max - n)
		return fail(b, -E2BIG);
	size_t need = b->len + n + 1; /* and the NUL */
	if (need <= b->cap)
		return 0;
	size_t nc = b->cap ? b->cap : MIN_CAP;
	while (nc < need)
		nc = nc > SIZE_MAX / 2 ? need : nc * 2;
	if (nc > b->max + 1)
		nc = b->max + 1;
	if (nc < need)
		nc = need;
	char *np = realloc(b->p, nc);
	if (!np)
		return fail(b, -ENOMEM);
	if (!b->p)
		np[0] = 0;
	b->p = np;
	b->cap = nc;
	return 0;
}

void strobe_buf_commit(strobe_buf *b, size_t n)
{
	b->len += n;
	b->p[b->len] = 0;
}

int strobe_buf_add(strobe_buf *b, const void *data, size_t n)
{
	int r = strobe_buf_reserve(b, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(b->p + b->len, data, n);
	strobe_buf_commit(b, n);
	return 0;
}

int strobe_buf_adds(strobe_buf *b, const char *s)
{
	return strobe_buf_add(b, s, strlen(s));
}

int strobe_buf_vaddf(strobe_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	char small[256];
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	int r;
	if (n < 0) {
		r = fail(b, -EINVAL);
	} else if ((size_t)n < sizeof(small)) {
		r = strobe_buf_add(b, small, (size_t)n);
	} else if ((r = strobe_buf_reserve(b, (size_t)n)) == 0) {
		vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
		strobe_buf_commit(b, (size_t)n);
	}
	va_end(again);
	return r;
}

int strobe_buf_addf(strobe_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = strobe_buf_vaddf(b, fmt, ap);
	va_end(ap);
	return r;
}

char *strobe_buf_take(strobe_buf *b, size_t *len)
{
	if (!b->p && strobe_buf_reserve(b, 0) < 0)
		return NULL;
	char *p = b->p;
	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

int strobe_buf_add_urlenc(strobe_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i = 0;
	while (i < n) {
		/* a run of unreserved characters in one add, then one escaped byte */
		size_t k = i;
		for (; k < n; k++) {
			unsigned char c = (unsigned char)s[k];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~'))
				break;
		}
		int r = strobe_buf_add(b, s + i, k - i);
		if (r < 0)
			return r;
		if (k == n)
			break;
		unsigned char c = (unsigned char)s[k];
		char e[3] = {'%', hex[c >> 4], hex[c & 15]};
		if ((r = strobe_buf_add(b, e, 3)) < 0)
			return r;
		i = k + 1;
	}
	return 0;
}
