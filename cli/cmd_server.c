// SPDX-License-Identifier: Apache-2.0
/*
 * strobe server: the profile store and its HTTP API in one process. Opens (or creates) the
 * embedded store in --data DIR, listens on loopback unless told otherwise, and runs compaction
 * and retention every maintenance interval until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli.h"
#include "strobe/server.h"

static const char usage_text[] =
	"usage: strobe server --data DIR [--listen HOST:PORT] [--config FILE] [--retention D]\n"
	"                     [--tls-cert FILE --tls-key FILE] [--insecure] [--check MODE]\n"
	"                     [--debuginfod URL]... [--store URL]\n"
	"       strobe server --list-routes\n\n"
	"Runs the profile server: push profiles to POST /api/v1/push, query them with\n"
	"GET /api/v1/query (docs/http-api.md). Settings in FILE (JSON, docs/server.md) are\n"
	"overridden by the options given here.\n\n"
	"  --data DIR          data directory (created if missing)\n"
	"  --listen HOST:PORT  address to listen on (default 127.0.0.1:4100; port 0 = any free\n"
	"                      port, printed on stderr)\n"
	"  --config FILE       configuration file\n"
	"  --retention D       keep profiles for D (e.g. 28d, 6h; 0 = forever)\n"
	"  --tls-cert FILE     serve HTTPS with this PEM certificate (chain); needs --tls-key\n"
	"  --tls-key FILE      the certificate's PEM private key (unencrypted)\n"
	"  --insecure          allow listening off loopback while some tenant needs no token\n"
	"                      (refused otherwise: anyone who can reach the server could read\n"
	"                      and write those tenants' profiles)\n"
	"  --debuginfod URL    a debuginfod server to ask for the debug files of bare addresses\n"
	"                      not uploaded (repeatable; default: $DEBUGINFOD_URLS). Fetched\n"
	"                      files are cached in DIR/debuginfod-cache\n"
	"  --list-routes       print the HTTP routes, one \"METHOD PATH ACCESS\" line each\n"
	"                      (ACCESS: public, tenant or admin; docs/http-api.md) and exit\n"
	"  --check MODE        check the store file at start: quick (default: its structure,\n"
	"                      all of it up to 256 MiB, else the tables loaded at start), full\n"
	"                      (SQLite's integrity_check of everything), off\n"
	"  --store URL         keep profiles in ClickHouse instead of SQLite in DIR:\n"
	"                      clickhouse://HOST:PORT[,HOST:PORT...]/DB[?cluster=NAME]\n"
	"                      (docs/clickhouse.md; DIR then holds only debug files)\n";

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void scrape_log(const char *msg)
{
	fprintf(stderr, "strobe server: scrape: %s\n", msg);
}

static void request_log(const char *line)
{
	fprintf(stderr, "strobe server: %s\n", line);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * STROBE_NS_PER_S + ts.tv_nsec;
}

/* libdebuginfod reads its settings from the environment: set them here, in main's thread,
 * before the server starts any other (setenv is not thread-safe). The user's own values of the
 * cache, timeout and size settings win. */
static int debuginfod_env(const strobe_server_config *c)
{
	char *cache = NULL, size[32];
	if (asprintf(&cache, "%s/debuginfod-cache", c->data_dir) < 0)
		return -1;
	snprintf(size, sizeof size, "%llu", (unsigned long long)c->max_debuginfo_bytes);
	int r = setenv("DEBUGINFOD_URLS", c->debuginfod_urls, 1) | setenv("DEBUGINFOD_CACHE_PATH", cache, 0) |
		setenv("DEBUGINFOD_TIMEOUT", "10", 0) | setenv("DEBUGINFOD_MAXSIZE", size, 0);
	free(cache);
	return r;
}

int cmd_server(int argc, char **argv)
{
	enum { O_DATA = OPT_CMD_BASE, O_LISTEN, O_CONFIG, O_RETENTION, O_ROUTES, O_TLSCERT, O_TLSKEY,
	       O_INSECURE, O_CHECK, O_DEBUGINFOD, O_STORE };
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'}, {"data", required_argument, 0, O_DATA},
		{"listen", required_argument, 0, O_LISTEN},
		{"config", required_argument, 0, O_CONFIG},
		{"retention", required_argument, 0, O_RETENTION},
		{"list-routes", no_argument, 0, O_ROUTES},
		{"tls-cert", required_argument, 0, O_TLSCERT},
		{"tls-key", required_argument, 0, O_TLSKEY},
		{"insecure", no_argument, 0, O_INSECURE},
		{"check", required_argument, 0, O_CHECK},
		{"debuginfod", required_argument, 0, O_DEBUGINFOD},
		{"store", required_argument, 0, O_STORE}, {0, 0, 0, 0}};
	const char *cmd = "server", *data = NULL, *listen = NULL, *config = NULL, *ret = NULL;
	const char *tls_cert = NULL, *tls_key = NULL, *check = NULL, *store = NULL;
	bool insecure = false;
	char *urls = NULL; /* --debuginfod, space-separated */
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': free(urls); fputs(usage_text, stdout); return 0;
		case O_DATA: data = optarg; break;
		case O_LISTEN: listen = optarg; break;
		case O_CONFIG: config = optarg; break;
		case O_RETENTION: ret = optarg; break;
		case O_ROUTES: free(urls); strobe_server_list_routes(stdout); return 0;
		case O_TLSCERT: tls_cert = optarg; break;
		case O_TLSKEY: tls_key = optarg; break;
		case O_INSECURE: insecure = true; break;
		case O_CHECK: check = optarg; break;
		case O_STORE: store = optarg; break;
		case O_DEBUGINFOD: {
			char *u = NULL;
			if (!*optarg || strchr(optarg, ' ') || asprintf(&u, "%s%s%s", urls ? urls : "",
						   urls ? " " : "", optarg) < 0) {
				cli_err(cmd, "--debuginfod: give one URL, without spaces");
				free(urls);
				return 2;
			}
			free(urls);
			urls = u;
			break;
		}
		default: free(urls); fputs(usage_text, stderr); return 2;
		}
	}
	if (optind != argc) {
		cli_err(cmd, "unexpected argument '%s'", argv[optind]);
		free(urls);
		return 2;
	}
	/* Every push decodes into tables sized for its worst case (hundreds of KB, freed at
	 * once): keep that memory in the process rather than handing it back to the kernel after
	 * each request and faulting it in again for the next (that was a third of ingest's CPU). */
	mallopt(M_MMAP_THRESHOLD, 32 << 20); /* the largest glibc takes */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	strobe_server_config cfg;
	strobe_server_config_init(&cfg);
	strobe_err err = {{0}};
	int rc = 2;
	strobe_store *st = NULL;
	strobe_server *srv = NULL;
	strobe_server_scraper *scraper = NULL;
	if (config && strobe_server_config_load(&cfg, config, &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	if (data) {
		free(cfg.data_dir);
		cfg.data_dir = strdup(data);
	}
	if (store) {
		free(cfg.store);
		cfg.store = strdup(store);
	}
	if (listen) {
		free(cfg.listen);
		cfg.listen = strdup(listen);
	}
	if (tls_cert) {
		free(cfg.tls_cert);
		cfg.tls_cert = strdup(tls_cert);
	}
	if (tls_key) {
		free(cfg.tls_key);
		cfg.tls_key = strdup(tls_key);
	}
	if (insecure)
		cfg.insecure = true;
	if (urls) {
		free(cfg.debuginfod_urls);
		cfg.debuginfod_urls = urls;
		urls = NULL;
	} else if (!cfg.debuginfod_urls && getenv("DEBUGINFOD_URLS") && *getenv("DEBUGINFOD_URLS")) {
		cfg.debuginfod_urls = strdup(getenv("DEBUGINFOD_URLS"));
	}
	if (ret) {
		if (strcmp(ret, "0") == 0)
			cfg.retention_ns = 0;
		else if (strobe_duration_parse(ret, &cfg.retention_ns, &err) < 0) {
			cli_err(cmd, "--retention: %s", err.msg);
			goto out;
		}
	}
	if (check) {
		if (strcmp(check, "quick") == 0)
			cfg.check_on_start = STROBE_STORE_CHECK_QUICK;
		else if (strcmp(check, "full") == 0)
			cfg.check_on_start = STROBE_STORE_CHECK_FULL;
		else if (strcmp(check, "off") == 0)
			cfg.check_on_start = STROBE_STORE_CHECK_OFF;
		else {
			cli_err(cmd, "--check: '%s' is not quick, full or off", check);
			goto out;
		}
	}
	if (!cfg.data_dir) {
		cli_err(cmd, "--data DIR (or data_dir in the config) is required");
		goto out;
	}
	/* Before the store is opened: a refused start leaves nothing behind. */
	if (strobe_server_check_exposure(&cfg, &err) < 0 || strobe_server_check_tls(&cfg, &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	if (cfg.debuginfod_urls && debuginfod_env(&cfg) < 0) {
		cli_err(cmd, "cannot set up the debuginfod client: %s", strerror(errno));
		goto out;
	}
	strobe_store_opts so = {.dir = cfg.data_dir, .retention_ns = cfg.retention_ns,
				.max_series = cfg.max_series_per_tenant,
				.max_label_values = cfg.max_label_values_per_name,
				.max_stacks = cfg.max_stacks,
				.sync_normal = cfg.sync_normal,
				.max_query_points = cfg.max_query_profiles,
				.max_query_bytes = cfg.max_query_bytes,
				.check = cfg.check_on_start,
				.store = cfg.store};
	if (!(st = strobe_store_open(&so, &err))) {
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(errno));
		goto out;
	}
	/* Retention first: a server restarted after a long pause should not serve what has
	 * expired. */
	if (strobe_store_retain(st, now_ns(), &err) < 0)
		cli_err(cmd, "retention: %s", err.msg);
	/* A connection is a descriptor: the common soft limit of 1024 would stop accepting
	 * before max_connections (the store, logs and listen socket need some too). */
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg.max_connections * 2 + 128; /* + the room kept for reads */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < want)
			fprintf(stderr,
				"strobe server: warning: at most %llu open files (ulimit -n), fewer than "
				"limits.max_connections %u needs; raise the hard limit or lower "
				"max_connections\n",
				(unsigned long long)rl.rlim_cur, cfg.max_connections);
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	cfg.log = request_log;
	if (!(srv = strobe_server_start(&cfg, st, &err))) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	scraper = strobe_server_scrape_start(&cfg, st, scrape_log, &err);
	if (!scraper && err.msg[0]) {
		cli_err(cmd, "%s", err.msg);
		goto out;
	}
	if (scraper)
		strobe_server_set_scraper(srv, scraper);
	const char *l = cfg.listen ? cfg.listen : "127.0.0.1:4100";
	if (cfg.tls_cert)
		fprintf(stderr, "strobe server: listening on https://%.*s:%u (TLS, certificate %s; data in "
			"%s)\n", (int)(strrchr(l, ':') - l), l, strobe_server_port(srv), cfg.tls_cert,
			cfg.data_dir);
	else
		fprintf(stderr, "strobe server: listening on %.*s:%u (data in %s)\n",
			(int)(strrchr(l, ':') - l), l, strobe_server_port(srv), cfg.data_dir);
	/* Loopback is the default; anything wider without tokens is open to whoever can reach
	 * it. strobe_server_check_exposure refused that above unless --insecure accepted it (a
	 * private network, a proxy in front that checks who comes in): then it is said once. */
	const char *open = strobe_server_config_open_tenant(&cfg);
	if (!strobe_listen_is_loopback(l) && open)
		fprintf(stderr,
			"strobe server: warning: listening on %.*s (not loopback) without a token "
			"for %s%s: anyone who can reach it can push and read %s profiles "
			"(accepted with --insecure); give every tenant a token (docs/server.md) or "
			"listen on 127.0.0.1\n",
			(int)(strrchr(l, ':') - l), l, strcmp(open, "any") ? "tenant " : "",
			strcmp(open, "any") ? open : "any tenant",
			strcmp(open, "any") ? "that tenant's" : "every tenant's");
	int64_t next = now_ns() + cfg.maintenance_interval_ns;
	while (!stop) {
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
		strobe_server_log_flush(srv);
		int64_t now = now_ns();
		if (now < next)
			continue;
		next = now + cfg.maintenance_interval_ns;
		err.msg[0] = 0;
		if (strobe_store_compact(st, now, &err) < 0)
			cli_err(cmd, "maintenance: %s", err.msg);
		/* Even after compaction failed: on a full disk, retention is what frees pages. */
		err.msg[0] = 0;
		if (strobe_store_retain(st, now, &err) < 0)
			cli_err(cmd, "maintenance: %s", err.msg);
	}
	rc = 0;
out:
	strobe_server_stop(srv); /* first: its /metrics reads the scraper */
	strobe_server_scrape_stop(scraper);
	strobe_store_close(st);
	strobe_server_config_free(&cfg);
	return rc;
}
