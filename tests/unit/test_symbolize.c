// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the symbolizer against binaries whose answers are known: the group setup
 * compiles small C fixtures with `cc` into a temporary directory (a -g -O1 PIE with an
 * always_inline callee, a shared library), runs the PIE so it reports, from /proc/self/maps, the
 * file offsets of return addresses inside known functions and inside the inlined code, then
 * derives the stripped variants (debug file by build ID, .gnu_debuglink, MiniDebugInfo, no
 * debug information at all). Expected names and lines come from marker comments in the fixture
 * source and are cross-checked with binutils' addr2line over every address of two functions.
 * Kernel and perf-map parsing run on fixture files through opts.sysroot.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gelf.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixtures.h"

#include "strobe/heap_channel.h"
#include "strobe/symbolize.h"

/* ---- fixtures -------------------------------------------------------------------------------- */

static const char fix_c[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"volatile int sink;\n"
	"static uintptr_t pcs[4];\n"
	"extern uintptr_t lib_pc;\n"
	"int lib_fn(int x);\n"
	"__attribute__((noinline)) void record_pc(int i)\n"
	"{\n"
	"	pcs[i] = (uintptr_t)__builtin_return_address(0) - 1;\n"
	"	__asm__ volatile(\"\");\n"
	"}\n"
	"static inline __attribute__((always_inline)) int inl_leaf(int x) /*D_LEAF*/\n"
	"{\n"
	"	int r = x * 3;\n"
	"	record_pc(0); /*L_LEAF*/\n"
	"	sink += r;\n"
	"	return r ^ sink;\n"
	"}\n"
	"__attribute__((noinline)) int outer_fn(int x) /*D_OUTER*/\n"
	"{\n"
	"	int a = x + 1;\n"
	"	a += inl_leaf(a); /*L_CALL*/\n"
	"	return a * 2;\n"
	"}\n"
	"__attribute__((noinline)) int plain_fn(int x)\n"
	"{\n"
	"	record_pc(1); /*L_PLAIN*/\n"
	"	return x * 7 + sink;\n"
	"}\n"
	"static __attribute__((noinline)) int hidden_static(int x)\n"
	"{\n"
	"	record_pc(2); /*L_HIDDEN*/\n"
	"	return x - sink;\n"
	"}\n"
	"/* Prints: tag, file offset (as a sampler computes it from /proc/self/maps), ELF address. */\n"
	"static void report(const char *tag, uintptr_t pc)\n"
	"{\n"
	"	FILE *m = fopen(\"/proc/self/maps\", \"r\");\n"
	"	char line[4096];\n"
	"	Dl_info info;\n"
	"	if (!m || !dladdr((void *)pc, &info))\n"
	"		return;\n"
	"	while (fgets(line, sizeof(line), m)) {\n"
	"		unsigned long lo, hi, off;\n"
	"		if (sscanf(line, \"%lx-%lx %*s %lx\", &lo, &hi, &off) == 3 && pc >= lo && pc < hi)\n"
	"			printf(\"%s %lx %lx\\n\", tag, pc - lo + off,\n"
	"			       (unsigned long)(pc - (uintptr_t)info.dli_fbase));\n"
	"	}\n"
	"	fclose(m);\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	int v = outer_fn(argc) + plain_fn(argc) + hidden_static(argc) + lib_fn(argc);\n"
	"	report(\"inl\", pcs[0]);\n"
	"	report(\"plain\", pcs[1]);\n"
	"	report(\"hidden\", pcs[2]);\n"
	"	report(\"lib\", lib_pc);\n"
	"	return v == 123456789;\n"
	"}\n";

static const char lib_c[] =
	"#include <stdint.h>\n"
	"uintptr_t lib_pc;\n"
	"volatile int lib_sink;\n"
	"__attribute__((noinline)) static void lib_record(void)\n"
	"{\n"
	"	lib_pc = (uintptr_t)__builtin_return_address(0) - 1;\n"
	"	__asm__ volatile(\"\");\n"
	"}\n"
	"__attribute__((noinline)) int lib_fn(int x)\n"
	"{\n"
	"	lib_record(); /*L_LIB*/\n"
	"	return x + lib_sink;\n"
	"}\n";

typedef struct point {
	uint64_t offset, vaddr;
} point;

typedef struct fixture {
	char dir[64];
	bool have_dir; /* mkdtemp made dir (its random suffix may itself end in 'X') */
	char err[512];   /* set when setup could not build the fixtures: every test fails with it */
	bool have_xz, have_addr2line;
	point inl, plain, hidden, lib;
	int l_leaf, d_leaf, l_call, d_outer, l_plain, l_hidden, l_lib;
	char build_id_hex[2 * STROBE_BUILD_ID_MAX + 1];
} fixture;

static fixture fx;

static int line_of(const char *src, const char *marker)
{
	const char *p = strstr(src, marker);
	if (!p)
		return -1;
	int line = 1;
	for (const char *q = src; q < p; q++)
		line += *q == '\n';
	return line;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int r = system(cmd);
	return r == -1 ? -1 : WEXITSTATUS(r);
}

/* The whole output of a command, malloc'd (NULL when it could not run). */
static char *capture(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *capture(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	if (!p)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *o = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, o);
	fclose(o);
	if (pclose(p) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *path_in(const char *rel) /* static buffer rotation: fine for one-line uses */
{
	static char bufs[8][512];
	static int k;
	char *b = bufs[k++ & 7];
	snprintf(b, 512, "%s/%s", fx.dir, rel);
	return b;
}

static int setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int setup_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fx.err, sizeof(fx.err), fmt, ap);
	va_end(ap);
	return 0; /* the tests report it, each with its own name */
}

static int build_fixtures(void **state)
{
	(void)state;
	snprintf(fx.dir, sizeof(fx.dir), "%s", "/tmp/strobe-sym-XXXXXX");
	if (!mkdtemp(fx.dir))
		return setup_fail("mkdtemp: %s", strerror(errno));
	fx.have_dir = true;
	if (sh("cc --version >/dev/null 2>&1") != 0)
		return setup_fail("no C compiler: `cc` is needed to build the fixtures");
	for (const char *tool = "readelf\0objcopy\0strip\0nm\0"; *tool; tool += strlen(tool) + 1)
		if (sh("command -v %s >/dev/null 2>&1", tool) != 0)
			return setup_fail("binutils missing: `%s` is needed to build the fixtures",
					  tool);
	fx.have_xz = sh("command -v xz >/dev/null 2>&1") == 0;
	fx.have_addr2line = sh("command -v addr2line >/dev/null 2>&1") == 0;
	write_file(path_in("fix.c"), fix_c);
	write_file(path_in("lib.c"), lib_c);
	fx.l_leaf = line_of(fix_c, "/*L_LEAF*/");
	fx.d_leaf = line_of(fix_c, "/*D_LEAF*/");
	fx.l_call = line_of(fix_c, "/*L_CALL*/");
	fx.d_outer = line_of(fix_c, "/*D_OUTER*/");
	fx.l_plain = line_of(fix_c, "/*L_PLAIN*/");
	fx.l_hidden = line_of(fix_c, "/*L_HIDDEN*/");
	fx.l_lib = line_of(lib_c, "/*L_LIB*/");
	const char *d = fx.dir;
	if (sh("cd %s && cc -g -O1 -fPIC -shared -Wl,--build-id -o libfix.so lib.c", d) ||
	    sh("cd %s && cc -g -O1 -fPIE -pie -rdynamic -Wl,--build-id -o fix fix.c -L. -lfix "
	       "-Wl,-rpath,%s -ldl",
	       d, d))
		return setup_fail("compiling the fixtures failed (cc -g -O1 in %s)", d);
	char *out = capture("%s/fix", d);
	if (!out)
		return setup_fail("running the fixture %s/fix failed", d);
	struct {
		const char *tag;
		point *p;
	} want[] = {{"inl", &fx.inl}, {"plain", &fx.plain}, {"hidden", &fx.hidden}, {"lib", &fx.lib}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char pat[32];
		snprintf(pat, sizeof(pat), "%s ", want[i].tag);
		char *l = strstr(out, pat);
		unsigned long long off, va;
		if (!l || sscanf(l + strlen(pat), "%llx %llx", &off, &va) != 2) {
			free(out);
			return setup_fail("the fixture did not report '%s'", want[i].tag);
		}
		want[i].p->offset = off;
		want[i].p->vaddr = va;
	}
	free(out);
	out = capture("readelf -n %s/fix", d);
	char *b = out ? strstr(out, "Build ID: ") : NULL;
	if (!b || sscanf(b + 10, "%40[0-9a-f]", fx.build_id_hex) != 1) {
		free(out);
		return setup_fail("readelf -n shows no build ID for %s/fix", d);
	}
	free(out);
	/* (b) stripped, debug file by build ID under a debug directory. */
	if (sh("cd %s && objcopy --only-keep-debug fix fix.debug && cp fix fix.stripped && "
	       "strip --strip-all fix.stripped && mkdir -p debugdir/.build-id/%.2s && "
	       "cp fix.debug debugdir/.build-id/%.2s/%s.debug",
	       d, fx.build_id_hex, fx.build_id_hex, fx.build_id_hex + 2))
		return setup_fail("building the stripped fixture with a build-ID debug file failed");
	/* (c) stripped with a .gnu_debuglink to fix.debug, next to it and in .debug/. */
	if (sh("cd %s && mkdir -p link link2/.debug && cp fix.debug link/ && "
	       "cp fix.debug link2/.debug/ && cp fix.stripped link/fix && "
	       "cd link && objcopy --add-gnu-debuglink=fix.debug fix && cp fix ../link2/fix",
	       d))
		return setup_fail("building the .gnu_debuglink fixture failed");
	/* (d) MiniDebugInfo, the way Fedora's find-debuginfo and gdb's manual build it. */
	if (fx.have_xz &&
	    sh("cd %s && nm -D fix --format=posix --defined-only | awk '{print $1}' | sort > dynsyms"
	       " && nm fix --format=posix --defined-only | awk '{ if ($2 == \"T\" || $2 == \"t\" || "
	       "$2 == \"D\") print $1 }' | sort > funcsyms && comm -13 dynsyms funcsyms > keep && "
	       "objcopy -S --remove-section .gdb_index --remove-section .comment "
	       "--keep-symbols=keep fix.debug mini && xz -f mini && cp fix fix.mini && "
	       "strip --strip-all -R .comment fix.mini && "
	       "objcopy --add-section .gnu_debugdata=mini.xz fix.mini",
	       d))
		return setup_fail("building the MiniDebugInfo fixture failed");
	/* (e) stripped, nothing to find; (f) the library stripped the same way. */
	if (sh("cd %s && cp libfix.so libfix.stripped.so && strip --strip-all libfix.stripped.so "
	       "&& mkdir -p empty && cp fix copy_of_fix && cc -c -o obj.o lib.c && "
	       "printf 'not an ELF file\\n' > text.txt && : > empty.bin",
	       d))
		return setup_fail("building the remaining fixtures failed");
	return 0;
}

static int remove_fixtures(void **state)
{
	(void)state;
	if (fx.dir[0] && strncmp(fx.dir, "/tmp/strobe-sym-", 16) == 0 && !getenv("STROBE_KEEP"))
		sh("rm -rf '%s'", fx.dir);
	return 0;
}

#define NEED_FIXTURES()                                                                          \
	do {                                                                                     \
		if (fx.err[0])                                                                   \
			fail_msg("%s", fx.err);                                                  \
	} while (0)
/* The text-file tests need only the directory. */
#define NEED_DIR()                                                                               \
	do {                                                                                     \
		if (!fx.have_dir)                                                                \
			fail_msg("%s", fx.err);                                                  \
	} while (0)

/* ---- helpers --------------------------------------------------------------------------------- */

static strobe_symbolizer *new_sym(bool no_dwarf, const char *const *debug_dirs)
{
	/* An empty sysroot keeps the host's /usr/lib/debug out of the tests. */
	strobe_sym_opts o = {.debug_dirs = debug_dirs, .sysroot = path_in("empty"),
			     .no_dwarf = no_dwarf, .no_kernel = true};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	assert_non_null(s);
	return s;
}

static strobe_sym_object *get(strobe_symbolizer *s, const char *rel)
{
	strobe_sym_object *o = NULL;
	int r = strobe_sym_object_get(s, path_in(rel), 0, 0, 0, NULL, 0, &o);
	if (r < 0)
		fail_msg("strobe_sym_object_get(%s): %s", rel, strerror(-r));
	assert_non_null(o);
	return o;
}

static const char *base(const char *path)
{
	if (!path)
		return "(null)";
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static void expect_frame(const strobe_sym_frame *f, const char *fn, const char *file, int line)
{
	if (!f->function || strcmp(f->function, fn) != 0)
		fail_msg("function: got %s, want %s", f->function ? f->function : "(null)", fn);
	if (file) {
		if (strcmp(base(f->file), file) != 0)
			fail_msg("%s: file %s, want %s", fn, f->file ? f->file : "(null)", file);
		if (f->line != line)
			fail_msg("%s: line %lld, want %d", fn, (long long)f->line, line);
	} else {
		assert_null(f->file);
		assert_int_equal(f->line, 0);
	}
}

/* The named, lined answers of the -g fixture, shared by every variant that has DWARF. */
static void expect_full(strobe_symbolizer *s, strobe_sym_object *o)
{
	strobe_sym_frame f[8];
	int n = strobe_sym_lookup(s, o, fx.inl.offset, f, 8);
	assert_int_equal(n, 2);
	expect_frame(&f[0], "inl_leaf", "fix.c", fx.l_leaf);
	expect_frame(&f[1], "outer_fn", "fix.c", fx.l_call);
	assert_int_equal(f[0].start_line, fx.d_leaf);
	assert_int_equal(f[1].start_line, fx.d_outer);
	assert_true(f[0].column > 0);
	n = strobe_sym_lookup(s, o, fx.plain.offset, f, 8);
	assert_int_equal(n, 1);
	expect_frame(&f[0], "plain_fn", "fix.c", fx.l_plain);
	n = strobe_sym_lookup(s, o, fx.hidden.offset, f, 8);
	assert_int_equal(n, 1);
	expect_frame(&f[0], "hidden_static", "fix.c", fx.l_hidden);
	assert_true(strobe_sym_object_has_symbols(o));
	assert_true(strobe_sym_object_has_lines(o));
}

/* ---- (a) the -g binary ----------------------------------------------------------------------- */

static void test_dwarf_inline(void **state)
{
	(void)state;
	NEED_FIXTURES();
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix");
	expect_full(s, o);
	assert_null(strobe_sym_object_debug_file(o)); /* its DWARF is its own */

	/* A second lookup (served from the cache) gives the very same strings. */
	strobe_sym_frame a[4], b[4];
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, a, 4), 2);
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, b, 4), 2);
	assert_ptr_equal(a[0].function, b[0].function);
	assert_ptr_equal(a[1].file, b[1].file);

	/* max 1: the outermost frame is kept, with its own call-site line. */
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, a, 1), 1);
	expect_frame(&a[0], "outer_fn", "fix.c", fx.l_call);
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, a, 0), 0);
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, NULL, 4), -EINVAL);
	assert_int_equal(strobe_sym_lookup(s, NULL, fx.inl.offset, a, 4), -EINVAL);
	/* Past every PT_LOAD segment: nothing names it. */
	assert_int_equal(strobe_sym_lookup(s, o, 1ull << 40, a, 4), 0);
	strobe_symbolizer_free(s);
}

static void test_no_dwarf(void **state)
{
	(void)state;
	NEED_FIXTURES();
	strobe_symbolizer *s = new_sym(true, NULL);
	strobe_sym_object *o = get(s, "fix");
	strobe_sym_frame f[4];
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, f, 4), 1);
	expect_frame(&f[0], "outer_fn", NULL, 0);
	assert_int_equal(strobe_sym_lookup(s, o, fx.hidden.offset, f, 4), 1);
	expect_frame(&f[0], "hidden_static", NULL, 0);
	assert_false(strobe_sym_object_has_lines(o));
	assert_true(strobe_sym_object_has_symbols(o));
	strobe_symbolizer_free(s);
}

/* A debug-information budget: over half of it, the object is named from its symbol table (and
 * counted once); under it, lookups give the full answer however often the budget makes the
 * symbolizer drop and reload the DWARF. Names handed out stay valid after a release (ASan
 * would see them freed otherwise). */
static void test_debug_budget(void **state)
{
	(void)state;
	NEED_FIXTURES();
	bool over_seen = false, full_seen = false;
	for (uint64_t b = 256; b <= (1u << 20); b = b * 9 / 8) { /* fine steps: some reload */
		strobe_sym_opts o = {.sysroot = path_in("empty"), .no_kernel = true,
				     .max_debug_bytes = b};
		strobe_symbolizer *s = strobe_symbolizer_new(&o);
		assert_non_null(s);
		strobe_sym_object *obj = get(s, "fix");
		strobe_sym_frame f[8];
		int n = strobe_sym_lookup(s, obj, fx.inl.offset, f, 8);
		if (strobe_symbolizer_over_budget(s)) {
			over_seen = true;
			assert_int_equal(n, 1);
			expect_frame(&f[0], "outer_fn", NULL, 0);
			assert_null(f[0].file);
			assert_false(strobe_sym_object_has_lines(obj));
			assert_int_equal(strobe_sym_lookup(s, obj, fx.hidden.offset, f, 8), 1);
			expect_frame(&f[0], "hidden_static", NULL, 0);
			assert_int_equal(strobe_symbolizer_over_budget(s), 1); /* counted once */
		} else {
			full_seen = true;
			for (int i = 0; i < 3; i++)
				expect_full(s, obj);
			strobe_sym_frame keep[8];
			assert_int_equal(strobe_sym_lookup(s, obj, fx.inl.offset, keep, 8), 2);
			strobe_sym_object_release(s, obj);
			expect_frame(&keep[0], "inl_leaf", "fix.c", fx.l_leaf);
			expect_frame(&keep[1], "outer_fn", "fix.c", fx.l_call);
			expect_full(s, obj);
		}
		strobe_symbolizer_free(s);
	}
	assert_true(over_seen);
	assert_true(full_seen);
}

/* addr2line -a -f -i output for many addresses, split per address: "fn\nfile:line\n" pairs. */
typedef struct a2l_frame {
	char fn[256], file[256];
	int line;
} a2l_frame;

static int a2l_parse(char **cursor, a2l_frame *out, int cap)
{
	char *p = *cursor;
	if (!p || strncmp(p, "0x", 2) != 0)
		return -1;
	p = strchr(p, '\n');
	if (!p)
		return -1;
	p++;
	int n = 0;
	while (*p && strncmp(p, "0x", 2) != 0) {
		char *nl1 = strchr(p, '\n');
		if (!nl1)
			return -1;
		char *nl2 = strchr(nl1 + 1, '\n');
		if (!nl2)
			return -1;
		if (n < cap) {
			snprintf(out[n].fn, sizeof(out[n].fn), "%.*s", (int)(nl1 - p), p);
			char loc[512];
			snprintf(loc, sizeof(loc), "%.*s", (int)(nl2 - nl1 - 1), nl1 + 1);
			char *colon = strrchr(loc, ':');
			out[n].line = 0;
			if (colon) {
				*colon = 0;
				out[n].line = atoi(colon + 1);
			}
			snprintf(out[n].file, sizeof(out[n].file), "%s", base(loc));
		}
		n++;
		p = nl2 + 1;
	}
	*cursor = p;
	return n;
}

/* ELF address -> file offset, from readelf's program headers (independent of ours). */
static bool vaddr_to_offset(const char *phdrs, uint64_t va, uint64_t *off)
{
	for (const char *l = phdrs; (l = strstr(l, "LOAD ")); l++) {
		unsigned long long o, v, pa, fs;
		if (sscanf(l + 5, "%llx %llx %llx %llx", &o, &v, &pa, &fs) == 4 && va >= v &&
		    va < v + fs) {
			*off = va - v + o;
			return true;
		}
	}
	return false;
}

static void test_addr2line_agrees(void **state)
{
	(void)state;
	NEED_FIXTURES();
	if (!fx.have_addr2line) {
		SKIP_CASE("addr2line not installed, cross-check not run");
	}
	char *nm = capture("nm -S %s/fix", fx.dir);
	char *phdrs = capture("readelf -lW %s/fix", fx.dir);
	assert_non_null(nm);
	assert_non_null(phdrs);
	/* Every address of outer_fn (which holds the inlined code) and of main. */
	char addrs[65536] = "";
	size_t alen = 0;
	uint64_t vas[4096];
	int nva = 0;
	for (const char *fn = "outer_fn\0main\0"; *fn; fn += strlen(fn) + 1) {
		char pat[64];
		snprintf(pat, sizeof(pat), " T %s\n", fn);
		char *l = strstr(nm, pat);
		assert_non_null(l);
		while (l > nm && l[-1] != '\n')
			l--;
		unsigned long long start, size;
		assert_int_equal(sscanf(l, "%llx %llx", &start, &size), 2);
		for (uint64_t a = start; a < start + size && nva < 4096; a++) {
			vas[nva++] = a;
			alen += (size_t)snprintf(addrs + alen, sizeof(addrs) - alen, " 0x%llx",
						 (unsigned long long)a);
		}
	}
	assert_true(alen < sizeof(addrs) - 1);
	char *a2l = capture("addr2line -a -f -i -e %s/fix%s", fx.dir, addrs);
	assert_non_null(a2l);
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix");
	char *cur = a2l;
	int checked = 0, inlined = 0;
	for (int i = 0; i < nva; i++) {
		a2l_frame want[16];
		int nw = a2l_parse(&cur, want, 16);
		assert_true(nw > 0 && nw <= 16);
		uint64_t off;
		assert_true(vaddr_to_offset(phdrs, vas[i], &off));
		strobe_sym_frame got[16];
		int ng = strobe_sym_lookup(s, o, off, got, 16);
		if (ng != nw)
			fail_msg("0x%llx: %d frames, addr2line %d (leaf %s)", (unsigned long long)vas[i],
				 ng, nw, want[0].fn);
		for (int j = 0; j < nw; j++) {
			if (!got[j].function || strcmp(got[j].function, want[j].fn) != 0 ||
			    strcmp(base(got[j].file), want[j].file) != 0 ||
			    got[j].line != want[j].line)
				fail_msg("0x%llx frame %d: %s %s:%lld, addr2line %s %s:%d",
					 (unsigned long long)vas[i], j,
					 got[j].function ? got[j].function : "(null)",
					 base(got[j].file), (long long)got[j].line, want[j].fn,
					 want[j].file, want[j].line);
		}
		checked++;
		inlined += nw > 1;
	}
	assert_true(checked > 20);
	assert_true(inlined > 0); /* the sweep did cover inlined code */
	strobe_symbolizer_free(s);
	free(a2l);
	free(nm);
	free(phdrs);
}

/* ---- (b) (c) separate debug files ------------------------------------------------------------ */

static void test_debug_dir_by_build_id(void **state)
{
	(void)state;
	NEED_FIXTURES();
	/* Without the directory the stripped binary has only .dynsym: no lines. */
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix.stripped");
	assert_false(strobe_sym_object_has_lines(o));
	assert_null(strobe_sym_object_debug_file(o));
	strobe_symbolizer_free(s);

	const char *dirs[] = {path_in("nonexistent"), path_in("debugdir"), NULL};
	s = new_sym(false, dirs);
	o = get(s, "fix.stripped");
	expect_full(s, o);
	char want[600];
	snprintf(want, sizeof(want), "%s/debugdir/.build-id/%.2s/%s.debug", fx.dir, fx.build_id_hex,
		 fx.build_id_hex + 2);
	assert_non_null(strobe_sym_object_debug_file(o));
	assert_string_equal(strobe_sym_object_debug_file(o), want);
	strobe_symbolizer_free(s);
}

static void test_debug_dir_wrong_build_id(void **state)
{
	(void)state;
	NEED_FIXTURES();
	/* A debug file of another binary placed under this build ID must not be used. */
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/baddebug/.build-id/%.2s", fx.dir, fx.build_id_hex);
	assert_int_equal(sh("mkdir -p %s && cd %s && objcopy --only-keep-debug libfix.so "
			    "%s/%s.debug",
			    dir, fx.dir, dir, fx.build_id_hex + 2),
			 0);
	const char *dirs[] = {path_in("baddebug"), NULL};
	strobe_symbolizer *s = new_sym(false, dirs);
	strobe_sym_object *o = get(s, "fix.stripped");
	assert_false(strobe_sym_object_has_lines(o));
	assert_null(strobe_sym_object_debug_file(o));
	strobe_sym_frame f[4];
	assert_int_equal(strobe_sym_lookup(s, o, fx.plain.offset, f, 4), 1);
	expect_frame(&f[0], "plain_fn", NULL, 0); /* .dynsym (the fixture is -rdynamic) */
	strobe_symbolizer_free(s);
}

static void test_debuglink(void **state)
{
	(void)state;
	NEED_FIXTURES();
	for (const char *rel = "link/fix\0link2/fix\0"; *rel; rel += strlen(rel) + 1) {
		strobe_symbolizer *s = new_sym(false, NULL);
		strobe_sym_object *o = get(s, rel);
		expect_full(s, o);
		const char *dbg = strobe_sym_object_debug_file(o);
		assert_non_null(dbg);
		assert_string_equal(base(dbg), "fix.debug");
		if (strcmp(rel, "link2/fix") == 0)
			assert_non_null(strstr(dbg, "/link2/.debug/fix.debug"));
		strobe_symbolizer_free(s);
	}
}

/* ---- (d) MiniDebugInfo, (e) nothing but .dynsym ----------------------------------------------- */

static void test_minidebuginfo(void **state)
{
	(void)state;
	NEED_FIXTURES();
	if (!fx.have_xz) {
		SKIP_CASE("xz not installed, MiniDebugInfo fixture not built");
	}
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix.mini");
	strobe_sym_frame f[4];
	/* hidden_static is in no dynamic symbol table: only .gnu_debugdata names it. */
	assert_int_equal(strobe_sym_lookup(s, o, fx.hidden.offset, f, 4), 1);
	expect_frame(&f[0], "hidden_static", NULL, 0);
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, f, 4), 1);
	expect_frame(&f[0], "outer_fn", NULL, 0);
	assert_false(strobe_sym_object_has_lines(o));
	strobe_symbolizer_free(s);
}

static void test_dynsym_only(void **state)
{
	(void)state;
	NEED_FIXTURES();
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix.stripped");
	strobe_sym_frame f[4];
	assert_int_equal(strobe_sym_lookup(s, o, fx.inl.offset, f, 4), 1);
	expect_frame(&f[0], "outer_fn", NULL, 0);
	assert_int_equal(strobe_sym_lookup(s, o, fx.plain.offset, f, 4), 1);
	expect_frame(&f[0], "plain_fn", NULL, 0);
	/* A static function: in no table the stripped binary has. */
	assert_int_equal(strobe_sym_lookup(s, o, fx.hidden.offset, f, 4), 0);
	assert_true(strobe_sym_object_has_symbols(o));
	strobe_symbolizer_free(s);
}

/* What has_symbols / has_lines answered survives a release: the agent asks them for every
 * process's profile every interval, and a released object must not be reopened (and its
 * symbol table sorted again) for a property of the file. Checked by taking the file away
 * after the first answers: reopening it would now find nothing. */
static void test_answers_kept_after_release(void **state)
{
	(void)state;
	NEED_FIXTURES();
	char copy[4096], gone[4096];
	snprintf(copy, sizeof(copy), "%s", path_in("fix.kept"));
	snprintf(gone, sizeof(gone), "%s", path_in("fix.kept.gone"));
	char cmd[3 * 4096];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path_in("fix"), copy);
	assert_int_equal(system(cmd), 0);
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "fix.kept");
	assert_true(strobe_sym_object_has_symbols(o));
	assert_true(strobe_sym_object_has_lines(o));
	strobe_sym_object_release(s, o);
	assert_int_equal(rename(copy, gone), 0);
	assert_true(strobe_sym_object_has_symbols(o));
	assert_true(strobe_sym_object_has_lines(o));
	strobe_symbolizer_free(s);
	unlink(gone);
}

/* ---- (f) a shared library -------------------------------------------------------------------- */

static void test_shared_library(void **state)
{
	(void)state;
	NEED_FIXTURES();
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = get(s, "libfix.so");
	strobe_sym_frame f[4];
	assert_int_equal(strobe_sym_lookup(s, o, fx.lib.offset, f, 4), 1);
	expect_frame(&f[0], "lib_fn", "lib.c", fx.l_lib);
	strobe_symbolizer_free(s);
	/* Stripped (a symbolizer of its own: with the same build ID, the one above would hand
	 * back the unstripped object it already has). */
	s = new_sym(false, NULL);
	o = get(s, "libfix.stripped.so");
	assert_false(strobe_sym_object_has_lines(o));
	assert_int_equal(strobe_sym_lookup(s, o, fx.lib.offset, f, 4), 1);
	expect_frame(&f[0], "lib_fn", NULL, 0);
	strobe_symbolizer_free(s);
}

/* ---- (g) build IDs and the object cache ------------------------------------------------------ */

static void test_build_id_cache(void **state)
{
	(void)state;
	NEED_FIXTURES();
	uint8_t id[STROBE_BUILD_ID_MAX];
	char hex[2 * STROBE_BUILD_ID_MAX + 1];
	int len = strobe_elf_build_id(path_in("fix"), id, sizeof(id));
	assert_true(len > 0);
	assert_string_equal(strobe_build_id_hex(id, (size_t)len, hex), fx.build_id_hex);
	assert_int_equal(strobe_elf_build_id(path_in("fix"), id, 4), -ENOBUFS);
	assert_int_equal(strobe_elf_build_id(path_in("missing"), id, sizeof(id)), -ENOENT);
	assert_int_equal(strobe_elf_build_id(path_in("text.txt"), id, sizeof(id)), -ENOEXEC);

	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *a = get(s, "fix");
	size_t blen;
	const uint8_t *b = strobe_sym_object_build_id(a, &blen);
	assert_int_equal(blen, (size_t)len);
	assert_memory_equal(b, id, blen);
	assert_string_equal(strobe_sym_object_path(a), path_in("fix"));
	/* Another path (a copy: another inode) to the same build ID: the same object. */
	assert_ptr_equal(get(s, "copy_of_fix"), a);
	/* So is the stripped binary: same build ID, and the first opened copy names it. */
	assert_ptr_equal(get(s, "fix.stripped"), a);
	/* With the build ID given, the path is not even opened. */
	strobe_sym_object *c = NULL;
	assert_int_equal(strobe_sym_object_get(s, "/no/such/file", 0, 0, 0, id, (size_t)len, &c), 0);
	assert_ptr_equal(c, a);
	/* A given build ID the file does not have: it was replaced, not used. */
	id[0] ^= 0xff;
	assert_int_equal(strobe_sym_object_get(s, path_in("libfix.so"), 0, 0, 0, id, (size_t)len,
					       &c),
			 -ESTALE);
	assert_null(c);
	/* Same (dev, inode, path) again: the cached object. */
	struct stat st;
	assert_int_equal(stat(path_in("libfix.so"), &st), 0);
	strobe_sym_object *l1 = NULL, *l2 = NULL;
	assert_int_equal(strobe_sym_object_get(s, path_in("libfix.so"), 0, st.st_dev, st.st_ino,
					       NULL, 0, &l1),
			 0);
	assert_int_equal(strobe_sym_object_get(s, path_in("libfix.so"), 0, st.st_dev, st.st_ino,
					       NULL, 0, &l2),
			 0);
	assert_ptr_equal(l1, l2);
	assert_ptr_not_equal(l1, a);
	strobe_symbolizer_free(s);
}

/* ---- (i) bad input ---------------------------------------------------------------------------- */

static void test_bad_files(void **state)
{
	(void)state;
	NEED_FIXTURES();
	strobe_symbolizer *s = new_sym(false, NULL);
	strobe_sym_object *o = (strobe_sym_object *)1;
	assert_int_equal(strobe_sym_object_get(s, path_in("text.txt"), 0, 0, 0, NULL, 0, &o),
			 -ENOEXEC);
	assert_null(o);
	/* Cached failure: asked again, same answer. */
	assert_int_equal(strobe_sym_object_get(s, path_in("text.txt"), 0, 0, 0, NULL, 0, &o),
			 -ENOEXEC);
	assert_int_equal(strobe_sym_object_get(s, path_in("empty.bin"), 0, 0, 0, NULL, 0, &o),
			 -ENOEXEC);
	assert_int_equal(strobe_sym_object_get(s, path_in("obj.o"), 0, 0, 0, NULL, 0, &o),
			 -ENOEXEC); /* relocatable: never mapped by a process */
	assert_int_equal(strobe_sym_object_get(s, path_in("missing"), 0, 0, 0, NULL, 0, &o),
			 -ENOENT);
	assert_int_equal(strobe_sym_object_get(s, path_in("missing"), 999999999, 0, 0, NULL, 0, &o),
			 -ENOENT);
	assert_int_equal(strobe_sym_object_get(s, path_in("empty"), 0, 0, 0, NULL, 0, &o), -EISDIR);
	assert_int_equal(strobe_sym_object_get(s, NULL, 0, 0, 0, NULL, 0, &o), -EINVAL);
	assert_int_equal(strobe_sym_object_get(s, "", 0, 0, 0, NULL, 0, &o), -EINVAL);
	assert_int_equal(strobe_sym_object_get(NULL, path_in("fix"), 0, 0, 0, NULL, 0, &o), -EINVAL);
	/* A truncated ELF: the header promises what the file does not hold. */
	assert_int_equal(sh("head -c 200 %s/fix > %s/trunc", fx.dir, fx.dir), 0);
	int r = strobe_sym_object_get(s, path_in("trunc"), 0, 0, 0, NULL, 0, &o);
	assert_true(r == -ENOEXEC || r == 0);
	if (r == 0) {
		strobe_sym_frame f[4];
		assert_true(strobe_sym_lookup(s, o, fx.inl.offset, f, 4) >= 0);
	}
	strobe_symbolizer_free(s);
	strobe_symbolizer_free(NULL);
}

/* ---- (h0) readable names --------------------------------------------------------------------- */

static void test_demangle(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
		/* symbol versions, dropped */
		{"__libc_start_main@@GLIBC_2.34", "__libc_start_main"},
		{"clock_nanosleep@GLIBC_2.2.5", "clock_nanosleep"},
		/* not versions: kept */
		{"foo@", "foo@"},
		{"@GLIBC_2.2.5", "@GLIBC_2.2.5"},
		{"a@b c", "a@b c"},
		/* C++: no parameters, no template arguments */
		{"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector::push_back"},
		{"_ZN6__asan9Allocator8AllocateEmmP18__sanitizer_stackTNS_9AllocTypeEb",
		 "__asan::Allocator::Allocate"},
		{"_ZNKSt8functionIFvvEEclEv", "std::function::operator()"},
		{"_ZN3FooIiEcvSt6vectorIiSaIiEEEv", "Foo::operator std::vector"},
		/* operators whose names hold '<' or '>' */
		{"_ZlsRSoRK1A", "operator<<"},
		{"_ZN1AltERKS_", "A::operator<"},
		{"_ZN1AssERKS_", "A::operator<=>"},
		{"_ZN1AptEv", "A::operator->"},
		{"_ZN1AIiEgtERKS0_", "A::operator>"},
		/* versioned and mangled */
		{"_ZNSt6vectorIiSaIiEE9push_backERKi@@GLIBCXX_3.4", "std::vector::push_back"},
		/* Rust, legacy and v0: without the hash or disambiguator, generics kept */
		{"_ZN4core3ptr13drop_in_place17h0123456789abcdefE", "core::ptr::drop_in_place"},
		{"_RNvCs1234_7mycrate3foo", "mycrate::foo"},
		/* the copies compilers make of a function: named after it */
		{"burn_60.constprop.0", "burn_60"},
		{"run.isra.0", "run"},
		{"parse.part.0.cold", "parse"},
		{"f.cold", "f"},
		{"g.lto_priv.3", "g"},
		{"h.llvm.1234567890", "h"},
		{"_ZN1A3getEv.cold", "A::get"},
		{"_ZN1A3getEv.isra.0@@V_1", "A::get"},
		/* not clone suffixes */
		{"x.1234", "x.1234"},
		{"a.b", "a.b"},
		{".cold", ".cold"},
		{"cold", "cold"},
		/* C, and what does not demangle: unchanged */
		{"main", "main"},
		{"_Zgarbage", "_Zgarbage"},
		{"", ""},
	};
	char out[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = strobe_sym_demangle(cases[i][0], out, sizeof(out));
		if (strcmp(out, cases[i][1]) != 0 || n != strlen(out))
			fail_msg("%s: got \"%s\" (%zu), want \"%s\"", cases[i][0], out, n, cases[i][1]);
	}
	/* cut to the buffer, NUL-terminated */
	assert_int_equal(strobe_sym_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi", out, 8), 7);
	assert_string_equal(out, "std::ve");
	assert_int_equal(strobe_sym_demangle(NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* a name longer than any buffer on the stack */
	char *lng = malloc(5001);
	assert_non_null(lng);
	memset(lng, 'x', 5000);
	memcpy(lng + 4990, "@@GLIBC_2.2", 11);
	lng[5000] = 0;
	assert_int_equal(strobe_sym_demangle(lng, out, sizeof(out)), sizeof(out) - 1);
	free(lng);
}

/* ---- (h) kallsyms and perf maps --------------------------------------------------------------- */

static void make_root(const char *name, const char *kallsyms, const char *modules,
		      const char *perfmap)
{
	assert_int_equal(sh("mkdir -p %s/%s/proc %s/%s/tmp", fx.dir, name, fx.dir, name), 0);
	char p[600];
	snprintf(p, sizeof(p), "%s/%s/proc/kallsyms", fx.dir, name);
	if (kallsyms)
		write_file(p, kallsyms);
	snprintf(p, sizeof(p), "%s/%s/proc/modules", fx.dir, name);
	if (modules)
		write_file(p, modules);
	snprintf(p, sizeof(p), "%s/%s/tmp/perf-123.map", fx.dir, name);
	if (perfmap)
		write_file(p, perfmap);
}

static char *long_line(const char *prefix)
{
	char *l = malloc(6000);
	assert_non_null(l);
	int n = snprintf(l, 6000, "%s", prefix);
	memset(l + n, 'x', 5000);
	strcpy(l + n + 5000, "\n");
	return l;
}

static void expect_kernel(strobe_symbolizer *s, uint64_t addr, const char *fn, const char *mod)
{
	strobe_sym_frame f;
	const char *m = "unset";
	int r = strobe_sym_kernel(s, addr, &f, &m);
	if (fn) {
		if (r != 1 || !f.function || strcmp(f.function, fn) != 0)
			fail_msg("kernel 0x%llx: got %d %s, want %s", (unsigned long long)addr, r,
				 f.function ? f.function : "(null)", fn);
		assert_null(f.file);
	} else if (r != 0) {
		fail_msg("kernel 0x%llx: named %s, want nothing", (unsigned long long)addr,
			 f.function ? f.function : "(null)");
	}
	if (mod) {
		if (!m || strcmp(m, mod) != 0)
			fail_msg("kernel 0x%llx: module %s, want %s", (unsigned long long)addr,
				 m ? m : "(null)", mod);
	} else if (m) {
		fail_msg("kernel 0x%llx: module %s, want none", (unsigned long long)addr, m);
	}
}

static void test_kallsyms(void **state)
{
	(void)state;
	NEED_DIR();
	char *lng = long_line("ffffffff81000400 T ");
	char text[8192];
	snprintf(text, sizeof(text),
		 "ffffffff81000100 T core_b\n"
		 "ffffffff81000000 T _stext\n"
		 "this line is garbage\n"
		 "ffffffff810000zz T bad_hex\n"
		 "ffffffff81000200 d some_data\n"
		 "ffffffff81000200 t core_c\n"
		 "ffffffffc0001000 t mod_a_fn1\t[mod_a]\n"
		 "ffffffffc0001100 T mod_a_fn2\t[mod_a]\n"
		 "ffffffff81000050 W core_weak\n"
		 "%s"
		 "ffffffffc0002000 t mod_b_fn\t[mod_b]\n"
		 "0000000000000000 T zero_addr\n"
		 "1ffffffff81000000 T too_long_address\n"
		 "ffffffff81000300 T core_last\n"
		 "ffffffffc0003000 t no_close\t[mod_c\n"
		 "ffffffffc0002100 t mod_b_last\t[mod_b]", /* no final newline */
		 lng);
	free(lng);
	make_root("kroot", text, "mod_a 384 0 - Live 0xffffffffc0001000\ngarbage\n", NULL);
	strobe_sym_opts o = {.sysroot = path_in("kroot")};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	assert_non_null(s);
	const char *core = "[kernel.kallsyms]";
	expect_kernel(s, 0xffffffff81000000, "_stext", core);
	expect_kernel(s, 0xffffffff81000010, "_stext", core);
	expect_kernel(s, 0xffffffff81000060, "core_weak", core);
	expect_kernel(s, 0xffffffff81000150, "core_b", core);
	expect_kernel(s, 0xffffffff81000210, "core_c", core); /* the data symbol is not code */
	expect_kernel(s, 0xffffffff81000310, "core_last", core);
	expect_kernel(s, 0xffffffff81000300 + (1 << 20), NULL, NULL); /* far past the last */
	expect_kernel(s, 0xffffffff80000000, NULL, NULL);             /* before the first */
	expect_kernel(s, 0xffffffffc0001050, "mod_a_fn1", "[mod_a]");
	expect_kernel(s, 0xffffffffc0001150, "mod_a_fn2", "[mod_a]");
	/* /proc/modules says mod_a is 384 bytes long: past that is not mod_a_fn2. */
	expect_kernel(s, 0xffffffffc0001200, NULL, NULL);
	expect_kernel(s, 0xffffffffc0002010, "mod_b_fn", "[mod_b]");
	expect_kernel(s, 0xffffffffc0002110, "mod_b_last", "[mod_b]");
	expect_kernel(s, 0xffffffffc0003010, "mod_b_last", "[mod_b]"); /* mod_c line dropped */
	expect_kernel(s, 0, NULL, NULL);
	strobe_symbolizer_free(s);

	/* no_kernel: the file is not read. */
	o.no_kernel = true;
	s = strobe_symbolizer_new(&o);
	expect_kernel(s, 0xffffffff81000010, NULL, NULL);
	strobe_symbolizer_free(s);

	/* kptr_restrict: every address reads as 0: the kernel is unavailable, not "_stext". */
	make_root("krestricted",
		  "0000000000000000 T _stext\n0000000000000000 T core_b\n"
		  "0000000000000000 t mod_a_fn1\t[mod_a]\n",
		  NULL, NULL);
	strobe_sym_opts o2 = {.sysroot = path_in("krestricted")};
	s = strobe_symbolizer_new(&o2);
	expect_kernel(s, 0xffffffff81000010, NULL, NULL);
	expect_kernel(s, 0, NULL, NULL);
	strobe_symbolizer_free(s);

	/* No file at all. */
	strobe_sym_opts o3 = {.sysroot = path_in("empty")};
	s = strobe_symbolizer_new(&o3);
	expect_kernel(s, 0xffffffff81000010, NULL, NULL);
	strobe_symbolizer_free(s);
}

/* A larger synthetic kallsyms (a core kernel and three modules, symbols sharing addresses with
 * every type, data symbols among them, one module sized by /proc/modules) against a plain
 * model of the rules written out here by linear scan: the last text symbol at or before the
 * address, ties broken T, t, W, w then by name; it ends at the next address, or at its
 * module's end (the /proc/modules size, else 4 KiB past its last symbol). */
typedef struct model_sym {
	uint64_t addr;
	char type;
	int group;
	char name[24];
} model_sym;

static int model_rank(char t)
{
	return t == 'T' ? 4 : t == 't' ? 3 : t == 'W' ? 2 : t == 'w' ? 1 : 0;
}

static void model_expect(const model_sym *v, int n, const uint64_t *lo, const uint64_t *hi,
			 const char *const *gname, uint64_t x, const char **fn, const char **mod)
{
	const model_sym *best = NULL;
	for (int i = 0; i < n; i++) {
		const model_sym *m = &v[i];
		if (!model_rank(m->type) || m->addr > x)
			continue;
		if (!best || m->addr > best->addr ||
		    (m->addr == best->addr &&
		     (model_rank(m->type) > model_rank(best->type) ||
		      (model_rank(m->type) == model_rank(best->type) &&
		       strcmp(m->name, best->name) < 0))))
			best = m;
	}
	*fn = *mod = NULL;
	if (!best)
		return;
	uint64_t end = hi[best->group];
	for (int i = 0; i < n; i++)
		if (model_rank(v[i].type) && v[i].addr > best->addr && v[i].addr < end)
			end = v[i].addr;
	if (end <= best->addr)
		end = best->addr + 1;
	if (x < end) {
		*fn = best->name;
		*mod = gname[best->group];
	} else if (x >= lo[best->group] && x < hi[best->group]) {
		*mod = gname[best->group];
	}
}

static int by_model_addr(const void *a, const void *b)
{
	const model_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x - y < 0 ? -1 : x - y > 0; /* never equal: qsort gets a total order */
}

static void test_kallsyms_model(void **state)
{
	(void)state;
	NEED_DIR();
	enum { N = 6000, G = 4 }; /* text symbols past the name cache (kallsyms.c), in many blocks */
	static const char *const gname[G] = {"[kernel.kallsyms]", "[m_one]", "[m_two]", "[bpf]"};
	static const uint64_t gbase[G] = {0xffffffff81000000ull, 0xffffffffc0100000ull,
					  0xffffffffc0200000ull, 0xffffffffa0000000ull};
	static const char types[] = "TtWwdDbr";
	model_sym *v = calloc(N, sizeof(*v));
	size_t cap = (size_t)N * 64;
	char *text = malloc(cap);
	assert_non_null(v);
	assert_non_null(text);
	uint64_t seed = 42;
	size_t len = 0;
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t r = (uint32_t)(seed >> 33);
		model_sym *m = &v[i];
		m->group = (int)(r % G);
		/* every fifth symbol shares the address of an earlier one */
		if (i > 0 && r % 5 == 0 && v[(r >> 8) % (uint32_t)i].group == m->group)
			m->addr = v[(r >> 8) % (uint32_t)i].addr;
		else
			m->addr = gbase[m->group] + (r >> 4) % 0x40000;
		m->type = types[(r >> 24) % 8];
		snprintf(m->name, sizeof(m->name), "f%u_%d", (r >> 12) % 97, i);
		len += (size_t)snprintf(text + len, cap - len, "%016llx %c %s%s%s\n",
					(unsigned long long)m->addr, m->type, m->name,
					m->group ? "\t" : "", m->group ? gname[m->group] : "");
	}
	/* m_one is sized by /proc/modules, cutting its last symbols short; the others are not. */
	uint64_t lo[G], hi[G];
	for (int g = 0; g < G; g++)
		lo[g] = UINT64_MAX, hi[g] = 0;
	for (int i = 0; i < N; i++)
		if (model_rank(v[i].type)) {
			if (v[i].addr < lo[v[i].group])
				lo[v[i].group] = v[i].addr;
			if (v[i].addr + 4096 > hi[v[i].group])
				hi[v[i].group] = v[i].addr + 4096;
		}
	char modules[128];
	snprintf(modules, sizeof(modules), "m_one %u 0 - Live 0x%llx\n", 0x30000u,
		 (unsigned long long)gbase[1]);
	if (gbase[1] < lo[1])
		lo[1] = gbase[1];
	hi[1] = gbase[1] + 0x30000;
	make_root("kmodel", text, modules, NULL);
	/* The same symbols in address order (as a kernel without modules lists them), ties in
	 * the order generated, which is not the order of the rules. */
	model_sym *sorted = malloc(N * sizeof(*sorted));
	assert_non_null(sorted);
	memcpy(sorted, v, N * sizeof(*v));
	qsort(sorted, N, sizeof(*sorted), by_model_addr);
	size_t slen = 0;
	for (int i = 0; i < N; i++) {
		const model_sym *m = &sorted[i];
		slen += (size_t)snprintf(text + slen, cap - slen, "%016llx %c %s%s%s\n",
					 (unsigned long long)m->addr, m->type, m->name,
					 m->group ? "\t" : "", m->group ? gname[m->group] : "");
	}
	free(sorted);
	make_root("kmodel_sorted", text, modules, NULL);
	for (int pass = 0; pass < 2; pass++) {
		strobe_sym_opts o = {.sysroot = path_in(pass ? "kmodel_sorted" : "kmodel")};
		strobe_symbolizer *s = strobe_symbolizer_new(&o);
		assert_non_null(s);
		int named = 0, unnamed = 0;
		uint64_t qseed = 7;
		for (int i = 0; i < 4 * N; i++) {
			qseed = qseed * 6364136223846793005ull + 1442695040888963407ull;
			uint32_t r = (uint32_t)(qseed >> 33);
			const model_sym *m = &v[r % N];
			/* at a symbol, just inside or before it, or anywhere up to 72 KiB past it */
			uint64_t x = m->addr + (i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : (r >> 8) % 0x12000) -
				     (i % 4 == 3 ? 1 : 0);
			const char *fn, *mod;
			model_expect(v, N, lo, hi, gname, x, &fn, &mod);
			expect_kernel(s, x, fn, mod);
			named += fn != NULL;
			unnamed += fn == NULL;
		}
		/* both outcomes are covered */
		assert_true(named > N);
		assert_true(unnamed > 10);
		strobe_symbolizer_free(s);
	}
	free(text);
	free(v);
}


/* This host's own kernel: every text symbol of /proc/kallsyms (and 1 byte past it, while still
 * before the next address) is named as the rules above say: the first of its address after
 * ordering T, t, W, w, then by name; with its module. A reference built here with plain arrays
 * and qsort, checked against the compressed table (its blocks, its address offsets, its runs of
 * modules) across the whole file. Skipped where the file is unreadable or its addresses are
 * hidden (kptr_restrict). */
typedef struct host_sym {
	uint64_t addr;
	int rank;
	char *name, *mod;
} host_sym;

static int by_host_rule(const void *a, const void *b)
{
	const host_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return y->rank - x->rank;
	return strcmp(x->name, y->name);
}

static void test_kallsyms_host(void **state)
{
	(void)state;
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		skip();
	size_t n = 0, cap = 1 << 17;
	host_sym *v = malloc(cap * sizeof(*v));
	assert_non_null(v);
	char line[1200];
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char t, name[1100], mod[128] = "[kernel.kallsyms]";
		int got = sscanf(line, "%llx %c %1023s %127s", &a, &t, name, mod);
		if (got < 3 || !a || !model_rank(t))
			continue;
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		v[n++] = (host_sym){a, model_rank(t), strdup(name), strdup(mod)};
	}
	fclose(f);
	if (n < 1000) { /* hidden addresses, or no kernel symbols to speak of */
		for (size_t i = 0; i < n; i++)
			free(v[i].name), free(v[i].mod);
		free(v);
		skip();
	}
	qsort(v, n, sizeof(*v), by_host_rule);
	strobe_sym_opts o = {0};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	assert_non_null(s);
	size_t checked = 0;
	for (size_t i = 0; i < n; i++) {
		if (i && v[i].addr == v[i - 1].addr)
			continue;
		if (strcmp(v[i].mod, "[bpf]") == 0)
			continue; /* BPF programs come and go between two reads of the file */
		size_t j = i + 1;
		while (j < n && v[j].addr == v[i].addr)
			j++;
		uint64_t next = j < n ? v[j].addr : UINT64_MAX;
		for (uint64_t x = v[i].addr; x <= v[i].addr + 1 && x < next; x++) {
			strobe_sym_frame fr;
			const char *m;
			int r = strobe_sym_kernel(s, x, &fr, &m);
			if (r != 1 || strcmp(fr.function, v[i].name) != 0 || !m ||
			    strcmp(m, v[i].mod) != 0)
				fail_msg("kernel 0x%llx: got %d %s %s, want %s %s", (unsigned long long)x,
					 r, r == 1 ? fr.function : "-", m ? m : "-", v[i].name, v[i].mod);
			checked++;
		}
	}
	assert_true(checked > 1000);
	strobe_symbolizer_free(s);
	for (size_t i = 0; i < n; i++)
		free(v[i].name), free(v[i].mod);
	free(v);
}
static void expect_jit(strobe_symbolizer *s, pid_t pid, uint64_t addr, const char *fn)
{
	strobe_sym_frame f;
	int r = strobe_sym_perfmap(s, pid, addr, &f);
	if (fn && (r != 1 || !f.function || strcmp(f.function, fn) != 0))
		fail_msg("perf map 0x%llx: got %d %s, want %s", (unsigned long long)addr, r,
			 f.function ? f.function : "(null)", fn);
	if (!fn && r != 0)
		fail_msg("perf map 0x%llx: named %s, want nothing", (unsigned long long)addr,
			 f.function ? f.function : "(null)");
}

static void test_perfmap(void **state)
{
	(void)state;
	NEED_DIR();
	char *lng = long_line("7f0000009000 100 ");
	char text[8192];
	snprintf(text, sizeof(text),
		 "7f0000001000 100 jit_one\n"
		 "0x7f0000002000 0x80 LazyCompile:~two /app/x.js:1 with spaces\r\n"
		 "zzzz 10 bad_start\n"
		 "7f0000003000 40\n"
		 "7f0000000800 100 jit_unsorted\n"
		 "%s"
		 "7f0000002000 80 jit_two_new\n"
		 "7f0000004000 0 zero_size\n"
		 "7f00000a0000 ffffffffffffffff huge\n",
		 lng);
	free(lng);
	make_root("proot", NULL, NULL, text);
	strobe_sym_opts o = {.sysroot = path_in("proot"), .no_kernel = true};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	assert_non_null(s);
	expect_jit(s, 123, 0x7f0000001000, "jit_one");
	expect_jit(s, 123, 0x7f00000010ff, "jit_one");
	expect_jit(s, 123, 0x7f0000001100, NULL); /* the end is exclusive */
	expect_jit(s, 123, 0x7f0000002010, "jit_two_new"); /* the later line wins */
	expect_jit(s, 123, 0x7f0000000810, "jit_unsorted");
	expect_jit(s, 123, 0x7f0000003010, NULL);
	expect_jit(s, 123, 0x7f0000004000, NULL);
	expect_jit(s, 123, 0x7f0000009010, NULL); /* the over-long line is skipped */
	expect_jit(s, 123, 0x7fffffffffff, "huge"); /* size clamped, not wrapped */
	expect_jit(s, 123, 0x100, NULL);
	expect_jit(s, 124, 0x7f0000001000, NULL); /* no map for that pid */
	expect_jit(s, 0, 0x7f0000001000, NULL);
	strobe_sym_frame f;
	assert_int_equal(strobe_sym_perfmap(s, 123, 0x7f0000001000, &f), 1);
	const char *one = f.function;

	/* The JIT writes more: a miss re-reads the changed file (at most every 100 ms). */
	char p[600];
	snprintf(p, sizeof(p), "%s/proot/tmp/perf-123.map", fx.dir);
	FILE *fp = fopen(p, "a");
	assert_non_null(fp);
	fputs("7f0000005000 100 jit_late\n", fp);
	fclose(fp);
	struct timespec ts = {0, 150 * 1000000};
	nanosleep(&ts, NULL);
	expect_jit(s, 123, 0x7f0000005010, "jit_late");
	assert_int_equal(strobe_sym_perfmap(s, 123, 0x7f0000001000, &f), 1);
	assert_ptr_equal(f.function, one); /* names survive the reload, pooled */

	strobe_sym_forget_pid(s, 123);
	strobe_sym_forget_pid(s, 999);
	expect_jit(s, 123, 0x7f0000005010, "jit_late"); /* read again on demand */
	assert_string_equal(one, "jit_one");
	strobe_symbolizer_free(s);
}

/* "[vdso]" is named from this process's own vDSO image: every symbol of the image's dynamic
 * symbol table, looked up by its offset, must come back with its own name. */
static void test_vdso(void **state)
{
	const uint8_t *base = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	if (!base)
		SKIP_CASE("no vDSO mapped in this process");
	size_t size = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			size = hi - lo;
	}
	if (f)
		fclose(f);
	assert_true(size > 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_memory((char *)base, size);
	assert_non_null(e);
	strobe_symbolizer *s = strobe_symbolizer_new(NULL);
	strobe_sym_object *o;
	assert_int_equal(strobe_sym_object_get(s, "[vdso]", 0, 0, 0, NULL, 0, &o), 0);
	int named = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			gelf_getsym(d, (int)i, &sym);
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
			strobe_sym_frame fr[4];
			/* the vDSO is linked at 0: a symbol's value is its offset in the image */
			int n = strobe_sym_lookup(s, o, sym.st_value, fr, 4);
			assert_int_equal(n, 1);
			assert_non_null(fr[0].function);
			/* aliases (clock_gettime / __vdso_clock_gettime) share an address */
			if (strcmp(fr[0].function, name) == 0 ||
			    strstr(fr[0].function, name + (strncmp(name, "__vdso_", 7) ? 0 : 7)))
				named++;
		}
	}
	assert_true(named >= 4);
	elf_end(e);
	strobe_symbolizer_free(s);
}

/* ---- (i) renewal ------------------------------------------------------------------------------ */

/* strobe_symbolizer_renew: user-space objects, perf maps and the heap namer's objects are
 * opened afresh and name the same; the kernel's table is kept, not re-read (the file changed
 * under it, and the old names still answer), and so are its module names, to the pointer.
 * Names handed out before are freed (ASan would see a use of them, or of the namer's objects
 * from before, had the namer not noticed). */
static void test_renew(void **state)
{
	(void)state;
	NEED_FIXTURES();
	make_root("krenew",
		  "ffffffff81000000 T _stext\nffffffff81000100 T core_b\n"
		  "ffffffffc0001000 t mod_a_fn1\t[mod_a]\n",
		  "mod_a 384 0 - Live 0xffffffffc0001000\n", "7f0000001000 100 jit_fn_one\n");
	strobe_sym_opts o = {.sysroot = path_in("krenew")};
	strobe_symbolizer *s = strobe_symbolizer_new(&o);
	assert_non_null(s);
	expect_kernel(s, 0xffffffff81000110, "core_b", "[kernel.kallsyms]");
	strobe_sym_frame f[8];
	const char *mod_before = NULL, *mod_after = NULL;
	assert_int_equal(strobe_sym_kernel(s, 0xffffffffc0001010, f, &mod_before), 1);
	assert_int_equal(strobe_sym_perfmap(s, 123, 0x7f0000001010, f), 1);
	assert_string_equal(f[0].function, "jit_fn_one");
	strobe_sym_object *obj = get(s, "fix");
	expect_full(s, obj);
	strobe_sym_heap_namer *namer = strobe_sym_heap_namer_new(s);
	assert_non_null(namer);
	strobe_heap_frame hf[4];
	assert_int_equal(strobe_sym_heap_name(namer, path_in("fix"), fx.plain.offset, hf, 4), 1);
	assert_string_equal(hf[0].function, "plain_fn");

	/* The kernel's file changes under it (a rename at the same addresses): a renewal that
	 * rebuilt the table would now say core_b_renamed. */
	make_root("krenew",
		  "ffffffff81000000 T _stext\nffffffff81000100 T core_b_renamed\n"
		  "ffffffffc0001000 t mod_a_fn1\t[mod_a]\n",
		  NULL, NULL);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(strobe_symbolizer_renew(s), 0);
		expect_kernel(s, 0xffffffff81000110, "core_b", "[kernel.kallsyms]");
		expect_kernel(s, 0xffffffff81000010, "_stext", "[kernel.kallsyms]");
		assert_int_equal(strobe_sym_kernel(s, 0xffffffffc0001010, f, &mod_after), 1);
		assert_string_equal(f[0].function, "mod_a_fn1");
		assert_ptr_equal(mod_after, mod_before); /* module names outlive renewals */
		assert_int_equal(strobe_sym_perfmap(s, 123, 0x7f0000001010, f), 1);
		assert_string_equal(f[0].function, "jit_fn_one");
		obj = get(s, "fix"); /* the one from before is gone */
		expect_full(s, obj);
		assert_int_equal(strobe_sym_heap_name(namer, path_in("fix"), fx.plain.offset, hf, 4),
				 1);
		assert_string_equal(hf[0].function, "plain_fn");
		char hex[2 * STROBE_BUILD_ID_MAX + 1];
		strobe_sym_heap_build_id(namer, path_in("fix"), hex, sizeof(hex));
		assert_true(strlen(hex) >= 16);
	}
	assert_int_equal(strobe_symbolizer_renew(NULL), -EINVAL);
	strobe_sym_heap_namer_free(namer);
	strobe_symbolizer_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dwarf_inline),
		cmocka_unit_test(test_no_dwarf),
		cmocka_unit_test(test_debug_budget),
		cmocka_unit_test(test_addr2line_agrees),
		cmocka_unit_test(test_debug_dir_by_build_id),
		cmocka_unit_test(test_debug_dir_wrong_build_id),
		cmocka_unit_test(test_debuglink),
		cmocka_unit_test(test_minidebuginfo),
		cmocka_unit_test(test_dynsym_only),
		cmocka_unit_test(test_answers_kept_after_release),
		cmocka_unit_test(test_shared_library),
		cmocka_unit_test(test_build_id_cache),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_kallsyms),
		cmocka_unit_test(test_kallsyms_model),
		cmocka_unit_test(test_kallsyms_host),
		cmocka_unit_test(test_perfmap),
		cmocka_unit_test(test_vdso),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_renew),
	};
	return cmocka_run_group_tests(tests, build_fixtures, remove_fixtures);
}
