// SPDX-License-Identifier: Apache-2.0
/*
 * Counts per process id (see pid_count.h): linear probing over a power-of-two table of pid + 1
 * keys, grown at three quarters full up to STROBE_PID_COUNT_MAX slots. The sampler holds a few
 * side-band records at a time (the last 50 ms of mmaps, execs and new processes), so the table stays
 * small and emptying it is cheap.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pid_count.h"

static uint32_t slot_of(uint32_t key, uint32_t cap)
{
	return (key * 2654435761u) & (cap - 1); /* Fibonacci hashing: pids are consecutive */
}

static uint32_t *find(const pid_count *c, uint32_t key)
{
	if (!c->cap)
		return NULL;
	for (uint32_t i = slot_of(key, c->cap);; i = (i + 1) & (c->cap - 1)) {
		if (c->key[i] == key)
			return &c->n[i];
		if (c->key[i] == 0)
			return NULL;
	}
}

static int grow(pid_count *c)
{
	uint32_t nc = c->cap ? c->cap * 2 : 64;
	if (nc > STROBE_PID_COUNT_MAX)
		return -ENOMEM;
	uint32_t *nk = calloc(nc, sizeof(*nk)), *nn = calloc(nc, sizeof(*nn));
	if (!nk || !nn) {
		free(nk);
		free(nn);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->cap; i++) {
		if (!c->key[i])
			continue;
		uint32_t j = slot_of(c->key[i], nc);
		while (nk[j])
			j = (j + 1) & (nc - 1);
		nk[j] = c->key[i];
		nn[j] = c->n[i];
	}
	free(c->key);
	free(c->n);
	c->key = nk;
	c->n = nn;
	c->cap = nc;
	return 0;
}

int pid_count_add(pid_count *c, int32_t pid)
{
	uint32_t key = (uint32_t)pid + 1;
	c->total++;
	if (c->full)
		return 0;
	uint32_t *n = find(c, key);
	if (n) {
		(*n)++;
		return 0;
	}
	if ((c->used + 1) * 4 > c->cap * 3 && grow(c) < 0) {
		c->full = true;
		return -ENOMEM;
	}
	uint32_t i = slot_of(key, c->cap);
	while (c->key[i])
		i = (i + 1) & (c->cap - 1);
	c->key[i] = key;
	c->n[i] = 1;
	c->used++;
	return 0;
}

void pid_count_sub(pid_count *c, int32_t pid)
{
	uint32_t *n = c->full ? NULL : find(c, (uint32_t)pid + 1);
	if (n && *n)
		(*n)--;
	else if (!c->full)
		return; /* never added: not counted in total either */
	if (c->total && --c->total == 0)
		pid_count_clear(c);
}

uint32_t pid_count_get(const pid_count *c, int32_t pid)
{
	if (c->full)
		return UINT32_MAX;
	const uint32_t *n = find(c, (uint32_t)pid + 1);
	return n ? *n : 0;
}

void pid_count_clear(pid_count *c)
{
	if (c->used) {
		memset(c->key, 0, c->cap * sizeof(*c->key));
		memset(c->n, 0, c->cap * sizeof(*c->n));
	}
	c->used = 0;
	c->total = 0;
	c->full = false;
}

void pid_count_free(pid_count *c)
{
	free(c->key);
	free(c->n);
	memset(c, 0, sizeof(*c));
}
