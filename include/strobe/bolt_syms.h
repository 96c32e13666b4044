/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An executable's functions as llvm-bolt names them, for the BOLT export (lib/bolt_fdata.c):
 * global symbols by their name, local ones as NAME/N, N counting the local symbols of that name
 * in address order from 1 (BOLT's NameResolver), so that a profile names the functions BOLT
 * will look for. Addresses of a profile are matched to the executable by the mapping's build ID.
 *
 * Ownership: the table owns its names; the resolver's names live as long as the table.
 */
#ifndef STROBE_BOLT_SYMS_H
#define STROBE_BOLT_SYMS_H

#include "strobe/profile.h"

typedef struct strobe_bolt_syms strobe_bolt_syms;

/* Reads path's symbol table (.symtab, else .dynsym) and program headers. NULL + errno with a
 * message naming path and the problem (not ELF, no symbols: stripped). */
strobe_bolt_syms *strobe_bolt_syms_open(const char *path, strobe_err *err);
void strobe_bolt_syms_free(strobe_bolt_syms *s);
/* The executable's build ID in lower-case hex ("" when it has none). */
const char *strobe_bolt_syms_build_id(const strobe_bolt_syms *s);
/* A strobe_bolt_resolver (ctx: the table): the function holding loc's address when loc's
 * mapping is this executable (same build ID, or the same file name when the mapping has no
 * build ID). */
int strobe_bolt_syms_resolve(void *ctx, const strobe_profile *p, const strobe_location *loc,
			     const char **sym, uint64_t *offset);

#endif
