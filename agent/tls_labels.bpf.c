// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * The proof that the kernel can read the C SDK's label block at each sample: a program on a
 * cpu-clock perf event that reads the sampled thread's block (agent/tls_labels.bpf.h) and counts
 * samples per (process, how the read ended, the block's first slots). Loaded by
 * tests/tools/tls_labels_probe.c; the agent's on-CPU sampler includes the same header.
 *
 * Only processes user space has put in `procs` (with their TLS offset) are read: the others
 * cost a hash lookup.
 */
#include "tls_labels.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct tls_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tls_count_key);
	__type(value, __u64);
} counts SEC(".maps");

/* Per CPU: the block's copy and the key being built (both too large for the stack). */
struct scratch {
	struct tls_block b;
	struct tls_count_key k;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* Samples the counts map had no room for. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

SEC("perf_event")
int on_sample(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, zero = 0;
	struct tls_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	__builtin_memset(&s->k, 0, sizeof(s->k));
	s->k.tgid = tgid;
	s->k.status = tls_labels_read((void *)bpf_get_current_task(), p->tls_offset, &s->b);
	if (s->k.status == STROBE_TLS_OK)
		__builtin_memcpy(s->k.slot, s->b.slot, sizeof(s->k.slot));
	__u64 *c = bpf_map_lookup_elem(&counts, &s->k);
	if (c) {
		__sync_fetch_and_add(c, 1);
	} else {
		__u64 one = 1;
		if (bpf_map_update_elem(&counts, &s->k, &one, BPF_NOEXIST) == 0)
			return 0;
		if ((c = bpf_map_lookup_elem(&counts, &s->k)))
			__sync_fetch_and_add(c, 1); /* another CPU added it meanwhile */
		else if ((c = bpf_map_lookup_elem(&lost, &zero)))
			(*c)++; /* the map is full */
	}
	return 0;
}
