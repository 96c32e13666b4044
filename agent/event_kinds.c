// SPDX-License-Identifier: Apache-2.0
/*
 * The map from the kernel's event ids to the sampler's kinds of event (event_kinds.h): an
 * interning table of the ids, whose dense index holds the kind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "event_kinds.h"

void event_kinds_init(event_kinds *m)
{
	memset(m, 0, sizeof(*m));
	m->ids.fixed = sizeof(uint64_t);
}

void event_kinds_free(event_kinds *m)
{
	strobe_itab_free(&m->ids);
	free(m->kind);
	memset(m, 0, sizeof(*m));
}

int event_kinds_add(event_kinds *m, uint64_t id, int kind)
{
	uint32_t i;
	bool added;
	int rc = strobe_itab_intern(&m->ids, &id, sizeof(id), &i, &added);
	if (rc < 0)
		return rc;
	if (!added)
		return 0;
	if (i >= m->ckind) {
		uint32_t nc = m->ckind ? m->ckind * 2 : 64;
		while (nc <= i)
			nc *= 2;
		uint8_t *nk = realloc(m->kind, nc);
		if (!nk)
			return -ENOMEM; /* the id stays, of kind 0: its records are dropped */
		memset(nk + m->ckind, 0, nc - m->ckind);
		m->kind = nk;
		m->ckind = nc;
	}
	m->kind[i] = (uint8_t)kind;
	unsigned d = (unsigned)(id % EVENT_KINDS_DIRECT);
	if (!m->direct[d].kind) {
		m->direct[d].id = id;
		m->direct[d].kind = (uint8_t)kind;
	}
	return 0;
}

int event_kinds_get(const event_kinds *m, uint64_t id)
{
	unsigned d = (unsigned)(id % EVENT_KINDS_DIRECT);
	if (m->direct[d].kind && m->direct[d].id == id)
		return m->direct[d].kind;
	uint32_t i = strobe_itab_find(&m->ids, &id, sizeof(id));
	return i == UINT32_MAX || i >= m->ckind ? 0 : m->kind[i];
}
