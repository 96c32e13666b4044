/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profile server: an HTTP API (libmicrohttpd) over a strobe_store, and the parsers it is
 * built from, exported for the CLI, tests and fuzzers: Prometheus-style selectors, times and
 * durations, and the server's configuration file. docs/http-api.md describes the endpoints,
 * docs/server.md the configuration.
 *
 * Parsers take untrusted text with a length cap and return -EINVAL with a message naming the
 * byte offset of the problem.
 */
#ifndef STROBE_SERVER_H
#define STROBE_SERVER_H

#include <stdio.h>

#include "strobe/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_SELECTOR_MAX     4096u /* bytes of selector text */
#define STROBE_SELECTOR_MAX_M   64u   /* matchers in one selector */
#define STROBE_LABEL_NAME_MAX   128u

/* `type{name="value", name!="v", name=~"re", name!~"re"}`; the type and the braces are each
 * optional (but not both absent), a trailing comma is allowed, values take "..." with Go/PromQL
 * escapes, '...' or `...`. out is zeroed on error. */
int strobe_selector_parse(const char *s, size_t len, strobe_selector *out, strobe_err *err);
void strobe_selector_free(strobe_selector *s);
/* Appends name="value" (copied) to a selector: how the server narrows a query it builds itself. */
int strobe_selector_add_eq(strobe_selector *s, const char *name, const char *value);

/* A point in time: unix seconds, milliseconds, microseconds or nanoseconds (told apart by
 * magnitude: up to 10 digits seconds, 13 ms, 16 us, else ns; "1700000000.25" is seconds),
 * RFC 3339 ("2026-11-22T11:59:18.5Z", "...+02:00"), "now", or "now-1h30m" / "now+5m". */
int strobe_time_parse(const char *s, int64_t now_ns, int64_t *out, strobe_err *err);
/* "90s", "1h30m", "250ms", "7d", "2w", or a bare number of seconds. Must be > 0. */
int strobe_duration_parse(const char *s, int64_t *out_ns, strobe_err *err);

typedef struct strobe_tenant_cfg {
	char *id, *token; /* token NULL = none needed */
} strobe_tenant_cfg;

typedef struct strobe_server_config {
	char *listen;   /* "host:port", IPv4 or [IPv6]; default 127.0.0.1:4100 */
	char *data_dir; /* required (the --data option or "data_dir") */
	/* The store: NULL = SQLite in data_dir; "clickhouse://HOST:PORT[,...]/DB[?cluster=C]"
	 * (--store, or "store" in the config: a URL, or a list of URLs that differ only in
	 * their host, joined into one with the hosts in order for failover). */
	char *store;
	int64_t retention_ns;         /* default 28 days; 0 = forever */
	int64_t maintenance_interval_ns; /* compaction + retention period; default 60 s */
	bool sync_normal;             /* "sync": "normal" (default "full") */
	size_t max_body_bytes;        /* request body as sent; default 16 MiB */
	size_t max_decompressed_bytes;/* one profile after gunzip; default 256 MiB */
	uint64_t max_debuginfo_bytes; /* one uploaded debug file, streamed to disk; default 2 GiB */
	/* debuginfod servers asked for debug files not uploaded (space-separated URLs, as
	 * DEBUGINFOD_URLS; "debuginfod_urls", --debuginfod), and the size its cache is kept under
	 * (limits.max_debuginfod_cache_bytes, default 4 GiB). */
	char *debuginfod_urls;
	uint64_t max_debuginfod_cache_bytes;
	uint32_t max_labels, max_label_name_len, max_label_value_len;
	uint32_t max_series_per_tenant, max_profiles_per_push;
	uint32_t max_label_values_per_name; /* per tenant and series label name */
	uint32_t max_stacks;          /* distinct stacks in the store (its memory); 0 = unlimited */
	uint32_t threads;             /* 0 = one per connection (default), N = a pool of N */
	int check_on_start;           /* STROBE_STORE_CHECK_*: "quick" (default), "full", "off" */
	/* Load and slow clients (server/admit.c): open connections; pushes (push, /ingest) and
	 * bytes of request bodies held at once, 503 + Retry-After beyond; a connection idle this
	 * long is closed; a request's headers and body must arrive within request_timeout. */
	uint32_t max_connections;      /* default 1000 */
	uint32_t max_inflight_pushes;  /* default 64 */
	uint64_t max_inflight_bytes;   /* default 256 MiB */
	int64_t connection_timeout_ns; /* default 60 s */
	int64_t request_timeout_ns;    /* default 30 s */
	uint64_t max_query_profiles, max_query_bytes; /* query cost caps (strobe_store_opts) */
	strobe_tenant_cfg *tenants;   /* none = open: any X-Scope-OrgID, no token */
	size_t ntenants;
	char *admin_token; /* bearer token of the admin routes; NULL = open only without tenants */
	char *scrape_json; /* the "scrape" section as JSON text, for the scraper; NULL = none */
	/* "cost" (server/cost_config.c): what a core-hour costs in money and energy, for
	 * /api/v1/cost (docs/cost-and-leaks.md) */
	struct strobe_cost_config {
		double price_per_core_hour; /* dollars; default 0.0425 */
		double watts_per_core;      /* 0 (default) = no energy figures */
		double pue;                 /* data centre overhead; default 1.2 */
		double grid_g_co2_per_kwh;  /* default 400 */
	} cost;
	char *owners_json; /* the "owners" map (label: {value: team}) as JSON text; NULL = none */
	char *notify_json; /* the "notify" section (server/notify.c) as JSON text; NULL = off */
	bool insecure;     /* "insecure" / --insecure: listen off loopback although some tenant needs
			      no token (strobe_server_check_exposure refuses that otherwise) */
	char *tls_cert, *tls_key; /* PEM files (--tls-cert, --tls-key): both or neither; HTTPS */
	/* Gets one line (no newline) per refused request (status 4xx/5xx): method, path without
	 * the query, status, tenant, reason; at most STROBE_SERVER_LOG_PER_S a second, the rest
	 * counted in a "not logged" line. Called from the server's threads; NULL = no log. */
	void (*log)(const char *line);
} strobe_server_config;

#define STROBE_SERVER_LOG_PER_S 10u

void strobe_server_config_init(strobe_server_config *c);
/* Reads a JSON configuration file over the current values (see docs/server.md). */
int strobe_server_config_load(strobe_server_config *c, const char *path, strobe_err *err);
/* Checks the config's "owners" section (server/owners.c) and keeps it in c->owners_json. */
struct json_t;
int strobe_server_owners_config(struct json_t *v, strobe_server_config *c, strobe_err *err);
void strobe_server_config_free(strobe_server_config *c);

/* Writes the server's route table, one "METHOD PATH ACCESS" line per route (ACCESS: public,
 * tenant or admin), for `strobe server --list-routes` and the tenant test. */
void strobe_server_list_routes(FILE *f);

/* Whether a listen address ("host:port", NULL = the default) is a loopback one (127.0.0.0/8,
 * ::1, localhost); false for anything else, unparsable included. */
bool strobe_listen_is_loopback(const char *listen);
/* A tenant reachable without a token: "any" when no tenants are configured (every
 * X-Scope-OrgID is accepted), else the id of the first configured tenant without a token, or
 * NULL when every tenant needs one. */
const char *strobe_server_config_open_tenant(const strobe_server_config *c);
/* Refuses (-EPERM, err saying why and what to do) a listen address off loopback while some
 * tenant is reachable without a token, unless c->insecure accepts that explicitly: anyone who
 * can reach such a server could read and write every open tenant's profiles. 0 when allowed.
 * strobe_server_start checks it too. */
int strobe_server_check_exposure(const strobe_server_config *c, strobe_err *err);
/* Reads and checks c->tls_cert and c->tls_key as strobe_server_start will (both or neither;
 * readable PEM; the key the certificate's; not expired), so a caller can refuse before it
 * creates anything. 0, or -errno with err naming the file and the problem. */
int strobe_server_check_tls(const strobe_server_config *c, strobe_err *err);

typedef struct strobe_server strobe_server;

/* Starts listening and serving on threads of its own. The store must outlive the server. */
strobe_server *strobe_server_start(const strobe_server_config *c, strobe_store *st,
				   strobe_err *err);
/* The bound port (useful with port 0). */
uint16_t strobe_server_port(const strobe_server *s);
void strobe_server_stop(strobe_server *s);
/* Writes the "not logged" line of a second that has ended, if there is one: call it now and
 * then (the server writes it otherwise only with the next refused request's line). */
void strobe_server_log_flush(strobe_server *s);

/* Pull scraping of the config's "scrape" targets into the store, on threads of its own (see
 * server/scrape_targets.c for the schema). NULL with err->msg empty when there are no targets,
 * NULL with a message on a bad section. log gets one line per failed scrape (may be NULL). */
typedef struct strobe_server_scraper strobe_server_scraper;
strobe_server_scraper *strobe_server_scrape_start(const strobe_server_config *c, strobe_store *st,
						  void (*log)(const char *msg), strobe_err *err);
void strobe_server_scrape_stop(strobe_server_scraper *s);
/* Shows the scraper's counters in the server's GET /metrics. Stop the server before the
 * scraper. */
void strobe_server_set_scraper(strobe_server *srv, strobe_server_scraper *s);

#ifdef __cplusplus
}
#endif
#endif
