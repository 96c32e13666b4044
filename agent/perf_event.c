// SPDX-License-Identifier: Apache-2.0
/*
 * perf_event_open, its ring buffers and tracefs lookups.
 *
 * Written by hand because it is the sampler's core and thin: libperf (from the kernel tree) is not
 * packaged for Debian 12, and the ring protocol is a head/tail pair with two barriers. The rules
 * followed (from perf_event_open(2) and tools/include/linux/ring_buffer.h): read data_head with
 * acquire ordering, consume records, then publish data_tail with release ordering; a record may
 * wrap around the end of the data area; sizes in the header are trusted only after checking they
 * fit what is available.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf.h"

int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group, unsigned long flags)
{
	int fd = (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
	return fd < 0 ? -errno : fd;
}

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	int ok = fscanf(f, "%d", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

int perf_open_err(strobe_err *err, int code, const char *what, pid_t pid)
{
	int paranoid = 0;
	switch (-code) {
	case EACCES:
	case EPERM:
		if (read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid) < 0)
			paranoid = -99;
		return strobe_errf(err, code,
				   "no permission to open %s (kernel.perf_event_paranoid = %d): run as "
				   "root, give the binary CAP_PERFMON (setcap cap_perfmon,cap_sys_ptrace"
				   "+ep), or lower it with 'sysctl kernel.perf_event_paranoid=%d'",
				   what, paranoid, pid == -1 ? 0 : 1);
	case ESRCH:
		return strobe_errf(err, code, "no process %d", (int)pid);
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		return strobe_errf(err, code, "this kernel cannot open %s: %s", what, strerror(-code));
	case EMFILE:
		return strobe_errf(err, code,
				   "out of file descriptors opening %s (one per thread and CPU): raise "
				   "'ulimit -n'", what);
	default:
		return strobe_errf(err, code, "cannot open %s: %s", what, strerror(-code));
	}
}

/* ---- ring buffers ---------------------------------------------------------------------------- */

int perf_ring_map(perf_ring *r, int fd, unsigned pages)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	void *m = mmap(NULL, (pages + 1) * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r->meta = m;
	r->data = (uint8_t *)m + pg;
	r->size = (size_t)pages * pg;
	r->tmp = malloc(65536);
	if (!r->tmp) {
		munmap(m, (pages + 1) * pg);
		r->meta = NULL;
		return -ENOMEM;
	}
	return 0;
}

void perf_ring_unmap(perf_ring *r)
{
	if (r->meta)
		munmap(r->meta, r->size + (size_t)sysconf(_SC_PAGESIZE));
	free(r->tmp);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

/* The records from the tail up to head, to fn; the tail moved past them when consume. */
static int ring_walk(perf_ring *r, uint64_t head, bool consume,
		     int (*fn)(const struct perf_event_header *h, void *ctx), void *ctx)
{
	if (!r->meta)
		return 0;
	uint64_t tail = r->meta->data_tail;
	int rc = 0;
	while (tail < head) {
		size_t off = (size_t)(tail & (r->size - 1));
		struct perf_event_header hdr;
		/* The header itself may straddle the end. */
		size_t first = r->size - off;
		if (first >= sizeof(hdr)) {
			memcpy(&hdr, r->data + off, sizeof(hdr));
		} else {
			memcpy(&hdr, r->data + off, first);
			memcpy((uint8_t *)&hdr + first, r->data, sizeof(hdr) - first);
		}
		if (hdr.size < sizeof(hdr) || hdr.size > head - tail) {
			/* A corrupt header: skip everything available rather than loop. */
			tail = head;
			break;
		}
		const struct perf_event_header *h;
		if (first >= hdr.size) {
			h = (const void *)(r->data + off);
		} else {
			memcpy(r->tmp, r->data + off, first);
			memcpy(r->tmp + first, r->data, hdr.size - first);
			h = (const void *)r->tmp;
		}
		rc = fn(h, ctx);
		tail += hdr.size;
		if (rc)
			break;
	}
	if (consume)
		__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
	return rc;
}

uint64_t perf_ring_head(const perf_ring *r)
{
	return r->meta ? __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE) : 0;
}

int perf_ring_peek(perf_ring *r, uint64_t head,
		     int (*fn)(const struct perf_event_header *h, void *ctx), void *ctx)
{
	return ring_walk(r, head, false, fn, ctx);
}

int perf_ring_read_to(perf_ring *r, uint64_t head,
			int (*fn)(const struct perf_event_header *h, void *ctx), void *ctx)
{
	return ring_walk(r, head, true, fn, ctx);
}

/* ---- CPUs ------------------------------------------------------------------------------------ */

/* Parses a kernel CPU list ("0-3,5") into a bitmap of up to 4096 CPUs; returns the highest + 1. */
static int cpu_list(const char *path, uint64_t *bits, int maxcpu)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	char buf[4096];
	int top = 0;
	if (fgets(buf, sizeof(buf), f)) {
		char *p = buf;
		while (*p && *p != '\n') {
			char *end;
			long a = strtol(p, &end, 10), b = a;
			if (end == p)
				break;
			if (*end == '-')
				b = strtol(end + 1, &end, 10);
			for (long c = a; c <= b && c < maxcpu; c++) {
				if (bits)
					bits[c / 64] |= 1ull << (c % 64);
				if (c + 1 > top)
					top = (int)c + 1;
			}
			p = *end == ',' ? end + 1 : end;
		}
	}
	fclose(f);
	return top;
}

/* Thread ids of a process from PROC_ROOT/PID/task. */
static int list_tids(const char *proc_root, pid_t pid, pid_t **out, unsigned *n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%d/task", proc_root ? proc_root : "/proc", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	unsigned cap = 16, cnt = 0;
	pid_t *v = malloc(cap * sizeof(*v));
	struct dirent *e;
	while (v && (e = readdir(d))) {
		char *end;
		long t = strtol(e->d_name, &end, 10);
		if (*end || t <= 0)
			continue;
		if (cnt == cap) {
			pid_t *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				free(v);
				v = NULL;
				break;
			}
			v = nv;
		}
		v[cnt++] = (pid_t)t;
	}
	closedir(d);
	if (!v)
		return -ENOMEM;
	*out = v;
	*n = cnt;
	return 0;
}

static bool in_list(const pid_t *v, unsigned n, pid_t x)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

int perf_each_thread(const char *proc_root, pid_t pid, bool only_pid,
		     int (*fn)(void *ctx, pid_t tid), void *ctx)
{
	pid_t *done = NULL;
	unsigned ndone = 0, cdone = 0;
	int rc = 0;
	for (int round = 0; round < 20 && rc == 0; round++) {
		pid_t *tids = NULL;
		unsigned nt = 0, added = 0;
		if (only_pid) {
			if (!(tids = malloc(sizeof(*tids))))
				rc = -ENOMEM;
			else
				tids[nt++] = pid;
		} else {
			rc = list_tids(proc_root, pid, &tids, &nt);
			if (rc == -ESRCH && ndone) /* exited since its threads were done */
				rc = 0;
		}
		for (unsigned i = 0; i < nt && rc == 0; i++) {
			if (in_list(done, ndone, tids[i]))
				continue;
			if ((rc = fn(ctx, tids[i])) == -ESRCH) { /* the thread exited meanwhile */
				rc = 0;
				continue;
			}
			if (rc < 0)
				break;
			if (ndone == cdone) {
				pid_t *nd = realloc(done, (cdone = cdone ? cdone * 2 : 16) * sizeof(*nd));
				if (!nd) {
					rc = -ENOMEM;
					break;
				}
				done = nd;
			}
			done[ndone++] = tids[i];
			added++;
		}
		free(tids);
		if (added == 0 || only_pid)
			break;
	}
	free(done);
	if (rc == 0 && ndone == 0)
		rc = -ESRCH;
	return rc;
}

int perf_cpu_count(void)
{
	int n = cpu_list("/sys/devices/system/cpu/possible", NULL, 4096);
	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_CONF);
	return n > 0 ? n : 1;
}

bool perf_cpu_online(int cpu)
{
	uint64_t bits[64] = {0};
	if (cpu < 0 || cpu >= 4096)
		return false;
	if (cpu_list("/sys/devices/system/cpu/online", bits, 4096) <= 0)
		return true;
	return bits[cpu / 64] >> (cpu % 64) & 1;
}

/* ---- tracefs --------------------------------------------------------------------------------- */

/* Where tracefs is, mounting it at /sys/kernel/tracing when nothing is mounted and we may. */
static const char *tracefs(void)
{
	static const char *const dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
	char probe[128];
	for (size_t i = 0; i < 2; i++) {
		snprintf(probe, sizeof(probe), "%s/events", dirs[i]);
		if (access(probe, R_OK) == 0)
			return dirs[i];
	}
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
		return dirs[0];
	return NULL;
}

static int event_path(const char *sys, const char *name, const char *file, char *buf, size_t cap,
		      strobe_err *err)
{
	const char *t = tracefs();
	if (!t)
		return strobe_errf(err, -ENOENT,
				   "tracefs is not mounted and cannot be (mount -t tracefs nodev "
				   "/sys/kernel/tracing as root) - needed for %s:%s", sys, name);
	snprintf(buf, cap, "%s/events/%s/%s/%s", t, sys, name, file);
	return 0;
}

int perf_tracepoint_id(const char *sys, const char *name, strobe_err *err)
{
	char path[256];
	int rc = event_path(sys, name, "id", path, sizeof(path), err), id;
	if (rc < 0)
		return rc;
	rc = read_int_file(path, &id);
	if (rc < 0)
		return strobe_errf(err, rc, "cannot read tracepoint %s:%s (%s): %s", sys, name, path,
				   rc == -EACCES ? "permission denied (root needed)" : strerror(-rc));
	return id;
}

int perf_tracepoint_field(const char *sys, const char *name, const char *field, int *offset,
			    int *size, strobe_err *err)
{
	char path[256];
	int rc = event_path(sys, name, "format", path, sizeof(path), err);
	if (rc < 0)
		return rc;
	FILE *f = fopen(path, "r");
	if (!f)
		return strobe_errf(err, -errno, "cannot read %s: %s", path, strerror(errno));
	/* Lines look like "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;" */
	char line[512];
	size_t flen = strlen(field);
	rc = strobe_errf(err, -ENOENT, "tracepoint %s:%s has no field '%s'", sys, name, field);
	while (fgets(line, sizeof(line), f)) {
		char *decl = strstr(line, "field:"), *semi, *off, *sz;
		if (!decl || !(semi = strchr(decl, ';')))
			continue;
		char *end = semi;
		if (end[-1] == ']') { /* an array: "char prev_comm[16]" */
			char *br = memrchr(decl, '[', (size_t)(end - decl));
			if (br)
				end = br;
		}
		/* (end - flen)[-1]: end[-flen - 1] would index by a size_t that wrapped around */
		if ((size_t)(end - decl) < flen || memcmp(end - flen, field, flen) != 0 ||
		    (end - flen > decl && ((end - flen)[-1] != ' ' && (end - flen)[-1] != '*')))
			continue;
		if (!(off = strstr(semi, "offset:")) || !(sz = strstr(semi, "size:")))
			continue;
		*offset = atoi(off + 7);
		*size = atoi(sz + 5);
		rc = 0;
		if (err)
			err->msg[0] = 0;
		break;
	}
	fclose(f);
	return rc;
}
