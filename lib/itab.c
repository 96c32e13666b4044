// SPDX-License-Identifier: Apache-2.0
/*
 * The interning table: byte blobs to dense ids. Every table of the profile model (strings,
 * functions, mappings, locations, stacks, label sets, samples) is one of these, which is what
 * makes merging cheap: an entity is identified by its bytes, so the same function arriving from a
 * thousand profiles is stored once.
 *
 * Written by hand because it is the heart of the model: open addressing with linear probing over
 * 64-bit slots holding the hash beside id+1, so a probe that misses never touches the key arena
 * (one cache miss per lookup on big tables), the hash kept per id so growth never rehashes keys,
 * keys packed 8-byte
 * aligned in one arena so they can be read back as structs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/profile.h"

/* FNV-1a folded over 8-byte words, then mixed: fast on short keys, good enough spread for linear
 * probing once finalised. */
/* Fixed-size tables (stacks, samples, functions, mappings) keep no per-id offset or length:
 * id * stride is the key, which saves 12 bytes and a cache miss per entry. */
uint32_t strobe_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull ^ len;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
		p += 8;
		len -= 8;
	}
	uint64_t w = 0;
	if (len) /* an empty key may come with a NULL pointer */
		memcpy(&w, p, len);
	h = (h ^ w) * 0x100000001b3ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return (uint32_t)h;
}

void strobe_itab_free(strobe_itab *t)
{
	free(t->data);
	free(t->off);
	free(t->klen);
	free(t->slots);
	free(t->hashes);
	memset(t, 0, sizeof(*t));
}

static int itab_rehash(strobe_itab *t, uint32_t nslots)
{
	uint64_t *slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	uint32_t mask = nslots - 1;
	for (uint32_t id = 0; id < t->n; id++) {
		uint32_t i = t->hashes[id] & mask;
		while (slots[i])
			i = (i + 1) & mask;
		slots[i] = (uint64_t)t->hashes[id] << 32 | (id + 1);
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

static uint32_t itab_lookup(const strobe_itab *t, const void *key, size_t len, uint32_t h,
			    uint32_t *slot)
{
	uint32_t mask = t->nslots - 1;
	uint32_t i = h & mask;
	for (;;) {
		uint64_t s = t->slots[i];
		if (!s) {
			*slot = i;
			return UINT32_MAX;
		}
		uint32_t id = (uint32_t)s - 1;
		if ((uint32_t)(s >> 32) == h &&
		    (t->fixed ? memcmp(t->data + (size_t)id * ((t->fixed + 7) & ~7u), key, len) == 0
			      : t->klen[id] == len && (!len || memcmp(t->data + t->off[id], key, len) == 0)))
			return id;
		i = (i + 1) & mask;
	}
}

/* Room for n ids in the per-id arrays (offsets and lengths only for variable-size keys). */
static int grow_ids(strobe_itab *t, uint32_t n)
{
	if (n <= t->ncap)
		return 0;
	if (!t->fixed) {
		uint64_t *off = realloc(t->off, n * sizeof(*off));
		if (!off)
			return -ENOMEM;
		t->off = off;
		uint32_t *kl = realloc(t->klen, n * sizeof(*kl));
		if (!kl)
			return -ENOMEM;
		t->klen = kl;
	}
	uint32_t *hs = realloc(t->hashes, n * sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	t->hashes = hs;
	t->ncap = n;
	return 0;
}

int strobe_itab_reserve(strobe_itab *t, uint32_t n, size_t key_bytes)
{
	/* Grow everything once to its final size, so a decoder that knows its counts up front
	 * pays neither the rehashes nor the copies of doubling. */
	int r = grow_ids(t, n);
	if (r < 0)
		return r;
	if (key_bytes > t->cap) {
		uint8_t *d = realloc(t->data, key_bytes);
		if (!d)
			return -ENOMEM;
		t->data = d;
		t->cap = key_bytes;
	}
	uint32_t want = 64;
	while (want < (uint64_t)n * 2 + 2 && want < (1u << 31))
		want *= 2;
	return want > t->nslots ? itab_rehash(t, want) : 0;
}

uint32_t strobe_itab_find(const strobe_itab *t, const void *key, size_t len)
{
	if (!t->nslots)
		return UINT32_MAX;
	uint32_t slot;
	return itab_lookup(t, key, len, strobe_hash(key, len), &slot);
}

int strobe_itab_intern(strobe_itab *t, const void *key, size_t len, uint32_t *id, bool *added)
{
	if (len > UINT32_MAX)
		return -EOVERFLOW;
	if (!t->nslots && itab_rehash(t, 64) < 0)
		return -ENOMEM;
	uint32_t h = strobe_hash(key, len), slot;
	uint32_t found = itab_lookup(t, key, len, h, &slot);
	if (found != UINT32_MAX) {
		*id = found;
		if (added)
			*added = false;
		return 0;
	}
	if (t->n == UINT32_MAX - 1)
		return -EOVERFLOW;
	if (t->fixed && len != t->fixed)
		return -EINVAL;
	if (t->n == t->ncap) {
		int r = grow_ids(t, t->ncap ? t->ncap * 2 : 64);
		if (r < 0)
			return r;
	}
	size_t need = t->len + ((len + 7) & ~(size_t)7);
	if (need > t->cap || !t->data) { /* always an arena, so empty keys have an address */
		size_t nc = t->cap ? t->cap : 4096;
		while (nc < need)
			nc *= 2;
		uint8_t *d = realloc(t->data, nc);
		if (!d)
			return -ENOMEM;
		t->data = d;
		t->cap = nc;
	}
	/* The arena's tail padding is zeroed so that keys read back as structs have defined bytes. */
	if (len)
		memcpy(t->data + t->len, key, len);
	memset(t->data + t->len + len, 0, need - t->len - len);
	uint32_t nid = t->n++;
	if (!t->fixed) {
		t->off[nid] = t->len;
		t->klen[nid] = (uint32_t)len;
	}
	t->hashes[nid] = h;
	t->len = need;
	t->slots[slot] = (uint64_t)h << 32 | (nid + 1);
	/* Keep the load factor under 1/2: probes stay short even with a weak hash. */
	if ((uint64_t)t->n * 2 > t->nslots) {
		int r = itab_rehash(t, t->nslots * 2);
		if (r < 0)
			return r;
	}
	*id = nid;
	if (added)
		*added = true;
	return 0;
}
