// SPDX-License-Identifier: Apache-2.0
/*
 * Emptying the eBPF programs' hash maps at a drain, in batches where the kernel has them
 * (bpf_drain.h says why). The one-by-one path lists the keys first and then takes each: deleting
 * while walking with get_next_key would restart the walk.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "bpf_drain.h"

/* One batch: -errno, 0 (more may follow) or -ENOENT (the map is empty now); *got: taken.
 * -ENOSPC: a bucket holds more entries than the room left (the rest go one by one). */
static int take_batch(int fd, bool first, uint32_t *token, void *keys, void *vals, uint32_t *got)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	int rc = bpf_map_lookup_and_delete_batch(fd, first ? NULL : token, token, keys, vals, got,
						 &bo);
	return rc < 0 ? -errno : 0;
}

/* A batch that failed with rc after `done` entries: a kernel without batches for this map
 * (before 5.6: -EINVAL, -ENOTSUPP) is served one by one from then on. */
static void refused(int rc, size_t done, bool *no_batch)
{
	if (done == 0 && rc != -ENOSPC && rc != -EINTR && rc != -EAGAIN)
		*no_batch = true;
}

size_t agent_map_take(int fd, void *keys, void *vals, size_t ksz, size_t vsz, size_t cap,
		      bool *no_batch)
{
	size_t n = 0;
	if (!*no_batch) {
		uint32_t token = 0;
		int rc = 0;
		for (bool first = true; rc == 0 && n < cap; first = false) {
			uint32_t got = (uint32_t)(cap - n);
			rc = take_batch(fd, first, &token, (char *)keys + n * ksz, (char *)vals + n * vsz,
					&got);
			if (rc == 0 || rc == -ENOENT)
				n += got;
		}
		if (rc == 0 || rc == -ENOENT)
			return n;
		refused(rc, n, no_batch);
	}
	/* one by one (what a batch took stays in keys[0..n)) */
	size_t from = n;
	void *prev = NULL;
	while (n < cap && bpf_map_get_next_key(fd, prev, (char *)keys + n * ksz) == 0) {
		prev = (char *)keys + n * ksz;
		n++;
	}
	size_t kept = from;
	for (size_t i = from; i < n; i++) {
		char *k = (char *)keys + i * ksz;
		if (bpf_map_lookup_and_delete_elem(fd, k, (char *)vals + kept * vsz) < 0)
			continue; /* gone meanwhile */
		if (kept != i)
			memmove((char *)keys + kept * ksz, k, ksz);
		kept++;
	}
	return kept;
}

void agent_map_clear(int fd, size_t cap, bool *no_batch)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0 || !info.key_size)
		return;
	enum { CHUNK = 32 }; /* entries a call: values (stacks) are up to a few KiB each */
	char *scratch = *no_batch ? NULL : malloc(CHUNK * ((size_t)info.key_size + info.value_size));
	if (scratch) {
		uint32_t token = 0;
		int rc = 0;
		size_t done = 0;
		for (bool first = true; rc == 0 && done < cap; first = false) {
			uint32_t got = CHUNK;
			rc = take_batch(fd, first, &token, scratch, scratch + CHUNK * info.key_size, &got);
			if (rc == 0 || rc == -ENOENT)
				done += got;
		}
		free(scratch);
		if (rc == 0 || rc == -ENOENT)
			return;
		refused(rc, done, no_batch);
	}
	/* one by one, always the first key: a walk would restart after each delete anyway */
	char key[info.key_size];
	for (size_t i = 0; i < cap && bpf_map_get_next_key(fd, NULL, key) == 0; i++)
		if (bpf_map_delete_elem(fd, key) < 0 && errno != ENOENT)
			break;
}

long agent_map_take_each(int fd, size_t ksz, size_t vsz, size_t chunk, size_t cap,
			 int (*fn)(void *ctx, const void *key, const void *val), void *ctx,
			 bool *no_batch)
{
	if (!chunk)
		chunk = 1;
	char *scratch = malloc(chunk * (ksz + vsz));
	if (!scratch)
		return -ENOMEM;
	char *keys = scratch, *vals = scratch + chunk * ksz;
	size_t done = 0;
	int rc = 0;
	if (!*no_batch) {
		uint32_t token = 0;
		for (bool first = true; rc == 0 && done < cap; first = false) {
			uint32_t got = (uint32_t)(cap - done < chunk ? cap - done : chunk);
			rc = take_batch(fd, first, &token, keys, vals, &got);
			if (rc != 0 && rc != -ENOENT)
				break;
			for (uint32_t i = 0; i < got; i++) {
				int frc = fn(ctx, keys + i * ksz, vals + i * vsz);
				if (frc < 0) {
					free(scratch);
					return frc;
				}
			}
			done += got;
		}
		if (rc != 0 && rc != -ENOENT)
			refused(rc, done, no_batch);
		else
			rc = 0;
	}
	if (rc != 0 || *no_batch) {
		/* one by one, always the first key (what a batch took was handed over already): a
		 * walk would restart after each delete anyway */
		while (done < cap && bpf_map_get_next_key(fd, NULL, keys) == 0) {
			if (bpf_map_lookup_and_delete_elem(fd, keys, vals) < 0) {
				/* (hash maps before 5.14: a read, then a delete) */
				if (bpf_map_lookup_elem(fd, keys, vals) < 0) {
					if (errno == ENOENT)
						continue; /* gone meanwhile */
					break;
				}
				if (bpf_map_delete_elem(fd, keys) < 0 && errno != ENOENT)
					break;
			}
			int frc = fn(ctx, keys, vals);
			if (frc < 0) {
				free(scratch);
				return frc;
			}
			done++;
		}
	}
	free(scratch);
	return (long)done;
}
