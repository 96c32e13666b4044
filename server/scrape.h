/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pull mode: scraping Go-style /debug/pprof endpoints (net/http/pprof) on a schedule, as Parca's
 * and Pyroscope's scrapers do, and handing every profile to the server through one callback.
 *
 * Per target and per round: profile?seconds=N (N seconds of CPU), allocs or heap, mutex, block and
 * goroutine, each a gzipped pprof. The cumulative ones (the alloc_* columns of allocs/heap, all
 * of mutex and block) are turned into deltas between consecutive scrapes with lib/delta.c: the
 * first scrape of such an endpoint only sets the baseline (a heap profile's inuse_* columns,
 * which are snapshots, are still delivered), and a process restart (counters went down) delivers
 * the counts since the restart.
 *
 * Threads: srv_scraper_start runs one thread per target; the ingest callback is called from
 * those threads, concurrently for different targets, and must be thread-safe.
 * srv_scraper_stop (or _free) stops promptly: transfers in flight are aborted.
 * libcurl: call curl_global_init once in main before any thread exists (the scraper also calls
 * it, which is harmless afterwards).
 *
 * Ownership: the configuration is copied by srv_scraper_new; a profile handed to the ingest
 * callback belongs to the callback, which must strobe_profile_free it.
 */
#ifndef STROBE_SERVER_SCRAPE_H
#define STROBE_SERVER_SCRAPE_H

#include <stdint.h>

#include "strobe/profile.h"

#include "pyroscope.h" /* srv_kv */

#ifdef __cplusplus
extern "C" {
#endif

/* Which endpoints to scrape; 0 in a target means STROBE_SCRAPE_DEFAULT (what Parca and
 * Pyroscope's scrapers take by default: allocs rather than heap, the two hold the same data). */
enum {
	STROBE_SCRAPE_CPU = 1 << 0,       /* profile?seconds=N -> hint "process_cpu" */
	STROBE_SCRAPE_HEAP = 1 << 1,      /* heap              -> "memory" */
	STROBE_SCRAPE_ALLOCS = 1 << 2,    /* allocs            -> "memory" */
	STROBE_SCRAPE_MUTEX = 1 << 3,     /* mutex             -> "mutex" */
	STROBE_SCRAPE_BLOCK = 1 << 4,     /* block             -> "block" */
	STROBE_SCRAPE_GOROUTINE = 1 << 5, /* goroutine         -> "goroutine" */
};
#define STROBE_SCRAPE_DEFAULT                                                                     \
	(STROBE_SCRAPE_CPU | STROBE_SCRAPE_ALLOCS | STROBE_SCRAPE_MUTEX | STROBE_SCRAPE_BLOCK |   \
	 STROBE_SCRAPE_GOROUTINE)

/* Receives one scraped profile (ownership passes to the callee). type_name_hint is the profile
 * name for strobe_profile_name ("process_cpu", "memory", "mutex", "block", "goroutine");
 * labels are the target's (with instance and service_name filled in); t_ns is the start of the
 * window the values cover and dur_ns its length (0 for a snapshot such as goroutines, and for
 * the gauge columns of a heap profile, which come in a call of their own stamped with the time
 * of their scrape, after the call with the counters' delta). Returns 0
 * or -errno (counted as a scrape error of that endpoint). */
typedef int (*srv_scrape_ingest_fn)(void *ctx, const char *type_name_hint,
				       const srv_kv *labels, size_t nlabels, strobe_profile *p,
				       int64_t t_ns, int64_t dur_ns);

typedef struct srv_scrape_target {
	const char *url;         /* "http://host:port", optionally with a path before /debug/pprof */
	const srv_kv *labels; /* series labels; "instance" defaults to host:port and
				    "service_name" to the instance */
	size_t nlabels;
	int64_t interval_ns;     /* between round starts; 0 = 15 s */
	uint32_t profiles;       /* STROBE_SCRAPE_* bits; 0 = STROBE_SCRAPE_DEFAULT */
	uint32_t cpu_seconds;    /* N of profile?seconds=N; 0 = interval - 1 s (at least 1) */
	int64_t timeout_ns;      /* per request, on top of N seconds for the CPU profile; 0 = 10 s */
	size_t max_response;     /* bytes of one response body; 0 = 64 MiB */
} srv_scrape_target;

typedef struct srv_scrape_config {
	const srv_scrape_target *targets;
	size_t ntargets;
	const char *path_prefix; /* NULL = "/debug/pprof" */
	srv_scrape_ingest_fn ingest;
	void *ctx;
	/* The one log hook: each failed endpoint, one line (may be NULL). */
	void (*log)(void *ctx, const char *msg);
} srv_scrape_config;

typedef struct srv_scraper srv_scraper;

/* Validates and copies cfg. NULL with errno set (EINVAL with a message in err for a bad target:
 * not http(s), no host, negative interval). */
srv_scraper *srv_scraper_new(const srv_scrape_config *cfg, strobe_err *err);
/* Stops the threads if running, then frees. */
void srv_scraper_free(srv_scraper *s);

/* One round for one target, synchronously in the calling thread (for tests and "scrape now"):
 * every enabled endpoint in turn. Returns 0 when all succeeded, else the first failure's -errno
 * with its message in err (the other endpoints are still scraped). */
int srv_scraper_scrape(srv_scraper *s, size_t target, strobe_err *err);

/* One thread per target, each running a round every interval. -EALREADY if running. */
int srv_scraper_start(srv_scraper *s);
/* Stops and joins the threads; transfers in flight are aborted. Safe to call twice. */
void srv_scraper_stop(srv_scraper *s);

typedef struct srv_scrape_status {
	uint64_t rounds, errors; /* completed rounds; failed endpoint scrapes */
	int64_t last_round_ns;   /* unix ns of the last round's start, 0 = none */
	char last_error[256];    /* the latest failure, "" when none */
} srv_scrape_status;
int srv_scraper_status(srv_scraper *s, size_t target, srv_scrape_status *st);

/* A copy of the last raw (cumulative, as scraped) profile of one endpoint (a single
 * STROBE_SCRAPE_* bit) of a target, for checks and debugging: 0 and *out, or -ENOENT before the
 * first successful scrape of it. */
int srv_scraper_last_raw(srv_scraper *s, size_t target, uint32_t endpoint,
			    strobe_profile **out);

#ifdef __cplusplus
}
#endif
#endif
