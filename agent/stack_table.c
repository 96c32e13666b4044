// SPDX-License-Identifier: Apache-2.0
/*
 * The stacks of one drain, by id (stack_table.h): open addressing with linear probing over
 * power-of-two slots, kept under three quarters full, and one growing array of addresses.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stack_table.h"

#define KEEP_IPS 32768u  /* addresses kept across resets (256 KiB); more are given back */
#define KEEP_SLOTS 8192u /* slots kept across resets (128 KiB) */

static uint32_t slot_of(uint64_t id, uint32_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (uint32_t)id & (cap - 1);
}

static int grow_slots(stack_table *t)
{
	uint32_t nc = t->cap ? t->cap * 2 : 256;
	if (nc < t->cap)
		return -EINVAL;
	uint64_t *ids = calloc(nc, sizeof(*ids));
	uint32_t *at = malloc(nc * sizeof(*at)), *len = malloc(nc * sizeof(*len));
	if (!ids || !at || !len) {
		free(ids);
		free(at);
		free(len);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		if (!t->ids[i])
			continue;
		uint32_t j = slot_of(t->ids[i], nc);
		while (ids[j])
			j = (j + 1) & (nc - 1);
		ids[j] = t->ids[i];
		at[j] = t->at[i];
		len[j] = t->len[i];
	}
	free(t->ids);
	free(t->at);
	free(t->len);
	t->ids = ids;
	t->at = at;
	t->len = len;
	t->cap = nc;
	return 0;
}

int stack_table_add(stack_table *t, uint64_t id, const uint64_t *ips, uint32_t n)
{
	if (!id || (n && !ips) || t->n == UINT32_MAX)
		return -EINVAL;
	if ((uint64_t)(t->n + 1) * 4 > (uint64_t)t->cap * 3) {
		int rc = grow_slots(t);
		if (rc < 0)
			return rc;
	}
	uint32_t j = slot_of(id, t->cap);
	while (t->ids[j]) {
		if (t->ids[j] == id)
			return 0;
		j = (j + 1) & (t->cap - 1);
	}
	if (t->nips + n > UINT32_MAX)
		return -EINVAL;
	if (t->nips + n > t->cips) {
		size_t nc = t->cips ? t->cips : 1024;
		while (nc < t->nips + n)
			nc *= 2;
		uint64_t *v = realloc(t->ips, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->ips = v;
		t->cips = nc;
	}
	if (n)
		memcpy(t->ips + t->nips, ips, n * sizeof(*ips));
	t->ids[j] = id;
	t->at[j] = (uint32_t)t->nips;
	t->len[j] = n;
	t->nips += n;
	t->n++;
	return 0;
}

const uint64_t *stack_table_get(const stack_table *t, uint64_t id, uint32_t *n)
{
	*n = 0;
	if (!id || !t->cap)
		return NULL;
	for (uint32_t j = slot_of(id, t->cap); t->ids[j]; j = (j + 1) & (t->cap - 1))
		if (t->ids[j] == id) {
			*n = t->len[j];
			return t->ips + t->at[j];
		}
	return NULL;
}

void stack_table_reset(stack_table *t)
{
	if (t->cap > KEEP_SLOTS) {
		free(t->ids);
		free(t->at);
		free(t->len);
		t->ids = NULL;
		t->at = t->len = NULL;
		t->cap = 0;
	} else if (t->cap) {
		memset(t->ids, 0, t->cap * sizeof(*t->ids));
	}
	if (t->cips > KEEP_IPS) {
		free(t->ips);
		t->ips = NULL;
		t->cips = 0;
	}
	t->n = 0;
	t->nips = 0;
}

void stack_table_free(stack_table *t)
{
	free(t->ids);
	free(t->at);
	free(t->len);
	free(t->ips);
	*t = (stack_table){0};
}
