/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The body of /api/v1/range (server/range_json.c): written straight into a buffer, byte for byte
 * what building it as jansson values and dumping them compact gave, without the three
 * allocations and a printf per value that made the rendering of a big range cost more than its
 * query (500 groups of 240 steps).
 */
#ifndef STROBE_SRV_RANGE_JSON_H
#define STROBE_SRV_RANGE_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "strobe/buf.h"
#include "strobe/store.h"

/* The answer res of a range of type over [from, to) by step (ns), grouped by gb (NULL: not
 * grouped), with the exemplars object ex (NULL: none) into b (initialised by the caller). 0, or
 * -ENOMEM / -E2BIG from the buffer, or -EINVAL when a string cannot be encoded (not UTF-8). */
int srv_range_json(strobe_buf *b, const char *type, int64_t from, int64_t to, int64_t step,
		   const char *gb, const strobe_range_result *res, json_t *ex);

#endif
