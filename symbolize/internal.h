/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of symbolize/ share and nothing outside it sees: the symbolizer and object
 * structs, the string pool every returned string lives in, the sorted address tables the ELF,
 * kallsyms and perf-map code search, and the bounded line reader the two text formats use.
 *
 * Addresses inside an object are "module addresses": the ELF virtual address plus the bias the
 * object's Dwfl gave the module, which is the coordinate system libdwfl's symbol functions speak.
 * DWARF addresses are module addresses minus the DWARF bias (a separate debug file may be
 * linked at a different base than the binary, libdwfl reports the difference).
 */
#ifndef STROBE_SYMBOLIZE_INTERNAL_H
#define STROBE_SYMBOLIZE_INTERNAL_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strobe/profile.h"
#include "strobe/symbolize.h"

/* Caps on what untrusted input can make us hold. */
#define SYM_MAX_LINE 4096u            /* kallsyms / perf-map lines longer than this are skipped */
#define SYM_MAX_NAME 1023u            /* symbol names are cut to this many bytes */
#define SYM_MAX_ENTRIES (4u << 20)    /* symbols per table (ELF, kallsyms, one perf map) */
#define SYM_MAX_TEXT_FILE (512u << 20) /* bytes read from one kallsyms / perf-map file */
#define SYM_MAX_INLINE 64             /* inline depth followed in DWARF */
#define SYM_MAX_PERFMAPS 4096u        /* perf maps held at once (pids) */

/* ---- string pool: stable, deduplicated strings ---------------------------------------------- */

typedef struct sym_strpool {
	char **chunks;     /* each chunk stays where it is, so returned pointers stay valid */
	size_t nchunks, cchunks;
	size_t used, avail; /* in the last chunk */
	const char **strs; /* interned strings, by index */
	uint32_t *hashes;
	uint32_t n, cap;
	uint64_t *slots;   /* hash << 32 | (index + 1), 0 = empty */
	uint32_t nslots;
} sym_strpool;

void sym_strpool_free(sym_strpool *p);
/* The pooled copy of s[0..len) (cut to SYM_MAX_NAME bytes on a UTF-8 boundary), or NULL when
 * out of memory. */
const char *sym_intern(sym_strpool *p, const char *s, size_t len);
/* The same with another cap on the length (names from ELF and DWARF files, which are longer
 * than kallsyms or perf-map lines can be). */
const char *sym_intern_max(sym_strpool *p, const char *s, size_t len, size_t max);

/* ---- sorted address ranges ------------------------------------------------------------------ */

typedef struct sym_range {
	uint64_t start, end; /* [start, end) */
	const char *name;
	uint32_t group;      /* kallsyms: module index; unused elsewhere */
	uint32_t seq;        /* perf maps: line number, later lines win */
} sym_range;

/* The range containing addr among v[0..n) sorted by start (overlaps allowed: the nearest
 * preceding ranges are checked, the one with the highest seq among those containing addr wins),
 * or NULL. *below, when not NULL, gets the index of the last range starting at or before addr
 * (or SIZE_MAX). */
const sym_range *sym_ranges_find(const sym_range *v, size_t n, uint64_t addr, size_t *below);

/* ---- bounded line reader -------------------------------------------------------------------- */

/* Calls fn for every line of the file at path (without its '\n', not NUL-terminated), skipping
 * lines longer than SYM_MAX_LINE and stopping after SYM_MAX_TEXT_FILE bytes. fn returns 0 to go
 * on, anything else to stop (returned). Returns 0 or -errno when the file cannot be read. */
/* Up to 16 hex digits (an optional 0x first) at *p, before e; advances *p. False when there are
 * none or more (kallsyms addresses and perf map fields). */
bool sym_parse_hex(const char **p, const char *e, uint64_t *out);

int sym_read_lines(const char *path, int (*fn)(void *arg, const char *line, size_t len),
		   void *arg);

/* ---- the symbolizer ------------------------------------------------------------------------- */

typedef struct sym_kernel sym_kernel;
typedef struct sym_perfmaps sym_perfmaps;

/* Parsed DWARF index of one object (dwarf.c). */
typedef struct sym_dwarf sym_dwarf;

/* One PT_LOAD segment of the main ELF file. */
typedef struct sym_segment {
	uint64_t offset, filesz, vaddr;
	bool exec;
} sym_segment;

struct strobe_sym_object {
	strobe_symbolizer *owner;
	char *path;            /* as the process named it */
	dev_t dev;
	ino_t ino;
	uint8_t build_id[STROBE_BUILD_ID_MAX];
	size_t build_id_len;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	uint64_t bias;         /* module address = ELF vaddr + bias */
	sym_segment *seg;
	size_t nseg;
	char *opened_as;       /* the file actually opened, to reopen after a release */
	bool released;         /* tables freed by strobe_sym_object_release; reopened on use */
	/* What has_symbols / has_lines answered (0: not asked yet, 1: no, 2: yes): a property
	 * of the file, kept across releases, so that a process's mapping flags do not reopen a
	 * released object at every profile (the agent builds one per process per interval). */
	unsigned char known_syms, known_lines;
	/* Loaded on first use. */
	bool syms_loaded, dwarf_loaded;
	bool over_budget;      /* DWARF over the symbolizer's budget: never loaded */
	sym_range *syms;       /* functions by module address */
	size_t nsyms;
	sym_dwarf *dw;         /* NULL when the object has no DWARF (or no_dwarf) */
};

typedef struct sym_cache_entry sym_cache_entry;

struct strobe_symbolizer {
	char **debug_dirs;     /* copies of opts.debug_dirs, NULL-terminated */
	char *sysroot;         /* "" for "/" */
	bool no_dwarf, no_kernel;
	uint64_t max_debug;     /* opts.max_debug_bytes */
	size_t over_budget;     /* objects named without their DWARF because of it */
	sym_strpool strings;
	/* Object cache: build ID -> object, (dev, inode, path) -> object or a cached failure. */
	strobe_itab by_build_id; /* key: sym_bid_key */
	strobe_sym_object **bid_obj;
	strobe_itab by_path;     /* key: dev, ino, then the path bytes */
	strobe_sym_object **path_obj; /* NULL: failure, errno in path_err */
	int *path_err;
	uint32_t cpath, cbid;
	strobe_sym_object **objs;
	size_t nobjs, cobjs;
	sym_cache_entry *cache; /* recent lookups */
	uint32_t clock;
	sym_kernel *kernel;
	sym_perfmaps *perfmaps;
	int vdso_fd;            /* a memfd holding this process's vDSO image; -1 = not yet, -2 = none */
	unsigned generation;    /* strobe_symbolizer_renew calls: a holder of objects checks it */
};

/* Reopens an object whose tables were released (no-op otherwise). */
void sym_object_ensure(strobe_sym_object *o);

/* sysroot + path into a malloc'd string (path absolute). NULL + ENOMEM. */
char *sym_rooted(const strobe_symbolizer *s, const char *path);

/* ---- elf_object.c --------------------------------------------------------------------------- */

/* Opens the object on an already open ELF file (fd consumed either way). 0 or -errno. */
int sym_object_open(strobe_symbolizer *s, strobe_sym_object *o, int fd, const char *opened_as);
void sym_object_close(strobe_sym_object *o);
/* Builds the sorted function table on first call. */
void sym_object_load_symbols(strobe_sym_object *o);
/* File offset -> module address; false when no PT_LOAD segment holds the offset. */
bool sym_object_offset_to_addr(const strobe_sym_object *o, uint64_t offset, uint64_t *addr);
/* The function symbol containing a module address, or NULL. */
const sym_range *sym_object_symbol(const strobe_sym_object *o, uint64_t addr);
/* The GNU build ID of an ELF handle: its length, 0 when none. *id points into the ELF data. */
int sym_elf_build_id(Elf *elf, const uint8_t **id);

/* ---- dwarf.c -------------------------------------------------------------------------------- */

/* Loads the DWARF of o on first call (sets o->dw, NULL when there is none). */
void sym_dwarf_load(strobe_sym_object *o);
void sym_dwarf_free(sym_dwarf *d);
/* What the object's DWARF holds now, estimated: its sections (decompressed) plus the line
 * tables parsed so far. */
uint64_t sym_dwarf_held_bytes(const sym_dwarf *d);
/* Frames for module address addr, leaf-first into out[0..cap) (the innermost are dropped when
 * the chain is longer). Returns the count, 0 when DWARF does not cover addr. The outermost
 * frame's function may be NULL (code with lines but no subprogram DIE). */
int sym_dwarf_frames(strobe_sym_object *o, uint64_t addr, strobe_sym_frame *out, int cap);

/* ---- kallsyms.c / perfmap.c ----------------------------------------------------------------- */

void sym_kernel_free(sym_kernel *k);
/* strobe_symbolizer_renew: drops the names the table handed out (they were in the symbolizer's
 * pool, which is emptied), keeps the table and its module names. */
void sym_kernel_renew(sym_kernel *k);
void sym_perfmaps_free(sym_perfmaps *m);

#endif
