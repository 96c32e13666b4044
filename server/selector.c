// SPDX-License-Identifier: Apache-2.0
/*
 * The selector parser: `type{label="value", ...}` with Prometheus's four matchers. Regexes are
 * anchored at both ends as in PromQL and compiled once here (POSIX ERE, the subset of RE2 people
 * write in label matchers). A hand-written scanner, because the grammar is tiny and every error
 * can then say exactly where it is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/server.h"
#include "strobe/transform.h"

typedef struct lexer {
	const char *s;
	size_t len, pos;
	strobe_err *err;
} lexer;

static void skip_ws(lexer *l)
{
	while (l->pos < l->len && strchr(" \t\r\n", l->s[l->pos]) && l->s[l->pos])
		l->pos++;
}

static int fail(lexer *l, const char *what)
{
	if (l->pos >= l->len)
		return strobe_errf(l->err, -EINVAL, "selector: %s at the end (offset %zu)", what,
				   l->pos);
	/* The input is not NUL-terminated: quote at most what is left of it. */
	int near = l->len - l->pos < 10 ? (int)(l->len - l->pos) : 10;
	return strobe_errf(l->err, -EINVAL, "selector: %s at offset %zu (near '%.*s')", what,
			   l->pos, near, l->s + l->pos);
}

static bool is_type_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == ':' || c == '.' || c == '-' || c == '/';
}

static bool is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9') || c == '.';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A quoted string; *out malloc'd (the value cannot be longer than the input). */
static int quoted(lexer *l, char **out)
{
	char q = l->s[l->pos++];
	char *v = malloc(l->len - l->pos + 1);
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	while (l->pos < l->len && l->s[l->pos] != q) {
		char c = l->s[l->pos++];
		if (!c) {
			l->pos--;
			free(v);
			return fail(l, "NUL byte in a string");
		}
		if (c != '\\' || q == '`') {
			v[n++] = c;
			continue;
		}
		if (l->pos >= l->len)
			break;
		c = l->s[l->pos++];
		switch (c) {
		case 'n': v[n++] = '\n'; break;
		case 't': v[n++] = '\t'; break;
		case 'r': v[n++] = '\r'; break;
		case '\\': case '"': case '\'': v[n++] = c; break;
		case 'x': {
			int a = l->pos + 1 < l->len ? hexval(l->s[l->pos]) : -1;
			int b = a >= 0 ? hexval(l->s[l->pos + 1]) : -1;
			if (b < 0 || (a == 0 && b == 0)) {
				free(v);
				return fail(l, "bad \\x escape");
			}
			v[n++] = (char)(a * 16 + b);
			l->pos += 2;
			break;
		}
		default:
			l->pos--;
			free(v);
			return fail(l, "unknown escape");
		}
	}
	if (l->pos >= l->len) {
		free(v);
		return fail(l, "unterminated string");
	}
	l->pos++;
	v[n] = 0;
	*out = v;
	return 0;
}


void strobe_selector_free(strobe_selector *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->m[i].name);
		free(s->m[i].value);
		if (s->m[i].has_re)
			regfree(&s->m[i].re);
	}
	free(s->m);
	free(s->type);
	memset(s, 0, sizeof(*s));
}

static int matcher(lexer *l, strobe_selector *out)
{
	if (out->n >= STROBE_SELECTOR_MAX_M)
		return fail(l, "too many matchers (limit 64)");
	size_t start = l->pos;
	if (l->pos >= l->len || !is_name_start(l->s[l->pos]))
		return fail(l, "expected a label name");
	while (l->pos < l->len && is_name_char(l->s[l->pos]))
		l->pos++;
	size_t name_len = l->pos - start;
	if (name_len > STROBE_LABEL_NAME_MAX)
		return fail(l, "label name longer than 128 bytes");
	strobe_matcher m = {0};
	skip_ws(l);
	const char *o = l->s + l->pos;
	size_t left = l->len - l->pos;
	if (left >= 2 && o[0] == '=' && o[1] == '~') {
		m.op = STROBE_MATCH_RE;
		l->pos += 2;
	} else if (left >= 2 && o[0] == '!' && o[1] == '=') {
		m.op = STROBE_MATCH_NEQ;
		l->pos += 2;
	} else if (left >= 2 && o[0] == '!' && o[1] == '~') {
		m.op = STROBE_MATCH_NRE;
		l->pos += 2;
	} else if (left >= 1 && o[0] == '=') {
		m.op = STROBE_MATCH_EQ;
		l->pos += 1;
	} else {
		return fail(l, "expected =, !=, =~ or !~");
	}
	skip_ws(l);
	if (l->pos >= l->len || !strchr("\"'`", l->s[l->pos]) || !l->s[l->pos])
		return fail(l, "expected a quoted value");
	size_t vpos = l->pos;
	int r = quoted(l, &m.value);
	if (r < 0)
		return r;
	if (!(m.name = strndup(l->s + start, name_len))) {
		free(m.value);
		return -ENOMEM;
	}
	if (m.op == STROBE_MATCH_RE || m.op == STROBE_MATCH_NRE) {
		const char *why = strobe_regex_too_costly(m.value, 1024);
		if (why) {
			free(m.name);
			free(m.value);
			l->pos = vpos;
			return strobe_errf(l->err, -EINVAL,
					   "selector: regular expression at offset %zu refused: %s", vpos,
					   why);
		}
		size_t vl = strlen(m.value);
		char *re = malloc(vl + 5);
		if (!re) {
			free(m.name);
			free(m.value);
			return -ENOMEM;
		}
		snprintf(re, vl + 5, "^(%s)$", m.value);
		int rc = regcomp(&m.re, re, REG_EXTENDED | REG_NOSUB);
		free(re);
		if (rc != 0) {
			char msg[128];
			regerror(rc, &m.re, msg, sizeof(msg));
			free(m.name);
			free(m.value);
			l->pos = vpos;
			return strobe_errf(l->err, -EINVAL,
					   "selector: bad regular expression at offset %zu: %s", vpos,
					   msg);
		}
		m.has_re = true;
	}
	strobe_matcher *nm = realloc(out->m, (out->n + 1) * sizeof(*nm));
	if (!nm) {
		free(m.name);
		free(m.value);
		if (m.has_re)
			regfree(&m.re);
		return -ENOMEM;
	}
	out->m = nm;
	out->m[out->n++] = m;
	return 0;
}

int strobe_selector_parse(const char *s, size_t len, strobe_selector *out, strobe_err *err)
{
	memset(out, 0, sizeof(*out));
	if (len > STROBE_SELECTOR_MAX)
		return strobe_errf(err, -EINVAL, "selector: longer than %u bytes",
				   STROBE_SELECTOR_MAX);
	lexer l = {s, len, 0, err};
	int r = 0;
	skip_ws(&l);
	size_t ts = l.pos;
	while (l.pos < len && is_type_char(s[l.pos]))
		l.pos++;
	if (l.pos > ts) {
		if (l.pos - ts >= STROBE_TYPE_MAX) {
			l.pos = ts;
			return fail(&l, "profile type too long");
		}
		if (!(out->type = strndup(s + ts, l.pos - ts)))
			return -ENOMEM;
	}
	skip_ws(&l);
	if (l.pos < len && s[l.pos] == '{') {
		l.pos++;
		for (;;) {
			skip_ws(&l);
			if (l.pos < len && s[l.pos] == '}') {
				l.pos++;
				break;
			}
			if ((r = matcher(&l, out)) < 0)
				goto bad;
			skip_ws(&l);
			if (l.pos < len && s[l.pos] == ',') {
				l.pos++;
				continue;
			}
			if (l.pos < len && s[l.pos] == '}') {
				l.pos++;
				break;
			}
			r = fail(&l, "expected ',' or '}'");
			goto bad;
		}
	} else if (!out->type) {
		r = fail(&l, "expected a profile type or '{'");
		goto bad;
	}
	skip_ws(&l);
	if (l.pos < len) {
		r = fail(&l, "unexpected text after the selector");
		goto bad;
	}
	return 0;
bad:
	strobe_selector_free(out);
	return r;
}

int strobe_selector_add_eq(strobe_selector *s, const char *name, const char *value)
{
	strobe_matcher *m = realloc(s->m, (s->n + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	s->m = m;
	memset(&m[s->n], 0, sizeof(*m));
	m[s->n].op = STROBE_MATCH_EQ;
	if (!(m[s->n].name = strdup(name)) || !(m[s->n].value = strdup(value))) {
		free(m[s->n].name);
		return -ENOMEM;
	}
	s->n++;
	return 0;
}
