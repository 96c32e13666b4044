// SPDX-License-Identifier: Apache-2.0
/*
 * HotSpot's perf map on request (see include/strobe/jvm_perfmap.h for what and why).
 *
 * The attach protocol is HotSpot's own, the one jcmd speaks (there is no library for it in C):
 *   1. the JVM listens on the UNIX socket /tmp/.java_pid<PID> once its attach listener runs;
 *      the listener starts lazily, when the JVM gets SIGQUIT while a file /tmp/.attach_pid<PID>
 *      exists (owned by the JVM's user or root), and then prints no thread dump;
 *   2. a request is "1\0" (protocol version), the command, and three arguments, each
 *      NUL-terminated: "jcmd\0Compiler.perfmap\0\0\0";
 *   3. the answer is the result code on its own line ("0" is success), then the command's
 *      output, then EOF.
 * PID and /tmp are the JVM's own: its pid in its innermost pid namespace (NSpid) and its mount
 * namespace's /tmp, reached through /proc/PID/root, so JVMs in containers are asked the same
 * way. The symbolizer reads the map at the host path /tmp/perf-<host pid>.map, so a container's
 * JVM is named only where the two agree (the host's pid namespace and /tmp).
 *
 * SIGQUIT's default action ends a process: it is sent only when the JVM catches it (SigCgt in
 * /proc/PID/status), which -Xrs turns off.
 *
 * /proc here is the configured proc root (the agent's proc_root, as its other readers take it):
 * every status, maps, exe and root of a process is read there.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "strobe/clock.h"
#include "strobe/jvm_perfmap.h"
#include "strobe/proc_maps.h"

#define QUEUE_MAX 64
#define PROCS_MAX 4096
#define ANSWER_MAX 4096
#define NOT_JVM_RECHECK_NS (60 * 1000000000ll) /* a process that is not a JVM now may exec one */
#define FAIL_BACKOFF_MAX_NS (300 * 1000000000ll)
#define SWEEP_NS (10 * 1000000000ll)
#define ROOT(r) ((r) ? (r) : "/proc") /* the configured proc root */

static void sayf(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sayf(char *why, size_t n, const char *fmt, ...)
{
	if (!why || !n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
}

bool strobe_jvm_is_hotspot(const char *proc_root, pid_t pid)
{
	FILE *f = strobe_proc_maps_open(proc_root, pid);
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool jvm = false;
	while (!jvm && getline(&line, &cap, f) > 0) {
		char *s = strstr(line, "/libjvm.so");
		jvm = s && (s[10] == '\n' || s[10] == '\0' || s[10] == ' ');
	}
	free(line);
	fclose(f);
	return jvm;
}

typedef struct proc_status {
	pid_t nspid;        /* the innermost namespace's pid */
	uint64_t sigcgt;    /* caught signals, bit n-1 for signal n */
} proc_status;

static int read_status(const char *root, pid_t pid, proc_status *ps)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%d/status", ROOT(root), (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	char line[512];
	ps->nspid = pid;
	ps->sigcgt = 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			for (;;) {
				long v = strtol(p, &end, 10);
				if (end == p)
					break;
				ps->nspid = (pid_t)v;
				p = end;
			}
		} else if (strncmp(line, "SigCgt:", 7) == 0) {
			ps->sigcgt = strtoull(line + 7, NULL, 16);
		}
	}
	fclose(f);
	return 0;
}

static int64_t ms_left(int64_t deadline)
{
	int64_t left = (deadline - strobe_mono_ns()) / 1000000;
	return left > 0 ? left : 0;
}

/* Starts the attach listener (step 1 of the protocol) and waits for its socket. */
static int start_listener(const char *root, pid_t pid, const proc_status *ps, const char *sock,
			  int64_t deadline, char *why, size_t whylen)
{
	if (!(ps->sigcgt & (1ull << (SIGQUIT - 1)))) {
		sayf(why, whylen,
		     "JVM %d does not catch SIGQUIT (started with -Xrs?), whose default action ends "
		     "a process: not sent, so its Java frames stay unnamed", (int)pid);
		return -ENOTSUP;
	}
	char trigger[PATH_MAX];
	snprintf(trigger, sizeof(trigger), "%s/%d/root/tmp/.attach_pid%d", ROOT(root), (int)pid,
		 (int)ps->nspid);
	int fd = open(trigger, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		int e = errno;
		/* without the file, SIGQUIT would make the JVM print a thread dump: not sent */
		sayf(why, whylen, "cannot create %s: %s", trigger, strerror(e));
		return -e;
	}
	close(fd);
	int rc = 0;
	if (kill(pid, SIGQUIT) < 0) {
		rc = -errno;
		sayf(why, whylen, "cannot signal JVM %d: %s", (int)pid, strerror(-rc));
	}
	struct stat st;
	while (rc == 0 && (stat(sock, &st) < 0 || !S_ISSOCK(st.st_mode))) {
		if (!ms_left(deadline)) {
			rc = -ETIMEDOUT;
			sayf(why, whylen,
			     "JVM %d opened no attach socket (%s) in time (-XX:+DisableAttachMechanism?)",
			     (int)pid, sock);
			break;
		}
		nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	}
	unlink(trigger);
	return rc;
}

/* Steps 2 and 3 on a connected socket. */
static int ask(int fd, pid_t pid, int64_t deadline, char *why, size_t whylen)
{
	static const char req[] = "1\0jcmd\0Compiler.perfmap\0\0"; /* + the literal's own NUL */
	struct timeval tv = {.tv_sec = ms_left(deadline) / 1000,
			     .tv_usec = (ms_left(deadline) % 1000) * 1000 + 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (send(fd, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
		int e = errno ? errno : EIO;
		sayf(why, whylen, "cannot send to JVM %d: %s", (int)pid, strerror(e));
		return -e;
	}
	char ans[ANSWER_MAX + 1];
	size_t n = 0;
	for (;;) {
		ssize_t r = recv(fd, ans + n, ANSWER_MAX - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno == EAGAIN ? ETIMEDOUT : errno;
			sayf(why, whylen, "no answer from JVM %d: %s", (int)pid, strerror(e));
			return -e;
		}
		if (r == 0 || (n += (size_t)r) == ANSWER_MAX)
			break;
	}
	ans[n] = '\0';
	char *end;
	long code = strtol(ans, &end, 10);
	if (end == ans) {
		sayf(why, whylen, "JVM %d answered something that is not an attach result", (int)pid);
		return -EPROTO;
	}
	if (code != 0) {
		/* the message: the first non-empty line after the code, e.g. an unknown command */
		char *msg = end + strspn(end, "\r\n");
		msg[strcspn(msg, "\r\n")] = '\0';
		sayf(why, whylen, "JVM %d refused Compiler.perfmap (JDK 17 or later has it): %.200s",
		     (int)pid, *msg ? msg : "no reason given");
		return -ENOTSUP;
	}
	return 0;
}

int strobe_jvm_write_perfmap(const char *proc_root, pid_t pid, int timeout_ms, char *why,
			     size_t whylen)
{
	sayf(why, whylen, "ok");
	if (pid <= 0)
		return -EINVAL;
	int64_t deadline = strobe_mono_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
	proc_status ps;
	int rc = read_status(proc_root, pid, &ps);
	if (rc < 0) {
		sayf(why, whylen, "process %d: %s", (int)pid, strerror(-rc));
		return rc == -ENOENT ? -ESRCH : rc;
	}
	if (!strobe_jvm_is_hotspot(proc_root, pid)) {
		sayf(why, whylen, "process %d is not a HotSpot JVM (no libjvm.so mapped)", (int)pid);
		return -ENOTSUP;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int len = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%d/root/tmp/.java_pid%d",
			   ROOT(proc_root), (int)pid, (int)ps.nspid);
	if (len < 0 || (size_t)len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	struct stat st;
	if ((stat(sa.sun_path, &st) < 0 || !S_ISSOCK(st.st_mode)) &&
	    (rc = start_listener(proc_root, pid, &ps, sa.sun_path, deadline, why, whylen)) < 0)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		sayf(why, whylen, "cannot connect to JVM %d at %s: %s", (int)pid, sa.sun_path,
		     strerror(-rc));
	} else {
		rc = ask(fd, pid, deadline, why, whylen);
	}
	close(fd);
	return rc;
}

/* ---- the agent's form: a thread that asks ------------------------------------------------- */

typedef struct jvm_proc {
	pid_t pid;
	int64_t next_ns;    /* not asked again before */
	unsigned fails;
	bool is_jvm;
	bool said;          /* its first outcome was reported */
	bool wrote;         /* a map was written at our request */
	bool host_tmp;      /* ... in the host's /tmp (same mount namespace), so ours to remove */
	pid_t nspid;
} jvm_proc;

struct strobe_jvm_maps {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool stop;
	pid_t queue[QUEUE_MAX];
	unsigned nq;
	jvm_proc *procs; /* under mu */
	unsigned nprocs;
	int64_t refresh_ns;
	strobe_jvm_say_fn say;
	void *ctx;
	char *root;      /* where /proc is (NULL: /proc) */
	atomic_ulong asked, written;
};

static jvm_proc *proc_find(strobe_jvm_maps *m, pid_t pid)
{
	for (unsigned i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid)
			return &m->procs[i];
	return NULL;
}

static jvm_proc *proc_add(strobe_jvm_maps *m, pid_t pid)
{
	if (m->nprocs == PROCS_MAX) {
		/* forget what was learnt of processes whose maps we need not remove */
		unsigned k = 0;
		for (unsigned i = 0; i < m->nprocs; i++)
			if (m->procs[i].wrote)
				m->procs[k++] = m->procs[i];
		m->nprocs = k;
		if (k == PROCS_MAX)
			return NULL;
	}
	jvm_proc *p = &m->procs[m->nprocs++];
	*p = (jvm_proc){.pid = pid};
	return p;
}

static bool same_root(const char *root, pid_t pid)
{
	char path[PATH_MAX];
	struct stat a, b;
	snprintf(path, sizeof(path), "%s/%d/root", ROOT(root), (int)pid);
	return stat(path, &a) == 0 && stat("/", &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Removes the maps written at our request for processes that are gone. Under mu. */
static void sweep(strobe_jvm_maps *m)
{
	unsigned k = 0;
	for (unsigned i = 0; i < m->nprocs; i++) {
		jvm_proc *p = &m->procs[i];
		if (kill(p->pid, 0) < 0 && errno == ESRCH) {
			if (p->wrote && p->host_tmp) {
				char path[64];
				snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)p->nspid);
				unlink(path);
			}
			continue;
		}
		m->procs[k++] = *p;
	}
	m->nprocs = k;
}

/* A Node.js process (its executable is node or nodejs) with no perf map: V8 writes one only
 * when started with --perf-basic-prof, which cannot be turned on from outside. */
static bool node_without_map(const char *root, pid_t pid, char *why, size_t whylen)
{
	char path[PATH_MAX], exe[512];
	snprintf(path, sizeof(path), "%s/%d/exe", ROOT(root), (int)pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	if (strcmp(base, "node") != 0 && strcmp(base, "nodejs") != 0)
		return false;
	proc_status ps;
	struct stat st;
	if (read_status(root, pid, &ps) < 0)
		return false;
	snprintf(path, sizeof(path), "%s/%d/root/tmp/perf-%d.map", ROOT(root), (int)pid,
		 (int)ps.nspid);
	if (stat(path, &st) == 0)
		return false;
	sayf(why, whylen,
	     "node %d (%s) writes no perf map: its JavaScript frames stay unnamed; start it with "
	     "--perf-basic-prof (or NODE_OPTIONS=--perf-basic-prof)", (int)pid, exe);
	return true;
}

static void serve(strobe_jvm_maps *m, pid_t pid)
{
	char why[256];
	bool jvm = strobe_jvm_is_hotspot(m->root, pid);
	bool node = !jvm && node_without_map(m->root, pid, why, sizeof(why));
	int rc = -ENOTSUP;
	bool host_tmp = false;
	proc_status ps = {.nspid = pid};
	if (jvm) {
		atomic_fetch_add(&m->asked, 1);
		rc = strobe_jvm_write_perfmap(m->root, pid, 3000, why, sizeof(why));
		if (rc == 0) {
			atomic_fetch_add(&m->written, 1);
			host_tmp = same_root(m->root, pid) && read_status(m->root, pid, &ps) == 0;
		}
	}
	pthread_mutex_lock(&m->mu);
	jvm_proc *p = proc_find(m, pid);
	bool say = false;
	if (p) {
		int64_t now = strobe_mono_ns();
		p->is_jvm = jvm;
		if (!jvm) {
			p->next_ns = now + NOT_JVM_RECHECK_NS;
		} else if (rc == 0) {
			p->fails = 0;
			p->wrote = true;
			p->host_tmp = host_tmp;
			p->nspid = ps.nspid;
			p->next_ns = now + m->refresh_ns;
		} else {
			/* a JVM that cannot be asked is asked less and less often */
			int64_t back = m->refresh_ns << (p->fails < 6 ? p->fails : 6);
			p->fails++;
			p->next_ns = now + (back < FAIL_BACKOFF_MAX_NS ? back : FAIL_BACKOFF_MAX_NS);
		}
		say = (jvm || node) && !p->said;
		p->said |= say;
	}
	pthread_mutex_unlock(&m->mu);
	if (say && m->say) {
		char ok[96];
		if (rc == 0)
			snprintf(ok, sizeof(ok), "JVM %d writes its perf map on request", (int)pid);
		m->say(m->ctx, pid, rc != 0, rc == 0 ? ok : why);
	}
}

static void *jvm_main(void *arg)
{
	strobe_jvm_maps *m = arg;
	int64_t swept = strobe_mono_ns();
	pthread_mutex_lock(&m->mu);
	while (!m->stop) {
		if (!m->nq) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += SWEEP_NS / 1000000000;
			pthread_cond_timedwait(&m->cv, &m->mu, &ts);
		}
		if (strobe_mono_ns() - swept >= SWEEP_NS) {
			sweep(m);
			swept = strobe_mono_ns();
		}
		if (!m->nq || m->stop)
			continue;
		pid_t pid = m->queue[0];
		memmove(m->queue, m->queue + 1, --m->nq * sizeof(pid_t));
		pthread_mutex_unlock(&m->mu);
		serve(m, pid);
		pthread_mutex_lock(&m->mu);
	}
	pthread_mutex_unlock(&m->mu);
	return NULL;
}

strobe_jvm_maps *strobe_jvm_maps_new(const char *proc_root, unsigned refresh_ms,
				     strobe_jvm_say_fn say, void *ctx)
{
	strobe_jvm_maps *m = calloc(1, sizeof(*m));
	if (!m || !(m->procs = calloc(PROCS_MAX, sizeof(jvm_proc))) ||
	    (proc_root && !(m->root = strdup(proc_root)))) {
		if (m)
			free(m->procs);
		free(m);
		return NULL;
	}
	m->refresh_ns = (int64_t)(refresh_ms ? refresh_ms : 5000) * 1000000;
	m->say = say;
	m->ctx = ctx;
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->cv, NULL);
	int e = pthread_create(&m->thread, NULL, jvm_main, m);
	if (e) {
		pthread_cond_destroy(&m->cv);
		pthread_mutex_destroy(&m->mu);
		free(m->procs);
		free(m->root);
		free(m);
		errno = e;
		return NULL;
	}
	return m;
}

int strobe_jvm_maps_unnamed(strobe_jvm_maps *m, pid_t pid)
{
	if (!m || pid <= 0)
		return 0;
	int64_t now = strobe_mono_ns();
	pthread_mutex_lock(&m->mu);
	jvm_proc *p = proc_find(m, pid);
	if (!p)
		p = proc_add(m, pid);
	if (p && now >= p->next_ns && m->nq < QUEUE_MAX) {
		/* asked once per period however many of its frames go unnamed meanwhile */
		p->next_ns = now + m->refresh_ns;
		m->queue[m->nq++] = pid;
		pthread_cond_signal(&m->cv);
	}
	pthread_mutex_unlock(&m->mu);
	return 0;
}

void strobe_jvm_maps_counts(strobe_jvm_maps *m, unsigned long *asked, unsigned long *written)
{
	*asked = m ? atomic_load(&m->asked) : 0;
	*written = m ? atomic_load(&m->written) : 0;
}

void strobe_jvm_maps_free(strobe_jvm_maps *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->stop = true;
	pthread_cond_signal(&m->cv);
	pthread_mutex_unlock(&m->mu);
	pthread_join(m->thread, NULL);
	sweep(m);
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m->procs);
	free(m->root);
	free(m);
}
