// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the agent's policy pieces: the spool (bounded, oldest dropped first and counted,
 * survives a restart, corrupt and half-written files deleted and counted), the retry backoff
 * (exponential, capped, jittered within [half, full]), the server's Retry-After (seconds or an
 * HTTP date, capped, nonsense ignored), the service-name rules on a synthetic
 * /proc tree, the config parser's errors (each naming the key and the problem), and the options
 * strobe_agent_new refuses (NULL, errno EINVAL, a message naming the option).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strobe/agent.h"
#include "strobe/sampler.h"
#include "../../agent/proc_info.h"

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/strobe-test-agent.XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static void rm_rf(const char *d)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static unsigned count_files(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "ls -1 '%s' | wc -l", dir);
	FILE *p = popen(cmd, "r");
	unsigned n = 0;
	assert_int_equal(fscanf(p, "%u", &n), 1);
	pclose(p);
	return n;
}

/* Peeks the oldest item and checks its meta; removes it. */
static void expect_next(strobe_spool *sp, const char *meta, size_t len)
{
	uint64_t id;
	char *m;
	void *b;
	size_t l;
	assert_int_equal(strobe_spool_peek(sp, 0, &id, &m, &b, &l), 0);
	assert_string_equal(m, meta);
	assert_int_equal(l, len);
	for (size_t i = 0; i < l; i++)
		assert_int_equal(((unsigned char *)b)[i], (unsigned char)(meta[0] + i));
	free(m);
	free(b);
	strobe_spool_remove(sp, id);
}

static void add(strobe_spool *sp, const char *meta, size_t len)
{
	unsigned char *b = malloc(len);
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)(meta[0] + i);
	assert_int_equal(strobe_spool_add(sp, meta, b, len), 0);
	free(b);
}

static void spool_bounded(bool on_disk)
{
	char *d = on_disk ? tmpdir() : NULL;
	char sub[512] = "";
	if (d)
		snprintf(sub, sizeof(sub), "%s/spool", d);
	/* every item is 22 (header) + 1 (meta) + 1000 bytes = 1023: three fit in 3100 */
	strobe_spool *sp = strobe_spool_open(d ? sub : NULL, 3100, NULL);
	assert_non_null(sp);
	add(sp, "a", 1000);
	add(sp, "b", 1000);
	add(sp, "c", 1000);
	strobe_spool_stats st;
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 3);
	assert_int_equal(st.bytes, 3 * 1023);
	assert_int_equal(st.dropped, 0);
	add(sp, "d", 1000); /* a goes */
	add(sp, "e", 1000); /* b goes */
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 3);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(st.dropped_bytes, 2 * 1023);
	/* too large to ever fit: dropped itself, the others stay */
	add(sp, "f", 5000);
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 3);
	assert_int_equal(st.dropped, 3);
	if (d)
		assert_int_equal(count_files(sub), 3);
	expect_next(sp, "c", 1000);
	expect_next(sp, "d", 1000);
	expect_next(sp, "e", 1000);
	uint64_t id;
	char *m;
	void *b;
	size_t l;
	assert_int_equal(strobe_spool_peek(sp, 10, &id, &m, &b, &l), -ENOENT);
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.removed, 3);
	strobe_spool_close(sp);
	if (d) {
		assert_int_equal(count_files(sub), 0);
		rm_rf(d);
		free(d);
	}
}

static void test_spool_bounded_memory(void **state) { spool_bounded(false); }
static void test_spool_bounded_disk(void **state) { spool_bounded(true); }

/* The item being pushed is not the one a full spool drops: a profile counted as dropped that
 * also reached the server would break exported = stored + dropped (agent_outage/accounting). */
static void test_spool_in_flight(void **state)
{
	strobe_spool *sp = strobe_spool_open(NULL, 3100, NULL);
	assert_non_null(sp);
	add(sp, "a", 1000);
	add(sp, "b", 1000);
	add(sp, "c", 1000);
	uint64_t id;
	char *m;
	void *b;
	size_t l;
	assert_int_equal(strobe_spool_peek(sp, 0, &id, &m, &b, &l), 0);
	assert_string_equal(m, "a");
	free(m);
	free(b);
	add(sp, "d", 1000); /* a is in flight: b goes */
	strobe_spool_stats st;
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.items, 3);
	strobe_spool_remove(sp, id); /* a delivered */
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.removed, 1);
	assert_int_equal(st.items, 2);
	/* a failed push releases its item: it is the oldest again, and dropped first */
	assert_int_equal(strobe_spool_peek(sp, 0, &id, &m, &b, &l), 0);
	assert_string_equal(m, "c");
	free(m);
	free(b);
	strobe_spool_release(sp, id);
	add(sp, "e", 1000);
	add(sp, "f", 1000); /* c goes */
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.dropped, 2);
	expect_next(sp, "d", 1000);
	expect_next(sp, "e", 1000);
	/* alone and in flight, with no room for the next: both kept, over the limit by one item */
	assert_int_equal(strobe_spool_peek(sp, 0, &id, &m, &b, &l), 0);
	free(m);
	free(b);
	add(sp, "g", 3000);
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 2);
	assert_int_equal(st.dropped, 2);
	strobe_spool_remove(sp, id);
	expect_next(sp, "g", 3000);
	strobe_spool_close(sp);
}

static void test_spool_restart(void **state)
{
	char *d = tmpdir();
	strobe_spool *sp = strobe_spool_open(d, 1 << 20, NULL);
	assert_non_null(sp);
	add(sp, "x=1", 100);
	add(sp, "y=2", 200);
	add(sp, "z=3", 300);
	strobe_spool_close(sp);
	/* reopened: the same items in the same order, and new ones after them */
	sp = strobe_spool_open(d, 1 << 20, NULL);
	assert_non_null(sp);
	strobe_spool_stats st;
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 3);
	add(sp, "w=4", 50);
	expect_next(sp, "x=1", 100);
	strobe_spool_close(sp);
	/* reopened with a smaller limit: the oldest go first */
	sp = strobe_spool_open(d, 22 + 3 + 300 + 22 + 3 + 50, NULL);
	assert_non_null(sp);
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.items, 2);
	assert_int_equal(st.dropped, 1);
	expect_next(sp, "z=3", 300);
	expect_next(sp, "w=4", 50);
	strobe_spool_close(sp);
	rm_rf(d);
	free(d);
}

static void test_spool_corrupt(void **state)
{
	char *d = tmpdir();
	strobe_spool *sp = strobe_spool_open(d, 1 << 20, NULL);
	add(sp, "good1", 64);
	add(sp, "bad", 64);
	add(sp, "good2", 64);
	strobe_spool_close(sp);
	char path[600];
	/* flip a body byte of the second item: its checksum no longer matches */
	snprintf(path, sizeof(path), "%s/%016x.spool", d, 2);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, 22 + 3 + 10, SEEK_SET);
	fputc(0xff, f);
	fclose(f);
	/* a truncated item, a crashed write's temp file, garbage with our suffix */
	snprintf(path, sizeof(path), "%s/%016x.spool", d, 9);
	write_file(path, "STSP1\n\x05\0\0\0", 10);
	snprintf(path, sizeof(path), "%s/tmp-%016x", d, 10);
	write_file(path, "half", 4);
	snprintf(path, sizeof(path), "%s/junk.spool", d);
	write_file(path, "junk", 4);
	sp = strobe_spool_open(d, 1 << 20, NULL);
	assert_non_null(sp);
	strobe_spool_stats st;
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.corrupt, 3); /* truncated, temp, junk: found at open */
	assert_int_equal(st.items, 3);
	expect_next(sp, "good1", 64);
	expect_next(sp, "good2", 64); /* "bad" is skipped when read */
	strobe_spool_get_stats(sp, &st);
	assert_int_equal(st.corrupt, 4);
	assert_int_equal(st.items, 0);
	strobe_spool_close(sp);
	assert_int_equal(count_files(d), 0);
	rm_rf(d);
	free(d);
}

static void test_spool_bad_dir(void **state)
{
	strobe_err err = {{0}};
	strobe_spool *sp = strobe_spool_open("/proc/no/such/dir", 4096, &err);
	assert_null(sp);
	assert_non_null(strstr(err.msg, "/proc/no/such/dir"));
}

static void test_backoff(void **state)
{
	strobe_backoff b;
	strobe_backoff_init(&b, 500, 30000, 42);
	uint64_t want[] = {500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
		uint64_t w = strobe_backoff_next(&b);
		assert_true(w >= want[i] / 2);
		assert_true(w <= want[i]);
	}
	strobe_backoff_reset(&b);
	uint64_t w = strobe_backoff_next(&b);
	assert_true(w >= 250 && w <= 500);
	/* jitter: two agents with different seeds do not retry in lockstep */
	strobe_backoff x, y;
	strobe_backoff_init(&x, 1000, 60000, 1);
	strobe_backoff_init(&y, 1000, 60000, 2);
	int same = 0;
	for (int i = 0; i < 8; i++)
		same += strobe_backoff_next(&x) == strobe_backoff_next(&y);
	assert_true(same < 3);
}

static void test_retry_after(void **state)
{
	/* 1994-11-06 08:49:37 UTC, RFC 9110's example date, in its three forms */
	const int64_t t = 784111777, now = (t - 90) * 1000 + 250;
	assert_int_equal(strobe_retry_after_ms("3", now), 3000);
	assert_int_equal(strobe_retry_after_ms("120", now), 120000);
	assert_int_equal(strobe_retry_after_ms("Sun, 06 Nov 1994 08:49:37 GMT", now), 89750);
	assert_int_equal(strobe_retry_after_ms("Sunday, 06-Nov-94 08:49:37 GMT", now), 89750);
	assert_int_equal(strobe_retry_after_ms("Sun Nov  6 08:49:37 1994", now), 89750);
	/* capped: a wrong or hostile server cannot stop the agent for good */
	assert_int_equal(strobe_retry_after_ms("86400", now), STROBE_RETRY_AFTER_MAX_MS);
	assert_int_equal(strobe_retry_after_ms("99999999999999999999999", now),
			 STROBE_RETRY_AFTER_MAX_MS);
	assert_int_equal(strobe_retry_after_ms("Sun, 06 Nov 2094 08:49:37 GMT", now),
			 STROBE_RETRY_AFTER_MAX_MS);
	/* now, a time past, or not a Retry-After: the agent's own backoff decides */
	assert_int_equal(strobe_retry_after_ms("0", now), -1);
	assert_int_equal(strobe_retry_after_ms("Sun, 06 Nov 1994 08:00:00 GMT", now), -1);
	assert_int_equal(strobe_retry_after_ms("", now), -1);
	assert_int_equal(strobe_retry_after_ms("5s", now), -1);
	assert_int_equal(strobe_retry_after_ms("1.5", now), -1);
	assert_int_equal(strobe_retry_after_ms("-3", now), -1);
	assert_int_equal(strobe_retry_after_ms("soon", now), -1);
}

/* A synthetic /proc/PID with comm, environ, cgroup and exe. */
static void fake_proc(const char *root, int pid, const char *comm, const char *env, size_t envlen,
		      const char *cgroup, const char *exe)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/%d", root, pid);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/%d/comm", root, pid);
	write_file(p, comm, strlen(comm));
	if (env) {
		snprintf(p, sizeof(p), "%s/%d/environ", root, pid);
		write_file(p, env, envlen);
	}
	if (cgroup) {
		snprintf(p, sizeof(p), "%s/%d/cgroup", root, pid);
		write_file(p, cgroup, strlen(cgroup));
	}
	if (exe) {
		snprintf(p, sizeof(p), "%s/%d/exe", root, pid);
		assert_int_equal(symlink(exe, p), 0);
	}
}

static void test_service_name(void **state)
{
	char *root = tmpdir();
	static const char env1[] = "PATH=/bin\0STROBE_SERVICE=checkout\0HOME=/\0";
	static const char env2[] = "PYROSCOPE_APPLICATION_NAME=ride-sharing\0";
	static const char env3[] = "STROBE_SERVICE_X=no\0STROBE_SERVICE=\0";
	fake_proc(root, 10, "app\n", env1, sizeof(env1) - 1, "0::/system.slice/app.service\n",
		  "/usr/bin/app");
	fake_proc(root, 11, "python3\n", env2, sizeof(env2) - 1, NULL, NULL);
	fake_proc(root, 12, "nginx\n", env3, sizeof(env3) - 1,
		  "0::/system.slice/nginx.service\n", "/usr/sbin/nginx");
	fake_proc(root, 13, "redis\n", NULL, 0,
		  "0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n",
		  "/usr/bin/redis-server");
	fake_proc(root, 14, "java\n", NULL, 0,
		  "12:cpu:/kubepods/burstable/podX/fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\n",
		  NULL);
	fake_proc(root, 15, "vim\n", NULL, 0,
		  "0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.scope\n",
		  "/usr/bin/vim.basic (deleted)");
	fake_proc(root, 16, "kworker/0:1\n", NULL, 0, "0::/\n", NULL);
	/* the test binary itself: a real ELF with a build ID */
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = 0;
	fake_proc(root, 17, "test\n", NULL, 0, NULL, self);

	strobe_proc_info pi;
	assert_int_equal(strobe_proc_info_read(root, 10, &pi), 0);
	assert_string_equal(pi.service, "checkout");
	assert_string_equal(pi.source, "env");
	assert_string_equal(pi.comm, "app");
	assert_string_equal(pi.exe, "/usr/bin/app");
	assert_string_equal(pi.cgroup, "/system.slice/app.service");
	assert_int_equal(strobe_proc_info_read(root, 11, &pi), 0);
	assert_string_equal(pi.service, "ride-sharing");
	assert_int_equal(strobe_proc_info_read(root, 12, &pi), 0);
	assert_string_equal(pi.service, "nginx"); /* empty STROBE_SERVICE does not count */
	assert_string_equal(pi.source, "systemd");
	assert_int_equal(strobe_proc_info_read(root, 13, &pi), 0);
	assert_string_equal(pi.service, "container/0123456789ab");
	assert_string_equal(pi.source, "container");
	assert_int_equal(strobe_proc_info_read(root, 14, &pi), 0);
	assert_string_equal(pi.service, "container/fedcba987654");
	assert_string_equal(pi.cgroup, "/kubepods/burstable/podX/fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
	assert_int_equal(strobe_proc_info_read(root, 15, &pi), 0);
	assert_string_equal(pi.service, "vim.basic"); /* user@.service is not a service */
	assert_string_equal(pi.source, "exe");
	assert_int_equal(strobe_proc_info_read(root, 16, &pi), 0);
	assert_string_equal(pi.service, "kworker/0:1");
	assert_string_equal(pi.source, "comm");
	assert_int_equal(strobe_proc_info_read(root, 17, &pi), 0);
	assert_int_equal(strlen(pi.build_id), 40);
	assert_int_equal(strobe_proc_info_read(root, 99, &pi), -ENOENT);
	/* the cgroup alone (what the agent reads again to see a process moved): as read with the
	 * rest, the unified hierarchy's line first wherever it is, cleaned */
	fake_proc(root, 18, "mix\n", NULL, 0, "12:cpu:/old\n0::/new.slice/x.service\n", NULL);
	fake_proc(root, 19, "q\n", NULL, 0, "0::/a\"b\n", NULL);
	char cg[sizeof(pi.cgroup)];
	assert_int_equal(proc_info_cgroup(root, 10, cg, sizeof(cg)), 0);
	assert_string_equal(cg, "/system.slice/app.service");
	assert_int_equal(proc_info_cgroup(root, 14, cg, sizeof(cg)), 0);
	assert_int_equal(strobe_proc_info_read(root, 14, &pi), 0);
	assert_string_equal(cg, pi.cgroup);
	assert_int_equal(proc_info_cgroup(root, 18, cg, sizeof(cg)), 0);
	assert_string_equal(cg, "/new.slice/x.service");
	assert_int_equal(strobe_proc_info_read(root, 18, &pi), 0);
	assert_string_equal(pi.cgroup, "/new.slice/x.service");
	assert_int_equal(proc_info_cgroup(root, 19, cg, sizeof(cg)), 0);
	assert_string_equal(cg, "/a_b");
	assert_int_equal(proc_info_cgroup(root, 11, cg, sizeof(cg)), -ENOENT); /* no file */
	assert_string_equal(cg, "");
	assert_int_equal(proc_info_cgroup(root, 99, cg, sizeof(cg)), -ENOENT);
	rm_rf(root);
	free(root);
}

/* strobe_agent_new refuses bad options before it opens anything: NULL with errno EINVAL (which
 * cmd_agent turns into exit status 2) and a message naming the option. */
static void agent_refused(const strobe_agent_opts *o, const char *want)
{
	strobe_err err = {{0}};
	errno = 0;
	strobe_agent *a = strobe_agent_new(o, &err);
	int e = errno;
	if (a || e != EINVAL || !strstr(err.msg, want))
		fail_msg("strobe_agent_new: got %p, errno %d, '%s'; want NULL, EINVAL and '%s'",
			 (void *)a, e, err.msg, want);
}

static void test_agent_new_refused(void **state)
{
	char *d = tmpdir();
	char path[512];
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	agent_refused(&o, "no server URL");
	o.server = strdup("http://127.0.0.1:1");
	snprintf(path, sizeof(path), "%s/ca.txt", d);
	write_file(path, "not a certificate\n", 18);
	o.ca = strdup(path);
	agent_refused(&o, "not a PEM file");
	free(o.ca);
	snprintf(path, sizeof(path), "%s/missing.pem", d);
	o.ca = strdup(path);
	agent_refused(&o, "missing.pem: No such file");
	free(o.ca);
	o.ca = NULL;
	/* refused after the agent was allocated: what it holds is freed (ASan's leak check) */
	o.comm_re = strdup("(unclosed");
	agent_refused(&o, "--comm '(unclosed'");
	strobe_agent_opts_free(&o);
	rm_rf(d);
	free(d);
}

static void config_error(const char *json, const char *want)
{
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	strobe_err err = {{0}};
	int rc = strobe_agent_config_parse(json, strlen(json), "agent.json", &o, &err);
	if (rc != -EINVAL || !strstr(err.msg, want))
		fail_msg("config %s: got %d '%s', want -EINVAL with '%s'", json, rc, err.msg, want);
	strobe_agent_opts_free(&o);
}

static void test_config(void **state)
{
	static const char good[] =
		"{\"server\": \"http://127.0.0.1:4100\", \"frequency\": 49, \"offcpu\": true,"
		" \"interval\": 15, \"labels\": {\"env\": \"prod\", \"region\": \"eu\"},"
		" \"targets\": {\"comm\": \"^(nginx|postgres)$\", \"cgroup\": \"/system.slice\"},"
		" \"processes\": [{\"comm\": \"^postgres$\", \"service_name\": \"db\","
		"                  \"labels\": {\"team\": \"data\"}}],"
		" \"spool\": {\"dir\": \"/var/lib/strobe/spool\", \"max_bytes\": 1048576},"
		" \"max_cpu\": 0.5, \"admin\": \"127.0.0.1:4101\", \"log_level\": \"debug\","
		" \"symbolize\": false}";
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	strobe_err err = {{0}};
	assert_int_equal(strobe_agent_config_parse(good, sizeof(good) - 1, "agent.json", &o, &err), 0);
	assert_string_equal(o.server, "http://127.0.0.1:4100");
	assert_int_equal(o.freq, 49);
	assert_true(o.offcpu);
	assert_int_equal(o.interval_s, 15);
	assert_int_equal(o.nlabels, 2);
	assert_string_equal(o.labels[0], "env=prod");
	assert_string_equal(o.comm_re, "^(nginx|postgres)$");
	assert_int_equal(o.nrules, 1);
	assert_string_equal(o.rules[0].service_name, "db");
	assert_string_equal(o.rules[0].labels[0], "team=data");
	assert_int_equal(o.spool_max, 1048576);
	assert_true(o.max_cpu == 0.5);
	assert_int_equal(o.log_level, STROBE_LOG_DEBUG);
	assert_true(o.no_symbolize);
	assert_true(o.no_dwarf); /* the default: symbol tables only */
	strobe_agent_opts_free(&o);
	strobe_agent_opts_init(&o);
	assert_int_equal(strobe_agent_config_parse("{\"dwarf\": true}", 15, "agent.json", &o, &err), 0);
	assert_false(o.no_dwarf);
	assert_int_equal(o.call_graph, STROBE_CG_AUTO); /* the default */
	assert_int_equal(o.unwind_cache_mb, 16);
	assert_int_equal(o.unwind_table_mb, 8);
	strobe_agent_opts_free(&o);
	strobe_agent_opts_init(&o);
	static const char cg[] =
		"{\"call_graph\": \"fp\", \"unwind_cache_mb\": 4, \"unwind_table_mb\": 0}";
	assert_int_equal(strobe_agent_config_parse(cg, sizeof(cg) - 1, "agent.json", &o, &err), 0);
	assert_int_equal(o.call_graph, STROBE_CG_FP);
	assert_int_equal(o.unwind_cache_mb, 4);
	assert_int_equal(o.unwind_table_mb, 0);
	assert_int_equal(o.offcpu_mode, STROBE_OFFCPU_AUTO); /* the default */
	strobe_agent_opts_free(&o);
	strobe_agent_opts_init(&o);
	static const char om[] = "{\"offcpu_mode\": \"perf\", \"offcpu_entries\": 4096}";
	assert_int_equal(strobe_agent_config_parse(om, sizeof(om) - 1, "agent.json", &o, &err), 0);
	assert_int_equal(o.offcpu_mode, STROBE_OFFCPU_PERF);
	assert_int_equal(o.offcpu_entries, 4096);
	assert_false(o.locks); /* the default */
	strobe_agent_opts_free(&o);
	strobe_agent_opts_init(&o);
	assert_int_equal(strobe_agent_config_parse("{\"locks\": true}", 15, "agent.json", &o, &err), 0);
	assert_true(o.locks);
	assert_false(o.no_preload); /* preloaded processes are collected by default */
	assert_null(o.preload_dir);
	strobe_agent_opts_free(&o);
	strobe_agent_opts_init(&o);
	static const char pl[] = "{\"preload\": false, \"preload_dir\": \"/run/strobe-heap\"}";
	assert_int_equal(strobe_agent_config_parse(pl, sizeof(pl) - 1, "agent.json", &o, &err), 0);
	assert_true(o.no_preload);
	assert_string_equal(o.preload_dir, "/run/strobe-heap");
	strobe_agent_opts_free(&o);
	assert_int_equal(strobe_offcpu_mode_parse("bpf"), STROBE_OFFCPU_BPF);
	assert_int_equal(strobe_offcpu_mode_parse("ebpf"), -EINVAL);
	assert_string_equal(strobe_offcpu_mode_name(STROBE_OFFCPU_BPF), "bpf");
	config_error("{\"unwind_table_mb\": 64}", "\"unwind_table_mb\"");
	config_error("{\"offcpu_mode\": \"kprobe\"}",
		     "\"offcpu_mode\": expected \"auto\", \"bpf\" or \"perf\"");
	config_error("{\"offcpu_entries\": 10}", "\"offcpu_entries\": 10 is out of range");
	config_error("{\"locks\": \"yes\"}", "\"locks\": expected true or false");
	config_error("{\"preload\": 1}", "\"preload\": expected true or false");
	/* glibc's regcomp grows geometrically with repeated repetitions (found by fuzzing: 2 GB) */
	config_error("{\"targets\": {\"comm\": \"^postg+++++++++++++++++++++++++++++res$\"}}",
		     "stacked repetition operators");
	config_error("{\"processes\": [{\"exe\": \"(a{99}){99}\"}]}", "too many repetition operators");
	config_error("{\"call_graph\": \"lbr\"}", "\"call_graph\": expected \"fp\", \"dwarf\" or \"auto\"");
	config_error("{\"unwind_cache_mb\": 0}", "\"unwind_cache_mb\": 0 is out of range");

	config_error("{\"frequncy\": 19}", "\"frequncy\": unknown key");
	config_error("{\"frequency\": \"fast\"}", "\"frequency\": expected a number");
	config_error("{\"frequency\": 0}", "\"frequency\": 0 is out of range");
	config_error("{\"interval\": 99999}", "\"interval\"");
	config_error("{\"offcpu\": 1}", "\"offcpu\": expected true or false");
	config_error("{\"labels\": {\"__x\": \"y\"}}", "\"labels\"");
	config_error("{\"labels\": {\"ok\": 5}}", "label values must be strings");
	config_error("{\"targets\": {\"comm\": \"(\"}}", "\"targets.comm\": not a valid");
	config_error("{\"targets\": {\"pids\": [1, -3]}}", "\"targets.pids\"");
	config_error("{\"spool\": {\"max\": 5}}", "\"max\": unknown key in spool");
	config_error("{\"processes\": [{\"name\": \"x\"}]}", "unknown key in a processes entry");
	config_error("{\"log_level\": \"loud\"}", "\"log_level\"");
	config_error("[1, 2]", "must be a JSON object");
	config_error("{\"server\": ", "agent.json:1:");
	config_error("{\"server\": \"a\", \"server\": \"b\"}", "agent.json:");

	/* --label checking */
	char **l = NULL;
	unsigned nl = 0;
	assert_int_equal(strobe_agent_add_label(&l, &nl, "team.name=x", &err), 0);
	assert_int_equal(strobe_agent_add_label(&l, &nl, "9x=y", &err), -EINVAL);
	assert_int_equal(strobe_agent_add_label(&l, &nl, "novalue", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "novalue"));
	assert_int_equal(nl, 1);
	free(l[0]);
	free(l);
	assert_int_equal(strobe_agent_config_load("/no/such/agent.json", &o, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/no/such/agent.json"));
	strobe_agent_opts_free(&o);
}

/* --ca, the admin token in the config, and --admin-token-file's checks. */
static void test_config_tls_admin(void **state)
{
	strobe_agent_opts o;
	strobe_agent_opts_init(&o);
	strobe_err err = {{0}};
	static const char good[] = "{\"ca\": \"/etc/strobe/ca.pem\", \"admin_token\": \"t0k\"}";
	assert_int_equal(strobe_agent_config_parse(good, sizeof(good) - 1, "agent.json", &o, &err), 0);
	assert_string_equal(o.ca, "/etc/strobe/ca.pem");
	assert_string_equal(o.admin_token, "t0k");
	strobe_agent_opts_free(&o);
	config_error("{\"admin_token\": \"\"}", "\"admin_token\": must not be empty");
	config_error("{\"ca\": 5}", "\"ca\": expected a string");
	config_error("{\"admin_token_file\": 5}", "\"admin_token_file\": expected a string");

	char *d = tmpdir(), path[256];
	snprintf(path, sizeof(path), "%s/tok", d);
	char *tok = NULL;
	write_file(path, "s3cret\n", 7);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(strobe_token_file_read(path, &tok, &err), 0);
	assert_string_equal(tok, "s3cret"); /* the line, without its newline */
	free(tok);
	/* readable by the group: refused, the file named and the fix said */
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(strobe_token_file_read(path, &tok, &err), -EACCES);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "chmod 600"));
	assert_null(tok);
	write_file(path, "two words\n", 10);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(strobe_token_file_read(path, &tok, &err), -EINVAL);
	write_file(path, "\n", 1);
	assert_int_equal(strobe_token_file_read(path, &tok, &err), -EINVAL);
	/* through the config, replacing a token given before */
	write_file(path, "from-file\n", 10);
	char json[400];
	snprintf(json, sizeof(json), "{\"admin_token\": \"old\", \"admin_token_file\": \"%s\"}", path);
	strobe_agent_opts_init(&o);
	assert_int_equal(strobe_agent_config_parse(json, strlen(json), "agent.json", &o, &err), 0);
	assert_string_equal(o.admin_token, "from-file");
	strobe_agent_opts_free(&o);
	snprintf(path, sizeof(path), "%s/none", d);
	assert_int_equal(strobe_token_file_read(path, &tok, &err), -ENOENT);
	assert_non_null(strstr(err.msg, path));
	free(tok);
	rm_rf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spool_bounded_memory), cmocka_unit_test(test_spool_bounded_disk),
		cmocka_unit_test(test_spool_in_flight),
		cmocka_unit_test(test_spool_restart),	     cmocka_unit_test(test_spool_corrupt),
		cmocka_unit_test(test_spool_bad_dir),	     cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_agent_new_refused),
		cmocka_unit_test(test_service_name),	     cmocka_unit_test(test_config), cmocka_unit_test(test_config_tls_admin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
