// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/bpf_drain.c, which empties the eBPF programs' hash maps at a drain: real
 * hash maps made here (no program loaded), filled from user space, then taken out and cleared,
 * in batches and one by one (the path of a kernel without batch operations, forced with
 * no_batch). Checked: every entry comes out once with its own value, the map is empty after;
 * a cap smaller than the map takes cap entries and leaves the rest for the next drain, each
 * exactly once over the two; a clear empties a map of large values (stacks) whatever its
 * size, and one with more entries than one batch's room; agent_map_take_each hands every entry
 * of a map of stacks to its callback once with its value, chunk by chunk, and stops at the
 * callback's error. BPF maps need root (or CAP_BPF): elsewhere it prints SKIP with the reason.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <cmocka.h>

#include "../../agent/bpf_drain.h"

typedef struct key {
	uint32_t tgid, tid;
	uint64_t stack;
} key;

static int make_map(uint32_t vsz, uint32_t max)
{
	return bpf_map_create(BPF_MAP_TYPE_HASH, "t_drain", sizeof(key), vsz, max, NULL);
}

static void fill(int fd, unsigned n, unsigned from)
{
	for (unsigned i = from; i < from + n; i++) {
		key k = {i, i * 3, (uint64_t)i << 20};
		uint64_t v = (uint64_t)i * 1000 + 7;
		assert_int_equal(bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST), 0);
	}
}

static unsigned count(int fd)
{
	key k, *prev = NULL;
	unsigned n = 0;
	while (bpf_map_get_next_key(fd, prev, &k) == 0) {
		n++;
		prev = &k;
	}
	return n;
}

/* Takes entries until the map is empty (cap a call) and checks each of 0..n-1 came out once
 * with its value. */
static void take_all(bool no_batch, unsigned n, unsigned cap)
{
	int fd = make_map(sizeof(uint64_t), 4096);
	assert_true(fd >= 0);
	fill(fd, n, 0);
	key *keys = calloc(cap, sizeof(*keys));
	uint64_t *vals = calloc(cap, sizeof(*vals));
	unsigned char *seen = calloc(n, 1);
	unsigned total = 0, calls = 0;
	bool nb = no_batch;
	for (;;) {
		size_t got = agent_map_take(fd, keys, vals, sizeof(*keys), sizeof(*vals), cap, &nb);
		assert_true(got <= cap);
		if (!got)
			break;
		calls++;
		for (size_t i = 0; i < got; i++) {
			assert_true(keys[i].tgid < n);
			assert_int_equal(keys[i].tid, keys[i].tgid * 3);
			assert_int_equal(vals[i], (uint64_t)keys[i].tgid * 1000 + 7);
			assert_int_equal(seen[keys[i].tgid], 0);
			seen[keys[i].tgid] = 1;
		}
		total += (unsigned)got;
		assert_true(calls <= n / cap + 2);
	}
	assert_int_equal(total, n);
	assert_int_equal(count(fd), 0);
	assert_int_equal(nb, no_batch); /* this kernel has batches: never given up on */
	free(keys);
	free(vals);
	free(seen);
	close(fd);
}

static void test_take_batched(void **state)
{
	(void)state;
	take_all(false, 3000, 4096); /* one drain */
	take_all(false, 3000, 1000); /* cap smaller than the map: the rest next time */
	take_all(false, 0, 16);
}

static void test_take_one_by_one(void **state)
{
	(void)state;
	take_all(true, 1500, 4096);
	take_all(true, 1500, 700);
}

static void test_clear(void **state)
{
	(void)state;
	enum { BIG = 1024 + 8 }; /* a stack's size: many of them are more than one batch's room */
	for (int nb = 0; nb < 2; nb++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "t_stacks", sizeof(uint64_t), BIG, 2048, NULL);
		assert_true(fd >= 0);
		unsigned char v[BIG];
		for (uint64_t i = 1; i <= 1500; i++) {
			memset(v, (int)i, sizeof(v));
			assert_int_equal(bpf_map_update_elem(fd, &i, v, BPF_NOEXIST), 0);
		}
		bool no_batch = nb;
		agent_map_clear(fd, 2048, &no_batch);
		assert_int_equal(count(fd), 0);
		assert_int_equal(no_batch, nb);
		/* at most cap a call: the rest stays */
		for (uint64_t i = 1; i <= 100; i++)
			assert_int_equal(bpf_map_update_elem(fd, &i, v, BPF_NOEXIST), 0);
		agent_map_clear(fd, 40, &no_batch);
		assert_true(count(fd) >= 60 - 32 && count(fd) <= 60);
		agent_map_clear(fd, 2048, &no_batch);
		assert_int_equal(count(fd), 0);
		close(fd);
	}
}

/* agent_map_take_each on a map of stacks (1 KiB values, so a chunk of 64 is far less than the
 * map): every entry handed over once with its own value, the map empty after, in batches and
 * one by one; a callback's error stops the drain with it. */
typedef struct each_seen {
	unsigned char seen[2049];
	unsigned n, stop_at;
} each_seen;

static int each_cb(void *ctx, const void *k, const void *v)
{
	each_seen *e = ctx;
	uint64_t id;
	memcpy(&id, k, sizeof(id));
	assert_true(id >= 1 && id <= 2048);
	const unsigned char *b = v;
	assert_int_equal(b[0], (unsigned char)id);
	assert_int_equal(b[1023], (unsigned char)(id * 7));
	assert_int_equal(e->seen[id], 0);
	e->seen[id] = 1;
	if (e->stop_at && e->n == e->stop_at)
		return -ENOMEM;
	e->n++;
	return 0;
}

static void test_take_each(void **state)
{
	(void)state;
	enum { BIG = 1024 + 8 };
	for (int nb = 0; nb < 2; nb++) {
		int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "t_each", sizeof(uint64_t), BIG, 2048, NULL);
		assert_true(fd >= 0);
		unsigned char v[BIG];
		for (uint64_t i = 1; i <= 1500; i++) {
			memset(v, (int)i, sizeof(v));
			v[1023] = (unsigned char)(i * 7);
			assert_int_equal(bpf_map_update_elem(fd, &i, v, BPF_NOEXIST), 0);
		}
		bool no_batch = nb;
		each_seen *e = calloc(1, sizeof(*e));
		long got = agent_map_take_each(fd, sizeof(uint64_t), BIG, 64, 2048, each_cb, e,
					       &no_batch);
		assert_int_equal(got, 1500);
		assert_int_equal(e->n, 1500);
		for (unsigned i = 1; i <= 1500; i++)
			assert_int_equal(e->seen[i], 1);
		assert_int_equal(count(fd), 0);
		assert_int_equal(no_batch, nb);
		/* an error from the callback: returned, the rest of the map left in it */
		for (uint64_t i = 1; i <= 300; i++) {
			memset(v, (int)i, sizeof(v));
			v[1023] = (unsigned char)(i * 7);
			assert_int_equal(bpf_map_update_elem(fd, &i, v, BPF_NOEXIST), 0);
		}
		memset(e, 0, sizeof(*e));
		e->stop_at = 10;
		assert_int_equal(agent_map_take_each(fd, sizeof(uint64_t), BIG, 64, 2048, each_cb, e,
						     &no_batch),
				 -ENOMEM);
		assert_true(count(fd) > 0 && count(fd) < 300);
		free(e);
		close(fd);
	}
}

int main(void)
{
	int fd = make_map(8, 4);
	if (fd < 0) {
		printf("SKIP test_bpf_drain: cannot create BPF maps (%s): needs root or CAP_BPF\n",
		       strerror(errno));
		return 0;
	}
	close(fd);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_take_batched),
		cmocka_unit_test(test_take_one_by_one),
		cmocka_unit_test(test_clear),
		cmocka_unit_test(test_take_each),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
