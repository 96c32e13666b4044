// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/bpf_load.c, which loads an eBPF skeleton in a short-lived child process
 * and adopts its maps and programs here. The agent's own on-CPU object (build/gen/oncpu.skel.h)
 * is opened and set up here, loaded through agent_bpf_load, and checked: it was loaded apart;
 * the child used this process's setup (a map size and a read-only setting made before the load
 * are the kernel's); the maps' fds are this process's; the data sections are the kernel's maps
 * (a write to skel->bss is what the map holds; skel->rodata reads the kernel's copy); the
 * programs are there by fd, of the right types, and attach (a raw tracepoint, a perf event);
 * and this process's peak RSS grew by much less than the kernel BTF's copy libbpf makes while
 * loading (11 MB and more: that is in the child). A load the kernel refuses is an error here,
 * with libbpf's message from the child. Needs root, BPF and kernel BTF: elsewhere it
 * prints SKIP with the reason.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>
#include <linux/perf_event.h>

#include "../../agent/bpf_load.h"
#include "../../agent/bpf_msg.h"
#include "oncpu.skel.h"

static long status_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, n) == 0 && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static bool can_run(void)
{
	if (geteuid() != 0) {
		printf("SKIP bpf_load: needs root (BPF)\n");
		return false;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		printf("SKIP bpf_load: no kernel BTF\n");
		return false;
	}
	return true;
}

/* The on-CPU program opened (not loaded), or the test skipped where BPF cannot run. */
static struct oncpu_bpf *open_or_skip(void)
{
	if (!can_run()) {
		skip();
		return NULL;
	}
	struct oncpu_bpf *skel = oncpu_bpf__open();
	assert_non_null(skel);
	return skel;
}

static void loads_apart_and_adopts(void **state)
{
	(void)state;
	struct oncpu_bpf *skel = open_or_skip();
	if (!skel)
		return;
	/* a setup of our own, which the child must have used */
	skel->rodata->per_thread = 0;
	skel->rodata->kernel_stacks = 0;
	assert_int_equal(bpf_map__set_max_entries(skel->maps.counts0, 2048), 0);
	assert_int_equal(bpf_map__set_max_entries(skel->maps.urows, 1), 0);
	bpf_program__set_autoattach(skel->progs.on_sample, false);

	long hwm0 = status_kb("VmHWM");
	agent_bpf_progs progs;
	int rc = agent_bpf_load(skel->skeleton, &progs);
	long hwm1 = status_kb("VmHWM");
	assert_int_equal(rc, 0);
	/* libbpf's copy of the kernel BTF alone is twice the file's size; here, much less */
	long btf_kb = 0;
	FILE *f = fopen("/sys/kernel/btf/vmlinux", "r");
	if (f && fseek(f, 0, SEEK_END) == 0)
		btf_kb = ftell(f) / 1024;
	if (f)
		fclose(f);
	printf("VmHWM %ld -> %ld kB across the load (kernel BTF %ld kB)\n", hwm0, hwm1, btf_kb);
	assert_true(hwm1 - hwm0 < btf_kb);
	assert_true(progs.apart);

	/* the maps: fds of this process, the child's sizes */
	int cfd = bpf_map__fd(skel->maps.counts0);
	assert_true(cfd >= 0);
	struct bpf_map_info mi;
	__u32 len = sizeof(mi);
	memset(&mi, 0, sizeof(mi));
	assert_int_equal(bpf_obj_get_info_by_fd(cfd, &mi, &len), 0);
	assert_int_equal(mi.max_entries, 2048);

	/* the data sections are the kernel's maps */
	int bfd = bpf_map__fd(skel->maps.bss), rfd = bpf_map__fd(skel->maps.rodata);
	assert_true(bfd >= 0 && rfd >= 0);
	skel->bss->generation = 7;
	uint32_t zero = 0;
	struct oncpu_bpf__bss bv = {0};
	assert_int_equal(bpf_map_lookup_elem(bfd, &zero, &bv), 0);
	assert_int_equal(bv.generation, 7);
	struct oncpu_bpf__rodata rv;
	memset(&rv, 0xff, sizeof(rv));
	assert_int_equal(bpf_map_lookup_elem(rfd, &zero, &rv), 0);
	assert_int_equal(rv.per_thread, 0);
	assert_int_equal(skel->rodata->per_thread, 0);
	assert_int_equal(skel->rodata->kernel_stacks, 0);

	/* the programs: by fd, of their types, and they attach */
	int sfd = agent_bpf_prog_fd(&progs, skel->progs.on_sample);
	int ffd = agent_bpf_prog_fd(&progs, skel->progs.on_fork);
	assert_true(sfd >= 0 && ffd >= 0);
	assert_true(bpf_program__fd(skel->progs.on_sample) < 0); /* (never loaded here) */
	struct bpf_prog_info pi;
	len = sizeof(pi);
	memset(&pi, 0, sizeof(pi));
	assert_int_equal(bpf_obj_get_info_by_fd(sfd, &pi, &len), 0);
	assert_int_equal(pi.type, BPF_PROG_TYPE_PERF_EVENT);
	int lfd = agent_bpf_attach_raw_tp(ffd, NULL);
	assert_true(lfd >= 0);
	close(lfd);
	struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE, .size = sizeof(a),
				    .config = PERF_COUNT_SW_CPU_CLOCK, .sample_period = 10000000};
	int pfd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	assert_true(pfd >= 0);
	int link = -1;
	assert_int_equal(agent_bpf_attach_perf(sfd, pfd, &link), 0);
	if (link >= 0)
		close(link);
	close(pfd);

	agent_bpf_progs_close(&progs);
	oncpu_bpf__destroy(skel);
}

/* A load the kernel refuses comes back as an error with libbpf's reason, and nothing leaks:
 * a map too large for any kernel. */
static void refused_load_is_an_error(void **state)
{
	(void)state;
	struct oncpu_bpf *skel = open_or_skip();
	if (!skel)
		return;
	assert_int_equal(bpf_map__set_max_entries(skel->maps.urows, 0), 0); /* an array of 0 */
	strobe_err err = {{0}};
	assert_int_equal(agent_bpf_start("the test's program", &err), 0); /* libbpf's hook */
	agent_bpf_progs progs;
	int rc = agent_bpf_load(skel->skeleton, &progs);
	assert_true(rc < 0);
	assert_int_equal(progs.n, 0);
	/* libbpf's last message, said in the child, is here to quote */
	printf("error %d: %s\n", rc, agent_bpf_msg());
	assert_non_null(strstr(agent_bpf_msg(), "oncpu_bpf"));
	agent_bpf_progs_close(&progs);
	oncpu_bpf__destroy(skel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(loads_apart_and_adopts),
		cmocka_unit_test(refused_load_is_an_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
