/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Emptying the eBPF programs' hash maps at a drain (the on-CPU, off-CPU and lock sums, and the
 * stacks beside them), shared by oncpu.c, offcpu.c and locks.c. A drain empties thousands of
 * entries; one by one that is two or three bpf() calls each (list the key, read it, delete it),
 * which was most of the collectors' own CPU on a busy host. The batch operations of kernel 5.6+
 * (BPF_MAP_LOOKUP_AND_DELETE_BATCH) take many entries a call; a kernel that refuses them is
 * remembered (*no_batch) and served one by one. Private to agent/.
 */
#ifndef STROBE_AGENT_BPF_DRAIN_H
#define STROBE_AGENT_BPF_DRAIN_H

#include <stdbool.h>
#include <stddef.h>

/* Takes every entry (at most cap) out of hash map fd, each key with its value at once, so that
 * what the kernel adds meanwhile is never lost: keys[i] (ksz bytes each) and vals[i] (vsz bytes
 * each). Returns how many were taken. An entry the kernel could not give back is left for the
 * next drain. */
size_t agent_map_take(int fd, void *keys, void *vals, size_t ksz, size_t vsz, size_t cap,
		      bool *no_batch);
/* Deletes every entry of hash map fd (at most cap), in batches of a few dozen where the kernel
 * has them (a little scratch memory for the values, freed before it returns). */
void agent_map_clear(int fd, size_t cap, bool *no_batch);
/* Takes every entry (at most cap) out of hash map fd, `chunk` a call, and hands each key and
 * value to fn before the next call (so a map of large values, stacks of 1 KiB, needs only a
 * chunk's room, not the map's). fn returning < 0 stops the drain with that error (the rest of its
 * chunk is lost, the rest of the map left in it). Returns how many were taken, or -errno. */
long agent_map_take_each(int fd, size_t ksz, size_t vsz, size_t chunk, size_t cap,
			 int (*fn)(void *ctx, const void *key, const void *val), void *ctx,
			 bool *no_batch);

#endif
