/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the eBPF off-CPU program's table walk reads (agent/offcpu.bpf.c): each process's
 * executable mappings (map umaps) and the unwind rows of their binaries (map urows), loaded
 * from /proc and the binaries' .eh_frame by offcpu_tables.c when the program asks for a process
 * (ring buffer ureq, map uwant). Private to agent/.
 */
#ifndef STROBE_AGENT_OFFCPU_TABLES_H
#define STROBE_AGENT_OFFCPU_TABLES_H

#include <stdint.h>

#include "strobe/offcpu.h" /* strobe_otables_stats */

typedef struct otables otables;


/* fds of the maps urows (max_rows entries), umaps, uwant, uexec and ubins (-1: none).
 * NULL + errno. */
/* proc_root: where /proc is (the agent's --proc-root; NULL: /proc), for PID/maps and the
 * binaries under PID/root. */
otables *otables_new(int fd_rows, uint32_t max_rows, int fd_maps, int fd_want,
				   int fd_exec, int fd_bins, const char *proc_root);
void otables_free(otables *t);
/* Loads (again) the mappings of process tgid. 0 or -errno (-ESRCH: gone). */
int otables_load(otables *t, uint32_t tgid);
/* Loads the tables of the processes running now (under proc_root), for at most ms
 * milliseconds: before the loader thread starts (otables_load is not for two threads at
 * once). */
void otables_preload(otables *t, unsigned ms);
/* Starts the loader thread: it loads the processes the program asks for (through the ring
 * buffer at fd_ring, and map uwant) and forgets processes that have exited, until
 * otables_free. 0 or -errno. */
/* on_load(ctx, tgid) runs on the loader thread after each process's mappings are written (not
 * before: it may wait for a lock the drain holds, and the tables must not wait for it). */
int otables_start(otables *t, int fd_ring, void (*on_load)(void *, uint32_t),
			 void *ctx);
void otables_get_stats(otables *t, strobe_otables_stats *st);
/* Binaries larger than this (4 MiB by default) have their rows built on a thread of their own
 * once the loader thread runs, their processes read again when the rows are in. Before
 * otables_start. */
void otables_set_big_binary(otables *t, uint64_t bytes);

#endif
