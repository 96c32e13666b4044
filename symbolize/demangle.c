// SPDX-License-Identifier: Apache-2.0
/*
 * Function names as people read them: the symbol tables and DWARF spell C++ and Rust functions
 * mangled (_ZN6__asan9Allocator8AllocateEmmP...), and versioned glibc symbols with their version
 * (__libc_start_main@@GLIBC_2.34). Every frame the symbolizer names goes through here, in the
 * agent, the recorder and anything else, so one binary's frame reads the same in all of them
 * and their profiles merge and diff.
 *
 * The rules, pprof's default ("simplified") where a choice was to be made:
 *   - a version suffix (@VER or @@VER) is dropped;
 *   - the suffixes compilers give the copies they make of a function (GCC's .constprop.0,
 *     .isra.0, .part.0, .cold, .lto_priv.0, .localalias; LLVM's .llvm.NNN) are dropped: DWARF
 *     names those copies after their source function, and so does every frame here, whichever
 *     table named it;
 *   - Rust (legacy _ZN...17h<hash>E or v0 _R...) is demangled by libiberty's Rust demangler,
 *     without the hash;
 *   - C++ (_Z...) is demangled by libiberty's GNU v3 demangler without parameters, and the
 *     template arguments are dropped: std::vector<int>::push_back(int const&) reads
 *     std::vector::push_back, so that one flame-graph box holds every instantiation (the
 *     mangled name stays in the profile as the function's system name);
 *   - anything else (C, kernel, JIT names) is left as it is.
 * libiberty (binutils' demangler, the one perf and addr2line use) is a well-kept library made for
 * the job; only the template stripping is ours, because libiberty has no such option.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "strobe/symbolize.h"

/* The length of name without a symbol-version suffix: "@" or "@@" followed by a version made of
 * letters, digits, '_' and '.' (GLIBC_2.2.5), at the end. */
static size_t unversioned_len(const char *name, size_t len)
{
	const char *at = memchr(name, '@', len);
	if (!at || at == name)
		return len;
	const char *v = at + 1 + (at + 1 < name + len && at[1] == '@');
	if (v == name + len)
		return len;
	for (const char *p = v; p < name + len; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
			return len;
	return (size_t)(at - name);
}

/* Whether s[0..n) is one of the words compilers name a function's copies with. */
static bool clone_word(const char *s, size_t n)
{
	static const char *const words[] = {"constprop", "isra", "part", "cold", "lto_priv",
					    "localalias", "llvm", "clone", "specialized"};
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strlen(words[i]) == n && memcmp(words[i], s, n) == 0)
			return true;
	return false;
}

/* The length of name without its clone suffixes: ".WORD" or ".WORD.DIGITS", repeated
 * (burn.constprop.0.isra.0), WORD one of clone_word's; never the whole name. */
static size_t unclone_len(const char *name, size_t len)
{
	for (;;) {
		size_t e = len;
		while (e > 0 && name[e - 1] >= '0' && name[e - 1] <= '9')
			e--;
		if (e < len) { /* digits: ".WORD.DIGITS" */
			if (e == 0 || name[e - 1] != '.')
				return len;
			e--;
		}
		size_t w = e;
		while (w > 0 && name[w - 1] != '.')
			w--;
		if (w < 2 || !clone_word(name + w, e - w)) /* w - 1 is the dot; keep a name */
			return len;
		len = w - 1;
	}
}

/* Whether out[0..n) ends with "operator" (the '<' or '>' that follows is the operator's). */
static bool after_operator(const char *out, size_t n)
{
	return n >= 8 && memcmp(out + n - 8, "operator", 8) == 0;
}

/* Copies a demangled C++ name without its template arguments into out (cap > 0), cut to fit.
 * operator<, operator<<, operator<=, operator<=>, operator>, operator>>, operator->... keep their
 * characters: a '<' or '>' right after "operator" belongs to the name. */
static size_t strip_templates(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	unsigned depth = 0;
	for (const char *p = in; *p; p++) {
		char c = *p;
		if (!depth && after_operator(out, n) && (c == '<' || c == '>' || c == '-')) {
			/* the operator's own characters, up to three (<=>) */
			while (*p == '<' || *p == '>' || *p == '=' || *p == '-') {
				if (n + 1 < cap)
					out[n++] = *p;
				p++;
			}
			p--;
			continue;
		}
		if (c == '<') {
			depth++;
			continue;
		}
		if (c == '>' && depth) {
			depth--;
			continue;
		}
		if (depth)
			continue;
		if (n + 1 < cap)
			out[n++] = c;
	}
	out[n] = 0;
	return n;
}

size_t strobe_sym_demangle(const char *name, char *out, size_t cap)
{
	if (!cap)
		return 0;
	out[0] = 0;
	if (!name)
		return 0;
	size_t len = unversioned_len(name, strlen(name));
	len = unclone_len(name, len);
	char stack[1024], *raw = len < sizeof(stack) ? stack : malloc(len + 1);
	if (!raw) { /* no memory: the name as it is, cut */
		size_t n = len < cap - 1 ? len : cap - 1;
		memcpy(out, name, n);
		out[n] = 0;
		return n;
	}
	memcpy(raw, name, len);
	raw[len] = 0;
	char *d = NULL;
	bool cxx = false;
	if (raw[0] == '_' && (raw[1] == 'Z' || raw[1] == 'R')) {
		/* Rust first: its legacy names are valid C++ manglings too, which the C++
		 * demangler would read with the hash as a path component. */
		d = cplus_demangle(raw, DMGL_RUST);
		if (!d && raw[1] == 'Z') {
			d = cplus_demangle(raw, DMGL_GNU_V3 | DMGL_ANSI);
			cxx = d != NULL;
		}
	}
	const char *src = d ? d : raw;
	size_t n;
	if (cxx && (n = strip_templates(src, out, cap)) > 0) {
		/* done (nothing left, which no real name gives: the demangled name whole) */
	} else {
		n = strlen(src);
		if (n > cap - 1)
			n = cap - 1;
		memcpy(out, src, n);
		out[n] = 0;
	}
	free(d);
	if (raw != stack)
		free(raw);
	return n;
}
