/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A growable byte buffer with a maximum size, as curl's dynbuf: the one type for the buffers
 * that collect bytes or text of unknown length (HTTP bodies, responses, generated text), so that
 * each has a cap, grows the same way, and fails the same way.
 *
 * Ownership: the buffer owns p (malloc'd), freed by strobe_buf_free or handed over by
 * strobe_buf_take. Any failure to add (-E2BIG past max, -ENOMEM) frees the contents and leaves
 * an empty buffer, as dynbuf does, so that half a body is never mistaken for a whole one. The
 * contents are always followed by a NUL byte (not counted in len) once anything was added.
 * A zeroed strobe_buf is not usable: strobe_buf_init sets its maximum.
 */
#ifndef STROBE_BUF_H
#define STROBE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct strobe_buf {
	char *p;    /* NULL until the first byte is added */
	size_t len; /* bytes held */
	size_t cap; /* bytes allocated (at least len + 1 once allocated) */
	size_t max; /* the most len may become */
} strobe_buf;

void strobe_buf_init(strobe_buf *b, size_t max);
void strobe_buf_free(strobe_buf *b);
/* Empties the buffer and keeps its memory, for reuse. */
void strobe_buf_reset(strobe_buf *b);

/* Appends n bytes. 0, -E2BIG or -ENOMEM (then the buffer is emptied and freed). */
int strobe_buf_add(strobe_buf *b, const void *data, size_t n);
int strobe_buf_adds(strobe_buf *b, const char *s);
int strobe_buf_addf(strobe_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strobe_buf_vaddf(strobe_buf *b, const char *fmt, va_list ap);

/* Room for n more bytes at p + len (to be filled, then counted with strobe_buf_commit), for
 * readers that write in place (read(2)). 0, -E2BIG or -ENOMEM as strobe_buf_add. */
int strobe_buf_reserve(strobe_buf *b, size_t n);
/* Counts n more bytes written at p + len after strobe_buf_reserve made room for them. */
void strobe_buf_commit(strobe_buf *b, size_t n);

/* Hands the contents over (NUL-terminated, never NULL unless out of memory; *len may be NULL)
 * and empties the buffer. */
char *strobe_buf_take(strobe_buf *b, size_t *len);

/* Appends n bytes of s percent-encoded for a URL query: RFC 3986's unreserved characters
 * (A-Z a-z 0-9 - . _ ~) as they are, every other byte as %XX (upper-case hex), as libcurl's
 * curl_easy_escape does. 0, -E2BIG or -ENOMEM as strobe_buf_add. */
int strobe_buf_add_urlenc(strobe_buf *b, const char *s, size_t n);

#endif
