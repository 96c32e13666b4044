// SPDX-License-Identifier: Apache-2.0
/*
 * The server's configuration file: JSON (jansson already parses the project's other JSON), every
 * key documented in docs/server.md with an example in examples/server.json. Unknown keys are an
 * error, so a typo does not silently leave a limit at its default.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/server.h"
#include "cost.h"
#include "notify.h"

void strobe_server_config_init(strobe_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->retention_ns = 28LL * 86400 * STROBE_NS_PER_S;
	c->maintenance_interval_ns = 60 * STROBE_NS_PER_S;
	c->max_body_bytes = 16u << 20;
	c->max_debuginfo_bytes = 2ull << 30;
	c->max_debuginfod_cache_bytes = 4ull << 30;
	c->max_decompressed_bytes = 256u << 20;
	c->max_labels = 32;
	c->max_label_name_len = 128;
	c->max_label_value_len = 1024;
	c->max_series_per_tenant = 100000;
	c->max_label_values_per_name = 10000;
	c->max_stacks = 20000000; /* the in-memory stack table: about 1.5 GB at this size */
	c->max_profiles_per_push = 64;
	c->threads = 0; /* one thread per connection */
	c->max_query_profiles = 1000000;
	c->max_query_bytes = 4ull << 30;
	c->max_connections = 1000;
	c->max_inflight_pushes = 64;
	c->max_inflight_bytes = 256ull << 20;
	c->connection_timeout_ns = 60 * STROBE_NS_PER_S;
	c->request_timeout_ns = 30 * STROBE_NS_PER_S;
	srv_cost_config_init(&c->cost);
}

void strobe_server_config_free(strobe_server_config *c)
{
	free(c->listen);
	free(c->data_dir);
	free(c->store);
	free(c->debuginfod_urls);
	for (size_t i = 0; i < c->ntenants; i++) {
		free(c->tenants[i].id);
		free(c->tenants[i].token);
	}
	free(c->tenants);
	free(c->admin_token);
	free(c->scrape_json);
	free(c->owners_json);
	free(c->notify_json);
	free(c->tls_cert);
	free(c->tls_key);
	memset(c, 0, sizeof(*c));
}

static int str_opt(json_t *v, const char *key, char **dst, strobe_err *err)
{
	if (!json_is_string(v))
		return strobe_errf(err, -EINVAL, "config: \"%s\" must be a string", key);
	char *s = strdup(json_string_value(v));
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

/* "store": a URL, or a list of ClickHouse URLs for failover that differ only in their host:
 * joined into clickhouse://H1,H2,.../DB?... (the hosts tried in order). */
static int store_opt(json_t *v, char **dst, strobe_err *err)
{
	if (json_is_string(v))
		return str_opt(v, "store", dst, err);
	if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > 16)
		return strobe_errf(err, -EINVAL, "config: \"store\" must be a URL or a list of 1 to "
				   "16 clickhouse:// URLs");
	char *hosts = NULL, *rest = NULL;
	size_t i;
	json_t *e;
	int r = 0;
	json_array_foreach(v, i, e) {
		const char *u = json_string_value(e), *h, *sl;
		if (!u || strncmp(u, "clickhouse://", 13) != 0 || !(sl = strchr(h = u + 13, '/'))) {
			r = strobe_errf(err, -EINVAL, "config: \"store\"[%zu] is not a "
					"clickhouse://HOST:PORT/DB URL", i);
			break;
		}
		if (rest && strcmp(rest, sl) != 0) {
			r = strobe_errf(err, -EINVAL, "config: \"store\"[%zu] names another database "
					"or cluster than \"store\"[0] (%.100s)", i, rest);
			break;
		}
		char *nh = NULL;
		if (!rest && !(rest = strdup(sl))) {
			r = -ENOMEM;
			break;
		}
		if (asprintf(&nh, "%s%s%.*s", hosts ? hosts : "", hosts ? "," : "", (int)(sl - h),
			     h) < 0) {
			r = -ENOMEM;
			break;
		}
		free(hosts);
		hosts = nh;
	}
	char *s = NULL;
	if (r == 0 && asprintf(&s, "clickhouse://%s%s", hosts, rest) < 0)
		r = -ENOMEM;
	free(hosts);
	free(rest);
	if (r == 0) {
		free(*dst);
		*dst = s;
	}
	return r;
}

static int dur_opt(json_t *v, const char *key, int64_t *dst, bool zero_ok, strobe_err *err)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*dst = json_integer_value(v) * STROBE_NS_PER_S;
		return 0;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		if (zero_ok && (strcmp(s, "0") == 0 || strcmp(s, "forever") == 0)) {
			*dst = 0;
			return 0;
		}
		strobe_err e = {{0}};
		if (strobe_duration_parse(s, dst, &e) == 0)
			return 0;
	}
	return strobe_errf(err, -EINVAL, "config: \"%s\" must be a duration like \"28d\" or \"60s\"",
			   key);
}

static int num_opt(json_t *v, const char *key, uint64_t max, uint64_t *dst, strobe_err *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    (uint64_t)json_integer_value(v) > max)
		return strobe_errf(err, -EINVAL, "config: \"%s\" must be an integer from 1 to %llu",
				   key, (unsigned long long)max);
	*dst = (uint64_t)json_integer_value(v);
	return 0;
}

static int limits(json_t *o, strobe_server_config *c, strobe_err *err)
{
	if (!json_is_object(o))
		return strobe_errf(err, -EINVAL, "config: \"limits\" must be an object");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		uint64_t x;
		int r;
		if (strcmp(k, "max_body_bytes") == 0 &&
		    (r = num_opt(v, k, 1ull << 32, &x, err)) == 0)
			c->max_body_bytes = x;
		else if (strcmp(k, "max_debuginfod_cache_bytes") == 0 &&
			 (r = num_opt(v, k, 1ull << 50, &x, err)) == 0)
			c->max_debuginfod_cache_bytes = x;
		else if (strcmp(k, "max_debuginfo_bytes") == 0 &&
			 (r = num_opt(v, k, 64ull << 30, &x, err)) == 0)
			c->max_debuginfo_bytes = x;
		else if (strcmp(k, "max_decompressed_bytes") == 0 &&
			 (r = num_opt(v, k, 4ull << 30, &x, err)) == 0)
			c->max_decompressed_bytes = x;
		else if (strcmp(k, "max_labels") == 0 && (r = num_opt(v, k, 1024, &x, err)) == 0)
			c->max_labels = (uint32_t)x;
		else if (strcmp(k, "max_label_name_length") == 0 &&
			 (r = num_opt(v, k, STROBE_LABEL_NAME_MAX, &x, err)) == 0)
			c->max_label_name_len = (uint32_t)x;
		else if (strcmp(k, "max_label_value_length") == 0 &&
			 (r = num_opt(v, k, 65536, &x, err)) == 0)
			c->max_label_value_len = (uint32_t)x;
		else if (strcmp(k, "max_series_per_tenant") == 0 &&
			 (r = num_opt(v, k, 100000000, &x, err)) == 0)
			c->max_series_per_tenant = (uint32_t)x;
		else if (strcmp(k, "max_label_values_per_name") == 0 &&
			 (r = num_opt(v, k, 100000000, &x, err)) == 0)
			c->max_label_values_per_name = (uint32_t)x;
		else if (strcmp(k, "max_stacks") == 0 &&
			 (r = num_opt(v, k, 1000000000, &x, err)) == 0)
			c->max_stacks = (uint32_t)x;
		else if (strcmp(k, "max_profiles_per_push") == 0 &&
			 (r = num_opt(v, k, 10000, &x, err)) == 0)
			c->max_profiles_per_push = (uint32_t)x;
		else if (strcmp(k, "max_query_profiles") == 0 &&
			 (r = num_opt(v, k, 1ull << 40, &x, err)) == 0)
			c->max_query_profiles = x;
		else if (strcmp(k, "max_query_bytes") == 0 &&
			 (r = num_opt(v, k, 1ull << 50, &x, err)) == 0)
			c->max_query_bytes = x;
		else if (strcmp(k, "max_connections") == 0 &&
			 (r = num_opt(v, k, 100000, &x, err)) == 0)
			c->max_connections = (uint32_t)x;
		else if (strcmp(k, "max_inflight_pushes") == 0 &&
			 (r = num_opt(v, k, 100000, &x, err)) == 0)
			c->max_inflight_pushes = (uint32_t)x;
		else if (strcmp(k, "max_inflight_bytes") == 0 &&
			 (r = num_opt(v, k, 1ull << 40, &x, err)) == 0)
			c->max_inflight_bytes = x;
		else if (strcmp(k, "connection_timeout") == 0 &&
			 (r = dur_opt(v, k, &c->connection_timeout_ns, false, err)) == 0)
			;
		else if (strcmp(k, "request_timeout") == 0 &&
			 (r = dur_opt(v, k, &c->request_timeout_ns, false, err)) == 0)
			;
		else if (err && err->msg[0])
			return -EINVAL;
		else
			return strobe_errf(err, -EINVAL, "config: unknown limit \"%s\"", k);
	}
	return 0;
}

static int tenants(json_t *a, strobe_server_config *c, strobe_err *err)
{
	if (!json_is_array(a))
		return strobe_errf(err, -EINVAL, "config: \"tenants\" must be an array");
	size_t n = json_array_size(a);
	strobe_tenant_cfg *t = calloc(n ? n : 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i), *id = json_object_get(e, "id"),
		       *tok = json_object_get(e, "token");
		if (!json_is_object(e) || !json_is_string(id) || (tok && !json_is_string(tok)) ||
		    json_object_size(e) != 1u + (tok != NULL)) {
			for (size_t k = 0; k < i; k++) {
				free(t[k].id);
				free(t[k].token);
			}
			free(t);
			return strobe_errf(err, -EINVAL,
					   "config: tenants[%zu] must be {\"id\": \"...\", "
					   "\"token\": \"...\"}",
					   i);
		}
		const char *bad = NULL;
		if (tok && !*json_string_value(tok))
			bad = "an empty token (leave \"token\" out for a tenant without one)";
		for (size_t k = 0; k < i && !bad; k++)
			if (strcmp(t[k].id, json_string_value(id)) == 0)
				bad = "the id of an earlier tenant";
		if (bad) {
			for (size_t k = 0; k < i; k++) {
				free(t[k].id);
				free(t[k].token);
			}
			free(t);
			return strobe_errf(err, -EINVAL, "config: tenants[%zu] has %s", i, bad);
		}
		t[i].id = strdup(json_string_value(id));
		t[i].token = tok ? strdup(json_string_value(tok)) : NULL;
	}
	for (size_t i = 0; i < c->ntenants; i++) {
		free(c->tenants[i].id);
		free(c->tenants[i].token);
	}
	free(c->tenants);
	c->tenants = t;
	c->ntenants = n;
	return 0;
}

/* jansson's message without its "near '...'": that part quotes the file, and a config file holds
 * tokens, so a typo next to one would put it on stderr. */
static const char *json_reason(json_error_t *je)
{
	char *near = strstr(je->text, " near ");
	if (near)
		*near = 0;
	return je->text;
}

int strobe_server_config_load(strobe_server_config *c, const char *path, strobe_err *err)
{
	json_error_t je;
	FILE *f = fopen(path, "rb");
	if (!f)
		return strobe_errf(err, -errno, "config %s: %s", path, strerror(errno));
	/* Mode checked on the descriptor that was read, not on the path (no swap in between). */
	json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		fclose(f);
		return strobe_errf(err, -EINVAL, "config %s:%d:%d: %s", path, je.line, je.column,
				   json_reason(&je));
	}
	int r = 0;
	if (!json_is_object(root))
		r = strobe_errf(err, -EINVAL, "config %s: must be a JSON object", path);
	const char *k;
	json_t *v;
	if (r == 0)
		json_object_foreach(root, k, v) {
			if (strcmp(k, "listen") == 0)
				r = str_opt(v, k, &c->listen, err);
			else if (strcmp(k, "data_dir") == 0)
				r = str_opt(v, k, &c->data_dir, err);
			else if (strcmp(k, "store") == 0)
				r = store_opt(v, &c->store, err);
			else if (strcmp(k, "debuginfod_urls") == 0)
				r = str_opt(v, k, &c->debuginfod_urls, err);
			else if (strcmp(k, "tls_cert") == 0)
				r = str_opt(v, k, &c->tls_cert, err);
			else if (strcmp(k, "tls_key") == 0)
				r = str_opt(v, k, &c->tls_key, err);
			else if (strcmp(k, "insecure") == 0) {
				if (json_is_boolean(v))
					c->insecure = json_is_true(v);
				else
					r = strobe_errf(err, -EINVAL,
							"config: \"insecure\" must be true or false");
			}
			else if (strcmp(k, "retention") == 0)
				r = dur_opt(v, k, &c->retention_ns, true, err);
			else if (strcmp(k, "maintenance_interval") == 0)
				r = dur_opt(v, k, &c->maintenance_interval_ns, false, err);
			else if (strcmp(k, "sync") == 0) {
				if (json_is_string(v) && (strcmp(json_string_value(v), "full") == 0 ||
							 strcmp(json_string_value(v), "normal") == 0))
					c->sync_normal = strcmp(json_string_value(v), "normal") == 0;
				else
					r = strobe_errf(err, -EINVAL,
							"config: \"sync\" must be \"full\" or \"normal\"");
			} else if (strcmp(k, "threads") == 0) {
				/* 0, the default, is a thread per connection (server/http.c). */
				if (json_is_integer(v) && json_integer_value(v) >= 0 &&
				    json_integer_value(v) <= 256)
					c->threads = (uint32_t)json_integer_value(v);
				else
					r = strobe_errf(err, -EINVAL,
							"config: \"threads\" must be an integer from 0 "
							"(a thread per connection) to 256");
			} else if (strcmp(k, "check_on_start") == 0) {
				const char *cv = json_is_string(v) ? json_string_value(v) : "";
				if (strcmp(cv, "quick") == 0)
					c->check_on_start = STROBE_STORE_CHECK_QUICK;
				else if (strcmp(cv, "full") == 0)
					c->check_on_start = STROBE_STORE_CHECK_FULL;
				else if (strcmp(cv, "off") == 0)
					c->check_on_start = STROBE_STORE_CHECK_OFF;
				else
					r = strobe_errf(err, -EINVAL, "config: \"check_on_start\" must "
							"be \"quick\", \"full\" or \"off\"");
			} else if (strcmp(k, "cost") == 0) {
				r = srv_cost_config_parse(v, &c->cost, err);
			} else if (strcmp(k, "limits") == 0)
				r = limits(v, c, err);
			else if (strcmp(k, "tenants") == 0)
				r = tenants(v, c, err);
			else if (strcmp(k, "admin_token") == 0) {
				if (!json_is_string(v) || !*json_string_value(v))
					r = strobe_errf(err, -EINVAL,
							"config: \"admin_token\" must be a non-empty string");
				else
					r = str_opt(v, k, &c->admin_token, err);
			} else if (strcmp(k, "owners") == 0) {
				r = strobe_server_owners_config(v, c, err); /* server/owners.c */
			} else if (strcmp(k, "notify") == 0) {
				r = srv_notify_config(v, &c->notify_json, err); /* server/notify.c */
			} else if (strcmp(k, "scrape") == 0) {
				/* Parsed by the scraper; kept as text so it owns its schema. */
				char *s = json_dumps(v, JSON_COMPACT);
				if (!s)
					r = -ENOMEM;
				free(c->scrape_json);
				c->scrape_json = s;
			} else
				r = strobe_errf(err, -EINVAL, "config %s: unknown key \"%s\"", path, k);
			if (r < 0)
				break;
		}
	json_decref(root);
	if (r == 0) {
		bool tokens = c->admin_token != NULL;
		for (size_t i = 0; i < c->ntenants && r == 0; i++) {
			tokens |= c->tenants[i].token != NULL;
			/* One secret for two roles would let that tenant act on everybody's data. */
			if (c->admin_token && c->tenants[i].token &&
			    strcmp(c->admin_token, c->tenants[i].token) == 0)
				r = strobe_errf(err, -EINVAL,
						"config %s: admin_token is also the token of tenant "
						"'%s'; give the admin a token of its own",
						path, c->tenants[i].id);
		}
		if (r == 0 && tokens)
			r = strobe_secret_file_check(fileno(f), path, err);
	}
	fclose(f);
	return r;
}

int strobe_server_check_exposure(const strobe_server_config *c, strobe_err *err)
{
	const char *l = c->listen ? c->listen : "127.0.0.1:4100";
	const char *open = strobe_server_config_open_tenant(c);
	if (strobe_listen_is_loopback(l) || !open || c->insecure)
		return 0;
	bool any = strcmp(open, "any") == 0;
	return strobe_errf(err, -EPERM,
			   "refusing to listen on %s (not loopback) without a token for %s%s: anyone "
			   "who can reach it could read and write %s profiles. Give every tenant a "
			   "token (\"tenants\" in the config, docs/server.md), listen on 127.0.0.1, "
			   "or accept this explicitly with --insecure (config \"insecure\": true)",
			   l, any ? "" : "tenant ", any ? "any tenant" : open,
			   any ? "every tenant's" : "that tenant's");
}
