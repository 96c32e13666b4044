/* SPDX-License-Identifier: Apache-2.0 */
/*
 * multipart/form-data bodies (server/multipart.c). Nothing is copied or owned: each part's
 * name is a buffer of the parser's, valid during the callback, and its content points into the
 * body, valid as long as the body is.
 */
#ifndef STROBE_SERVER_MULTIPART_H
#define STROBE_SERVER_MULTIPART_H

#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"

/* multipart/form-data: calls fn with each part's form field name ("" when none; at most 63
 * bytes kept) and content, in order; the content points into body. At most max_parts parts
 * (-E2BIG beyond); -EINVAL with a message when the body or the Content-Type's boundary is
 * malformed; a negative return of fn stops the parse and is returned. */
typedef int (*srv_part_fn)(void *ctx, const char *name, const uint8_t *data, size_t len);
int srv_multipart_parse(const char *ctype, const uint8_t *body, size_t len, unsigned max_parts,
			   srv_part_fn fn, void *ctx, strobe_err *err);

#endif
