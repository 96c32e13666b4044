// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the agent's options table (agent/agent_options.c), walking every entry: each
 * flag has a config key or says why not; flags, short flags and keys are each unique; every
 * listed flag is in the usage; strobe_agent_opts_init holds the table's defaults, within the
 * bounds; each number is taken at its bounds and refused just outside them, from the command
 * line and from the config alike, with a message naming the flag or the key; a flag and its key
 * store the same value; a flag without an argument stands for the value its key would give.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strobe/agent_options.h"

#define FOR_EACH(e)                                                                            \
	for (const strobe_agent_option *e = strobe_agent_options;                              \
	     e < strobe_agent_options + strobe_agent_noptions; e++)

static bool is_number(const strobe_agent_option *e)
{
	return e->type == STROBE_AOT_UINT || e->type == STROBE_AOT_DOUBLE ||
	       e->type == STROBE_AOT_BYTES || e->type == STROBE_AOT_PIDS;
}

/* The numeric field of e in o (pids: the last one). */
static double field(const strobe_agent_option *e, const strobe_agent_opts *o)
{
	const char *f = (const char *)o + e->off;
	switch (e->type) {
	case STROBE_AOT_UINT: return *(const unsigned *)f;
	case STROBE_AOT_DOUBLE: return *(const double *)f;
	case STROBE_AOT_BYTES: return (double)*(const uint64_t *)f;
	case STROBE_AOT_PIDS: return o->npids ? o->pids[o->npids - 1] : -1;
	default: return -1;
	}
}

/* {"key": value} as a config, nested for "a.b", value in an array for pids. */
static int config(const strobe_agent_option *e, const char *value, strobe_agent_opts *o,
		  strobe_err *err)
{
	char text[512], v[128];
	snprintf(v, sizeof(v), e->type == STROBE_AOT_PIDS ? "[%s]" : "%s", value);
	const char *dot = strchr(e->key, '.');
	if (dot)
		snprintf(text, sizeof(text), "{\"%.*s\": {\"%s\": %s}}", (int)(dot - e->key), e->key,
			 dot + 1, v);
	else
		snprintf(text, sizeof(text), "{\"%s\": %s}", e->key, v);
	return strobe_agent_config_parse(text, strlen(text), "agent.json", o, err);
}

static void test_names(void **state)
{
	char *usage = strobe_agent_options_usage();
	assert_non_null(usage);
	unsigned flags = 0;
	FOR_EACH(e) {
		assert_true(e->flag || e->key);
		if (e->flag) {
			flags++;
			/* a flag with no key says why */
			if (!e->key) {
				assert_non_null(e->no_key);
				assert_true(strlen(e->no_key) > 5);
			}
			char want[64];
			snprintf(want, sizeof(want), "--%s", e->flag);
			if (e->help)
				assert_non_null(strstr(usage, want));
			/* a flag without an argument stands for a value (or is the caller's) */
			if (!e->metavar)
				assert_true(e->implied || e->type == STROBE_AOT_NONE);
		}
		FOR_EACH(f) {
			if (f == e)
				continue;
			if (e->flag && f->flag)
				assert_string_not_equal(e->flag, f->flag);
			if (e->key && f->key)
				assert_string_not_equal(e->key, f->key);
			if (e->short_flag)
				assert_int_not_equal(e->short_flag, f->short_flag);
		}
	}
	assert_true(flags >= 39);
	free(usage);
	/* every flag and key strobe agent had before the table */
	static const char *const old_flags[] = {
		"help", "server", "config", "freq", "offcpu", "pid", "locks", "preload-dir",
		"no-preload", "comm", "cgroup", "interval", "label", "no-symbolize", "user",
		"symbolize", "no-upload-symbols", "no-jvm-attach", "no-python", "dwarf", "no-dwarf",
		"max-cpu", "admin", "spool", "spool-max", "host", "tenant", "token", "log-level",
		"call-graph", "unwind-cache", "unwind-table", "off-cpu-mode", "off-cpu-entries",
		"on-cpu-mode", "on-cpu-entries", "token-file", "ca", "admin-token-file"};
	for (size_t i = 0; i < sizeof(old_flags) / sizeof(old_flags[0]); i++)
		if (!strobe_agent_option_by_flag(old_flags[i]))
			fail_msg("--%s is gone", old_flags[i]);
	static const char *const old_keys[] = {
		"server", "tenant", "token", "token_file", "ca", "admin_token", "admin_token_file",
		"frequency", "offcpu", "locks", "preload", "preload_dir", "offcpu_mode", "oncpu_mode",
		"oncpu_entries", "offcpu_entries", "kernel", "symbolize", "upload_symbols",
		"jvm_attach", "python", "dwarf", "call_graph", "unwind_cache_mb", "unwind_table_mb",
		"interval", "max_cpu", "admin", "host", "log_level", "labels", "spool.dir",
		"spool.max_bytes", "targets.comm", "targets.cgroup", "targets.pids", "processes"};
	for (size_t i = 0; i < sizeof(old_keys) / sizeof(old_keys[0]); i++)
		if (!strobe_agent_option_by_key(old_keys[i]))
			fail_msg("\"%s\" is gone", old_keys[i]);
	unsigned short_flags = 0;
	FOR_EACH(e)
		short_flags += e->short_flag != 0;
	assert_int_equal(short_flags, 7); /* h s c F p i l */
}

static void test_defaults(void **state)
{
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	FOR_EACH(e) {
		if (!e->has_default)
			continue;
		const char *f = (const char *)&o + e->off;
		if (e->type == STROBE_AOT_BOOL) {
			bool v = *(const bool *)f;
			assert_int_equal(e->inverted ? !v : v, e->dflt != 0);
		} else if (e->type == STROBE_AOT_LOG_LEVEL) {
			assert_int_equal(*(const int *)f, (int)e->dflt);
		} else if (e->type == STROBE_AOT_MODE || e->type == STROBE_AOT_CALL_GRAPH) {
			assert_int_equal(*(const unsigned *)f, (unsigned)e->dflt);
		} else {
			assert_true(is_number(e));
			assert_true(field(e, &o) == e->dflt);
			/* in bounds, or 0: chosen when the agent starts (the eBPF maps' sizes) */
			assert_true((e->dflt >= e->min && e->dflt <= e->max) || e->dflt == 0);
		}
	}
	/* the documented ones, by name */
	assert_int_equal(o.freq, 19);
	assert_int_equal(o.interval_s, 10);
	assert_true(o.max_cpu == 1.0);
	assert_int_equal(o.spool_max, 64u << 20);
	assert_true(o.kernel);
	assert_true(o.no_dwarf);
	assert_false(o.no_preload);
	assert_false(o.no_python);
	assert_int_equal(o.unwind_cache_mb, 16);
	assert_int_equal(o.log_level, STROBE_LOG_INFO);
	strobe_agent_opts_free(&o);
}

/* Expects value v of e refused (from the flag and from the key), naming them, or taken. */
static void bound(const strobe_agent_option *e, double v, bool ok)
{
	char arg[64];
	snprintf(arg, sizeof(arg), "%.17g", v);
	strobe_agent_opts o;
	strobe_err err = {{0}};
	if (e->flag) {
		strobe_agent_opts_init(&o);
		int rc = strobe_agent_option_set_flag(e, arg, &o, &err);
		if (ok) {
			assert_int_equal(rc, 0);
			assert_true(field(e, &o) == v);
		} else {
			char want[64];
			snprintf(want, sizeof(want), "--%s: ", e->flag);
			if (rc != -EINVAL || !strstr(err.msg, want) || !strstr(err.msg, "out of range"))
				fail_msg("--%s %s: rc %d, '%s'", e->flag, arg, rc, err.msg);
		}
		strobe_agent_opts_free(&o);
	}
	if (e->key) {
		strobe_agent_opts_init(&o);
		int rc = config(e, arg, &o, &err);
		if (ok) {
			assert_int_equal(rc, 0);
			assert_true(field(e, &o) == v);
		} else {
			char want[64];
			snprintf(want, sizeof(want), "\"%s\": ", e->key);
			if (rc != -EINVAL || !strstr(err.msg, want) || !strstr(err.msg, "agent.json"))
				fail_msg("\"%s\": %s: rc %d, '%s'", e->key, arg, rc, err.msg);
		}
		strobe_agent_opts_free(&o);
	}
}

static void test_bounds(void **state)
{
	unsigned n = 0;
	FOR_EACH(e) {
		if (!is_number(e))
			continue;
		n++;
		assert_true(e->min <= e->max);
		bound(e, e->min, true);
		bound(e, e->max, true);
		double below = e->type == STROBE_AOT_DOUBLE ? e->min / 2 : e->min - 1;
		double above = e->type == STROBE_AOT_DOUBLE ? e->max * 1.5 : e->max + 1;
		if (e->min == 0)
			below = -1;
		bound(e, below, false);
		bound(e, above, false);
	}
	assert_true(n >= 9);
}

/* A flag and its key, and a flag without argument and the value it stands for, store alike. */
static void test_flag_is_key(void **state)
{
	unsigned n = 0;
	FOR_EACH(e) {
		if (!e->flag || !e->key || e->type == STROBE_AOT_TOKEN_FILE)
			continue;
		const char *arg = e->implied;
		char json[128], mid[64];
		snprintf(mid, sizeof(mid), "%.0f", (e->min + e->max) / 2 - 0.5);
		switch (e->type) {
		case STROBE_AOT_UINT: case STROBE_AOT_BYTES: case STROBE_AOT_PIDS:
			arg = mid;
			break;
		case STROBE_AOT_DOUBLE: arg = "2.5"; break;
		case STROBE_AOT_MODE: arg = "perf"; break;
		case STROBE_AOT_CALL_GRAPH: arg = "fp"; break;
		case STROBE_AOT_LOG_LEVEL: arg = "debug"; break;
		case STROBE_AOT_SYMBOLIZE: arg = "server"; break;
		case STROBE_AOT_REGEX: arg = "^a+b$"; break;
		case STROBE_AOT_LABELS: arg = "team=x"; break;
		case STROBE_AOT_BOOL: break;
		default: arg = "text"; break;
		}
		assert_non_null(arg);
		if (e->type == STROBE_AOT_LABELS)
			snprintf(json, sizeof(json), "{\"team\": \"x\"}");
		else if (e->type == STROBE_AOT_BOOL || is_number(e))
			snprintf(json, sizeof(json), "%s", arg);
		else
			snprintf(json, sizeof(json), "\"%s\"", arg);
		strobe_agent_opts a, b;
		strobe_err err = {{0}};
		strobe_agent_opts_init(&a);
		strobe_agent_opts_init(&b);
		/* the value away from its default, so that a flag that did nothing shows */
		if (strobe_agent_option_set_flag(e, e->metavar ? arg : NULL, &a, &err) < 0)
			fail_msg("--%s %s: %s", e->flag, arg, err.msg);
		if (config(e, json, &b, &err) < 0)
			fail_msg("\"%s\": %s: %s", e->key, json, err.msg);
		const char *fa = (const char *)&a + e->off, *fb = (const char *)&b + e->off;
		strobe_agent_opts d;
		strobe_agent_opts_init(&d);
		const char *fd = (const char *)&d + e->off;
		switch (e->type) {
		case STROBE_AOT_BOOL:
			assert_int_equal(*(const bool *)fa, *(const bool *)fb);
			assert_int_not_equal(*(const bool *)fa, *(const bool *)fd);
			break;
		case STROBE_AOT_STR: case STROBE_AOT_REGEX:
			assert_string_equal(*(char *const *)fa, *(char *const *)fb);
			break;
		case STROBE_AOT_LABELS:
			assert_int_equal(a.nlabels, 1);
			assert_string_equal(a.labels[0], b.labels[0]);
			break;
		case STROBE_AOT_SYMBOLIZE:
			assert_true(a.symbolize_server && b.symbolize_server);
			break;
		case STROBE_AOT_MODE: case STROBE_AOT_CALL_GRAPH: case STROBE_AOT_LOG_LEVEL:
			assert_int_equal(*(const unsigned *)fa, *(const unsigned *)fb);
			assert_int_not_equal(*(const unsigned *)fa, *(const unsigned *)fd);
			break;
		default:
			assert_true(field(e, &a) == field(e, &b));
			break;
		}
		strobe_agent_opts_free(&a);
		strobe_agent_opts_free(&b);
		strobe_agent_opts_free(&d);
		n++;
	}
	assert_true(n >= 30);
	/* the flags without a key stand for a value of another key */
	strobe_agent_opts o;
	strobe_err err = {{0}};
	strobe_agent_opts_init(&o);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("dwarf"), NULL, &o,
						      &err), 0);
	assert_false(o.no_dwarf);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("no-dwarf"), NULL,
						      &o, &err), 0);
	assert_true(o.no_dwarf);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("symbolize"),
						      "server", &o, &err), 0);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("no-symbolize"),
						      NULL, &o, &err), 0);
	assert_true(o.no_symbolize);
	assert_false(o.symbolize_server);
	/* several pids in one flag, after the config's */
	assert_int_equal(config(strobe_agent_option_by_key("targets.pids"), "7", &o, &err), 0);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("pid"), "8,9", &o,
						      &err), 0);
	assert_int_equal(o.npids, 3);
	assert_int_equal(o.pids[2], 9);
	/* sizes with a suffix */
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("spool-max"), "2M",
						      &o, &err), 0);
	assert_int_equal(o.spool_max, 2u << 20);
	assert_int_equal(strobe_agent_option_set_flag(strobe_agent_option_by_flag("freq"), "2.5", &o,
						      &err), -EINVAL);
	assert_non_null(strstr(err.msg, "--freq: 2.5 is not a whole number"));
	strobe_agent_opts_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_flag_is_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
