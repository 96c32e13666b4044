// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the JVM perf-map requests (agent/jvm_perfmap.c) under a fake proc root, so that
 * no JVM is needed and every file the code reads is this test's: PROC/PID/maps (libjvm.so mapped
 * or not), PROC/PID/status (NSpid, SigCgt) and the attach socket PROC/PID/root/tmp/.java_pidNS,
 * served here by a thread that checks the request HotSpot's attach listener would get and
 * answers as it does.
 *
 *   - a HotSpot JVM is one that maps libjvm.so (not a file named like it);
 *   - a JVM whose listener is up is asked for Compiler.perfmap and its "0" is success; an
 *     error code is refused, with the JVM's message; a JVM that does not catch SIGQUIT (-Xrs)
 *     is never signalled; a process that is no JVM, and one that is gone, say so;
 *   - the agent's form asks on its own thread and says the outcome once.
 * The pid is one that does not exist on this machine, so that reading /proc instead of the
 * configured root fails every case.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define UNIT_TMPDIR_NAME "jvm"
#include "unit_tmpdir.h"

#include "strobe/jvm_perfmap.h"

#define NSPID 7

/* A pid no process has here. */
static pid_t free_pid(void)
{
	for (pid_t p = 4000000; p < 4100000; p++)
		if (kill(p, 0) < 0 && errno == ESRCH)
			return p;
	fail_msg("no free pid");
	return -1;
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* PROC/pid with its maps (libjvm.so mapped when jvm) and status (SigCgt with SIGQUIT when
 * catches), and PROC/pid/root/tmp. */
static void fake_proc(pid_t pid, bool jvm, bool catches)
{
	char path[400], text[400];
	snprintf(path, sizeof(path), "%s/%d", dir, (int)pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/root", dir, (int)pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/root/tmp", dir, (int)pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/maps", dir, (int)pid);
	put_file(path, jvm ? "7f0000000000-7f0000100000 r-xp 00000000 08:01 5 /usr/lib/jvm/lib/"
			     "server/libjvm.so\n"
			   : "7f0000000000-7f0000100000 r-xp 00000000 08:01 5 /opt/libjvm.so.old\n");
	snprintf(path, sizeof(path), "%s/%d/status", dir, (int)pid);
	snprintf(text, sizeof(text), "Name:\tjava\nNSpid:\t%d\t%d\nSigCgt:\t%016llx\n", (int)pid,
		 NSPID, catches ? 1ull << (SIGQUIT - 1) : 0ull);
	put_file(path, text);
}

/* The JVM's attach listener: one connection, the request checked, `answer` sent. */
typedef struct listener {
	int fd;
	const char *answer;
	bool request_ok;
	pthread_t th;
} listener;

static void *serve(void *arg)
{
	listener *l = arg;
	int c = accept(l->fd, NULL, NULL);
	if (c < 0)
		return NULL;
	static const char want[] = "1\0jcmd\0Compiler.perfmap\0\0";
	char got[sizeof(want)];
	size_t n = 0;
	while (n < sizeof(got)) {
		ssize_t r = recv(c, got + n, sizeof(got) - n, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	l->request_ok = n == sizeof(want) && memcmp(got, want, sizeof(want)) == 0;
	if (send(c, l->answer, strlen(l->answer), MSG_NOSIGNAL) < 0)
		l->request_ok = false;
	close(c);
	return NULL;
}

static void listen_at(listener *l, pid_t pid, const char *answer)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int len = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d/root/tmp/.java_pid%d", dir,
			   (int)pid, NSPID);
	assert_true(len > 0 && (size_t)len < sizeof(sa.sun_path));
	unlink(sa.sun_path);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(l->fd >= 0);
	assert_int_equal(bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l->fd, 1), 0);
	l->answer = answer;
	l->request_ok = false;
	assert_int_equal(pthread_create(&l->th, NULL, serve, l), 0);
}

static void listen_done(listener *l)
{
	pthread_join(l->th, NULL);
	close(l->fd);
}

static void test_is_hotspot(void **state)
{
	pid_t jvm = free_pid();
	fake_proc(jvm, true, true);
	assert_true(strobe_jvm_is_hotspot(dir, jvm));
	assert_false(strobe_jvm_is_hotspot(NULL, jvm)); /* no such process in /proc */
	pid_t other = jvm + 1;
	while (kill(other, 0) == 0 || errno != ESRCH)
		other++;
	fake_proc(other, false, true);
	assert_false(strobe_jvm_is_hotspot(dir, other)); /* libjvm.so.old is not libjvm.so */
	assert_false(strobe_jvm_is_hotspot(NULL, getpid()));
}

static void test_write_perfmap(void **state)
{
	pid_t pid = free_pid();
	fake_proc(pid, true, true);
	char why[256];
	listener l;
	listen_at(&l, pid, "0\n");
	assert_int_equal(strobe_jvm_write_perfmap(dir, pid, 3000, why, sizeof(why)), 0);
	listen_done(&l);
	assert_true(l.request_ok);
	assert_string_equal(why, "ok");
	/* the JVM refuses: its message */
	listen_at(&l, pid, "-1\nCompiler.perfmap is not a known command\n");
	assert_int_equal(strobe_jvm_write_perfmap(dir, pid, 3000, why, sizeof(why)), -ENOTSUP);
	listen_done(&l);
	assert_true(l.request_ok);
	assert_non_null(strstr(why, "is not a known command"));
	/* the same process read from /proc instead: gone */
	assert_int_equal(strobe_jvm_write_perfmap(NULL, pid, 3000, why, sizeof(why)), -ESRCH);
}

static void test_not_asked(void **state)
{
	pid_t pid = free_pid();
	char why[256];
	/* -Xrs: SIGQUIT would end it, so no listener is started (and no signal sent) */
	fake_proc(pid, true, false);
	assert_int_equal(strobe_jvm_write_perfmap(dir, pid, 3000, why, sizeof(why)), -ENOTSUP);
	assert_non_null(strstr(why, "-Xrs"));
	/* no libjvm.so: not a JVM */
	pid_t other = pid + 1;
	while (kill(other, 0) == 0 || errno != ESRCH)
		other++;
	fake_proc(other, false, true);
	assert_int_equal(strobe_jvm_write_perfmap(dir, other, 3000, why, sizeof(why)), -ENOTSUP);
	assert_non_null(strstr(why, "not a HotSpot JVM"));
	/* no such process */
	assert_int_equal(strobe_jvm_write_perfmap(dir, other + 100000, 3000, why, sizeof(why)),
			 -ESRCH);
}

/* The agent's form: what it said. */
static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;
static char said[256];
static int nsaid;

static void say(void *ctx, pid_t pid, bool failed, const char *msg)
{
	(void)ctx;
	pthread_mutex_lock(&said_mu);
	snprintf(said, sizeof(said), "%d %s %s", (int)pid, failed ? "failed" : "ok", msg);
	nsaid++;
	pthread_mutex_unlock(&said_mu);
}

static void test_maps_thread(void **state)
{
	pid_t pid = free_pid();
	fake_proc(pid, true, true);
	listener l;
	listen_at(&l, pid, "0\n");
	strobe_jvm_maps *m = strobe_jvm_maps_new(dir, 0, say, NULL);
	assert_non_null(m);
	nsaid = 0;
	assert_int_equal(strobe_jvm_maps_unnamed(m, pid), 0);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) { /* its thread asks: wait for what it says, with a deadline */
		pthread_mutex_lock(&said_mu);
		int n = nsaid;
		pthread_mutex_unlock(&said_mu);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (n || t.tv_sec - t0.tv_sec > 20)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
	listen_done(&l);
	unsigned long asked, written;
	strobe_jvm_maps_counts(m, &asked, &written);
	strobe_jvm_maps_free(m);
	assert_int_equal(nsaid, 1);
	char want[64];
	snprintf(want, sizeof(want), "%d ok JVM %d writes", (int)pid, (int)pid);
	assert_memory_equal(said, want, strlen(want));
	assert_true(l.request_ok);
	assert_int_equal(asked, 1);
	assert_int_equal(written, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_is_hotspot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_perfmap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_maps_thread, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
