// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the time ordering of records (agent/record_order.c): records held out of order
 * are handed on in time order, those of one time in the order they were held, only those older
 * than the cutoff; the rest wait, compacted, for a later flush; a record held while a flush hands
 * records on waits too; one that comes after its time was handed on is counted late.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/record_order.h"

/* A record: its header, then its time and a tag, and as many more bytes as asked. */
typedef struct rec {
	struct perf_event_header h;
	int64_t time;
	uint64_t tag;
} rec;

static void hold(rec_order *o, int64_t time, uint64_t tag, size_t len)
{
	uint8_t *d = order_hold(o, time, len);
	assert_non_null(d);
	memset(d, 0xab, len);
	rec r = {.h = {.type = 1, .size = (uint16_t)len}, .time = time, .tag = tag};
	memcpy(d, &r, sizeof(r));
}

typedef struct got {
	uint64_t tag[64];
	int n;
	rec_order *o;      /* to hold from within the flush */
	int hold_at;       /* after this many records, hold one more (-1: never) */
} got;

static void take(void *ctx, const struct perf_event_header *h)
{
	got *g = ctx;
	rec r;
	memcpy(&r, h, sizeof(r));
	assert_int_equal(r.h.type, 1);
	if (g->n < 64)
		g->tag[g->n] = r.tag;
	g->n++;
	if (g->n == g->hold_at)
		hold(g->o, 25, 99, 2 << 20); /* newer than the cutoff: waits; the arena moves */
}

static void test_order_and_rest(void **state)
{
	rec_order o = {0};
	/* times out of order, as from several rings; two records at time 20 */
	hold(&o, 30, 1, sizeof(rec));
	hold(&o, 10, 2, 4096);
	hold(&o, 20, 3, sizeof(rec));
	hold(&o, 50, 4, 4096);
	hold(&o, 20, 5, sizeof(rec));
	hold(&o, 40, 6, sizeof(rec));
	got g = {.hold_at = -1};
	order_flush_until(&o, 35, take, &g);
	assert_int_equal(g.n, 4);
	assert_int_equal(g.tag[0], 2); /* 10 */
	assert_int_equal(g.tag[1], 3); /* 20, held first */
	assert_int_equal(g.tag[2], 5); /* 20 */
	assert_int_equal(g.tag[3], 1); /* 30 */
	assert_int_equal(o.npend, 2);
	assert_int_equal(order_bytes(&o), 4096 + sizeof(rec)); /* compacted */
	assert_int_equal(o.horizon_ns, 35);
	assert_int_equal(o.late, 0);
	/* the rest, intact after the compaction, with a late one among them */
	hold(&o, 30, 7, sizeof(rec));
	g = (got){.hold_at = -1};
	order_flush_until(&o, 100, take, &g);
	assert_int_equal(g.n, 3);
	assert_int_equal(g.tag[0], 7);
	assert_int_equal(g.tag[1], 6);
	assert_int_equal(g.tag[2], 4);
	assert_int_equal(o.late, 1);
	assert_int_equal(o.npend, 0);
	assert_int_equal(order_bytes(&o), 0);
	/* nothing held: the horizon still moves */
	order_flush_until(&o, 200, take, &g);
	assert_int_equal(o.horizon_ns, 200);
	order_free(&o);
}

static void test_hold_during_flush(void **state)
{
	rec_order o = {0};
	/* 3 MB of records in a 4 MB arena: the 2 MB one held during the flush moves the arena */
	for (int i = 0; i < 5000; i++)
		hold(&o, 1 + i % 20, (uint64_t)i, i % 7 == 0 ? 4096 : sizeof(rec));
	got g = {.o = &o, .hold_at = 3};
	order_flush_until(&o, 21, take, &g);
	assert_int_equal(g.n, 5000); /* not the one held meanwhile */
	assert_int_equal(o.npend, 1);
	g = (got){.hold_at = -1};
	order_flush_until(&o, 30, take, &g);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.tag[0], 99);
	order_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_rest),
		cmocka_unit_test(test_hold_during_flush),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
