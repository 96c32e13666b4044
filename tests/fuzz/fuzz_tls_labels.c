// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the decoder of the C SDK's label block as the kernel copied it from a
 * profiled process (agent/tls_labels.c): any bytes in the slots and any slot count either
 * decode into pairs whose keys and values end inside their slots (non-empty keys, at most cap
 * pairs) or are refused with -EINVAL; nothing is read past the block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/tls_labels_user.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* the block on the heap, exactly its size, so that ASan sees any read past it */
	struct tls_label_slot *slots = malloc(sizeof(struct tls_label_slot) * STROBE_TLS_SLOTS);
	if (!slots)
		return 0;
	memset(slots, 0, sizeof(struct tls_label_slot) * STROBE_TLS_SLOTS);
	size_t n = size - 1 < sizeof(struct tls_label_slot) * STROBE_TLS_SLOTS
			   ? size - 1
			   : sizeof(struct tls_label_slot) * STROBE_TLS_SLOTS;
	memcpy(slots, data + 1, n);
	uint32_t nslots = data[0] % 12; /* past the slots sometimes */
	size_t cap = (size_t)(data[0] >> 4) % 9;
	strobe_labelpair l[STROBE_TLS_SLOTS];
	int r = tls_labels_decode(slots, nslots, l, cap);
	if (r < 0 && r != -EINVAL)
		abort();
	if (r > (int)cap || (nslots > STROBE_TLS_SLOTS && r >= 0))
		abort();
	for (int i = 0; i < r; i++)
		if (!l[i].name[0] || strlen(l[i].name) >= STROBE_TLS_KEY_MAX ||
		    strlen(l[i].value) >= STROBE_TLS_VALUE_MAX)
			abort();
	free(slots);
	return 0;
}
