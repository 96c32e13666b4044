// SPDX-License-Identifier: Apache-2.0
/*
 * The times of a tenant's oldest and newest profiles (strobe_store_time_span), for Pyroscope's
 * GetProfileStats, which Grafana asks to tell "no data yet" from "data, but not in this
 * window". Each series' first and last raw point come from the (series, level, time) index, one
 * seek each, so the cost grows with the tenant's series, not with its points. Roll-ups count
 * when no raw point is left (their time is their bucket's start).
 */
#include <errno.h>
#include <sqlite3.h>

#include "backend.h"
#include "store_impl.h"

int strobe_store_time_span(strobe_store *s, const char *tenant, int64_t *oldest, int64_t *newest,
			   strobe_err *err)
{
	STORE_BACKEND_CALL(s, time_span, tenant, oldest, newest, err);
	*oldest = *newest = 0;
	static const char sql[] =
		"SELECT min(a), max(b) FROM (SELECT "
		"(SELECT min(time) FROM points WHERE series = s.id AND level = ?2) AS a, "
		"(SELECT max(time) FROM points WHERE series = s.id AND level = ?2) AS b "
		"FROM series s WHERE s.tenant = ?1)";
	pthread_mutex_lock(&s->mu);
	sqlite3_stmt *q;
	int r = 0;
	if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) {
		r = strobe_errf(err, -EIO, "store: %s", sqlite3_errmsg(s->db));
		goto out;
	}
	/* raw points first: their times are the profiles'; then the finest roll-up left */
	for (int level = 0; level < STORE_LEVELS && r == 0 && !*oldest; level++) {
		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 2, level);
		int st = sqlite3_step(q);
		if (st == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
			*oldest = sqlite3_column_int64(q, 0);
			*newest = sqlite3_column_int64(q, 1);
		} else if (st != SQLITE_ROW && st != SQLITE_DONE) {
			r = strobe_errf(err, -EIO, "store: %s", sqlite3_errmsg(s->db));
		}
	}
	sqlite3_finalize(q);
out:
	pthread_mutex_unlock(&s->mu);
	return r;
}
