// SPDX-License-Identifier: Apache-2.0
/* fork_exec: a parent that keeps spawning short-lived children, each of which burns a known
 * amount of CPU in a known function and exits, to test that processes which exec, and processes
 * which are gone by the time the profile is written, are still attributed and symbolized.
 *
 *   fork_exec [-n CHILDREN] [-b BURN_MS] [-p PRE_MS] [-x CHILD_EXE] [-o TRUTH]
 *
 * Children alternate between two kinds (default 10 children, 200 ms of CPU each):
 * - exec'd: fork, then execv(CHILD_EXE, {CHILD_EXE, "--child", BURN_MS, FD}); the new image
 *   burns in exec_child_burn and exits. With -p, the child first burns PRE_MS in pre_exec_burn
 *   between its fork and its exec, in the parent's image. CHILD_EXE defaults to this program;
 *   a test can pass a copy under another name, so that the child's process name (comm, from
 *   the exec'd file's name) differs from the parent's.
 * - forked only: the child burns in fork_child_burn (same image as the parent) and _exits.
 * One child runs at a time; the parent waits for each in parent_wait. Every child reports the
 * CPU its burn took (its thread CPU clock) through a pipe.
 *
 * Truth ("key value"): pid (the parent), exec_children N, fork_children N, exec_child_burn NS,
 * fork_child_burn NS, pre_exec_burn NS (sums over children), exec_pids P1,P2,...,
 * fork_pids P1,P2,... */
#include "wl_common.h"

#include <sys/wait.h>
#include <unistd.h>

/* Spins for want ns of the thread's CPU, inlined into each burn so that its samples are the
 * burn's own. */
static inline __attribute__((always_inline)) int64_t spin_for(int64_t want, uint64_t acc)
{
	int64_t t0 = wl_thread_cpu_ns(), t;
	do
		WL_SPIN_CHUNK(acc);
	while ((t = wl_thread_cpu_ns()) - t0 < want);
	return t - t0;
}

static __attribute__((noinline)) int64_t exec_child_burn(int64_t want)
{
	return spin_for(want, (uint64_t)want);
}

static __attribute__((noinline)) int64_t fork_child_burn(int64_t want)
{
	return spin_for(want, (uint64_t)want + 1);
}

static __attribute__((noinline)) int64_t pre_exec_burn(int64_t want)
{
	return spin_for(want, (uint64_t)want + 2);
}

/* One line per burn on the child's pipe: "NS" for the child's burn, "pNS" for pre_exec_burn. */
static void report_as(int fd, const char *tag, int64_t ns)
{
	char buf[40];
	int n = snprintf(buf, sizeof(buf), "%s%lld\n", tag, (long long)ns);
	if (write(fd, buf, (size_t)n) != n)
		_exit(3);
}

static void report(int fd, int64_t ns)
{
	report_as(fd, "", ns);
}

static __attribute__((noinline)) int exec_child_main(int64_t want, int fd)
{
	report(fd, exec_child_burn(want));
	return 0;
}

static __attribute__((noinline)) void fork_child_main(int64_t want, int fd)
{
	report(fd, fork_child_burn(want));
	_exit(0);
}

static __attribute__((noinline)) int parent_wait(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The child's lines until it exits: its burn (-1: none), and *pre its pre_exec_burn. */
static int64_t read_ns(int fd, int64_t *pre)
{
	char buf[128];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = 0;
	int64_t ns = -1;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		if (*l == 'p')
			*pre += atoll(l + 1);
		else
			ns = atoll(l);
	}
	return ns;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return exec_child_main((int64_t)atol(argv[2]) * 1000000, atoi(argv[3]));

	const char *truth = NULL, *child_exe = NULL;
	int nchildren = 10, c;
	long burn_ms = 200, pre_ms = 0;
	while ((c = getopt(argc, argv, "n:b:p:x:o:")) != -1) {
		switch (c) {
		case 'n': nchildren = atoi(optarg); break;
		case 'b': burn_ms = atol(optarg); break;
		case 'p': pre_ms = atol(optarg); break;
		case 'x': child_exe = optarg; break;
		case 'o': truth = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc || nchildren < 1 || nchildren > 1000 || burn_ms < 1 || burn_ms > 60000 ||
	    pre_ms < 0 || pre_ms > 60000)
		goto usage;
	static char self[4096];
	if (!child_exe) {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0) {
			perror("fork_exec: /proc/self/exe");
			return 1;
		}
		self[n] = 0;
		child_exe = self;
	}
	FILE *tf = wl_truth_open(truth, "fork_exec");
	int64_t ns[2] = { 0, 0 }, pre = 0;
	int count[2] = { 0, 0 };
	static char pids[2][8192];
	size_t plen[2] = { 0, 0 };
	for (int i = 0; i < nchildren; i++) {
		int kind = i % 2; /* 0: exec'd, 1: forked only */
		int fd[2];
		if (pipe(fd)) {
			perror("fork_exec: pipe");
			return 1;
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork_exec: fork");
			return 1;
		}
		if (pid == 0) {
			close(fd[0]);
			if (kind == 1)
				fork_child_main(burn_ms * 1000000, fd[1]);
			if (pre_ms)
				report_as(fd[1], "p", pre_exec_burn(pre_ms * 1000000));
			char ms[32], fds[16];
			snprintf(ms, sizeof(ms), "%ld", burn_ms);
			snprintf(fds, sizeof(fds), "%d", fd[1]);
			execl(child_exe, child_exe, "--child", ms, fds, (char *)NULL);
			perror("fork_exec: exec");
			_exit(127);
		}
		close(fd[1]);
		int64_t got = read_ns(fd[0], &pre);
		close(fd[0]);
		if (parent_wait(pid) || got < 0) {
			fprintf(stderr, "fork_exec: child %d failed\n", (int)pid);
			return 1;
		}
		ns[kind] += got;
		count[kind]++;
		if (plen[kind] < sizeof(pids[kind]) - 16)
			plen[kind] += (size_t)snprintf(pids[kind] + plen[kind], sizeof(pids[kind]) - plen[kind],
						       "%s%d", plen[kind] ? "," : "", (int)pid);
	}
	if (tf) {
		fprintf(tf, "pid %d\nexec_children %d\nfork_children %d\n", (int)getpid(), count[0], count[1]);
		fprintf(tf, "exec_child_burn %lld\nfork_child_burn %lld\npre_exec_burn %lld\n",
			(long long)ns[0], (long long)ns[1], (long long)pre);
		fprintf(tf, "exec_pids %s\nfork_pids %s\n", pids[0], pids[1]);
	}
	wl_truth_close(tf, truth, "fork_exec");
	return 0;
usage:
	fprintf(stderr, "usage: fork_exec [-n CHILDREN] [-b BURN_MS] [-p PRE_MS] [-x CHILD_EXE] [-o TRUTH]\n");
	return 2;
}
