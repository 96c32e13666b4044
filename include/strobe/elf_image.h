/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF images in memory, read without libelf: the GNU build ID (the name of a binary by content,
 * which symbolization, the debug-info store and the unwinder's caches key on) and the vDSO,
 * which is no file but an image the kernel maps into every process. One reader for the
 * symbolizer and the agent's unwinder.
 *
 * Ownership: nothing is allocated. A build ID points into the image it was read from, and the
 * vDSO image is the kernel's mapping in this process, valid for its life.
 */
#ifndef STROBE_ELF_IMAGE_H
#define STROBE_ELF_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* The GNU build ID of a little-endian ELF image (32- or 64-bit) of len bytes: *id points at it
 * and its length is returned; 0 when it has none or is no such image. Note sections are searched
 * first when the image has section headers (a separate debug file's program headers may point
 * at data it no longer holds), else its PT_NOTE segments, as libdw's dwelf_elf_gnu_build_id
 * does. Every offset and size is checked against len. */
size_t strobe_elf_build_id_of(const void *img, size_t len, const uint8_t **id);

/* What an ELF image holds, for the debug-info store: bits of STROBE_ELF_* (.debug_info, compressed
 * or not; code in .text; a .symtab), from its section headers, every offset and name checked
 * against len. -EINVAL when it is no little-endian ELF image or its section headers are out of
 * bounds. */
enum { STROBE_ELF_DEBUG_INFO = 1, STROBE_ELF_CODE = 2, STROBE_ELF_SYMTAB = 4 };
int strobe_elf_contents(const void *img, size_t len, unsigned *flags);

/* This process's vDSO: its image (the kernel's mapping, from the auxiliary vector) and the length
 * its headers describe. -ENOENT when there is none or it does not look like a 64-bit ELF image
 * of at most 1 MiB. */
int strobe_vdso_image(const uint8_t **img, size_t *len);

#endif
