// SPDX-License-Identifier: Apache-2.0
/*
 * The embedded store's SQLite connections, for every file of the store: opening one with the
 * store's pragmas, checking the database file before anything is written to it, and turning
 * SQLite's failures into -errno with a message that names what failed (and, for a full disk or
 * a damaged file, what the operator can do). Kept apart from store.c, which opens and loads the
 * store, so that the committer (commit.c) and the other files can use a connection without
 * depending on the code that starts the committer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store_impl.h"

/* What a failed SQLite call means for the caller: -ENOSPC when the disk (or the quota) of the
 * data directory is full, whatever part of SQLite ran into it (a page write, the WAL, the
 * shared-memory index), so the server can say "full, retry later" instead of "internal error";
 * -EIO for the rest. The file's damage gets words of its own: the operator must act. */
static int db_errno(sqlite3 *db, int code)
{
	int se = sqlite3_system_errno(db);
	if ((code & 0xff) == SQLITE_FULL ||
	    ((code & 0xff) == SQLITE_IOERR && (se == ENOSPC || se == EDQUOT)))
		return -ENOSPC;
	return -EIO;
}

static const char *db_hint(int code)
{
	switch (code & 0xff) {
	case SQLITE_FULL: return " (no space left on the data directory's disk)";
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return " (the database file is damaged: see docs/server.md, Recovery)";
	default: return "";
	}
}

int store_sqlerr(strobe_store *s, strobe_err *err, const char *what)
{
	return store_dberr(s->db, err, what);
}

int store_dberr(sqlite3 *db, strobe_err *err, const char *what)
{
	int code = sqlite3_extended_errcode(db);
	return strobe_errf(err, db_errno(db, code), "store: %s: %s%s", what, sqlite3_errmsg(db),
			   db_hint(code));
}

int store_exec(strobe_store *s, const char *sql, strobe_err *err)
{
	return store_db_exec(s->db, sql, err);
}

int store_db_exec(sqlite3 *db, const char *sql, strobe_err *err)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		int code = sqlite3_extended_errcode(db);
		int r = strobe_errf(err, db_errno(db, code), "store: %s%s",
				    msg ? msg : sqlite3_errstr(rc), db_hint(code));
		sqlite3_free(msg);
		return r;
	}
	return 0;
}

int store_db_open(strobe_store *s, sqlite3 **db, strobe_err *err)
{
	size_t pl = strlen(s->o.dir) + 16;
	char *path = malloc(pl);
	if (!path)
		return -ENOMEM;
	snprintf(path, pl, "%s/strobe.db", s->o.dir);
	int r = 0;
	if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		r = strobe_errf(err, -EIO, "store: cannot open %s: %s", path,
				*db ? sqlite3_errmsg(*db) : "out of memory");
	if (r < 0) {
		free(path);
		return r;
	}
	/* Two connections write (the committer's and the one maintenance uses): a writer that
	 * finds the other mid-commit waits for it. */
	sqlite3_busy_timeout(*db, 10000);
	/* A big transaction (a day compacted at once) grows the WAL; once checkpointed it is cut
	 * back to this size instead of staying on disk at its peak. */
	sqlite3_exec(*db, "PRAGMA journal_size_limit=8388608;", NULL, NULL, NULL);
	/* WAL: a commit appends to the log instead of rewriting pages, and readers do not block
	 * the writer. synchronous=FULL fsyncs the log at every commit, so an acknowledged push
	 * survives power loss as well as kill -9. NORMAL in WAL mode survives kill -9 (the log is
	 * in the page cache) but may lose the last commits on power loss, so it is only an opt-in
	 * for hosts where that trade is wanted. Group commit (commit.c) makes FULL cheap: one
	 * fsync covers every push waiting at the time. */
	r = store_db_exec(*db, "PRAGMA journal_mode=WAL;", err);
	if (r == 0)
		r = store_db_exec(*db, s->o.sync_normal ? "PRAGMA synchronous=NORMAL;"
						      : "PRAGMA synchronous=FULL;",
				  err);
	/* The first read of the file: a truncated or overwritten header fails here. */
	if (r < 0) {
		char m[sizeof(err->msg)];
		snprintf(m, sizeof(m), "%s", strncmp(err->msg, "store: ", 7) ? err->msg : err->msg + 7);
		r = strobe_errf(err, r, "store: cannot open %s: %s; the server does not start on it",
				path, m);
	}
	free(path);
	return r;
}

/* Runs one integrity pragma and turns its report into an error naming the file: the first
 * problems SQLite lists, and how many there were. */
static int check_pragma(sqlite3 *db, const char *path, const char *pragma, strobe_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, pragma, -1, &st, NULL) != SQLITE_OK) {
		int code = sqlite3_extended_errcode(db);
		return strobe_errf(err, db_errno(db, code), "store: %s is damaged or not a strobe "
				   "database: %s; the server does not start on it (see docs/server.md, "
				   "Recovery)", path, sqlite3_errmsg(db));
	}
	char first[400] = "";
	size_t fl = 0;
	int rc, nbad = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *line = (const char *)sqlite3_column_text(st, 0);
		if (!line || strcmp(line, "ok") == 0)
			continue;
		if (nbad++ < 3 && fl < sizeof(first) - 1)
			fl += (size_t)snprintf(first + fl, sizeof(first) - fl, "%s%s", fl ? "; " : "",
					       line);
	}
	if (rc != SQLITE_DONE) {
		int code = sqlite3_extended_errcode(db);
		int r = strobe_errf(err, db_errno(db, code), "store: %s is damaged: %s; the server "
				    "does not start on it (see docs/server.md, Recovery)", path,
				    sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return r;
	}
	sqlite3_finalize(st);
	if (nbad)
		return strobe_errf(err, -EIO, "store: %s is damaged (%s found %d problem%s: %s); the "
				   "server does not start on it, so that nothing is silently lost: "
				   "see docs/server.md, Recovery", path, pragma, nbad,
				   nbad == 1 ? "" : "s", first);
	return 0;
}

/* The file checked before the store writes anything to it. A WAL left by a crash is not damage:
 * SQLite reads it with the file. The default check costs about what loading the symbol tables
 * costs anyway (they are read whole at open); the points, the bulk of a large store and never
 * read at open, are checked too while the file is small enough for that to take about a second
 * (measured: 0.7 s per 100 MB from the page cache, 2 s cold, on a busy 2-core machine). */
int store_db_check(strobe_store *s, strobe_err *err)
{
	if (s->o.check == STROBE_STORE_CHECK_OFF)
		return 0;
	const char *path = sqlite3_db_filename(s->db, "main");
	if (s->o.check == STROBE_STORE_CHECK_FULL)
		return check_pragma(s->db, path, "PRAGMA integrity_check", err);
	struct stat sb;
	if (stat(path, &sb) == 0 && (uint64_t)sb.st_size <= STROBE_STORE_CHECK_ALL_MAX)
		return check_pragma(s->db, path, "PRAGMA quick_check", err);
	static const char *const loaded[] = {"sqlite_schema", "strings", "functions", "mappings",
					     "locations", "stacks", "series", "series_labels"};
	for (size_t i = 0; i < sizeof(loaded) / sizeof(*loaded); i++) {
		char q[64];
		snprintf(q, sizeof(q), "PRAGMA quick_check(%s)", loaded[i]);
		int r = check_pragma(s->db, path, q, err);
		/* A store from before a table existed: nothing of it to check. */
		if (r < 0 && !strstr(err->msg, "no such table"))
			return r;
		err->msg[0] = 0;
	}
	return 0;
}
