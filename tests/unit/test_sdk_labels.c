// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the C SDK's per-thread label block (sdk/strobe_labels.c): the published layout
 * (magic, version, size, the offsets docs/sdk.md gives), setting and replacing labels, values
 * cut at the slot's size and at a UTF-8 boundary without writing past the slot, keys too long
 * or too many refused, deletion keeping the slots packed, the sequence counter even at rest and
 * moving with every write, and the published TLS offset finding each thread's own block from
 * its thread pointer (what the kernel side does).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strobe_labels.h"

static const char *get(const char *key)
{
	const struct strobe_labels_block *b = strobe_labels_current();
	for (uint32_t i = 0; i < b->nslots; i++)
		if (strcmp(b->slot[i].key, key) == 0)
			return b->slot[i].value;
	return NULL;
}

static void test_layout(void **state)
{
	(void)state;
	/* docs/sdk.md's table: what a reader in another language or the kernel relies on */
	assert_int_equal(offsetof(struct strobe_labels_block, magic), 0);
	assert_int_equal(offsetof(struct strobe_labels_block, version), 4);
	assert_int_equal(offsetof(struct strobe_labels_block, size), 6);
	assert_int_equal(offsetof(struct strobe_labels_block, seq), 8);
	assert_int_equal(offsetof(struct strobe_labels_block, nslots), 12);
	assert_int_equal(offsetof(struct strobe_labels_block, slot), 16);
	assert_int_equal(sizeof(struct strobe_label_slot), 64);
	assert_int_equal(sizeof(struct strobe_labels_block), 16 + 8 * 64);
	assert_int_equal(strobe_labels_process.magic, STROBE_LABELS_MAGIC);
	assert_int_equal(strobe_labels_process.version, 1);
	assert_int_equal(strobe_labels_process.size, sizeof(struct strobe_labels_block));
}

static void test_set_replace_clear(void **state)
{
	(void)state;
	const struct strobe_labels_block *b = strobe_labels_current();
	assert_int_equal(strobe_labels_set("endpoint", "/checkout"), 0);
	assert_int_equal(b->magic, STROBE_LABELS_MAGIC);
	assert_int_equal(b->version, STROBE_LABELS_VERSION);
	uint32_t seq = b->seq;
	assert_int_equal(seq % 2, 0);
	assert_int_equal(strobe_labels_set_span_id(0x00ab0000000000cdull), 0);
	assert_int_equal(b->seq, seq + 2);
	assert_string_equal(get("span_id"), "00ab0000000000cd");
	assert_int_equal(strobe_labels_set("endpoint", "/cart"), 0);
	assert_int_equal(b->nslots, 2);
	assert_string_equal(get("endpoint"), "/cart");
	strobe_labels_clear();
	assert_int_equal(b->nslots, 0);
	assert_null(get("endpoint"));
	assert_int_equal(b->seq % 2, 0);
}

static void test_truncation(void **state)
{
	(void)state;
	const struct strobe_labels_block *b = strobe_labels_current();
	char big[200];
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	/* a neighbour slot after it, to see that nothing runs over */
	assert_int_equal(strobe_labels_set("a", "x"), 0);
	assert_int_equal(strobe_labels_set("b", "neighbour"), 0);
	assert_int_equal(strobe_labels_set("a", big), 1);
	assert_int_equal(strlen(get("a")), STROBE_LABELS_VALUE_MAX - 1);
	assert_string_equal(get("b"), "neighbour");
	assert_string_equal(b->slot[1].key, "b");
	/* exactly VALUE_MAX-1 bytes fit uncut */
	big[STROBE_LABELS_VALUE_MAX - 1] = 0;
	assert_int_equal(strobe_labels_set("a", big), 0);
	/* "é" (2 bytes) straddling the cut: cut before it, never half a character */
	char u[64];
	memset(u, 'x', sizeof(u));
	memcpy(u + STROBE_LABELS_VALUE_MAX - 2, "\xc3\xa9", 2);
	u[STROBE_LABELS_VALUE_MAX] = 0;
	assert_int_equal(strobe_labels_set("a", u), 1);
	assert_int_equal(strlen(get("a")), STROBE_LABELS_VALUE_MAX - 2);
	/* a key of KEY_MAX-1 fits, one more is refused (keys are never cut: a cut key would
	 * name another label) */
	char k[STROBE_LABELS_KEY_MAX + 1];
	memset(k, 'k', sizeof(k));
	k[STROBE_LABELS_KEY_MAX - 1] = 0;
	assert_int_equal(strobe_labels_set(k, "1"), 0);
	k[STROBE_LABELS_KEY_MAX - 1] = 'k';
	k[STROBE_LABELS_KEY_MAX] = 0;
	assert_int_equal(strobe_labels_set(k, "1"), -EINVAL);
	assert_int_equal(strobe_labels_set("", "1"), -EINVAL);
	assert_int_equal(strobe_labels_set(NULL, "1"), -EINVAL);
	assert_int_equal(strobe_labels_set("a", NULL), -EINVAL);
	strobe_labels_clear();
}

static void test_slots_full_and_delete(void **state)
{
	(void)state;
	const struct strobe_labels_block *b = strobe_labels_current();
	char key[8];
	for (unsigned i = 0; i < STROBE_LABELS_SLOTS; i++) {
		snprintf(key, sizeof(key), "k%u", i);
		assert_int_equal(strobe_labels_set(key, key), 0);
	}
	assert_int_equal(strobe_labels_set("one_more", "x"), -ENOSPC);
	assert_int_equal(b->nslots, STROBE_LABELS_SLOTS);
	assert_int_equal(strobe_labels_set("k3", "again"), 0); /* replacing needs no slot */
	assert_int_equal(strobe_labels_del("k1"), 0);
	assert_int_equal(strobe_labels_del("k1"), -ENOENT);
	assert_int_equal(b->nslots, STROBE_LABELS_SLOTS - 1);
	/* packed: the last one moved into the hole, the last slot is zero */
	assert_string_equal(b->slot[1].key, "k7");
	assert_int_equal(b->slot[STROBE_LABELS_SLOTS - 1].key[0], 0);
	assert_string_equal(get("k3"), "again");
	assert_int_equal(strobe_labels_set("one_more", "x"), 0);
	strobe_labels_clear();
}

static char *tp(void)
{
	char *p = NULL;
#if defined(__x86_64__)
	__asm__("mov %%fs:0, %0" : "=r"(p));
#elif defined(__aarch64__)
	__asm__("mrs %0, tpidr_el0" : "=r"(p));
#endif
	return p;
}

static void *thread_main(void *arg)
{
	strobe_labels_set("endpoint", (const char *)arg);
	const void *mine = strobe_labels_current();
	const void *found = tp() + strobe_labels_process.tls_offset;
	return (void *)(uintptr_t)(mine == found && get("endpoint") &&
				   strcmp(get("endpoint"), arg) == 0);
}

static void test_tls_offset(void **state)
{
	(void)state;
	assert_ptr_equal(tp() + strobe_labels_process.tls_offset, strobe_labels_current());
	pthread_t t[2];
	void *ok[2];
	pthread_create(&t[0], NULL, thread_main, "/a");
	pthread_create(&t[1], NULL, thread_main, "/b");
	pthread_join(t[0], &ok[0]);
	pthread_join(t[1], &ok[1]);
	assert_true(ok[0] && ok[1]);
	assert_ptr_not_equal(strobe_labels_current(), NULL);
	assert_null(get("endpoint")); /* the other threads' labels are theirs */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_set_replace_clear),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_slots_full_and_delete),
		cmocka_unit_test(test_tls_offset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
