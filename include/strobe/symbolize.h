/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symbolizer: machine addresses to function, file and line, with inlined frames expanded.
 *
 * Binaries are identified by build ID, not by process: the symbol tables and DWARF of libc are
 * loaded once however many processes map it, and a binary that has exited or been replaced on
 * disk is still named from the copy first opened. An object is found from what the sampler
 * knows of a mapping (its path, the device and inode, the build ID the kernel reported in its
 * MMAP2 record); the lookup key is the file offset (address - mapping start + mapping pgoff),
 * which is the same in every process whatever the load address (PIE, ASLR, shared libraries).
 *
 * Sources, best first: DWARF (.debug_info/.debug_line, inlined subroutines) from the binary or
 * from a separate debug file found by build ID (/usr/lib/debug/.build-id/xx/yyyy.debug, and
 * every directory in opts.debug_dirs) or by .gnu_debuglink; ELF .symtab, MiniDebugInfo
 * (.gnu_debugdata), .dynsym. The kernel from /proc/kallsyms (modules included, as
 * "[module]"-named objects). JIT code from /tmp/perf-PID.map.
 *
 * Ownership. Every string a lookup returns belongs to the symbolizer and lives until
 * strobe_symbolizer_free or strobe_symbolizer_renew (kernel module names: until free). Objects
 * likewise. Not thread-safe: one symbolizer per thread.
 *
 * Errors. Functions return 0/-errno (or a count); a missing or unreadable file is not an error
 * for a lookup: it gives 0 frames, and the caller keeps the mapping and address.
 */
#ifndef STROBE_SYMBOLIZE_H
#define STROBE_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_BUILD_ID_MAX 20 /* bytes; GNU build IDs are 20 (sha1), sometimes 16 or 8 */

typedef struct strobe_symbolizer strobe_symbolizer;
typedef struct strobe_sym_object strobe_sym_object;

typedef struct strobe_sym_opts {
	/* Extra directories searched for debug files, each laid out like /usr/lib/debug (a
	 * .build-id/xx/yyyy.debug tree and/or a mirror of the binary's path). NULL-terminated,
	 * may be NULL. /usr/lib/debug is always searched last. */
	const char *const *debug_dirs;
	/* Prefix prepended to absolute paths the symbolizer opens itself (/proc/kallsyms,
	 * /usr/lib/debug, /tmp/perf-PID.map); NULL for "/". Lets tests supply fixtures. */
	const char *sysroot;
	bool no_dwarf;   /* symbol tables only (faster, no lines or inlines) */
	bool no_kernel;  /* do not read /proc/kallsyms */
	/* Debug-information budget per object, in bytes; 0 = none. An object whose DWARF
	 * sections (decompressed) exceed half of it is named from its symbol tables only
	 * (functions, no lines or inlined frames); below that, its DWARF and the line tables
	 * parsed from it are dropped whenever together they exceed it, and reloaded on the next
	 * lookup. Bounds what one object costs, for callers that care about their footprint. */
	uint64_t max_debug_bytes;
} strobe_sym_opts;

/* One frame. Strings are NULL when unknown (function too, in the rare case where only a line
 * table covers the address). */
typedef struct strobe_sym_frame {
	const char *function;  /* as people read it: demangled, without a symbol version
				  (strobe_sym_demangle) */
	const char *system_name; /* as the symbol table or DWARF spells it (mangled, versioned);
				    the same pointer as function when the two are alike */
	const char *file;      /* source file, as DWARF names it */
	int64_t line, column;  /* 0 when unknown */
	int64_t start_line;    /* line of the function's declaration, 0 when unknown */
	uint32_t discriminator; /* DWARF discriminator of line (strobe_line), 0 when none */
} strobe_sym_frame;

/* The readable form of a function name from a symbol table or DWARF (symbolize/demangle.c):
 * C++ and Rust demangled (C++ without parameters or template arguments, as pprof shows them),
 * a symbol version (@GLIBC_2.34, @@GLIBC_2.2.5) dropped, other names unchanged. Writes it into
 * out (cut to cap - 1 bytes, NUL-terminated; cap > 0) and returns its length. */
size_t strobe_sym_demangle(const char *name, char *out, size_t cap);

strobe_symbolizer *strobe_symbolizer_new(const strobe_sym_opts *opts); /* NULL + errno */
void strobe_symbolizer_free(strobe_symbolizer *s);
/*
 * Forgets what the symbolizer holds of user space, as a new one would: every object (its symbol
 * tables, DWARF, the file), the failures cached by path, the lookup cache, the perf maps, and the
 * strings handed out for them and for kernel functions. Objects and strings returned before are
 * invalid afterwards (a strobe_sym_heap_namer notices and starts afresh). The kernel's symbol
 * table is kept, with its module names: it describes the kernel, not processes, and rebuilding
 * it (reading and sorting /proc/kallsyms) peaked 3.3 MB above the agent's steady state
 * (docs/BENCHMARKS.md, the agent's memory).
 * Modules loaded since are found as before: a kernel address outside every known symbol
 * re-reads the file, at most once a minute. For long-lived callers (the agent renews every 30
 * minutes) that name frames of processes long gone. 0, or -EINVAL when s is NULL.
 */
int strobe_symbolizer_renew(strobe_symbolizer *s);
/* How many objects were named without their DWARF because it is over opts.max_debug_bytes. */
size_t strobe_symbolizer_over_budget(const strobe_symbolizer *s);

/* ---- user-space objects ---------------------------------------------------------------------- */

/*
 * The object behind a mapping, opened (once per build ID; once per (dev, inode, path) when the
 * build ID is unknown) and cached. path: the file as the process named it. pid: when > 0 and
 * path cannot be opened directly, /proc/PID/root/PATH and then the /proc/PID/map_files links
 * whose target is PATH (or "PATH (deleted)") are tried (for containers and deleted files).
 * dev/ino: 0/0 when unknown (then the file's own are used). build_id/build_id_len: from the
 * kernel's MMAP2 record when known (len 0 otherwise; then it is read from the file). Returns 0
 * and *out, or -errno: the file cannot be opened (-ENOENT, -EACCES...), is not an ELF
 * executable or shared object (-ENOEXEC), or has a different build ID than the one given
 * (-ESTALE: the file was replaced after the process mapped it). The caller then keeps raw
 * addresses. Failures other than a missing file are cached like objects.
 */
int strobe_sym_object_get(strobe_symbolizer *s, const char *path, pid_t pid, dev_t dev, ino_t ino,
			  const uint8_t *build_id, size_t build_id_len, strobe_sym_object **out);

/* The object's build ID (as bytes; *len 0 when it has none) and the path it was opened as. */
const uint8_t *strobe_sym_object_build_id(const strobe_sym_object *o, size_t *len);
const char *strobe_sym_object_path(const strobe_sym_object *o);
/* Which sources it has: function symbols, DWARF lines (always false with no_dwarf), a separate
 * debug file (its path, or NULL when there is none or the binary carries its own DWARF). The
 * symbol table and DWARF are loaded on the first lookup; these load them if needed. */
bool strobe_sym_object_has_symbols(const strobe_sym_object *o);
bool strobe_sym_object_has_lines(const strobe_sym_object *o);
const char *strobe_sym_object_debug_file(const strobe_sym_object *o);

/*
 * Names the code at file offset `offset` of object o. Fills out[0..n) leaf-first: out[0] is
 * the innermost inlined function, out[n-1] the function that physically contains the address
 * (pprof's Location.line order). Returns n (0 when nothing names the address; at most max), or
 * -errno. With max frames the outermost are kept when the inline chain is longer.
 */
int strobe_sym_lookup(strobe_symbolizer *s, strobe_sym_object *o, uint64_t offset,
		      strobe_sym_frame *out, int max);

/* Frees the object's tables and debug information (the bulk of the symbolizer's memory),
 * keeping what identifies it; the next lookup reopens the file. Names already returned stay
 * valid. For callers that name all the frames of one object, then move on (strobe record), so
 * peak memory is one object's, not all. */
void strobe_sym_object_release(strobe_symbolizer *s, strobe_sym_object *o);

/* ---- kernel and JIT -------------------------------------------------------------------------- */

/* A kernel address: *out gets the symbol (file/line unknown), *module the module name
 * ("[kernel.kallsyms]" for the core kernel, else e.g. "[ext4]"). Returns 1 when named, 0 when
 * not (then *module is still set when the address is in a known range, else NULL). */
int strobe_sym_kernel(strobe_symbolizer *s, uint64_t addr, strobe_sym_frame *out,
		      const char **module);

/* An address in anonymous executable memory of process pid, from /tmp/perf-PID.map (read once,
 * re-read when the file changed and an address is not found, checked at most every 100 ms).
 * Returns 1 when named, else 0. */
int strobe_sym_perfmap(strobe_symbolizer *s, pid_t pid, uint64_t addr, strobe_sym_frame *out);
/* Drops what is held for process pid (its perf map), e.g. when it has exited and its samples
 * are named. Strings already returned stay valid. */
void strobe_sym_forget_pid(strobe_symbolizer *s, pid_t pid);

/* ---- helpers --------------------------------------------------------------------------------- */

/* Reads the GNU build ID note of an ELF file. Returns its length (> 0), 0 when it has none, or
 * -errno (-ENOEXEC: not ELF; -ENOBUFS: longer than cap). */
int strobe_elf_build_id(const char *path, uint8_t *out, size_t cap);
/* Lower-case hex of a build ID into buf (2*len+1 bytes). Returns buf. */
char *strobe_build_id_hex(const uint8_t *id, size_t len, char *buf);

/* ---- naming heap and lock profiles (symbolize/heap_names.c) --------------------------------- */

/* A namer for strobe_heap_profile_opts (include/strobe/heap_channel.h): pass
 * strobe_sym_heap_name as .namer, strobe_sym_heap_build_id as .build_id and the namer as their
 * ctx. It opens each mapped file once (remembering the most recent 256 paths) through sym,
 * which must outlive it. NULL + errno. */
typedef struct strobe_sym_heap_namer strobe_sym_heap_namer;
strobe_sym_heap_namer *strobe_sym_heap_namer_new(strobe_symbolizer *sym);
void strobe_sym_heap_namer_free(strobe_sym_heap_namer *c);
struct strobe_heap_frame;
int strobe_sym_heap_name(void *ctx, const char *path, uint64_t offset,
			 struct strobe_heap_frame *out, int max);
void strobe_sym_heap_build_id(void *ctx, const char *path, char *hex, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
