/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the embedded store, shared by its files: the in-memory mirror of the symbol tables
 * and series (so ingest never SELECTs per frame or per series), the point blob codec, and the
 * SQLite statements.
 */
#ifndef STROBE_STORE_IMPL_H
#define STROBE_STORE_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "strobe/store.h"
#include "strobe/wire.h"
#include "backend.h"

/* Roll-up levels: 0 raw, 1 one minute, 2 one hour. A raw row's `rolled` bit (1 << (level-1))
 * says it has been folded into that level's roll-up row of its bucket. */
#define STORE_LEVELS 3
extern const int64_t store_level_width[STORE_LEVELS];
/* The `rolled` value of a raw row folded into every level; the partial index points_unrolled
 * holds the raw rows short of it (few: those of buckets not yet compacted), so that a query
 * finds the raw points a roll-up does not cover yet without visiting every raw point under the
 * roll-ups it reads (a 24-h flame graph visited all 8,640 points of each series for that). */
#define STORE_ROLLED_ALL "3"

/* Per-point totals, so that a range (query.c) sums small rows instead of decoding profiles:
 * (series, level, time) -> (points, sum of their values). Level 0 is each point's own time (two
 * points of one series at one time share a row), levels 1 and 2 the start of its minute and
 * hour, as the roll-ups; all three are written with the point, in its transaction (commit.c),
 * and deleted with it by retention. They are never folded: a bucket's row is complete as soon
 * as its points are committed, compacted or not.
 *
 * A minute's row also lists its points (pts: per point, varints of its offset in the minute in
 * ns, its count and its zigzag total), so that a range whose step boundaries cut minutes (any
 * window not on whole minutes) splits a cut minute from its one row instead of seeking its
 * points' rows one by one. The list is appended to by the upsert (SQLite's || joins blobs byte
 * for byte; the CAST keeps the result a blob) and given up (an empty blob) past STORE_PTS_MAX
 * bytes, so a busy minute (many processes' points) costs no quadratic rewriting; NULL marks a
 * row written without a list: before the column existed, by an older server, or re-summed by
 * retention. A reader falls back to the points' own rows when the list is NULL, empty or does
 * not add up to the row (an older server that added to the row without appending).
 *
 * An hour's row lists its points the same way (offsets in the hour), up to STORE_HOUR_PTS_MAX
 * bytes (a series pushing every 10 s: 360 entries of about 12 bytes), so that a range whose
 * steps cut hours (any step under an hour, or not on whole hours: the UI's 24 h at 240 steps)
 * reads one row per hour and series, its points put in their steps from the list, instead of
 * sixty minute rows: 12,000 rows instead of 720,000 for the 24 h of 500 series. An hour
 * without a usable list is read from its minutes as before. Older servers bind NULL for the
 * hour's list, so an hour they add a point to loses its list (NULL) rather than keeping one
 * that misses the point; the hours without one are filled from their level-0 rows at open
 * (hour_lists.c), and by retention for the hour it cuts. */
#define STORE_PTS_MAX 1024
#define STORE_HOUR_PTS_MAX 8192
/* The cap of a level's list (0: that level keeps none). */
static inline int store_pts_cap(int level)
{
	return level == 1 ? STORE_PTS_MAX : level == 2 ? STORE_HOUR_PTS_MAX : 0;
}
#define STORE_STR_(x) #x
#define STORE_STR(x) STORE_STR_(x)
#define STORE_TOTALS_SCHEMA                                                                       \
	"CREATE TABLE IF NOT EXISTS totals(series INT NOT NULL, level INT NOT NULL,"             \
	" time INT NOT NULL, n INT NOT NULL, total INT NOT NULL, pts BLOB,"                        \
	" PRIMARY KEY(series, level, time)) WITHOUT ROWID;"
/* The upsert's rule for a row's list (?6: the new entries, ?7: the level's cap): NULL stays NULL
 * (a row written without a list), an empty blob marks a list given up past the cap and stays
 * so, anything else is appended to. */
#define STORE_PTS_APPEND                                                                          \
	"pts = CASE WHEN pts IS NULL OR excluded.pts IS NULL THEN NULL WHEN length(pts) = 0 OR "   \
	"length(excluded.pts) = 0 OR length(pts) + length(excluded.pts) > ?7 THEN X'' "           \
	"ELSE CAST(pts || excluded.pts AS BLOB) END"
#define STORE_TOTALS_UPSERT                                                                       \
	"INSERT INTO totals(series, level, time, n, total, pts) VALUES(?1,?2,?3,?4,?5,"           \
	"CASE WHEN length(?6) > ?7 THEN X'' ELSE ?6 END) "                                         \
	"ON CONFLICT(series, level, time) DO UPDATE SET n = n + excluded.n, "                     \
	"total = total + excluded.total, " STORE_PTS_APPEND
/* One point's entry of a minute's list into buf (at least STORE_PTS_ENTRY_MAX bytes); its
 * length. */
#define STORE_PTS_ENTRY_MAX 30
size_t store_pts_entry(uint8_t *buf, int64_t off, int64_t n, int64_t total);
/* Decodes one entry at *pos of a list of len bytes; 0, or -EIO when malformed (a varint cut
 * short or longer than 64 bits). Inline, on the protobuf wire helpers: a range over the hours'
 * lists decodes hundreds of thousands of entries. */
static inline int store_pts_next(const uint8_t *in, size_t len, size_t *pos, int64_t *off,
				 int64_t *n, int64_t *total)
{
	if (*pos > len)
		return -EIO;
	strobe_wire r = {in + *pos, in + len};
	uint64_t a, b, c;
	if (!strobe_wire_varint(&r, &a) || !strobe_wire_varint(&r, &b) ||
	    !strobe_wire_varint(&r, &c))
		return -EIO;
	*pos = (size_t)(r.p - in);
	*off = (int64_t)a;
	*n = (int64_t)b;
	*total = strobe_wire_unzigzag(c);
	return 0;
}
int store_totals_add(sqlite3 *db, sqlite3_stmt *ins, int64_t series, int64_t time, int64_t n,
		     int64_t total, strobe_err *err);
/* The start of time's bucket at a level (level 0: time itself). */
int64_t store_bucket_of(int64_t time, int level);
/* One upsert of a totals row through `up` (either table's: key, level, time, n, total, the
 * points list pts[0..plen) or NULL at level 0, the list's cap); what names the table in err. */
int store_totals_upsert(sqlite3 *db, sqlite3_stmt *up, int64_t key, int level, int64_t t,
			int64_t n, int64_t total, const uint8_t *pts, size_t plen, const char *what,
			strobe_err *err);

/* Group totals (groups.c): the same rows as the totals table, summed at ingest over every series
 * of a (tenant, profile type, value of one roll-up label) -- a "group" -- and over every series
 * of a (tenant, type) (the label ""), so that a range of the whole fleet grouped by service
 * reads one row per service and minute instead of one per series and minute. Counters only: a
 * gauge's range is a mean per series, which a sum over series cannot give back; ranges with a
 * gauge series, a function, or a selector or group-by on other labels keep the series rows.
 * Level 0 rows hold every exact point time of the group (two points at one time share one), so
 * a cut minute without a usable list is split from them, as a series' is from its own. */
#define STORE_NGROUPS 2
extern const char *const store_group_labels[STORE_NGROUPS]; /* "" (all series), service_name */
#define STORE_GROUPS_SCHEMA                                                                       \
	"CREATE TABLE IF NOT EXISTS rgroups(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL,"        \
	" type TEXT NOT NULL, label TEXT NOT NULL, value TEXT NOT NULL);"                          \
	"CREATE TABLE IF NOT EXISTS gtotals(grp INT NOT NULL, level INT NOT NULL,"               \
	" time INT NOT NULL, n INT NOT NULL, total INT NOT NULL, pts BLOB,"                        \
	" PRIMARY KEY(grp, level, time)) WITHOUT ROWID;"
#define STORE_GTOTALS_UPSERT                                                                      \
	"INSERT INTO gtotals(grp, level, time, n, total, pts) VALUES(?1,?2,?3,?4,?5,"              \
	"CASE WHEN length(?6) > ?7 THEN X'' ELSE ?6 END) "                                         \
	"ON CONFLICT(grp, level, time) DO UPDATE SET n = n + excluded.n, "                        \
	"total = total + excluded.total, " STORE_PTS_APPEND
/* One point's share of the group rows: its group ids (0: none), time and total. */
typedef struct store_grec {
	int64_t grp, time, n, total; /* n: points (at that time) */
} store_grec;
/* Under mu: the group ids of series se into grp (0 for each when se is a gauge), creating the
 * groups first seen (in memory; written by the next commit). 0 or -ENOMEM. */
struct store_series;
int store_series_groups(strobe_store *s, struct store_series *se, int64_t grp[STORE_NGROUPS]);
/* Through db, in the caller's transaction: under mu, the rows of the groups not yet in the
 * database (those from s->gsaved on; *upto: where they end, s->gsaved once committed); then,
 * without mu, the group rows of n records (sorted here; summed per row before each upsert). */
int store_groups_save(strobe_store *s, sqlite3 *db, size_t *upto, strobe_err *err);
int store_gtotals_add(sqlite3 *db, store_grec *rec, size_t n, strobe_err *err);
/* At open, after the series are loaded: the groups into memory, and a store without the group
 * tables gets them built from its totals, in one transaction. */
int store_groups_open(strobe_store *s, strobe_err *err);
/* Retention (maint.c, in its transaction): group rows before cutoff, the straddling buckets
 * summed again from their level-0 rows. */
int store_groups_retain(strobe_store *s, int64_t cutoff, strobe_err *err);
/* hour_lists.c: the hour lists that are NULL (level 2 of totals, or of gtotals when groups),
 * for the keys given, at hours in [from, to), made from their level-0 rows; *filled (when not
 * NULL) grows by how many. In the caller's transaction. */
int store_hour_lists_fill(sqlite3 *db, bool groups, const int64_t *keys, size_t nkeys,
			  int64_t from, int64_t to, size_t *filled, strobe_err *err);
/* The same for every live series and every group, through s->db, under mu. */
int store_hour_lists_range(strobe_store *s, int64_t from, int64_t to, size_t *filled,
			   strobe_err *err);
/* At open, after the groups: every hour without its list gets one, in one transaction. */
int store_hour_lists_open(strobe_store *s, strobe_err *err);
/* The id of a group, 0 when it has none (no point of it was ever stored). Under mu. */
int64_t store_group_find(strobe_store *s, const char *tenant, const char *type, const char *label,
			 const char *value);

/* Symbol tables mirrored from SQLite, in the profile model's order. */
enum { TAB_STRINGS, TAB_FUNCTIONS, TAB_MAPPINGS, TAB_LOCATIONS, TAB_STACKS, NTABS };

typedef struct store_series {
	int64_t id;        /* row id == index + 1 */
	char *tenant, *type;
	strobe_labelpair *labels; /* sorted by name; strings in one allocation with the array */
	uint32_t nlabels;
	int64_t period;
	bool gauge, dead;
	bool saved; /* its row is in the database (written by the committer, commit.c) */
	bool has_grp;             /* grp is known */
	int64_t grp[STORE_NGROUPS]; /* its groups' ids (groups.c), 0: none */
} store_series;

/* One push on its way to the disk (commit.c): its points, encoded outside the store's lock,
 * queued for the committer thread, which writes many pushes in one transaction and one fsync
 * and then wakes each of them with the outcome. */
typedef struct store_point {
	size_t series;     /* index into strobe_store.series */
	int64_t series_id; /* its row id (read by the committer without the lock) */
	int64_t time;
	int64_t total; /* the sum of its values (the totals table) */
	uint8_t *blob;
	size_t blen;
	char *slabels; /* its sample labels as name\0value\0... (sorted by name); NULL: none */
	size_t slen;
	int64_t grp[STORE_NGROUPS]; /* its series' groups (groups.c), 0: none */
} store_point;
typedef struct store_pending {
	store_point *pt;
	size_t npt;
	struct store_pending *next;
	pthread_cond_t cv; /* signalled by the committer when done (under qmu) */
	bool done;
	int r;
	strobe_err err;
} store_pending;

struct strobe_store {
	/* Another backend (backend.h) when set: every public call goes to be->fn(be_ctx, ...) and
	 * nothing below is used. */
	const store_backend *be;
	void *be_ctx;
	sqlite3 *db; /* queries, maintenance, loading: used under mu */
	pthread_mutex_t mu;
	/* Group commit (commit.c): pushes queue here and a committer thread writes them through
	 * its own connection, many per transaction. */
	sqlite3 *wdb;
	pthread_mutex_t qmu;
	pthread_cond_t qcv;
	store_pending *qhead, **qtail;
	bool qstop, committer_on;
	pthread_t committer;
	uint64_t ncommits, ncommitted; /* transactions, pushes in them (under qmu) */
	/* Held shared by every push from mapping its stacks until its commit returned (its
	 * encoded points hold store ids meanwhile); anything that renumbers symbol ids (a
	 * garbage collection of symbols) must hold it exclusively, taken before mu. Writers are
	 * preferred, so a steady stream of pushes cannot starve it. */
	pthread_rwlock_t ids_lock;
	strobe_store_opts o;
	char *dir;
	/* Every string, function, mapping, location and stack ever stored: ids here are row ids in
	 * SQLite. saved[t] = how many entries of table t are in the database (the rest were
	 * interned by a push whose transaction failed and are written by the next one). */
	strobe_profile *sym;
	uint32_t saved[NTABS];
	store_series *series;
	size_t nseries, capseries;
	strobe_itab series_key; /* "tenant\0type\0name\0value\0..." -> index */
	bool use_rollups;
	bool use_totals; /* ranges read the totals table (query.c) */
	int64_t last_gc_ns; /* when symbol gc last ran (symgc.c) */
	/* Whole stacks already mapped (ingest_view.c): their store location ids, root first ->
	 * index into seq_stack, the store's stack id. Valid as long as the symbol ids are:
	 * emptied when they are renumbered, and when it outgrows its cap. */
	strobe_itab seq;
	uint32_t *seq_stack;
	size_t seq_cap;
	bool use_span_index; /* span_id/trace_id queries read the span index (spans.c) */
	/* Groups of series (groups.c): key "tenant\0type\0label\0value" -> index, id = index + 1;
	 * those from gsaved on are not in the database yet. */
	strobe_itab group_key;
	size_t gsaved;
	bool use_group_totals; /* ranges may read the group totals (query.c) */
	bool use_hour_lists;   /* ranges read the hours' lists (hour_lists.c, query.c) */
};

static inline uint32_t tab_n(const strobe_profile *p, int t)
{
	const strobe_itab *tabs[NTABS] = {&p->strings, &p->functions, &p->mappings, &p->locations,
					  &p->stacks};
	return tabs[t]->n;
}

/* One point's (stack id, value) pairs, sorted by stack, no zero values. */
typedef struct store_pair {
	uint32_t stack;
	int64_t value;
} store_pair;

/* zstd of varints; *out malloc'd. */
/* Distinct sample label sets one series lists for the label APIs (a text for the SQL): a
 * bound on a window's reading, as the query caps bound a query's. */
#define STORE_SLABELS_LISTED "10000"
/* The sample labels of a stored point (points.slabels: name\0value\0..., sorted by name)
 * into l (at most cap pairs, pointing into in); the count, or -EIO when malformed. */
int store_slabels_decode(const char *in, size_t len, strobe_labelpair *l, size_t cap);
int store_blob_encode(const store_pair *p, size_t n, uint8_t **out, size_t *len);
/* Decodes into *buf (grown with realloc, capacity *cap); stacks are checked < nstacks. */
int store_blob_decode(const uint8_t *in, size_t len, uint32_t nstacks, store_pair **buf,
		      size_t *cap, size_t *n);

/* Grows a scratch array of lines to hold n (the locations of one profile are copied through it
 * one at a time); 0 or -ENOMEM. */
static inline int store_lines_reserve(strobe_line **lines, size_t *cap, size_t n)
{
	if (n <= *cap)
		return 0;
	strobe_line *nl = realloc(*lines, n * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	*lines = nl;
	*cap = n;
	return 0;
}

/* Maps of one profile's ids to another's (a push into the store's tables, the store's tables
 * into a query's result), filled lazily; 0 = not yet mapped (id 0 always maps to 0). */
typedef struct store_remap {
	uint32_t *str, *fn, *map, *loc, *stack;
	strobe_line *lines;
	size_t lcap;
} store_remap;
int store_remap_init(store_remap *m, const strobe_profile *src);
void store_remap_free(store_remap *m);
/* The stack `id` of src, copied with its locations, functions, mappings and strings into dst;
 * UINT32_MAX on ENOMEM. */
uint32_t store_map_stack(strobe_profile *dst, const strobe_profile *src, store_remap *m,
			 uint32_t id);

/* query.c: the group of a series with labels l in a range answer (group_by: names separated
 * by commas), added to out the first time; shared with the ClickHouse backend. */
int store_range_group(strobe_itab *groups, const strobe_labelpair *l, size_t nl,
		      const char *group_by, strobe_range_result *out, uint32_t *g);
/* ingest_view.c, under mu: the store stack id of each sample of a simple pprof view into
 * gst[1..nsamples], interning what is new; 0 or -ENOMEM. */
int store_map_view(strobe_store *s, const struct strobe_pprof_view *v, uint32_t *gst);
void store_seq_reset(strobe_store *s);

/* db.c: SQL run, and SQLite's failures as -errno (-ENOSPC: the disk is full) with a message. */
int store_exec(strobe_store *s, const char *sql, strobe_err *err);
/* Symbol gc with the lock held (symgc.c); the number of rows freed or -errno. */
int store_gc_locked(strobe_store *s, int64_t now_ns, strobe_err *err);
/* store/exemplars.c: x into a step's k slots (heaviest first) if it is heavy enough; both stores'
 * exemplar lists use it. */
void store_exemplar_keep(strobe_exemplar *slot, size_t k, const strobe_exemplar *x);
#define STORE_GC_INTERVAL (3600 * STROBE_NS_PER_S)
int store_sqlerr(strobe_store *s, strobe_err *err, const char *what);
int store_dberr(sqlite3 *db, strobe_err *err, const char *what);
int store_db_exec(sqlite3 *db, const char *sql, strobe_err *err);
/* Opens DIR/strobe.db with the store's pragmas (WAL, synchronous as configured). */
int store_db_open(strobe_store *s, sqlite3 **db, strobe_err *err);
/* The database file checked at open, as the store's check option asks (off, quick, full). */
int store_db_check(strobe_store *s, strobe_err *err);

/* rows.c: p's symbol rows from saved[t] up to n[t] (n NULL: all) of each table, and one
 * series' rows, through db; for the committer (under the store's lock) and symgc.c. */
int store_save_symbols(strobe_store *s, sqlite3 *db, const strobe_profile *p,
		       const uint32_t *saved, const uint32_t *n, strobe_err *err);
int store_series_write(strobe_store *s, sqlite3 *db, store_series *se, strobe_err *err);
/* Whether series se has a point in [from, to) that passes the selector's matchers on sample
 * labels it lacks (points.slabels): 1 yes (also when it has no such matcher), 0 no, <0 error. */
int store_series_sample_match(strobe_store *s, const strobe_selector *sel, const store_series *se,
			      int64_t from, int64_t to, strobe_err *err);

/* commit.c: start and stop the committer; hand it a push and wait until it is durable (0) or
 * failed (-errno, nothing of it stored). */
int store_committer_start(strobe_store *s, strobe_err *err);
void store_committer_stop(strobe_store *s);
int store_commit_wait(strobe_store *s, store_pending *p, strobe_err *err);
/* Series matching: indices of live series of the tenant that match q (type and matchers). */
int store_match_series(strobe_store *s, const char *tenant, const strobe_selector *sel,
		       size_t **out, size_t *n, strobe_err *err);

/* spans.c: the span index, (kind 0 span_id / 1 trace_id, ID) -> raw points carrying it. */
#define STORE_SPAN_SCHEMA                                                                         \
	"CREATE TABLE IF NOT EXISTS span_index(kind INT NOT NULL, id TEXT NOT NULL,"              \
	" point INT NOT NULL, series INT NOT NULL, time INT NOT NULL,"                            \
	" PRIMARY KEY(kind, id, point)) WITHOUT ROWID;"                                           \
	"CREATE INDEX IF NOT EXISTS span_index_by_time ON span_index(time);"
#define STORE_SPAN_INSERT                                                                         \
	"INSERT OR IGNORE INTO span_index(kind, id, point, series, time) VALUES(?1,?2,?3,?4,?5)"
/* Creates the index at open; a database without it gets it filled from its points. */
int store_span_migrate(strobe_store *s, strobe_err *err);
/* The index rows of raw point `point` (its sample labels slabels), through ins
 * (STORE_SPAN_INSERT prepared on db). */
int store_span_index_add(sqlite3 *db, sqlite3_stmt *ins, int64_t point, int64_t series,
			 int64_t time, const char *slabels, size_t slen, strobe_err *err);
typedef struct store_span_hit {
	int64_t series, point;
} store_span_hit;
typedef struct store_span_plan_t {
	bool active;      /* the selector's span matcher is answered by the index */
	const char *name; /* that matcher's label name */
	store_span_hit *hit; /* sorted by (series, point), distinct */
	size_t n;
} store_span_plan_t;
/* Under mu: the points of [from, to) the index gives for sel's span_id/trace_id matcher, when
 * it has one the index can answer (else out->active is false). */
int store_span_plan(strobe_store *s, const strobe_selector *sel, int64_t from, int64_t to,
		    store_span_plan_t *out, strobe_err *err);
void store_span_plan_free(store_span_plan_t *p);
/* query.c: whether a point of se with these sample labels passes sel's matchers on them (*bad:
 * the labels are corrupt); whether se is the tenant's and matches sel. */
bool store_point_passes(const strobe_selector *sel, const store_series *se, const void *slabels,
			size_t len, bool *bad);
bool store_series_ok(const store_series *se, const char *tenant, const strobe_selector *sel);

#endif
