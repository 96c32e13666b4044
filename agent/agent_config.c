// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's options: defaults, and the JSON config file (jansson). Every key is checked for
 * its type and range, unknown keys are refused (a typo must not silently mean "default"), and
 * every error names the file, the key and what was expected. Command-line flags are applied by
 * the caller after the file, so they win.
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

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

void strobe_agent_opts_init(strobe_agent_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->freq = 19;
	o->interval_s = 10;
	o->kernel = true;
	o->max_cpu = 1.0;
	o->spool_max = 64u << 20;
	o->log_level = STROBE_LOG_INFO;
	o->restart_procs = 4096;
	/* Symbol tables only by default: DWARF (lines, inlined frames) of every binary on a host
	 * costs tens of MB that an always-on daemon should not hold; --dwarf asks for it. */
	o->no_dwarf = true;
	o->call_graph = STROBE_CG_AUTO;
	/* Smaller than the recorder's 64: the agent's memory is part of its budget, and an
	 * evicted process's tables are only re-read at its next sample. */
	o->unwind_cache_mb = 16;
	o->unwind_table_mb = 8;
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

/* A token read from the file the config names (mode 600, one line: lib/secrets.c). */
static int get_token_file(ctx *c, json_t *v, const char *key, char **out)
{
	char *path = NULL, *tok = NULL;
	int rc = get_str(c, v, key, &path);
	if (rc == 0) {
		strobe_err e2 = {{0}};
		rc = strobe_token_file_read(path, &tok, &e2);
		if (rc == 0) {
			free(*out);
			*out = tok;
		} else if (rc != -ENOMEM) {
			rc = bad(c, key, e2.msg);
		}
	}
	free(path);
	return rc;
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

static int get_num(ctx *c, json_t *v, const char *key, double lo, double hi, double *out)
{
	if (!json_is_number(v))
		return bad(c, key, "expected a number");
	double d = json_number_value(v);
	if (d < lo || d > hi) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%g is out of range [%g, %g]", d, lo, hi);
		return bad(c, key, msg);
	}
	*out = d;
	return 0;
}

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
	double d;
	json_object_foreach(root, k, v) {
		if (strcmp(k, "server") == 0)
			rc = get_str(&c, v, k, &o->server);
		else if (strcmp(k, "tenant") == 0)
			rc = get_str(&c, v, k, &o->tenant);
		else if (strcmp(k, "token") == 0)
			rc = get_str(&c, v, k, &o->token);
		else if (strcmp(k, "token_file") == 0)
			rc = get_token_file(&c, v, k, &o->token);
		else if (strcmp(k, "ca") == 0)
			rc = get_str(&c, v, k, &o->ca);
		else if (strcmp(k, "admin_token") == 0) {
			if ((rc = get_str(&c, v, k, &o->admin_token)) == 0 && !*o->admin_token)
				rc = bad(&c, k, "must not be empty");
		} else if (strcmp(k, "admin_token_file") == 0)
			rc = get_token_file(&c, v, k, &o->admin_token);
		else if (strcmp(k, "frequency") == 0) {
			if ((rc = get_num(&c, v, k, 1, 10000, &d)) == 0)
				o->freq = (unsigned)d;
		} else if (strcmp(k, "offcpu") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->offcpu = json_is_true(v);
		} else if (strcmp(k, "locks") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->locks = json_is_true(v);
		} else if (strcmp(k, "preload") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->no_preload = !json_is_true(v);
		} else if (strcmp(k, "preload_dir") == 0) {
			rc = get_str(&c, v, k, &o->preload_dir);
		} else if (strcmp(k, "offcpu_mode") == 0) {
			int m = json_is_string(v) ? strobe_offcpu_mode_parse(json_string_value(v)) : -1;
			if (m < 0)
				rc = bad(&c, k, "expected \"auto\", \"bpf\" or \"perf\"");
			else
				o->offcpu_mode = (unsigned)m;
		} else if (strcmp(k, "oncpu_mode") == 0) {
			int m = json_is_string(v) ? strobe_offcpu_mode_parse(json_string_value(v)) : -1;
			if (m < 0)
				rc = bad(&c, k, "expected \"auto\", \"bpf\" or \"perf\"");
			else
				o->oncpu_mode = (unsigned)m;
		} else if (strcmp(k, "oncpu_entries") == 0) {
			if ((rc = get_num(&c, v, k, 4, 1 << 18, &d)) == 0)
				o->oncpu_entries = (unsigned)d;
		} else if (strcmp(k, "offcpu_entries") == 0) {
			if ((rc = get_num(&c, v, k, 64, 1 << 20, &d)) == 0)
				o->offcpu_entries = (unsigned)d;
		} else if (strcmp(k, "kernel") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->kernel = json_is_true(v);
		} else if (strcmp(k, "symbolize") == 0) {
			const char *m = json_string_value(v);
			if (json_is_boolean(v))
				o->no_symbolize = !json_is_true(v), o->symbolize_server = false;
			else if (m && strcmp(m, "local") == 0)
				o->no_symbolize = false, o->symbolize_server = false;
			else if (m && strcmp(m, "server") == 0)
				o->no_symbolize = false, o->symbolize_server = true;
			else if (m && strcmp(m, "none") == 0)
				o->no_symbolize = true, o->symbolize_server = false;
			else
				rc = bad(&c, k, "expected \"local\", \"server\", \"none\", true or false");
		} else if (strcmp(k, "upload_symbols") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->no_upload_symbols = !json_is_true(v);
		} else if (strcmp(k, "jvm_attach") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->no_jvm_attach = !json_is_true(v);
		} else if (strcmp(k, "python") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->no_python = !json_is_true(v);
		} else if (strcmp(k, "dwarf") == 0) {
			if (!json_is_boolean(v))
				rc = bad(&c, k, "expected true or false");
			else
				o->no_dwarf = !json_is_true(v);
		} else if (strcmp(k, "call_graph") == 0) {
			int cg = json_is_string(v) ? strobe_call_graph_parse(json_string_value(v))
						   : -EINVAL;
			if (cg < 0)
				rc = bad(&c, k, "expected \"fp\", \"dwarf\" or \"auto\"");
			else
				o->call_graph = (unsigned)cg;
		} else if (strcmp(k, "unwind_cache_mb") == 0) {
			if ((rc = get_num(&c, v, k, 1, 1 << 20, &d)) == 0)
				o->unwind_cache_mb = (unsigned)d;
		} else if (strcmp(k, "unwind_table_mb") == 0) {
			if ((rc = get_num(&c, v, k, 0, 32, &d)) == 0)
				o->unwind_table_mb = (unsigned)d;
		} else if (strcmp(k, "interval") == 0) {
			if ((rc = get_num(&c, v, k, 1, 3600, &d)) == 0)
				o->interval_s = (unsigned)d;
		} else if (strcmp(k, "max_cpu") == 0) {
			if ((rc = get_num(&c, v, k, 0.0001, 100, &d)) == 0)
				o->max_cpu = d;
		} else if (strcmp(k, "admin") == 0)
			rc = get_str(&c, v, k, &o->admin);
		else if (strcmp(k, "host") == 0)
			rc = get_str(&c, v, k, &o->host);
		else if (strcmp(k, "log_level") == 0) {
			if (!json_is_string(v) || strobe_log_level_parse(json_string_value(v)) < 0)
				rc = bad(&c, k, "expected \"error\", \"warn\", \"info\" or \"debug\"");
			else
				o->log_level = strobe_log_level_parse(json_string_value(v));
		} else if (strcmp(k, "labels") == 0)
			rc = get_labels(&c, v, k, &o->labels, &o->nlabels);
		else if (strcmp(k, "spool") == 0) {
			if (!json_is_object(v)) {
				rc = bad(&c, k, "expected an object {\"dir\": ..., \"max_bytes\": ...}");
				break;
			}
			const char *sk;
			json_t *sv;
			json_object_foreach(v, sk, sv) {
				if (strcmp(sk, "dir") == 0)
					rc = get_str(&c, sv, "spool.dir", &o->spool_dir);
				else if (strcmp(sk, "max_bytes") == 0) {
					if ((rc = get_num(&c, sv, "spool.max_bytes", 4096, 1e12, &d)) == 0)
						o->spool_max = (uint64_t)d;
				} else
					rc = bad(&c, sk, "unknown key in spool (dir, max_bytes)");
				if (rc < 0)
					break;
			}
		} else if (strcmp(k, "targets") == 0) {
			if (!json_is_object(v)) {
				rc = bad(&c, k, "expected an object {\"pids\", \"comm\", \"cgroup\"}");
				break;
			}
			const char *tk;
			json_t *tv;
			json_object_foreach(v, tk, tv) {
				if (strcmp(tk, "comm") == 0)
					rc = get_regex(&c, tv, "targets.comm", &o->comm_re);
				else if (strcmp(tk, "cgroup") == 0)
					rc = get_str(&c, tv, "targets.cgroup", &o->cgroup);
				else if (strcmp(tk, "pids") == 0) {
					if (!json_is_array(tv)) {
						rc = bad(&c, "targets.pids", "expected an array of process ids");
						break;
					}
					size_t i;
					json_t *pv;
					json_array_foreach(tv, i, pv) {
						if ((rc = get_num(&c, pv, "targets.pids", 1, 0x7fffffff, &d)) < 0)
							break;
						pid_t *np = realloc(o->pids, (o->npids + 1) * sizeof(*np));
						if (!np) {
							rc = -ENOMEM;
							break;
						}
						o->pids = np;
						o->pids[o->npids++] = (pid_t)d;
					}
				} else
					rc = bad(&c, tk, "unknown key in targets (pids, comm, cgroup)");
				if (rc < 0)
					break;
			}
		} else if (strcmp(k, "processes") == 0) {
			if (!json_is_array(v)) {
				rc = bad(&c, k, "expected an array of {\"comm\": RE, \"labels\": {...}}");
				break;
			}
			size_t i;
			json_t *rv;
			json_array_foreach(v, i, rv) {
				strobe_agent_rule *nr = realloc(o->rules, (o->nrules + 1) * sizeof(*nr));
				if (!nr) {
					rc = -ENOMEM;
					break;
				}
				o->rules = nr;
				memset(&nr[o->nrules], 0, sizeof(*nr));
				rc = get_rule(&c, rv, &nr[o->nrules++]);
				if (rc < 0)
					break;
			}
		} else
			rc = bad(&c, k, "unknown key (see examples/agent.json)");
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

