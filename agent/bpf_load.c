// SPDX-License-Identifier: Apache-2.0
/*
 * An eBPF skeleton loaded by a short-lived child process, its maps and programs handed back over
 * a unix socket (bpf_load.h).
 *
 * Why: the agent's memory goal is a peak (VmHWM), and its peak was the load of its eBPF
 * objects. libbpf 1.1 (Debian 12) reads the kernel's BTF, /sys/kernel/btf/vmlinux (5 to 6 MB),
 * into a buffer, copies it into the struct btf it parses, and keeps that until the load ends:
 * about 11.6 MB for some 15 ms, in every mode, above everything else the agent ever holds (its
 * steady state is near 17 MB with that peak at 18). Newer libbpf maps the file instead of
 * copying it, on kernels that allow it (6.16 and later), but that is not the libbpf a Debian 12
 * host has. CO-RE relocations and the tp_btf programs' attach points need that BTF, and only
 * while loading; what the load leaves behind is file descriptors (maps, programs), which a
 * unix socket carries to another process. So a child forked with the opened, set-up object (a
 * copy of it, with its read-only data and map sizes as the parent set them) loads it and sends
 * every fd back; the parent adopts the maps (bpf_map__reuse_fd), maps the data sections where
 * the skeleton's pointers are (as bpf_object__load_skeleton does), and keeps the programs' fds.
 * The child's memory (the BTF among it) is gone with the child, a few ms later: the host pays it
 * as before, for as long as before, but the agent's own resident set never holds it.
 *
 * Cost: one fork of the agent (page tables copied, pages shared copy-on-write) per object
 * loaded, a few ms once at start. Where the fork or the socket fails (a seccomp profile, a
 * process limit) the object is loaded here, as before. The child does nothing but libbpf's load
 * and a sendmsg: both safe after fork in a process with other threads (glibc's malloc and stdio
 * are reset for the child).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>

#include "bpf_load.h"
#include "bpf_msg.h"
#include "strobe/offcpu.h" /* STROBE_TABLE_MAPS */

#define MAX_FDS 250           /* SCM_RIGHTS carries at most 253 fds a message */
#define MAX_MAPS 200          /* maps of one object (ours have about 30) */
#define CHILD_WAIT_MS 120000  /* the verifier on a loaded host takes seconds, not minutes */

/* What the child sends: its load's result and which map or program each fd is (by its index
 * in the object's order, the same in both processes: the child is a copy). */
struct reply {
	int32_t rc;
	uint16_t nfd;
	uint8_t prog[MAX_FDS]; /* 1: a program, 0: a map */
	uint16_t idx[MAX_FDS];
	char msg[256];
};

static void child_load(struct bpf_object *obj, const uint8_t *had, int sock)
{
	struct reply r;
	int fds[MAX_FDS];
	memset(&r, 0, sizeof(r));
	r.rc = bpf_object__load(obj);
	if (r.rc == 0) {
		struct bpf_map *m;
		struct bpf_program *p;
		int i = 0;
		bpf_object__for_each_map(m, obj) {
			int fd = bpf_map__fd(m);
			if (fd >= 0 && !had[i] && r.nfd < MAX_FDS) {
				r.prog[r.nfd] = 0;
				r.idx[r.nfd] = (uint16_t)i;
				fds[r.nfd++] = fd;
			} else if (fd >= 0 && !had[i]) {
				r.rc = -E2BIG;
			}
			i++;
		}
		i = 0;
		bpf_object__for_each_program(p, obj) {
			int fd = bpf_program__fd(p);
			if (fd >= 0 && r.nfd < MAX_FDS) {
				r.prog[r.nfd] = 1;
				r.idx[r.nfd] = (uint16_t)i;
				fds[r.nfd++] = fd;
			} else if (fd >= 0) {
				r.rc = -E2BIG;
			}
			i++;
		}
	}
	snprintf(r.msg, sizeof(r.msg), "%s", agent_bpf_msg());
	if (r.rc < 0)
		r.nfd = 0;
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (r.nfd > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * r.nfd);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * r.nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * r.nfd);
	}
	while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* The skeleton's data sections (.bss, .data, .rodata), mapped over the images its pointers
 * point at, exactly as bpf_object__load_skeleton does after its load. */
static int map_sections(struct bpf_object_skeleton *s)
{
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < s->map_cnt; i++) {
		struct bpf_map_skeleton *ms = (void *)((char *)s->maps + (size_t)i * s->map_skel_sz);
		struct bpf_map *map = *ms->map;
		void **mmaped = ms->mmaped;
		if (!mmaped)
			continue;
		__u32 flags = bpf_map__map_flags(map);
		if (!(flags & BPF_F_MMAPABLE)) {
			*mmaped = NULL;
			continue;
		}
		size_t sz = ((size_t)bpf_map__value_size(map) + 7) / 8 * 8 * bpf_map__max_entries(map);
		sz = (sz + (size_t)page - 1) / (size_t)page * (size_t)page;
		int prot = flags & BPF_F_RDONLY_PROG ? PROT_READ : PROT_READ | PROT_WRITE;
		void *p = mmap(*mmaped, sz, prot, MAP_SHARED | MAP_FIXED, bpf_map__fd(map), 0);
		if (p == MAP_FAILED) {
			int e = errno;
			snprintf(agent_bpf_msg(), 256, "cannot map the data section '%s': %s",
				 bpf_map__name(map), strerror(e));
			return -e;
		}
		*mmaped = p;
	}
	return 0;
}

static int load_here(struct bpf_object_skeleton *s, agent_bpf_progs *progs)
{
	int rc = bpf_object__load_skeleton(s);
	if (rc < 0)
		return rc;
	struct bpf_program *p;
	bpf_object__for_each_program(p, *s->obj) {
		if (progs->n >= AGENT_BPF_MAX_PROGS)
			return -E2BIG;
		int fd = bpf_program__fd(p);
		progs->prog[progs->n] = p;
		/* owned by progs in both ways of loading */
		progs->fd[progs->n] = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
		if (fd >= 0 && progs->fd[progs->n] < 0)
			return -errno;
		progs->n++;
	}
	return 0;
}

/* The parent's side: the reply, the maps adopted, the programs' fds kept. */
static int adopt(struct bpf_object_skeleton *s, agent_bpf_progs *progs, const struct reply *r,
		 int *fds, int nfds)
{
	struct bpf_object *obj = *s->obj;
	int rc = 0;
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj) {
		if (progs->n >= AGENT_BPF_MAX_PROGS) {
			rc = -E2BIG;
			break;
		}
		progs->prog[progs->n] = p;
		progs->fd[progs->n++] = -1;
	}
	for (int k = 0; k < nfds; k++) {
		int fd = fds[k];
		fds[k] = -1;
		if (rc < 0) {
			close(fd);
			continue;
		}
		if (r->prog[k]) {
			if (r->idx[k] < progs->n)
				progs->fd[r->idx[k]] = fd;
			else
				close(fd);
			continue;
		}
		struct bpf_map *m;
		int i = 0;
		bpf_object__for_each_map(m, obj) {
			if (i++ == r->idx[k])
				break;
		}
		rc = m ? bpf_map__reuse_fd(m, fd) : -EPROTO; /* (dups it) */
		if (rc < 0)
			snprintf(agent_bpf_msg(), 256, "cannot adopt map #%u from the loader process: %s",
				 r->idx[k], strerror(-rc));
		close(fd);
	}
	return rc < 0 ? rc : map_sections(s);
}

int agent_bpf_load(struct bpf_object_skeleton *s, agent_bpf_progs *progs)
{
	memset(progs, 0, sizeof(*progs));
	struct bpf_object *obj = *s->obj;
	uint8_t had[MAX_MAPS];
	struct bpf_map *m;
	int nmaps = 0;
	bpf_object__for_each_map(m, obj) {
		if (nmaps >= MAX_MAPS)
			return load_here(s, progs);
		had[nmaps++] = bpf_map__fd(m) >= 0; /* reused already: the parent has it */
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return load_here(s, progs);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return load_here(s, progs);
	}
	if (pid == 0) {
		close(sv[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == parent)
			child_load(obj, had, sv[1]);
		_exit(0); /* no atexit handlers, no flush of the parent's stdio buffers */
	}
	close(sv[1]);
	progs->apart = true;
	struct reply r;
	memset(&r, 0, sizeof(r));
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct pollfd pf = {.fd = sv[0], .events = POLLIN};
	int pr, rc;
	ssize_t n = -1;
	while ((pr = poll(&pf, 1, CHILD_WAIT_MS)) < 0 && errno == EINTR)
		;
	if (pr > 0)
		while ((n = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
			;
	close(sv[0]);
	if (pr <= 0)
		kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	int fds[MAX_FDS], nfds = 0;
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (nfds > MAX_FDS)
			nfds = MAX_FDS;
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)nfds);
	}
	if (n != (ssize_t)sizeof(r) || (mh.msg_flags & MSG_CTRUNC) || nfds != r.nfd) {
		for (int k = 0; k < nfds; k++)
			close(fds[k]);
		if (pr == 0)
			snprintf(agent_bpf_msg(), 256, "the loader process gave no answer in %d s",
				 CHILD_WAIT_MS / 1000);
		else if (n == 0 || n < 0)
			snprintf(agent_bpf_msg(), 256, "the loader process ended without an answer "
				 "(%s %d)", WIFSIGNALED(st) ? "signal" : "exit status",
				 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		else
			snprintf(agent_bpf_msg(), 256, "the loader process's answer was cut short");
		return -EIO;
	}
	if (r.msg[0]) {
		r.msg[sizeof(r.msg) - 1] = 0;
		snprintf(agent_bpf_msg(), 256, "%s", r.msg);
	}
	if (r.rc < 0) {
		for (int k = 0; k < nfds; k++)
			close(fds[k]);
		return r.rc;
	}
	rc = adopt(s, progs, &r, fds, nfds);
	return rc;
}

int agent_bpf_prog_fd(const agent_bpf_progs *progs, const struct bpf_program *prog)
{
	for (int i = 0; i < progs->n; i++)
		if (progs->prog[i] == prog)
			return progs->fd[i];
	return -1;
}

void agent_bpf_progs_close(agent_bpf_progs *progs)
{
	for (int i = 0; i < progs->n; i++)
		if (progs->fd[i] >= 0)
			close(progs->fd[i]);
	progs->n = 0;
}

int agent_bpf_share_tables(struct bpf_map *urows, struct bpf_map *umaps, struct bpf_map *uwant,
			   struct bpf_map *ureq, struct bpf_map *uexec, struct bpf_map *ubins,
			   const int *fds)
{
	struct bpf_map *m[] = {urows, umaps, uwant, ureq, uexec, ubins};
	_Static_assert(sizeof(m) / sizeof(m[0]) == STROBE_TABLE_MAPS, "strobe_offcpu_table_maps");
	for (size_t i = 0; i < STROBE_TABLE_MAPS; i++) {
		int rc = bpf_map__reuse_fd(m[i], fds[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

bool agent_bpf_has_find_vma(void)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_find_vma, NULL) > 0;
}

int agent_bpf_attach_perf(int prog_fd, int pfd, int *link_fd)
{
	*link_fd = -1;
	if (prog_fd < 0)
		return -EBADF;
	int l = bpf_link_create(prog_fd, pfd, BPF_PERF_EVENT, NULL);
	if (l < 0) {
		/* a kernel without perf links (before 5.15): the event's own ioctl */
		if (ioctl(pfd, PERF_EVENT_IOC_SET_BPF, prog_fd) < 0)
			return -errno;
	} else {
		*link_fd = l;
	}
	if (ioctl(pfd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		int e = errno;
		if (*link_fd >= 0)
			close(*link_fd);
		*link_fd = -1;
		return -e;
	}
	return 0;
}

int agent_bpf_attach_raw_tp(int prog_fd, const char *tp_name)
{
	if (prog_fd < 0)
		return -EBADF;
	int fd = bpf_raw_tracepoint_open(tp_name, prog_fd);
	return fd < 0 ? -errno : fd;
}

int agent_bpf_attach_tracepoint(int prog_fd, const char *category, const char *name, int *pfd,
				int *link_fd)
{
	*pfd = *link_fd = -1;
	static const char *const roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
	long id = -1;
	int e = ENOENT;
	for (size_t i = 0; i < 2 && id < 0; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[i], category, name);
		FILE *f = fopen(path, "r");
		if (!f) {
			if (errno != ENOENT)
				e = errno;
			continue;
		}
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
	}
	if (id < 0)
		return -e;
	struct perf_event_attr a = {.type = PERF_TYPE_TRACEPOINT, .size = sizeof(a),
				    .config = (__u64)id, .sample_period = 1, .wakeup_events = 1};
	int fd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = agent_bpf_attach_perf(prog_fd, fd, link_fd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*pfd = fd;
	return 0;
}
