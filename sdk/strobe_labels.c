// SPDX-License-Identifier: Apache-2.0
/*
 * The per-thread label block of strobe's C SDK (strobe_labels.h). Its one reader is the
 * kernel, interrupting this very thread at a sample (a perf event's eBPF program), never another
 * thread concurrently: so no atomics are needed, only that the compiler keep the order of the
 * stores around the sequence counter (a signal fence), as for a signal handler.
 *
 * libc only (it lives inside other people's programs): no allocation, no locks, no printing.
 */
#include "strobe_labels.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* Initial-exec TLS: the block sits at a fixed offset from the thread pointer, the same for
 * every thread, which is what lets the kernel find it from the task alone. */
static __thread struct strobe_labels_block block __attribute__((tls_model("initial-exec")));

__attribute__((visibility("default"))) struct strobe_labels_process strobe_labels_process;

static inline char *thread_pointer(void)
{
	char *tp = NULL;
#if defined(__x86_64__)
	/* glibc and musl keep the TCB's own address at %fs:0: the value of fsbase. */
	__asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
#endif
	return tp;
}

/* Published before main, so a profiler that finds the process later finds the offset set. */
__attribute__((constructor)) static void publish(void)
{
	char *tp = thread_pointer();
	if (!tp)
		return; /* an architecture the kernel side does not read: nothing published */
	strobe_labels_process.tls_offset = (int64_t)((char *)&block - tp);
	strobe_labels_process.version = STROBE_LABELS_VERSION;
	strobe_labels_process.size = sizeof(struct strobe_labels_block);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	strobe_labels_process.magic = STROBE_LABELS_MAGIC;
}

static inline void write_begin(void)
{
	if (block.magic != STROBE_LABELS_MAGIC) {
		block.version = STROBE_LABELS_VERSION;
		block.size = sizeof(block);
		block.magic = STROBE_LABELS_MAGIC;
	}
	block.seq++; /* odd: a reader drops what it copies now */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void write_end(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	block.seq++;
}

/* Copies s into dst[cap], cut to cap-1 bytes at a UTF-8 character boundary, the rest zeroed (so
 * a reader's copy holds no stale bytes); 1 when cut. */
static int copy_cut(char *dst, size_t cap, const char *s)
{
	size_t n = strnlen(s, cap);
	int cut = 0;
	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--; /* s[n] continues a character: cut before it starts */
		cut = 1;
	}
	memcpy(dst, s, n);
	memset(dst + n, 0, cap - n);
	return cut;
}

static int find(const char *key)
{
	for (uint32_t i = 0; i < block.nslots && i < STROBE_LABELS_SLOTS; i++)
		if (strncmp(block.slot[i].key, key, STROBE_LABELS_KEY_MAX) == 0)
			return (int)i;
	return -1;
}

int strobe_labels_set(const char *key, const char *value)
{
	if (!key || !value || !key[0] || strnlen(key, STROBE_LABELS_KEY_MAX) >= STROBE_LABELS_KEY_MAX)
		return -EINVAL;
	int i = find(key);
	if (i < 0 && block.nslots >= STROBE_LABELS_SLOTS)
		return -ENOSPC;
	write_begin();
	if (i < 0) {
		i = (int)block.nslots;
		copy_cut(block.slot[i].key, STROBE_LABELS_KEY_MAX, key);
		block.nslots++;
	}
	int cut = copy_cut(block.slot[i].value, STROBE_LABELS_VALUE_MAX, value);
	write_end();
	return cut;
}

int strobe_labels_set_span_id(uint64_t span_id)
{
	static const char hex[] = "0123456789abcdef";
	char s[17];
	for (int k = 15; k >= 0; k--, span_id >>= 4)
		s[k] = hex[span_id & 15];
	s[16] = 0;
	return strobe_labels_set("span_id", s);
}

int strobe_labels_del(const char *key)
{
	if (!key)
		return -EINVAL;
	int i = find(key);
	if (i < 0)
		return -ENOENT;
	write_begin();
	uint32_t last = block.nslots - 1;
	if ((uint32_t)i != last) /* keep the used slots packed: the last one moves here */
		memcpy(&block.slot[i], &block.slot[last], sizeof(block.slot[i]));
	memset(&block.slot[last], 0, sizeof(block.slot[last]));
	block.nslots = last;
	write_end();
	return 0;
}

void strobe_labels_clear(void)
{
	if (block.magic != STROBE_LABELS_MAGIC || !block.nslots)
		return;
	write_begin();
	memset(block.slot, 0, sizeof(block.slot));
	block.nslots = 0;
	write_end();
}

const struct strobe_labels_block *strobe_labels_current(void)
{
	return &block;
}
