// SPDX-License-Identifier: Apache-2.0
/*
 * Names the frames of heap and lock profiles read from the preload library's channel
 * (include/strobe/heap_channel.h) with a symbolizer: the channel gives each frame as a mapped
 * file's path and an offset in it, and the reader asks here for the function, file and line,
 * and for the file's build ID. One namer serves `strobe record -e heap|mutex` and the agent.
 *
 * A path is opened once (its symbolizer object, or the failure, is remembered), for the
 * NAMER_PATHS most recent distinct paths: a process maps a few dozen files, and the same
 * libraries come back in every process.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "strobe/heap_channel.h"

#define NAMER_PATHS 256u
#define NAMER_FRAMES 16

struct strobe_sym_heap_namer {
	strobe_symbolizer *sym;
	struct {
		char *path;
		strobe_sym_object *obj; /* NULL: the path cannot be read */
	} cache[NAMER_PATHS];
	unsigned n, next; /* entries used; the one replaced next when full */
	unsigned generation; /* the symbolizer's when the entries were made (strobe_symbolizer_renew
			      frees their objects) */
};

strobe_sym_heap_namer *strobe_sym_heap_namer_new(strobe_symbolizer *sym)
{
	if (!sym) {
		errno = EINVAL;
		return NULL;
	}
	strobe_sym_heap_namer *c = calloc(1, sizeof(*c));
	if (c) {
		c->sym = sym;
		c->generation = sym->generation;
	}
	return c;
}

void strobe_sym_heap_namer_free(strobe_sym_heap_namer *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n; i++)
		free(c->cache[i].path);
	free(c);
}

/* The symbolizer's object for a mapped file, opened once per path (NULL: cannot be read). */
static strobe_sym_object *object_for(strobe_sym_heap_namer *c, const char *path)
{
	if (c->generation != c->sym->generation) { /* renewed: the objects are gone */
		for (unsigned i = 0; i < c->n; i++)
			free(c->cache[i].path);
		c->n = c->next = 0;
		c->generation = c->sym->generation;
	}
	for (unsigned i = 0; i < c->n; i++)
		if (strcmp(c->cache[i].path, path) == 0)
			return c->cache[i].obj;
	strobe_sym_object *o = NULL;
	if (strobe_sym_object_get(c->sym, path, 0, 0, 0, NULL, 0, &o) < 0)
		o = NULL;
	char *p = strdup(path);
	if (!p)
		return o;
	unsigned slot;
	if (c->n < NAMER_PATHS) {
		slot = c->n++;
	} else { /* full: the oldest entry goes (the symbolizer keeps its object) */
		slot = c->next++ % NAMER_PATHS;
		free(c->cache[slot].path);
	}
	c->cache[slot].path = p;
	c->cache[slot].obj = o;
	return o;
}

int strobe_sym_heap_name(void *ctx, const char *path, uint64_t offset, strobe_heap_frame *out,
			 int max)
{
	strobe_sym_heap_namer *c = ctx;
	strobe_sym_object *o = c && path ? object_for(c, path) : NULL;
	if (!o || max <= 0)
		return 0;
	strobe_sym_frame fr[NAMER_FRAMES];
	int n = strobe_sym_lookup(c->sym, o, offset, fr, max < NAMER_FRAMES ? max : NAMER_FRAMES);
	for (int k = 0; k < n; k++)
		out[k] = (strobe_heap_frame){fr[k].function, fr[k].file, fr[k].line, fr[k].column,
					     fr[k].start_line};
	return n < 0 ? 0 : n;
}

void strobe_sym_heap_build_id(void *ctx, const char *path, char *hex, size_t cap)
{
	if (cap)
		hex[0] = 0;
	strobe_sym_object *o = ctx && path ? object_for(ctx, path) : NULL;
	size_t n = 0;
	const uint8_t *id = o ? strobe_sym_object_build_id(o, &n) : NULL;
	if (id && n && 2 * n < cap)
		strobe_build_id_hex(id, n, hex);
}
