/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbol garbage collection on ClickHouse: deletes the stacks, locations and functions that no
 * stored point (raw or roll-up) reaches any more, as the SQLite store's store/symgc.c does
 * after retention dropped points (at most once an hour, and when asked).
 *
 * How it differs from SQLite's, and why:
 *   - No renumbering: ids are content hashes, the same on every strobe server, so the live
 *     symbols keep theirs and no point is rewritten; the dead rows are deleted with
 *     `ALTER TABLE ... DELETE` (18.16's mutations: each part holding a dead row is rewritten
 *     once, in the background; lightweight deletes are ClickHouse >= 23.3).
 *   - What is live is read through the Distributed tables: a push's symbols are written to its
 *     shard only when this server had not written them before, to any shard, so a shard's
 *     points may use symbols stored on another. A shard down fails the collection (-EAGAIN)
 *     rather than count its points as gone.
 *   - No transaction and other servers writing meanwhile: a push writes its symbols, then its
 *     points. A symbol is deleted only when it was unreached in a first mark and still is when
 *     its mutation runs, CH_GC_GRACE_MS later (the delete's condition asks again), so a push
 *     in flight has that long between its symbols and its points. Another strobe server may
 *     remember a symbol as stored after it was collected (ch_known): it forgets what it knows
 *     every CH_KNOWN_TTL_S (ch_push.c), and could only name such a symbol in that time if the
 *     points it wrote with it had expired already.
 * The candidates of a run are at most CH_GC_MAX ids per table; the rest go at the next run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ch.h"

#define CH_GC_MAX 1000000u

/* The live ids of each table, as SQL (%1$s: the points table, %2$s: the roll-ups', %3$s:
 * stacks, %4$s: locations, all Distributed with a cluster). A location is live when a live
 * stack holds it, a function when a live location does. GLOBAL IN: the set is read once, by
 * the host asked, and sent to the shards (a plain IN of a Distributed table inside a
 * distributed query is refused: "double-distributed"). */
#define LIVE_STACKS "SELECT arrayJoin(stacks) FROM %1$s UNION ALL SELECT arrayJoin(`stacksMap.stack`) FROM %2$s"
#define LIVE_LOCS "SELECT arrayJoin(locations) FROM %3$s WHERE id GLOBAL IN (" LIVE_STACKS ")"
#define LIVE_FUNCS "SELECT arrayJoin(functions) FROM %4$s WHERE id GLOBAL IN (" LIVE_LOCS ")"
/* A stack is also kept when it is a prefix (an ancestor) of a live one: a push stores every
 * node of its stack tree, and a server that remembers an ancestor as stored would not write it
 * again when a sample lands on it. Prefixes are compared by a hash of their location ids (ids
 * are hashes of the parent's id, which SQL cannot recompute). */
#define LIVE_PREFIXES "SELECT cityHash64(arraySlice(locations, 1, k)) FROM %3$s ARRAY JOIN " \
	"arrayEnumerate(locations) AS k WHERE id GLOBAL IN (" LIVE_STACKS ")"
static const struct {
	const char *base, *dead; /* the condition of a dead row */
} gtab[] = {
	{"stacks", "id GLOBAL NOT IN (" LIVE_STACKS ") AND cityHash64(locations) GLOBAL NOT IN ("
		   LIVE_PREFIXES ")"},
	{"locations", "id GLOBAL NOT IN (" LIVE_LOCS ")"},
	{"functions", "id GLOBAL NOT IN (" LIVE_FUNCS ")"},
};
#define NG (sizeof(gtab) / sizeof(gtab[0]))

static int dead_sql(ch_store *c, size_t t, strobe_buf *b)
{
	char p[128], m[128], s[128], l[128];
	return strobe_buf_addf(b, gtab[t].dead, ch_tab(c, "points", p, sizeof p),
			       ch_tab(c, "points_1m", m, sizeof m), ch_tab(c, "stacks", s, sizeof s),
			       ch_tab(c, "locations", l, sizeof l));
}

/* The ids of table t (through the Distributed table) that nothing live reaches. */
static int candidates(ch_store *c, size_t t, uint64_t **ids, size_t *n, strobe_err *err)
{
	char tab[128];
	strobe_buf sql, out;
	strobe_buf_init(&sql, 1u << 20);
	strobe_buf_init(&out, (size_t)CH_GC_MAX * 8 + 64);
	int r = strobe_buf_addf(&sql, "SELECT DISTINCT id FROM %s WHERE ",
				ch_tab(c, gtab[t].base, tab, sizeof tab));
	if (r == 0)
		r = dead_sql(c, t, &sql);
	if (r == 0)
		r = strobe_buf_addf(&sql, " LIMIT %u FORMAT RowBinary", CH_GC_MAX);
	if (r < 0)
		r = strobe_errf(err, -ENOMEM, "symbol gc: out of memory");
	else
		r = ch_exec(c, sql.p, NULL, 0, &out, err);
	*n = 0;
	*ids = NULL;
	if (r == 0 && out.len) {
		if (out.len % 8 || !(*ids = malloc(out.len))) {
			r = strobe_errf(err, out.len % 8 ? -EIO : -ENOMEM,
					"symbol gc: an answer of %zu bytes is not ids", out.len);
		} else {
			rb_rd rd = rd_of(&out);
			while (rd_more(&rd))
				(*ids)[(*n)++] = rd_u64(&rd);
		}
	}
	strobe_buf_free(&sql);
	strobe_buf_free(&out);
	return r;
}

/* On every host: delete the candidates of table t that are still unreached. */
static int delete_dead(ch_store *c, size_t t, const uint64_t *ids, size_t n, strobe_err *err)
{
	char tab[128];
	strobe_buf sql;
	strobe_buf_init(&sql, 64u << 20);
	int r = strobe_buf_addf(&sql, "ALTER TABLE %s DELETE WHERE id IN (",
				ch_local(c, gtab[t].base, tab, sizeof tab));
	if (r == 0)
		r = ch_ids(&sql, ids, n);
	if (r == 0)
		r = strobe_buf_adds(&sql, ") AND ");
	if (r == 0)
		r = dead_sql(c, t, &sql);
	if (r < 0)
		r = strobe_errf(err, -ENOMEM, "symbol gc: out of memory");
	/* every host holds some symbols of its shard; a host down keeps its dead ones until the
	 * next run, but the first failure is reported */
	int first = 0;
	for (size_t h = 0; r == 0 && h < c->nhosts; h++) {
		strobe_err e = {{0}};
		int hr = ch_exec_on(c, h, sql.p, NULL, 0, NULL, &e);
		if (hr < 0 && !first) {
			first = hr;
			strobe_errf(err, hr, "symbol gc: %s", e.msg);
		}
	}
	strobe_buf_free(&sql);
	return r < 0 ? r : first;
}

int ch_gc(void *ctx, int64_t now_ns, strobe_err *err)
{
	ch_store *c = ctx;
	uint64_t *ids[NG] = {0};
	size_t n[NG] = {0}, freed = 0;
	int r = 0;
	for (size_t t = 0; r == 0 && t < NG; t++)
		r = candidates(c, t, &ids[t], &n[t], err);
	for (size_t t = 0; r == 0 && t < NG; t++)
		freed += n[t];
	if (r == 0 && freed) {
		/* the grace for pushes in flight between their symbols and their points */
		struct timespec ts = {CH_GC_GRACE_MS / 1000, (CH_GC_GRACE_MS % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	for (size_t t = 0; r == 0 && t < NG; t++)
		if (n[t])
			r = delete_dead(c, t, ids[t], n[t], err);
	for (size_t t = 0; t < NG; t++)
		free(ids[t]);
	if (r == 0) {
		pthread_mutex_lock(&c->mu);
		c->last_gc_ns = now_ns;
		/* what this server remembers as stored may be among what was deleted */
		ch_known_free(&c->known_sym);
		pthread_mutex_unlock(&c->mu);
	}
	return r < 0 ? r : (int)(freed > 0x7fffffff ? 0x7fffffff : freed);
}
