// SPDX-License-Identifier: Apache-2.0
/*
 * What a process is, for the agent's labels: its service name (from its environment, its
 * systemd unit or container, else its executable), comm, executable path, build ID and cgroup.
 * Everything is read from a /proc-like root so the rules can be tested on a synthetic tree.
 * Every read is capped: /proc files of other processes are input we do not control.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/agent.h"
#include "strobe/symbolize.h"
#include "proc_info.h"

#define ENV_CAP (256u * 1024) /* an environment larger than this is read in part */

/* Executables' build IDs, by file identity. Reading one maps the executable and walks its
 * notes, and unmapping it afterwards flushes TLBs on every CPU; a busy host starts the same
 * few executables (compilers, shells) thousands of times an hour, and the agent rereads every
 * process it profiles once a minute. (device, inode, size, mtime) of the file /proc/PID/exe
 * opens names the bytes well enough: a binary replaced or rebuilt changes one of them. A small
 * direct-mapped table, shared by the process's callers (hence the lock). */
#define EXE_IDS 64u
static struct {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char hex[STROBE_BUILD_ID_MAX * 2 + 1];
	bool used;
} exe_ids[EXE_IDS];
static pthread_mutex_t exe_ids_mu = PTHREAD_MUTEX_INITIALIZER;

static void exe_build_id(const char *exe_link, char *hex, size_t cap)
{
	struct stat st;
	if (stat(exe_link, &st) < 0)
		return;
	unsigned slot = (unsigned)((st.st_ino * 2654435761u) ^ st.st_dev) % EXE_IDS;
	pthread_mutex_lock(&exe_ids_mu);
	if (exe_ids[slot].used && exe_ids[slot].dev == st.st_dev && exe_ids[slot].ino == st.st_ino &&
	    exe_ids[slot].size == st.st_size && exe_ids[slot].mtime.tv_sec == st.st_mtim.tv_sec &&
	    exe_ids[slot].mtime.tv_nsec == st.st_mtim.tv_nsec) {
		snprintf(hex, cap, "%s", exe_ids[slot].hex);
		pthread_mutex_unlock(&exe_ids_mu);
		return;
	}
	pthread_mutex_unlock(&exe_ids_mu);
	uint8_t id[STROBE_BUILD_ID_MAX];
	char buf[STROBE_BUILD_ID_MAX * 2 + 1] = "";
	/* /proc/PID/exe opens the very file mapped, even in another mount namespace or deleted
	 * since. No build ID is an answer too, cached as "". */
	int l = strobe_elf_build_id(exe_link, id, sizeof(id));
	if (l > 0)
		strobe_build_id_hex(id, (size_t)l, buf);
	else if (l != 0 && l != -ENOEXEC)
		slot = EXE_IDS; /* not read (gone, no access, no memory): not an answer to keep */
	snprintf(hex, cap, "%s", buf);
	if (slot == EXE_IDS)
		return;
	pthread_mutex_lock(&exe_ids_mu);
	exe_ids[slot].dev = st.st_dev;
	exe_ids[slot].ino = st.st_ino;
	exe_ids[slot].size = st.st_size;
	exe_ids[slot].mtime = st.st_mtim;
	snprintf(exe_ids[slot].hex, sizeof(exe_ids[slot].hex), "%s", buf);
	exe_ids[slot].used = true;
	pthread_mutex_unlock(&exe_ids_mu);
}

/* Reads up to cap-1 bytes of path into buf (NUL-terminated). Returns the length or -errno. */
static ssize_t read_capped(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

/* A label value (proc_info.h): printable, no quotes or control characters, capped. */
void proc_info_clean(char *dst, size_t cap, const char *src, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < cap; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[o++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '_' : (char)c;
	}
	dst[o] = 0;
}

static bool from_env(const char *env, size_t len, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < len;) {
		const char *e = env + i;
		size_t el = strnlen(e, len - i);
		if (el > kl && strncmp(e, key, kl) == 0 && e[kl] == '=' && el > kl + 1) {
			proc_info_clean(out, cap, e + kl + 1, el - kl - 1);
			return true;
		}
		i += el + 1;
	}
	return false;
}

static bool is_hex(const char *s, size_t n)
{
	if (n < 12)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* A container id in one cgroup path component: docker-ID.scope, cri-containerd-ID.scope,
 * crio-ID.scope, libpod-ID.scope, or a bare 64-hex component (/docker/ID, kubepods/.../ID). */
static bool container_id(const char *comp, size_t n, char *out, size_t cap)
{
	static const char *const pre[] = {"docker-", "cri-containerd-", "crio-", "libpod-"};
	size_t len = n;
	const char *id = comp;
	if (len > 6 && memcmp(comp + len - 6, ".scope", 6) == 0) {
		for (size_t i = 0; i < sizeof(pre) / sizeof(*pre); i++) {
			size_t pl = strlen(pre[i]);
			if (len - 6 > pl && memcmp(comp, pre[i], pl) == 0) {
				id = comp + pl;
				len = n - 6 - pl;
				if (is_hex(id, len)) {
					snprintf(out, cap, "container/%.12s", id);
					return true;
				}
			}
		}
		return false;
	}
	if (len == 64 && is_hex(id, len)) {
		snprintf(out, cap, "container/%.12s", id);
		return true;
	}
	return false;
}

/* The service from a cgroup path: the innermost container, else the innermost X.service
 * (not the per-user manager's user@N.service, whose children are the user's own units). */
static const char *from_cgroup(const char *path, char *out, size_t cap)
{
	const char *unit = NULL;
	size_t unit_len = 0;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = p;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - p);
		if (n && container_id(p, n, out, cap))
			return "container";
		if (n > 8 && memcmp(p + n - 8, ".service", 8) == 0 && strncmp(p, "user@", 5) != 0) {
			unit = p;
			unit_len = n - 8;
		}
		p = e;
	}
	if (unit) {
		proc_info_clean(out, cap, unit, unit_len);
		return "systemd";
	}
	return NULL;
}

int proc_info_cgroup(const char *root, pid_t pid, char *out, size_t cap)
{
	char path[512], buf[4096];
	snprintf(path, sizeof(path), "%s/%d/cgroup", root ? root : "/proc", (int)pid);
	out[0] = 0;
	ssize_t n = read_capped(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	/* "0::/path" (cgroup v2) is preferred; else the first line's path. */
	const char *best = NULL;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		if (strncmp(line, "0::", 3) == 0) {
			best = c2 + 1;
			break;
		}
		if (!best)
			best = c2 + 1;
	}
	if (best)
		proc_info_clean(out, cap, best, strlen(best));
	return 0;
}

int strobe_proc_info_read(const char *root, pid_t pid, strobe_proc_info *out)
{
	char path[512];
	memset(out, 0, sizeof(*out));
	if (!root)
		root = "/proc";

	snprintf(path, sizeof(path), "%s/%d/comm", root, (int)pid);
	char buf[4096];
	ssize_t n = read_capped(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == 0))
		n--;
	proc_info_clean(out->comm, sizeof(out->comm), buf, (size_t)n);

	snprintf(path, sizeof(path), "%s/%d/exe", root, (int)pid);
	n = readlink(path, out->exe, sizeof(out->exe) - 1);
	if (n > 0) {
		out->exe[n] = 0;
		exe_build_id(path, out->build_id, sizeof(out->build_id));
	} else {
		out->exe[0] = 0;
	}

	proc_info_cgroup(root, pid, out->cgroup, sizeof(out->cgroup));

	/* The environment can be large and is unreadable for kernel threads: read what we can. */
	snprintf(path, sizeof(path), "%s/%d/environ", root, (int)pid);
	char *env = malloc(ENV_CAP);
	n = env ? read_capped(path, env, ENV_CAP) : -ENOMEM;
	if (n > 0 && (from_env(env, (size_t)n, "STROBE_SERVICE", out->service, sizeof(out->service)) ||
		      from_env(env, (size_t)n, "PYROSCOPE_APPLICATION_NAME", out->service,
			       sizeof(out->service)))) {
		strcpy(out->source, "env");
		free(env);
		return 0;
	}
	free(env);
	const char *src = out->cgroup[0] ? from_cgroup(out->cgroup, out->service, sizeof(out->service))
					 : NULL;
	if (src) {
		snprintf(out->source, sizeof(out->source), "%s", src);
		return 0;
	}
	const char *base = out->exe[0] ? strrchr(out->exe, '/') : NULL;
	if (base && base[1]) {
		/* "/usr/bin/foo (deleted)": the name without the suffix */
		size_t bl = strlen(base + 1);
		if (bl > 10 && strcmp(base + 1 + bl - 10, " (deleted)") == 0)
			bl -= 10;
		proc_info_clean(out->service, sizeof(out->service), base + 1, bl);
		strcpy(out->source, "exe");
	} else {
		snprintf(out->service, sizeof(out->service), "%s", out->comm[0] ? out->comm : "unknown");
		strcpy(out->source, "comm");
	}
	return 0;
}
