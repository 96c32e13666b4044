// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's JSON config file (jansson). Keys, their types, ranges and defaults are the options
 * table's (agent_options.c), shared with the command line: every key is checked there, unknown
 * keys are refused (a typo must not silently mean "default"), and every error names the file,
 * the key and what was expected. Command-line flags are applied by the caller after the file,
 * so they win.
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "strobe/agent_options.h"
#include "strobe/agent.h"
#include "strobe/transform.h"
#include "strobe/sampler.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int strobe_log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	if (strcmp(s, "warning") == 0)
		return STROBE_LOG_WARN;
	return -1;
}

const char *strobe_log_level_name(int level)
{
	return level >= 0 && level < 4 ? level_names[level] : "?";
}

int strobe_offcpu_mode_parse(const char *s)
{
	static const char *const names[] = {"auto", "bpf", "perf"};
	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, names[i]) == 0)
			return i;
	return -EINVAL;
}

const char *strobe_offcpu_mode_name(unsigned mode)
{
	return mode == STROBE_OFFCPU_BPF ? "bpf" : mode == STROBE_OFFCPU_PERF ? "perf" : "auto";
}

static void free_labels(char **l, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(l[i]);
	free(l);
}

void strobe_agent_opts_free(strobe_agent_opts *o)
{
	free(o->server);
	free(o->tenant);
	free(o->token);
	free(o->ca);
	if (o->admin_token)
		explicit_bzero(o->admin_token, strlen(o->admin_token));
	free(o->admin_token);
	free(o->pids);
	free(o->comm_re);
	free(o->cgroup);
	free(o->preload_dir);
	free_labels(o->labels, o->nlabels);
	for (unsigned i = 0; i < o->nrules; i++) {
		strobe_agent_rule *r = &o->rules[i];
		free(r->comm_re);
		free(r->exe_re);
		free(r->service_re);
		free(r->service_name);
		free_labels(r->labels, r->nlabels);
	}
	free(o->rules);
	free(o->admin);
	free(o->spool_dir);
	free(o->host);
	free(o->proc_root);
	memset(o, 0, sizeof(*o));
}

/* Label names as the server accepts them: [a-zA-Z_][a-zA-Z0-9_.]*, not starting with "__". */
static bool label_name_ok(const char *k, size_t n)
{
	if (!n || n > 128 || (n >= 2 && k[0] == '_' && k[1] == '_'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (!alpha && !(i && ((c >= '0' && c <= '9') || c == '.')))
			return false;
	}
	return true;
}

int strobe_agent_add_label(char ***labels, unsigned *n, const char *kv, strobe_err *err)
{
	const char *eq = strchr(kv, '=');
	if (!eq || !label_name_ok(kv, (size_t)(eq - kv)))
		return strobe_errf(err, -EINVAL,
				   "label '%s' is not KEY=VALUE with KEY a label name "
				   "([a-zA-Z_][a-zA-Z0-9_.]*, not starting with __)",
				   kv);
	if (strlen(eq + 1) > 1024)
		return strobe_errf(err, -EINVAL, "label '%.*s': the value is longer than 1024 bytes",
				   (int)(eq - kv), kv);
	char **nl = realloc(*labels, (*n + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	*labels = nl;
	if (!(nl[*n] = strdup(kv)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

typedef struct ctx {
	const char *name;
	strobe_err *err;
} ctx;

static int bad(ctx *c, const char *key, const char *what)
{
	return strobe_errf(c->err, -EINVAL, "%s: \"%s\": %s", c->name, key, what);
}

static int get_str(ctx *c, json_t *v, const char *key, char **out)
{
	if (!json_is_string(v))
		return bad(c, key, "expected a string");
	char *s = strdup(json_string_value(v));
	if (!s)
		return -ENOMEM;
	free(*out);
	*out = s;
	return 0;
}

int strobe_agent_regcomp(regex_t *re, const char *pattern, const char **why)
{
	/* a process pattern is short: 256 bytes is plenty */
	if ((*why = strobe_regex_too_costly(pattern, 256)))
		return -EINVAL;
	if (regcomp(re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
		*why = "not a valid POSIX extended regular expression";
		return -EINVAL;
	}
	return 0;
}

static int get_regex(ctx *c, json_t *v, const char *key, char **out)
{
	int rc = get_str(c, v, key, out);
	if (rc < 0)
		return rc;
	regex_t re;
	const char *why;
	if (strobe_agent_regcomp(&re, *out, &why) < 0)
		return bad(c, key, why);
	regfree(&re);
	return 0;
}

/* A rule's labels: an object of label names to string values. */
static int get_labels(ctx *c, json_t *v, const char *key, char ***labels, unsigned *n)
{
	if (!json_is_object(v))
		return bad(c, key, "expected an object of label names to string values");
	const char *k;
	json_t *lv;
	json_object_foreach(v, k, lv) {
		if (!json_is_string(lv))
			return bad(c, key, "label values must be strings");
		char kv[2048];
		snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(lv));
		strobe_err e2 = {{0}};
		int rc = strobe_agent_add_label(labels, n, kv, &e2);
		if (rc < 0)
			return rc == -EINVAL ? bad(c, key, e2.msg) : rc;
	}
	return 0;
}

static int get_rule(ctx *c, json_t *v, strobe_agent_rule *r)
{
	if (!json_is_object(v))
		return bad(c, "processes", "each entry must be an object");
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x) {
		int rc;
		if (strcmp(k, "comm") == 0)
			rc = get_regex(c, x, "processes[].comm", &r->comm_re);
		else if (strcmp(k, "exe") == 0)
			rc = get_regex(c, x, "processes[].exe", &r->exe_re);
		else if (strcmp(k, "service") == 0)
			rc = get_regex(c, x, "processes[].service", &r->service_re);
		else if (strcmp(k, "service_name") == 0)
			rc = get_str(c, x, "processes[].service_name", &r->service_name);
		else if (strcmp(k, "labels") == 0)
			rc = get_labels(c, x, "processes[].labels", &r->labels, &r->nlabels);
		else
			rc = bad(c, k, "unknown key in a processes entry (comm, exe, service, "
				       "service_name, labels)");
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The JSON value as the options table takes it. */
static strobe_agent_value value_of(json_t *v)
{
	if (json_is_string(v))
		return (strobe_agent_value){.kind = STROBE_AV_STR, .s = json_string_value(v)};
	if (json_is_number(v))
		return (strobe_agent_value){.kind = STROBE_AV_NUM, .d = json_number_value(v)};
	if (json_is_boolean(v))
		return (strobe_agent_value){.kind = STROBE_AV_BOOL, .b = json_is_true(v)};
	return (strobe_agent_value){.kind = STROBE_AV_OTHER};
}

/* One key of the table (name: as messages show it, "spool.dir" for a nested one). */
static int set_json(ctx *c, const strobe_agent_option *e, const char *name, json_t *v,
		    strobe_agent_opts *o)
{
	char msg[300] = "";
	int rc = 0;
	if (e->type == STROBE_AOT_PIDS) {
		if (!json_is_array(v))
			return bad(c, name, "expected an array of process ids");
		size_t i;
		json_t *pv;
		json_array_foreach(v, i, pv) {
			strobe_agent_value av = value_of(pv);
			if ((rc = strobe_agent_option_set(e, &av, o, msg, sizeof(msg))) < 0)
				break;
		}
	} else if (e->type == STROBE_AOT_LABELS) {
		if (!json_is_object(v))
			return bad(c, name, "expected an object of label names to string values");
		const char *k;
		json_t *lv;
		json_object_foreach(v, k, lv) {
			char kv[2048];
			snprintf(kv, sizeof(kv), "%s=%s", k, json_is_string(lv) ? json_string_value(lv) : "");
			strobe_agent_value av = json_is_string(lv) ? (strobe_agent_value){.kind = STROBE_AV_STR, .s = kv}
							    : (strobe_agent_value){.kind = STROBE_AV_OTHER};
			if ((rc = strobe_agent_option_set(e, &av, o, msg, sizeof(msg))) < 0)
				break;
		}
	} else {
		strobe_agent_value av = value_of(v);
		rc = strobe_agent_option_set(e, &av, o, msg, sizeof(msg));
	}
	return rc == -EINVAL ? bad(c, name, msg) : rc;
}

/* Whether key k is an object of nested keys ("spool": "spool.dir", ...). */
static bool is_group(const char *k)
{
	size_t n = strlen(k);
	for (unsigned i = 0; i < strobe_agent_noptions; i++) {
		const char *key = strobe_agent_options[i].key;
		if (key && strncmp(key, k, n) == 0 && key[n] == '.')
			return true;
	}
	return false;
}

static int set_group(ctx *c, const char *k, json_t *v, strobe_agent_opts *o)
{
	size_t n = strlen(k);
	char names[256] = "";
	for (unsigned i = 0; i < strobe_agent_noptions; i++) {
		const char *key = strobe_agent_options[i].key;
		if (key && strncmp(key, k, n) == 0 && key[n] == '.')
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[0] ? ", " : "", key + n + 1);
	}
	if (!json_is_object(v)) {
		char what[300];
		snprintf(what, sizeof(what), "expected an object of %s", names);
		return bad(c, k, what);
	}
	const char *sk;
	json_t *sv;
	json_object_foreach(v, sk, sv) {
		char full[128];
		snprintf(full, sizeof(full), "%s.%s", k, sk);
		const strobe_agent_option *e = strlen(k) + 1 + strlen(sk) < sizeof(full)
						? strobe_agent_option_by_key(full)
						: NULL;
		int rc;
		if (e) {
			rc = set_json(c, e, full, sv, o);
		} else {
			char what[300];
			snprintf(what, sizeof(what), "unknown key in %s (%s)", k, names);
			rc = bad(c, sk, what);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int get_rules(ctx *c, json_t *v, strobe_agent_opts *o)
{
	if (!json_is_array(v))
		return bad(c, "processes", "expected an array of {\"comm\": RE, \"labels\": {...}}");
	size_t i;
	json_t *rv;
	json_array_foreach(v, i, rv) {
		strobe_agent_rule *nr = realloc(o->rules, (o->nrules + 1) * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		o->rules = nr;
		memset(&nr[o->nrules], 0, sizeof(*nr));
		int rc = get_rule(c, rv, &nr[o->nrules++]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int strobe_agent_config_parse(const char *text, size_t len, const char *name,
			      strobe_agent_opts *o, strobe_err *err)
{
	ctx c = {name, err};
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		/* Without jansson's "near '...'": it quotes the file, which may hold the token. */
		char *near = strstr(je.text, " near ");
		if (near)
			*near = 0;
		return strobe_errf(err, -EINVAL, "%s:%d:%d: %s", name, je.line, je.column, je.text);
	}
	int rc = 0;
	if (!json_is_object(root)) {
		rc = strobe_errf(err, -EINVAL, "%s: the config must be a JSON object", name);
		goto out;
	}
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v) {
		if (is_group(k))
			rc = set_group(&c, k, v, o);
		else if (strcmp(k, "processes") == 0)
			rc = get_rules(&c, v, o);
		else {
			const strobe_agent_option *e = strobe_agent_option_by_key(k);
			rc = e ? set_json(&c, e, k, v, o) : bad(&c, k, "unknown key (see examples/agent.json)");
		}
		if (rc < 0)
			break;
	}
out:
	json_decref(root);
	return rc;
}

int strobe_agent_config_load(const char *path, strobe_agent_opts *o, strobe_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return strobe_errf(err, -errno, "%s: %s", path, strerror(errno));
	char *buf = malloc(1u << 20);
	size_t n = buf ? fread(buf, 1, 1u << 20, f) : 0;
	bool too_big = buf && n == 1u << 20;
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	int rc = too_big ? strobe_errf(err, -EFBIG, "%s: larger than 1 MiB; not a config", path)
			 : strobe_agent_config_parse(buf, n, path, o, err);
	/* A file that holds the push token is only the agent's (mode checked on what was read); one
	 * that names a token_file need not be (that file is checked itself). */
	json_t *root = rc == 0 ? json_loadb(buf, n, 0, NULL) : NULL;
	bool has_token = root && (json_object_get(root, "token") || json_object_get(root, "admin_token"));
	json_decref(root);
	if (has_token)
		rc = strobe_secret_file_check(fileno(f), path, err);
	fclose(f);
	free(buf);
	return rc;
}

