// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent's eBPF loaders (offcpu.c, locks.c) share around libbpf: its messages and the
 * kernel's BTF. libbpf prints through one process-wide hook, so the two loaders must share it:
 * with a hook each, whichever was set last took the other's messages, and an error about one
 * program quoted nothing. The last message of each thread is kept, for the error that follows it
 * to quote (libbpf's own errors are codes; its text says which map or helper the kernel refused).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf_msg.h"

static _Thread_local char msg[256];

static int on_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	char m[256];
	vsnprintf(m, sizeof(m), fmt, ap);
	m[strcspn(m, "\n")] = 0;
	if (m[0])
		memcpy(msg, m, sizeof(m));
	return 0;
}

char *agent_bpf_msg(void)
{
	return msg;
}

int agent_bpf_start(const char *what, strobe_err *err)
{
	libbpf_set_print(on_print);
	msg[0] = 0;
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		return strobe_errf(err, -ENOENT, "no kernel BTF (/sys/kernel/btf/vmlinux: %s): it is "
				   "needed by %s", strerror(errno), what);
	return 0;
}

void agent_bpf_percpu_sum(int map_fd, int ncpus, uint64_t *out, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		out[i] = 0;
		if (ncpus <= 0)
			continue;
		uint64_t v[ncpus];
		if (bpf_map_lookup_elem(map_fd, &i, v) == 0)
			for (int j = 0; j < ncpus; j++)
				out[i] += v[j];
	}
}
