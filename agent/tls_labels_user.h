/* SPDX-License-Identifier: Apache-2.0 */
/*
 * User space of the C SDK's label block (agent/tls_labels.c): finding a process's published
 * TLS offset once (the SDK's strobe_labels_process symbol, read from the process's memory), and
 * decoding a block copied by the kernel into label pairs. The eBPF side is
 * agent/tls_labels.bpf.h.
 */
#ifndef STROBE_AGENT_TLS_LABELS_USER_H
#define STROBE_AGENT_TLS_LABELS_USER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"
#include "strobe/store.h" /* strobe_labelpair */
#include "tls_labels.h"

/* The TLS offset process pid published (proc_root: "/proc" or a host's, for containers): 0,
 * -ENOENT (no mapped ELF file of it has the SDK's symbol: it does not use the SDK), -ENODATA
 * (the symbol is there but not published yet, or another layout version), or -errno of
 * reading the process. */
int tls_labels_offset(const char *proc_root, pid_t pid, int64_t *offset,
			     strobe_err *err);
/* The labels of a copied block: pairs pointing into b (at most cap); the count, or -EINVAL
 * when the block is malformed (a count past the slots, a key or value without its NUL). */
int tls_labels_decode(const struct tls_label_slot *slots, uint32_t nslots,
			     strobe_labelpair *out, size_t cap);

#endif
