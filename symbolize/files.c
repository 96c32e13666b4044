// SPDX-License-Identifier: Apache-2.0
/*
 * The files the symbolizer reads, found and identified: paths under the configured root
 * (opts.sysroot, so tests can supply /proc/kallsyms and /usr/lib/debug of their own) and ELF
 * build IDs (read from the image's notes through lib/elf_image.c). Both the object cache
 * (symbolizer.c) and the object loader (elf_object.c) use them, which is why they are here and
 * not in either.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "strobe/elf_image.h"

char *sym_rooted(const strobe_symbolizer *s, const char *path)
{
	size_t a = strlen(s->sysroot), b = strlen(path);
	char *r = malloc(a + b + 1);
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(r, s->sysroot, a);
	memcpy(r + a, path, b + 1);
	return r;
}

int sym_elf_build_id(Elf *elf, const uint8_t **id)
{
	size_t len = 0;
	const char *img = elf_rawfile(elf, &len);
	size_t n = img ? strobe_elf_build_id_of(img, len, id) : 0;
	return n > INT_MAX ? INT_MAX : (int)n;
}

int strobe_elf_build_id(const char *path, uint8_t *out, size_t cap)
{
	if (!path || (cap && !out))
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int r;
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		r = -ENOEXEC;
	} else {
		const uint8_t *id;
		r = sym_elf_build_id(elf, &id);
		if ((size_t)r > cap)
			r = -ENOBUFS;
		else if (r > 0)
			memcpy(out, id, (size_t)r);
	}
	elf_end(elf);
	close(fd);
	return r;
}

char *strobe_build_id_hex(const uint8_t *id, size_t len, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = hex[id[i] >> 4];
		buf[2 * i + 1] = hex[id[i] & 15];
	}
	buf[2 * len] = 0;
	return buf;
}
