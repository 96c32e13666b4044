// SPDX-License-Identifier: Apache-2.0
/*
 * The symbolizer's string pool. Every name the symbolizer hands out (kernel symbols, module
 * names, perf-map names, and the function and file names of ELF and DWARF lookups) is copied
 * here once and handed out by pointer; the pointers live until strobe_symbolizer_free even when
 * the table that produced them is reloaded or released, which is what lets a perf map be re-read,
 * or an object's debug information be dropped, under a caller still holding names from before.
 * Only names actually returned are pooled: a few thousand in a profile, not every symbol.
 *
 * Not strobe_itab: its arena is realloc'd as it grows, so its keys move. Here strings go into
 * fixed chunks that are never moved, and a small open-addressing set of (hash, index) finds an
 * existing copy, so a name seen on every reload is stored once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK_SIZE (64u << 10)

void sym_strpool_free(sym_strpool *p)
{
	for (size_t i = 0; i < p->nchunks; i++)
		free(p->chunks[i]);
	free(p->chunks);
	free(p->strs);
	free(p->hashes);
	free(p->slots);
	memset(p, 0, sizeof(*p));
}

static int rehash(sym_strpool *p, uint32_t nslots)
{
	uint64_t *slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n; i++) {
		uint32_t j = p->hashes[i] & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = (uint64_t)p->hashes[i] << 32 | (i + 1);
	}
	free(p->slots);
	p->slots = slots;
	p->nslots = nslots;
	return 0;
}

/* Room for len bytes that will never move. Big strings get a chunk of their own. */
static char *pool_alloc(sym_strpool *p, size_t len)
{
	if (len > p->avail) {
		if (p->nchunks == p->cchunks) {
			size_t nc = p->cchunks ? p->cchunks * 2 : 16;
			char **c = realloc(p->chunks, nc * sizeof(*c));
			if (!c)
				return NULL;
			p->chunks = c;
			p->cchunks = nc;
		}
		size_t sz = len > CHUNK_SIZE ? len : CHUNK_SIZE;
		char *chunk = malloc(sz);
		if (!chunk)
			return NULL;
		p->chunks[p->nchunks++] = chunk;
		p->used = 0;
		p->avail = sz;
	}
	char *r = p->chunks[p->nchunks - 1] + p->used;
	p->used += len;
	p->avail -= len;
	return r;
}

const char *sym_intern(sym_strpool *p, const char *s, size_t len)
{
	return sym_intern_max(p, s, len, SYM_MAX_NAME);
}

const char *sym_intern_max(sym_strpool *p, const char *s, size_t len, size_t max)
{
	const char *nul = memchr(s, 0, len); /* what a C string would show anyway */
	if (nul)
		len = (size_t)(nul - s);
	if (len > max) {
		/* Cut on a character boundary: never leave half a UTF-8 sequence behind. */
		len = max;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	/* Grow before probing, so the set always has an empty slot to end a probe on. */
	if (!p->nslots && rehash(p, 1024) < 0)
		return NULL;
	if ((uint64_t)(p->n + 1) * 2 > p->nslots && rehash(p, p->nslots * 2) < 0)
		return NULL;
	uint32_t h = strobe_hash(s, len), mask = p->nslots - 1, i = h & mask;
	for (uint64_t e; (e = p->slots[i]); i = (i + 1) & mask) {
		uint32_t id = (uint32_t)e - 1;
		if ((uint32_t)(e >> 32) == h && strncmp(p->strs[id], s, len) == 0 &&
		    p->strs[id][len] == 0)
			return p->strs[id];
	}
	if (p->n == p->cap) {
		uint32_t nc = p->cap ? p->cap * 2 : 1024;
		const char **strs = realloc(p->strs, nc * sizeof(*strs));
		if (!strs)
			return NULL;
		p->strs = strs;
		uint32_t *hs = realloc(p->hashes, nc * sizeof(*hs));
		if (!hs)
			return NULL;
		p->hashes = hs;
		p->cap = nc;
	}
	char *copy = pool_alloc(p, len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = 0;
	p->strs[p->n] = copy;
	p->hashes[p->n] = h;
	p->slots[i] = (uint64_t)h << 32 | (p->n + 1);
	p->n++;
	return copy;
}
