/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading an eBPF skeleton without the kernel BTF's copy in the agent's memory (bpf_load.c),
 * and attaching its programs by file descriptor. Private to agent/.
 *
 * Ownership: agent_bpf_load fills an agent_bpf_progs that owns one fd per program loaded;
 * agent_bpf_progs_close closes them (the skeleton still owns its maps, as after its own load).
 */
#ifndef STROBE_AGENT_BPF_LOAD_H
#define STROBE_AGENT_BPF_LOAD_H

#include <stdbool.h>

#include <bpf/libbpf.h>

#define AGENT_BPF_MAX_PROGS 32

typedef struct agent_bpf_progs {
	int n;
	const struct bpf_program *prog[AGENT_BPF_MAX_PROGS];
	int fd[AGENT_BPF_MAX_PROGS]; /* -1: not loaded (autoload off) */
	bool apart;                  /* loaded by a child process (else in this one) */
} agent_bpf_progs;

/* Loads the skeleton's object (opened and set up: read-only data, map sizes, reused maps,
 * autoload flags), as its own __load would, except that libbpf runs in a short-lived child
 * process: libbpf 1.1 reads the kernel's BTF (/sys/kernel/btf/vmlinux, 5 MB) and copies it while
 * loading, a transient of about 11 MB that would otherwise be the agent's peak RSS. The child
 * hands the maps and programs back over a unix socket (SCM_RIGHTS); here the maps are adopted
 * (bpf_map__reuse_fd) and the skeleton's data sections mapped as its own load maps them. Where
 * no child can be started the object is loaded here. 0 or -errno; libbpf's message (the
 * child's too) in agent_bpf_msg(). The object must not be loaded again afterwards: its
 * programs are used through `progs` only (bpf_program__fd says -1 for them). */
int agent_bpf_load(struct bpf_object_skeleton *s, agent_bpf_progs *progs);
/* The fd of one of the skeleton's programs (-1: not loaded). */
int agent_bpf_prog_fd(const agent_bpf_progs *progs, const struct bpf_program *prog);
void agent_bpf_progs_close(agent_bpf_progs *progs);

/* Before load: the table walk's maps (ustack.bpf.h: urows, umaps, uwant, ureq, uexec, ubins)
 * are those of fds (strobe_offcpu_table_maps), another program's, so that one loader serves
 * both. 0 or -errno. */
int agent_bpf_share_tables(struct bpf_map *urows, struct bpf_map *umaps, struct bpf_map *uwant,
			   struct bpf_map *ureq, struct bpf_map *uexec, struct bpf_map *ubins,
			   const int *fds);
/* Whether this kernel lets a perf_event program call bpf_find_vma (5.17 and later). */
bool agent_bpf_has_find_vma(void);

/* Attaches program prog_fd to perf event pfd: a BPF link where the kernel has them (*link_fd,
 * to close to detach), else the perf ioctl (*link_fd -1: closing pfd detaches). 0 or -errno. */
int agent_bpf_attach_perf(int prog_fd, int pfd, int *link_fd);
/* Attaches a tp_btf (or raw_tp with its name) program: the link's fd, or -errno. */
int agent_bpf_attach_raw_tp(int prog_fd, const char *tp_name);
/* Attaches a tracepoint program to tracepoint CATEGORY:NAME (its id from tracefs) as libbpf
 * does: a perf event of the tracepoint (*pfd) with the program on it (*link_fd: -1 where the
 * ioctl attached it). Close both to detach. 0 or -errno (-ENOENT: no such tracepoint). */
int agent_bpf_attach_tracepoint(int prog_fd, const char *category, const char *name, int *pfd,
				int *link_fd);

#endif
