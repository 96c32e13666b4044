// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for what the server reads of an uploaded debug file before it stores it
 * (server/debuginfo.c): the section walk that decides its roles (lib/elf_image.c
 * strobe_elf_contents) and the build-ID note search. Any client with a tenant's token can send
 * any bytes; neither may read outside them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/elf_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so ASan sees any read past the end. */
	uint8_t *img = malloc(size ? size : 1);
	if (!img)
		return 0;
	memcpy(img, data, size);
	unsigned flags = 0;
	if (strobe_elf_contents(img, size, &flags) == 0 && flags > 7)
		abort(); /* only the three flags exist */
	const uint8_t *id = NULL;
	size_t n = strobe_elf_build_id_of(img, size, &id);
	if (n && (id < img || id + n > img + size))
		abort(); /* the ID must lie inside the image */
	free(img);
	return 0;
}
