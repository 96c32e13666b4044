// SPDX-License-Identifier: Apache-2.0
/*
 * tls_labels_probe: the kernel side of the C SDK's labels, proven on this kernel. It finds the
 * TLS offset process PID published (agent/tls_labels.c), loads agent/tls_labels.bpf.c, attaches
 * it to a cpu-clock perf event on every CPU at FREQ Hz, creates GO_FILE (the workload waits for
 * it), waits for PID to exit (or DURATION s) and prints what it counted, one line per (status,
 * label set):
 *
 *   COUNT STATUS endpoint=/fast,span_id=5a00000000000001
 *
 * and with --pprof FILE, the samples read (status ok) as a pprof whose samples carry the block's
 * labels (one frame per sample named after its endpoint: this tool reads labels, not stacks),
 * ready for /api/v1/push.
 *
 *   tls_labels_probe --pid PID --go GO_FILE [--freq HZ] [--duration S] [--pprof FILE]
 *
 * Exit 0; 4 when the kernel refused the program or the perf event (the caller prints SKIP with
 * the message); 1 on other errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../agent/tls_labels_user.h"
#include "strobe/codec.h"
#include "tls_labels.skel.h"

static const char *const status_name[STROBE_TLS_NSTATUS] = {"ok", "noproc", "nobase", "fault",
							   "nomagic", "torn"};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int write_pprof(const char *path, struct tls_labels_bpf *skel, int freq)
{
	strobe_profile *p = strobe_profile_new();
	if (!p || strobe_profile_add_type(p, "samples", "count") < 0)
		return -ENOMEM;
	p->period_type.type = strobe_str_intern0(p, "cpu");
	p->period_type.unit = strobe_str_intern0(p, "nanoseconds");
	p->period = 1000000000 / freq;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	p->time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	int fd = bpf_map__fd(skel->maps.counts), r = 0;
	struct tls_count_key k, *prev = NULL;
	while (r == 0 && bpf_map_get_next_key(fd, prev, &k) == 0) {
		prev = &k;
		__u64 c;
		if (k.status != STROBE_TLS_OK || bpf_map_lookup_elem(fd, &k, &c) != 0)
			continue;
		strobe_labelpair l[STROBE_TLS_KEY_SLOTS];
		int n = tls_labels_decode(k.slot, STROBE_TLS_KEY_SLOTS, l, STROBE_TLS_KEY_SLOTS);
		if (n < 0)
			continue; /* malformed: not trusted */
		strobe_label sl[STROBE_TLS_KEY_SLOTS];
		const char *ep = "(no endpoint)";
		for (int i = 0; i < n; i++) {
			sl[i] = (strobe_label){.key = strobe_str_intern0(p, l[i].name),
					       .str = strobe_str_intern0(p, l[i].value)};
			if (strcmp(l[i].name, "endpoint") == 0)
				ep = l[i].value;
		}
		char frame[80];
		snprintf(frame, sizeof(frame), "endpoint %s", ep);
		uint32_t loc = strobe_location_for_name(p, frame, strlen(frame));
		uint32_t st = strobe_stack_push(p, 0, loc);
		uint32_t ls = strobe_labelset_intern(p, sl, (uint32_t)n);
		int64_t v = (int64_t)c;
		r = strobe_sample_add(p, st, ls, &v);
	}
	uint8_t *buf = NULL;
	size_t len = 0;
	if (r == 0)
		r = strobe_pprof_encode(p, &buf, &len);
	strobe_profile_free(p);
	FILE *f = r == 0 ? fopen(path, "wb") : NULL;
	if (r == 0 && (!f || fwrite(buf, 1, len, f) != len))
		r = -EIO;
	if (f && fclose(f) != 0)
		r = -EIO;
	free(buf);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"pid", required_argument, 0, 'p'},
					   {"go", required_argument, 0, 'g'},
					   {"freq", required_argument, 0, 'F'},
					   {"duration", required_argument, 0, 'd'},
					   {"pprof", required_argument, 0, 'o'},
					   {0, 0, 0, 0}};
	int pid = 0, freq = 999, c;
	double dur = 60;
	const char *go = NULL, *out = NULL;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p': pid = atoi(optarg); break;
		case 'g': go = optarg; break;
		case 'F': freq = atoi(optarg); break;
		case 'd': dur = atof(optarg); break;
		case 'o': out = optarg; break;
		default: return 2;
		}
	}
	if (pid <= 0 || !go || freq < 1 || freq > 10000) {
		fprintf(stderr, "usage: tls_labels_probe --pid PID --go GO_FILE [--freq HZ] "
				"[--duration S] [--pprof FILE]\n");
		return 2;
	}
	/* The offset is published by the SDK's constructor: the process may be just starting. */
	int64_t off = 0, deadline = mono_ns() + 10 * 1000000000LL;
	strobe_err err = {{0}};
	int r;
	while ((r = tls_labels_offset("/proc", pid, &off, &err)) < 0 && mono_ns() < deadline)
		usleep(20000);
	if (r < 0) {
		fprintf(stderr, "tls_labels_probe: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "tls_labels_probe: process %d publishes TLS offset %lld\n", pid,
		(long long)off);
	struct tls_labels_bpf *skel = tls_labels_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "tls_labels_probe: the kernel refused the eBPF program: %s\n",
			strerror(errno));
		return 4;
	}
	__u32 key = (__u32)pid;
	struct tls_proc pv = {off};
	bpf_map_update_elem(bpf_map__fd(skel->maps.procs), &key, &pv, BPF_ANY);
	int ncpu = libbpf_num_possible_cpus();
	struct bpf_link **links = calloc((size_t)ncpu, sizeof(*links));
	int attached = 0;
	for (int cpu = 0; links && cpu < ncpu; cpu++) {
		struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE,
					    .config = PERF_COUNT_SW_CPU_CLOCK,
					    .size = sizeof(a),
					    .freq = 1,
					    .sample_freq = (__u64)freq};
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			continue; /* an offline CPU */
		links[cpu] = bpf_program__attach_perf_event(skel->progs.on_sample, fd);
		if (!links[cpu]) {
			close(fd);
			continue;
		}
		attached++;
	}
	if (!attached) {
		fprintf(stderr, "tls_labels_probe: no cpu-clock perf event could be attached: %s\n",
			strerror(errno));
		tls_labels_bpf__destroy(skel);
		return 4;
	}
	int gfd = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (gfd >= 0)
		close(gfd);
	int64_t end = mono_ns() + (int64_t)(dur * 1e9);
	while (mono_ns() < end && (kill(pid, 0) == 0 || errno != ESRCH)) {
		/* a zombie child of someone else still answers kill: look at its state */
		char path[64], st[512] = "";
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(st, sizeof(st), f))
				st[0] = 0;
			fclose(f);
		}
		char *rp = strrchr(st, ')');
		if (!f || (rp && rp[1] == ' ' && rp[2] == 'Z'))
			break;
		usleep(20000);
	}
	for (int cpu = 0; cpu < ncpu; cpu++)
		bpf_link__destroy(links[cpu]);
	free(links);
	int fd = bpf_map__fd(skel->maps.counts);
	struct tls_count_key k, *prev = NULL;
	while (bpf_map_get_next_key(fd, prev, &k) == 0) {
		prev = &k;
		__u64 n;
		if (bpf_map_lookup_elem(fd, &k, &n) != 0)
			continue;
		printf("%llu %s ", (unsigned long long)n,
		       k.status < STROBE_TLS_NSTATUS ? status_name[k.status] : "?");
		strobe_labelpair l[STROBE_TLS_KEY_SLOTS];
		int nl = k.status == STROBE_TLS_OK
				 ? tls_labels_decode(k.slot, STROBE_TLS_KEY_SLOTS, l,
							    STROBE_TLS_KEY_SLOTS)
				 : 0;
		if (nl < 0)
			printf("(malformed)");
		for (int i = 0; i < nl; i++)
			printf("%s%s=%s", i ? "," : "", l[i].name, l[i].value);
		printf("%s\n", nl == 0 ? "-" : "");
	}
	__u64 lost[512] = {0}, tl = 0;
	__u32 zero = 0;
	if (ncpu <= 512 && bpf_map_lookup_elem(bpf_map__fd(skel->maps.lost), &zero, lost) == 0)
		for (int i = 0; i < ncpu; i++)
			tl += lost[i];
	fprintf(stderr, "tls_labels_probe: %llu samples lost to a full map\n",
		(unsigned long long)tl);
	r = out ? write_pprof(out, skel, freq) : 0;
	tls_labels_bpf__destroy(skel);
	if (r < 0) {
		fprintf(stderr, "tls_labels_probe: cannot write %s: %s\n", out, strerror(-r));
		return 1;
	}
	return 0;
}
