// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the folded-stacks decoder, and for what is built on a decoded profile
 * (folded output, call tree, top statistics), so a hostile file can crash none of them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "strobe/codec.h"
#include "strobe/transform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	strobe_profile *p = NULL;
	strobe_err err;
	if (strobe_folded_decode((const char *)data, size, "fuzz", &p, &err) < 0)
		return 0;
	FILE *devnull = fopen("/dev/null", "w");
	strobe_folded_write(devnull, p, 0, STROBE_GRAN_FUNCTIONS);
	strobe_top_write(devnull, p, 0, STROBE_GRAN_FUNCTIONS, 10, false);
	fclose(devnull);
	strobe_tree *t = strobe_tree_new();
	if (t && strobe_tree_add(t, p, (int)p->ntypes - 1, STROBE_GRAN_FUNCTIONS, 0, 1.0, 0) == 0)
		strobe_tree_sort(t);
	strobe_tree_free(t);
	strobe_filter f = {.prune = 0.1, .hide = "a"};
	strobe_profile_filter(p, &f, 0, NULL);
	strobe_profile_free(p);
	return 0;
}
