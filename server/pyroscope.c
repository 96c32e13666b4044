// SPDX-License-Identifier: Apache-2.0
/*
 * Pyroscope's POST /ingest as a pure parser (see server/pyroscope.h): query parameters,
 * Content-Type and body in, a batch of one-type profiles with their profile type names and
 * series labels out.
 *
 * It follows Grafana Pyroscope's handler (pkg/ingester/pyroscope/ingest_handler.go and
 * ingest_adapter.go, pkg/og/convert, api/model/labelset, pkg/og/util/attime) wherever a client
 * could notice: how the format is chosen, how folded and lines bodies count, how the name suffix
 * becomes a profile type and sampleRate a period, how from/until are read, which labels a series
 * gets. It is stricter where Pyroscope silently loses data (an unterminated label set, a negative
 * count) and it still honours prev_profile (cumulative types are diffed), which Pyroscope 1.x
 * refuses and the Pyroscope Go SDK before godeltaprof sent. docs/pyroscope.md lists every
 * difference.
 *
 * Everything here reads untrusted bytes: every buffer has a cap (body, decompressed size, line,
 * frame name, depth, multipart parts, labels), and every failure names what failed.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strobe/clock.h"
#include "strobe/codec.h"
#include "strobe/delta.h"
#include "strobe/stack_text.h"

#include "multipart.h"
#include "pyroscope.h"
#include "pyroscope_jfr.h"
#include "strobe/store.h"

#define DEF_MAX_BODY ((size_t)16 << 20)
#define DEF_MAX_DECOMPRESSED ((size_t)64 << 20)
#define DEF_MAX_LABELS 30u
#define DEF_MAX_LABEL_NAME 1024u
#define DEF_MAX_LABEL_VALUE 2048u
#define MAX_LINE ((size_t)1 << 20)  /* one folded/lines line */
#define MAX_PARTS 64u               /* multipart parts */
#define MAX_STC 256u                /* sample_type_config entries */
#define DEFAULT_SAMPLE_RATE 100

/* ---- small helpers ----------------------------------------------------------------------------- */

static srv_pyro_limits limits_of(const srv_pyro_limits *l)
{
	srv_pyro_limits r = l ? *l : (srv_pyro_limits){0};
	if (!r.max_body)
		r.max_body = DEF_MAX_BODY;
	if (!r.max_decompressed)
		r.max_decompressed = DEF_MAX_DECOMPRESSED;
	if (!r.max_labels)
		r.max_labels = DEF_MAX_LABELS;
	if (!r.max_label_name)
		r.max_label_name = DEF_MAX_LABEL_NAME;
	if (!r.max_label_value)
		r.max_label_value = DEF_MAX_LABEL_VALUE;
	return r;
}

static const char *param(const srv_pyro_request *req, const char *key)
{
	for (size_t i = 0; i < req->nparams; i++)
		if (req->params[i].key && strcmp(req->params[i].key, key) == 0)
			return req->params[i].value ? req->params[i].value : "";
	return NULL;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* [*s, *e) without surrounding white space, as Go's strings.TrimSpace (ASCII part). */
static void trim(const char **s, const char **e)
{
	while (*s < *e && is_space(**s))
		(*s)++;
	while (*e > *s && is_space((*e)[-1]))
		(*e)--;
}

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* Go's strconv.Atoi: optional sign, decimal digits, nothing else, no overflow. */
static bool go_atoi(const char *s, size_t n, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	if (i == n)
		return false;
	uint64_t v = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > (uint64_t)INT64_MAX + neg)
			return false;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
	return r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

/* ---- from / until (pkg/og/util/attime) --------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool valid_yyyymmdd(const char *s, int64_t *days)
{
	int64_t y = 0, m, d;
	for (int i = 0; i < 4; i++)
		y = y * 10 + (s[i] - '0');
	m = (s[4] - '0') * 10 + (s[5] - '0');
	d = (s[6] - '0') * 10 + (s[7] - '0');
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	if (y <= 1900 || m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
		return false;
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (m == 2 && d == 29 && !leap)
		return false;
	*days = days_from_civil(y, m, d);
	return true;
}

static int64_t unit_seconds(const char *u, size_t n)
{
	if (n >= 1 && u[0] == 's')
		return 1;
	if ((n >= 3 && memcmp(u, "mon", 3) == 0) || (n >= 1 && u[0] == 'M'))
		return 3600 * 24 * 30;
	if (n >= 1 && u[0] == 'm') /* "min" and "m" */
		return 60;
	if (n >= 1 && u[0] == 'h')
		return 3600;
	if (n >= 1 && u[0] == 'd')
		return 3600 * 24;
	if (n >= 1 && u[0] == 'w')
		return 3600 * 24 * 7;
	if (n >= 1 && u[0] == 'y')
		return 3600 * 24 * 365;
	return 0;
}

int64_t srv_pyro_parse_time(const char *in, int64_t now_ns)
{
	char buf[128];
	size_t n = 0;
	/* Pyroscope drops '_', ',' and ' ' anywhere ("1_700_000_000") after trimming. */
	const char *s = in, *e = in + strlen(in);
	trim(&s, &e);
	for (; s < e && n < sizeof(buf) - 1; s++)
		if (*s != '_' && *s != ',' && *s != ' ')
			buf[n++] = *s;
	if (s < e)
		return now_ns; /* longer than any time Pyroscope can read */
	buf[n] = 0;
	bool digits = n > 0;
	for (size_t i = 0; i < n && digits; i++)
		digits = buf[i] >= '0' && buf[i] <= '9';
	if (digits) {
		int64_t days;
		if (n == 8 && valid_yyyymmdd(buf, &days))
			return sat_mul(days, 86400 * (int64_t)1000000000);
		int64_t v;
		if (!go_atoi(buf, n, &v))
			v = INT64_MAX; /* Atoi's value on overflow */
		switch (n) {
		case 13:
			return sat_mul(v, 1000000);
		case 16:
			return sat_mul(v, 1000);
		case 19:
			return v;
		default:
			return sat_mul(v, 1000000000);
		}
	}
	/* "now-1h", "now+30min", "-2d": the reference is always now (Pyroscope does not read it),
	 * the offset is a sign and number+unit pairs. */
	const char *off = strchr(buf, '+');
	if (!off)
		off = strchr(buf, '-');
	if (!off)
		return now_ns;
	int64_t sign = 1, secs = 0;
	if (*off == '-')
		sign = -1;
	off++;
	while (*off) {
		const char *d = off;
		while (*off >= '0' && *off <= '9')
			off++;
		int64_t num = 0;
		if (off > d && !go_atoi(d, (size_t)(off - d), &num))
			num = INT64_MAX;
		const char *u = off;
		while (*off && !(*off >= '0' && *off <= '9'))
			off++;
		secs = sat_add(secs, sat_mul(sat_mul(num, sign), unit_seconds(u, (size_t)(off - u))));
	}
	return sat_add(now_ns, sat_mul(secs, 1000000000));
}

/* ---- name{labels} (api/model/labelset) --------------------------------------------------------- */

static bool label_name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.';
}

static bool app_name_char(unsigned char c)
{
	return label_name_char(c) || c == '-' || c == '/';
}

typedef struct label_list {
	srv_pyro_label *v;
	uint32_t n, cap;
} label_list;

static void labels_free(srv_pyro_label *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
}

static const char *label_get(const label_list *l, const char *name)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

/* Sets name to value (replacing an earlier value), copying both. */
static int label_set(label_list *l, const char *name, size_t nlen, const char *value, size_t vlen)
{
	char *v = dupn(value, vlen);
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < l->n; i++)
		if (strlen(l->v[i].name) == nlen && memcmp(l->v[i].name, name, nlen) == 0) {
			free(l->v[i].value);
			l->v[i].value = v;
			return 0;
		}
	char *k = dupn(name, nlen);
	if (k && l->n == l->cap) {
		uint32_t nc = l->cap ? l->cap * 2 : 8;
		srv_pyro_label *nv = realloc(l->v, (size_t)nc * sizeof(*nv));
		if (nv) {
			l->v = nv;
			l->cap = nc;
		}
	}
	if (!k || l->n == l->cap) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	l->v[l->n].name = k;
	l->v[l->n].value = v;
	l->n++;
	return 0;
}

static int label_set0(label_list *l, const char *name, const char *value)
{
	return label_set(l, name, strlen(name), value, strlen(value));
}

static void label_del(label_list *l, const char *name, size_t nlen)
{
	for (uint32_t i = 0; i < l->n; i++)
		if (strlen(l->v[i].name) == nlen && memcmp(l->v[i].name, name, nlen) == 0) {
			free(l->v[i].name);
			free(l->v[i].value);
			memmove(l->v + i, l->v + i + 1, (l->n - i - 1) * sizeof(*l->v));
			l->n--;
			return;
		}
}

int srv_pyro_parse_name(const char *name, const srv_pyro_limits *limits, char **app,
			   srv_pyro_label **labels, uint32_t *nlabels, strobe_err *err)
{
	srv_pyro_limits lim = limits_of(limits);
	*app = NULL;
	*labels = NULL;
	*nlabels = 0;
	const char *brace = strchr(name, '{');
	const char *s = name, *e = brace ? brace : name + strlen(name);
	trim(&s, &e);
	if (s == e)
		return strobe_errf(err, -EINVAL, "name: the application name is empty (expected "
						 "name=app.cpu{key=value,...})");
	if ((size_t)(e - s) > lim.max_label_value)
		return strobe_errf(err, -EINVAL, "name: the application name is longer than %u bytes",
				   lim.max_label_value);
	for (const char *c = s; c < e; c++)
		if (!app_name_char((unsigned char)*c))
			return strobe_errf(err, -EINVAL,
					   "name: character 0x%02x is not allowed in the application "
					   "name '%.*s' (allowed: A-Z a-z 0-9 _ . - /)",
					   (unsigned char)*c, (int)(e - s), s);
	label_list l = {0};
	int r = -ENOMEM;
	if (brace) {
		const char *p = brace + 1;
		bool closed = false;
		while (*p && !closed) {
			const char *ks = p;
			while (*p && *p != '=' && *p != '}' && *p != ',')
				p++;
			const char *ke = p;
			trim(&ks, &ke);
			if (*p != '=') {
				if (ke == ks && *p == '}') { /* "{}" or a trailing ",}" */
					closed = true;
					p++;
					continue;
				}
				r = strobe_errf(err, -EINVAL,
						*p ? "name: label '%.*s' has no '=value'"
						   : "name: label set is not closed with '}' after '%.*s'",
						(int)(ke - ks), ks);
				goto fail;
			}
			p++; /* '=' */
			const char *vs = p;
			while (*p && *p != ',' && *p != '}')
				p++;
			if (!*p) {
				r = strobe_errf(err, -EINVAL,
						"name: label set is not closed with '}' (no escaping: values "
						"cannot contain ',' or '}')");
				goto fail;
			}
			const char *ve = p;
			closed = *p == '}';
			p++;
			trim(&vs, &ve);
			if (ks == ke) {
				r = strobe_errf(err, -EINVAL, "name: a label has an empty name");
				goto fail;
			}
			if ((size_t)(ke - ks) > lim.max_label_name ||
			    (size_t)(ve - vs) > lim.max_label_value) {
				r = strobe_errf(err, -EINVAL,
						"name: label '%.40s...' is longer than %u bytes (name) or "
						"%u bytes (value)",
						ks, lim.max_label_name, lim.max_label_value);
				goto fail;
			}
			for (const char *c = ks; c < ke; c++)
				if (!label_name_char((unsigned char)*c)) {
					r = strobe_errf(err, -EINVAL,
							"name: character 0x%02x is not allowed in label "
							"name '%.*s' (allowed: A-Z a-z 0-9 _ .)",
							(unsigned char)*c, (int)(ke - ks), ks);
					goto fail;
				}
			if (ke - ks == 8 && memcmp(ks, "__name__", 8) == 0) {
				r = strobe_errf(err, -EINVAL, "name: label name __name__ is reserved");
				goto fail;
			}
			/* As /api/v1/push: the read APIs answer JSON, which cannot carry the value. */
			json_t *js = json_stringn(vs, (size_t)(ve - vs)); /* NULL: not UTF-8 */
			json_decref(js);
			if (!js) {
				r = strobe_errf(err, -EINVAL,
						"name: label '%.*s' has a value that is not UTF-8",
						(int)(ke - ks), ks);
				goto fail;
			}
			/* An empty value means "no such label" (Prometheus semantics). */
			if (ve == vs) {
				label_del(&l, ks, (size_t)(ke - ks));
			} else {
				bool exists = false; /* replacing a value does not add a label */
				for (uint32_t i = 0; i < l.n && !exists; i++)
					exists = strlen(l.v[i].name) == (size_t)(ke - ks) &&
						 memcmp(l.v[i].name, ks, (size_t)(ke - ks)) == 0;
				if (!exists && l.n >= lim.max_labels) {
					r = strobe_errf(err, -EINVAL, "name: more than %u labels",
							lim.max_labels);
					goto fail;
				}
				if ((r = label_set(&l, ks, (size_t)(ke - ks), vs, (size_t)(ve - vs))) < 0)
					goto fail;
			}
		}
		if (!closed) {
			r = strobe_errf(err, -EINVAL, "name: label set is not closed with '}'");
			goto fail;
		}
		for (; *p; p++)
			if (!is_space(*p)) {
				r = strobe_errf(err, -EINVAL, "name: unexpected text after '}': '%.40s'",
						p);
				goto fail;
			}
	}
	if (!(*app = dupn(s, (size_t)(e - s))))
		goto fail;
	*labels = l.v;
	*nlabels = l.n;
	return 0;
fail:
	labels_free(l.v, l.n);
	return r;
}

static bool is_gzip(const uint8_t *b, size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

/* ---- folded and lines bodies (pkg/og/convert/parser.go) ----------------------------------------- */

/* Adds `count` to the stack "a;b;c" (root first); an empty text is the root. */
static int add_stack(strobe_stack_parser *stk, const char *s, size_t n, int64_t count,
		     size_t lineno, strobe_err *err)
{
	uint32_t stack = 0;
	int r;
	if (n && (r = strobe_stack_parse(stk, s, n, "body", lineno, &stack, err)) < 0)
		return r;
	return strobe_sample_add(stk->p, stack, 0, &count);
}

typedef struct line_iter {
	const char *p, *end;
	size_t lineno;
} line_iter;

/* The next line without its "\n" or "\r\n", as bufio.ScanLines cuts them. */
static bool next_line(line_iter *it, const char **s, size_t *n)
{
	if (it->p >= it->end)
		return false;
	const char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
	const char *le = nl ? nl : it->end;
	*s = it->p;
	*n = (size_t)(le - it->p);
	if (*n && (*s)[*n - 1] == '\r')
		(*n)--;
	it->p = nl ? nl + 1 : it->end;
	it->lineno++;
	return true;
}

static int parse_groups(strobe_stack_parser *stk, const char *buf, size_t len, strobe_err *err)
{
	line_iter it = {buf, buf + len, 0};
	const char *s;
	size_t n;
	while (next_line(&it, &s, &n)) {
		if (n > MAX_LINE)
			return strobe_errf(err, -EINVAL, "body:%zu: line longer than %zu bytes",
					   it.lineno, MAX_LINE);
		/* The count follows the last space; a line without one is skipped, as Pyroscope
		 * does. */
		const char *sp = NULL;
		for (size_t i = n; i-- > 0;)
			if (s[i] == ' ') {
				sp = s + i;
				break;
			}
		if (!sp)
			continue;
		int64_t v;
		if (!go_atoi(sp + 1, (size_t)(s + n - sp - 1), &v))
			return strobe_errf(err, -EINVAL,
					   "body:%zu: '%.*s' after the last space is not an integer "
					   "count (format folded: \"frame;frame;... COUNT\" per line)",
					   it.lineno, (int)(s + n - sp - 1 > 40 ? 40 : s + n - sp - 1),
					   sp + 1);
		if (v < 0)
			return strobe_errf(err, -EINVAL, "body:%zu: negative count %lld", it.lineno,
					   (long long)v);
		if (v == 0)
			continue;
		int r = add_stack(stk, s, (size_t)(sp - s), v, it.lineno, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_lines(strobe_stack_parser *stk, const char *buf, size_t len, strobe_err *err)
{
	line_iter it = {buf, buf + len, 0};
	const char *s;
	size_t n;
	while (next_line(&it, &s, &n)) {
		if (n > MAX_LINE)
			return strobe_errf(err, -EINVAL, "body:%zu: line longer than %zu bytes",
					   it.lineno, MAX_LINE);
		if (!n)
			continue; /* each non-empty line is one sample of its stack */
		int r = add_stack(stk, s, n, 1, it.lineno, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The name suffix -> (profile name, sample type, unit), Pyroscope's convertMetadata. */
typedef struct suffix_type {
	const char *suffix, *metric, *type, *unit;
} suffix_type;

static const suffix_type suffixes[] = {
	{"cpu", "process_cpu", "samples", "count"},
	{"wall", "wall", "samples", "count"},
	{"itimer", "process_cpu", "samples", "count"},
	{"inuse_objects", "memory", "inuse_objects", "count"},
	{"inuse_space", "memory", "inuse_space", "bytes"},
	{"alloc_objects", "memory", "alloc_objects", "count"},
	{"alloc_space", "memory", "alloc_space", "bytes"},
	{"goroutines", "goroutine", "goroutines", "count"},
	{"mutex_count", "mutex", "contentions", "count"},
	{"mutex_duration", "mutex", "delay", "nanoseconds"},
	{"block_count", "block", "contentions", "count"},
	{"block_duration", "block", "delay", "nanoseconds"},
	{"alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count"},
	{"alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes"},
	{"alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count"},
	{"alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes"},
	{"lock_count", "block", "contentions", "count"},
	{"lock_duration", "block", "delay", "nanoseconds"},
	{"live", "memory", "live", "count"},
	{"exceptions", "exceptions", "samples", "count"},
	{"seconds", "wall", "samples", "count"},
	{"nanoseconds", "wall", "samples", "count"},
	{"microseconds", "wall", "samples", "count"},
	{"milliseconds", "wall", "samples", "count"},
	{"bytes", "memory", "samples", "bytes"},
};

/* ---- multipart/form-data ----------------------------------------------------------------------- */

typedef struct span {
	const uint8_t *p;
	size_t n;
	bool set;
} span;

typedef struct form {
	span profile, prev, stc;
} form;

static int form_part(void *ctx, const char *name, const uint8_t *data, size_t len)
{
	form *f = ctx;
	span *dst = strcmp(name, "profile") == 0	       ? &f->profile
		    : strcmp(name, "prev_profile") == 0	       ? &f->prev
		    : strcmp(name, "sample_type_config") == 0 ? &f->stc
							       : NULL;
	if (dst && !dst->set) /* the first of a name counts */
		*dst = (span){data, len, true};
	return 0;
}

static int parse_multipart(const char *ctype, const uint8_t *body, size_t len, form *f,
			   strobe_err *err)
{
	memset(f, 0, sizeof(*f));
	int r = srv_multipart_parse(ctype, body, len, MAX_PARTS, form_part, f, err);
	return r == -E2BIG ? -EINVAL : r;
}

/* ---- sample_type_config ------------------------------------------------------------------------ */

static int stc_string(json_t *o, const char *field, char *out, size_t cap, const char *key,
		      strobe_err *err)
{
	json_t *v = json_object_get(o, field);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return strobe_errf(err, -EINVAL, "sample_type_config: %s.%s is not a string", key,
				   field);
	if (json_string_length(v) >= cap)
		return strobe_errf(err, -EINVAL, "sample_type_config: %s.%s is longer than %zu bytes",
				   key, field, cap - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int stc_bool(json_t *o, const char *field, bool *out, const char *key, strobe_err *err)
{
	json_t *v = json_object_get(o, field);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return strobe_errf(err, -EINVAL, "sample_type_config: %s.%s is not true or false",
				   key, field);
	*out = json_is_true(v);
	return 0;
}

int srv_pyro_stc_parse(const char *json, size_t len, srv_pyro_stc **out, size_t *n,
			  strobe_err *err)
{
	*out = NULL;
	*n = 0;
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &je);
	if (!root)
		return strobe_errf(err, -EINVAL, "sample_type_config: %s (line %d, column %d)",
				   je.text, je.line, je.column);
	int r = 0;
	srv_pyro_stc *v = NULL;
	size_t cnt = 0;
	if (!json_is_object(root)) {
		r = strobe_errf(err, -EINVAL, "sample_type_config: expected a JSON object keyed by "
					      "sample type");
		goto out;
	}
	if (json_object_size(root) > MAX_STC) {
		r = strobe_errf(err, -EINVAL, "sample_type_config: more than %u entries", MAX_STC);
		goto out;
	}
	v = calloc(json_object_size(root) + 1, sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	const char *key;
	json_t *o;
	json_object_foreach(root, key, o)
	{
		if (json_is_null(o))
			continue; /* a nil entry, as Go's json leaves it */
		if (!json_is_object(o)) {
			r = strobe_errf(err, -EINVAL, "sample_type_config: '%.64s' is not an object",
					key);
			goto out;
		}
		srv_pyro_stc *c = &v[cnt];
		if (strlen(key) >= sizeof(c->type)) {
			r = strobe_errf(err, -EINVAL,
					"sample_type_config: sample type '%.64s...' is too long", key);
			goto out;
		}
		strcpy(c->type, key);
		c->aggregation = -1;
		char agg[16] = "";
		if ((r = stc_string(o, "units", c->units, sizeof(c->units), key, err)) < 0 ||
		    (r = stc_string(o, "display-name", c->display, sizeof(c->display), key, err)) < 0 ||
		    (r = stc_string(o, "aggregation", agg, sizeof(agg), key, err)) < 0 ||
		    (r = stc_bool(o, "cumulative", &c->cumulative, key, err)) < 0 ||
		    (r = stc_bool(o, "sampled", &c->sampled, key, err)) < 0)
			goto out;
		if (strcmp(agg, "sum") == 0)
			c->aggregation = STROBE_AGG_SUM;
		else if (strcmp(agg, "average") == 0)
			c->aggregation = STROBE_AGG_AVERAGE;
		else if (agg[0]) {
			r = strobe_errf(err, -EINVAL,
					"sample_type_config: %s.aggregation '%s' is not sum or average",
					key, agg);
			goto out;
		}
		cnt++;
	}
out:
	json_decref(root);
	if (r < 0) {
		free(v);
		return r;
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* Pyroscope's DefaultSampleTypeMapping: what a Go profile means when no config came with it. */
static const srv_pyro_stc default_stc[] = {
	{"samples", "samples", "cpu", -1, false, true},
	{"inuse_objects", "objects", "", STROBE_AGG_AVERAGE, false, false},
	{"alloc_objects", "objects", "", -1, true, false},
	{"inuse_space", "bytes", "", STROBE_AGG_AVERAGE, false, false},
	{"alloc_space", "bytes", "", -1, true, false},
	{"goroutine", "goroutines", "goroutines", STROBE_AGG_AVERAGE, false, false},
	{"contentions", "lock_samples", "mutex_count", -1, true, false},
	{"delay", "lock_nanoseconds", "mutex_duration", -1, true, false},
};

static const srv_pyro_stc *stc_find(const srv_pyro_stc *v, size_t n, const char *type)
{
	for (size_t i = 0; v && i < n; i++)
		if (strcmp(v[i].type, type) == 0)
			return &v[i];
	return NULL;
}

/* ---- profile type names ------------------------------------------------------------------------ */

/* The type names of every column of p, by the store's one rule (strobe_profile_type_names), with
 * Pyroscope's display names: the upload's sample_type_config, else its defaults for Go (samples
 * are cpu; contentions and delay are left to the rule, which tells mutex from block by the
 * leaves). */
static int pyro_type_names(const strobe_profile *p, const char *hint, const srv_pyro_stc *stc,
			   size_t nstc, char (*names)[STROBE_PTYPE_MAX], strobe_err *err)
{
	const char **display = calloc(p->ntypes + 1, sizeof(*display));
	if (!display)
		return -ENOMEM;
	for (uint32_t t = 0; t < p->ntypes; t++) {
		const char *st = strobe_str(p, p->types[t].type);
		const srv_pyro_stc *c = stc ? stc_find(stc, nstc, st) : NULL;
		if (!c && strcmp(st, "contentions") && strcmp(st, "delay"))
			c = stc_find(default_stc, sizeof(default_stc) / sizeof(*default_stc), st);
		display[t] = c && c->display[0] ? c->display : NULL;
	}
	const char *name = strobe_profile_name(p, hint, display);
	int r = 0;
	for (uint32_t t = 0; r == 0 && t < p->ntypes; t++)
		r = strobe_profile_type_names(p, name, t, names[t], err);
	free(display);
	return r;
}

/* ---- the batch --------------------------------------------------------------------------------- */

void srv_pyro_batch_free(srv_pyro_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nitems; i++) {
		labels_free(b->items[i].labels, b->items[i].nlabels);
		strobe_profile_free(b->items[i].profile);
	}
	free(b->items);
	b->items = NULL;
	b->nitems = 0;
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(((const srv_pyro_label *)a)->name, ((const srv_pyro_label *)b)->name);
}

/* Appends an item that takes over prof; labels are copied. */
static int batch_add(srv_pyro_batch *b, const char *type, const label_list *labels,
		     int64_t from, int64_t until, strobe_profile *prof, srv_agg agg)
{
	srv_pyro_item *ni = realloc(b->items, (b->nitems + 1) * sizeof(*ni));
	if (!ni) {
		strobe_profile_free(prof);
		return -ENOMEM;
	}
	b->items = ni;
	srv_pyro_item *it = &ni[b->nitems];
	memset(it, 0, sizeof(*it));
	snprintf(it->type, sizeof(it->type), "%s", type);
	it->from_ns = from;
	it->until_ns = until;
	it->profile = prof;
	it->aggregation = agg;
	b->nitems++;
	if (labels->n) {
		if (!(it->labels = calloc(labels->n, sizeof(*it->labels))))
			return -ENOMEM;
		for (uint32_t i = 0; i < labels->n; i++) {
			it->labels[i].name = strdup(labels->v[i].name);
			it->labels[i].value = strdup(labels->v[i].value);
			it->nlabels = i + 1;
			if (!it->labels[i].name || !it->labels[i].value)
				return -ENOMEM;
		}
		qsort(it->labels, it->nlabels, sizeof(*it->labels), label_cmp);
	}
	return 0;
}

/* The series labels of an upload, as Pyroscope builds them: the name's labels minus private
 * ("__") ones, service_name (the app name unless a label set it, then app_name is the app),
 * pyroscope_spy. */
static int series_labels(label_list *l, const char *app, const char *spy)
{
	for (uint32_t i = 0; i < l->n;) {
		const char *k = l->v[i].name;
		if (k[0] == '_' && k[1] == '_' && strcmp(k, "__session_id__") != 0)
			label_del(l, k, strlen(k));
		else
			i++;
	}
	int r;
	if (!label_get(l, "service_name")) {
		if ((r = label_set0(l, "service_name", app)) < 0)
			return r;
	} else if (!label_get(l, "app_name")) {
		if ((r = label_set0(l, "app_name", app)) < 0)
			return r;
	}
	return label_set0(l, "pyroscope_spy", spy);
}

typedef struct meta {
	label_list labels;
	char *app;
	int64_t from, until;
	int64_t sample_rate;
	const char *spy;
	int agg; /* -1 = not given */
} meta;

static int status_of(int r)
{
	return r == -ENOMEM ? 500 : r == -E2BIG ? 413 : 422;
}

static int ingest_text(const srv_pyro_request *req, const srv_pyro_limits *lim, meta *m,
		       bool lines, srv_pyro_batch *out, int *status, strobe_err *err)
{
	const uint8_t *body = req->body;
	size_t len = req->body_len;
	uint8_t *plain = NULL;
	int r;
	/* Pyroscope reads folded bodies as they are; a gzipped one (an agent that compresses
	 * without Content-Encoding) is undone here rather than parsed as garbage. */
	if (is_gzip(body, len)) {
		if ((r = strobe_gunzip_capped(body, len, lim->max_decompressed, &plain, &len, "body", err)) <
		    0) {
			*status = status_of(r);
			return r;
		}
		body = plain;
	}
	/* Type from the suffix: app.name.cpu -> app.name + cpu; no dot means cpu. */
	char *dot = strrchr(m->app, '.');
	const char *suffix = dot ? dot + 1 : "cpu";
	const suffix_type *st = NULL;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++)
		if (strcmp(suffixes[i].suffix, suffix) == 0)
			st = &suffixes[i];
	if (!st) {
		free(plain);
		*status = 400;
		return strobe_errf(err, -EINVAL,
				   "name: unknown profile type '.%s' (the name of a folded or lines "
				   "upload ends in .cpu, .wall, .alloc_objects, .alloc_space, "
				   ".inuse_objects, .inuse_space, .goroutines, .mutex_count, "
				   ".mutex_duration, .block_count, .block_duration, ...)",
				   suffix);
	}
	if (dot)
		*dot = 0; /* the app name without its type */
	strobe_profile *p = strobe_profile_new();
	r = -ENOMEM;
	if (!p || (r = strobe_profile_add_type(p, st->type, st->unit)) < 0)
		goto fail;
	strobe_stack_parser stk;
	if ((r = strobe_stack_parser_init(&stk, p, true)) < 0)
		goto fail;
	r = lines ? parse_lines(&stk, (const char *)body, len, err)
		  : parse_groups(&stk, (const char *)body, len, err);
	strobe_stack_parser_free(&stk);
	if (r < 0)
		goto fail;
	/* sampleRate turns CPU and wall sample counts into nanoseconds (ingest_adapter.go). */
	bool timed = !strcmp(st->metric, "process_cpu") || !strcmp(st->metric, "wall");
	if (m->sample_rate > 0 && timed) {
		int64_t period = 1000000000 / m->sample_rate;
		uint32_t tt = strobe_str_intern0(p, !strcmp(st->metric, "wall") ? "wall" : "cpu");
		uint32_t ns = strobe_str_intern0(p, "nanoseconds");
		uint32_t cpu = strobe_str_intern0(p, "cpu");
		if (tt == UINT32_MAX || ns == UINT32_MAX || cpu == UINT32_MAX) {
			r = -ENOMEM;
			goto fail;
		}
		p->types[0] = (strobe_value_type){tt, ns};
		p->period_type = (strobe_value_type){cpu, ns};
		p->period = period;
		for (uint32_t s = 1; s <= strobe_nsamples(p); s++) {
			int64_t *v = strobe_sample_values(p, s);
			if (__builtin_mul_overflow(*v, period, v)) {
				r = strobe_errf(err, -EINVAL,
						"body: a count times the period (%lld ns) overflows",
						(long long)period);
				goto fail;
			}
		}
	}
	p->time_nanos = m->from;
	if (m->until <= m->from || __builtin_sub_overflow(m->until, m->from, &p->duration_nanos))
		p->duration_nanos = 0;
	free(plain);
	plain = NULL;
	if (!strobe_nsamples(p)) {
		strobe_profile_free(p);
		return 0;
	}
	char name[STROBE_PTYPE_MAX];
	if ((r = pyro_type_names(p, st->metric, NULL, 0, &name, err)) < 0) {
		strobe_profile_free(p);
		*status = 400;
		return r;
	}
	if ((r = series_labels(&m->labels, m->app, m->spy)) < 0 ||
	    (r = batch_add(out, name, &m->labels, m->from, m->until, p,
			   m->agg >= 0 ? (srv_agg)m->agg : STROBE_AGG_SUM)) < 0) {
		*status = 500;
		return r;
	}
	return 0;
fail:
	free(plain);
	strobe_profile_free(p);
	*status = status_of(r);
	return r;
}

static int decode_pprof(const uint8_t *b, size_t n, const char *what,
			const srv_pyro_limits *lim, strobe_profile **out, strobe_err *err)
{
	uint8_t *plain = NULL;
	int r;
	if (is_gzip(b, n)) {
		if ((r = strobe_gunzip_capped(b, n, lim->max_decompressed, &plain, &n, what, err)) < 0)
			return r;
		b = plain;
	} else if (n > lim->max_decompressed) {
		return strobe_errf(err, -E2BIG, "%s: more than %zu bytes", what,
				   lim->max_decompressed);
	}
	r = strobe_pprof_decode(b, n, what, out, err);
	free(plain);
	return r;
}

static int ingest_pprof(const srv_pyro_request *req, const srv_pyro_limits *lim, meta *m,
			bool multipart, srv_pyro_batch *out, int *status, strobe_err *err)
{
	form f = {0};
	strobe_profile *p = NULL, *prev = NULL, *d = NULL;
	srv_pyro_stc *stc = NULL;
	size_t nstc = 0;
	char(*names)[STROBE_PTYPE_MAX] = NULL;
	bool *cumul = NULL;
	int r;
	*status = 422;
	if (multipart) {
		if ((r = parse_multipart(req->content_type, req->body, req->body_len, &f, err)) < 0)
			goto fail;
	} else {
		f.profile = (span){req->body, req->body_len, true};
	}
	if (!f.profile.n) { /* nothing to store: a success, as in Pyroscope */
		*status = 200;
		return 0;
	}
	if (f.stc.n && (r = srv_pyro_stc_parse((const char *)f.stc.p, f.stc.n, &stc, &nstc,
						  err)) < 0)
		goto fail;
	if ((r = decode_pprof(f.profile.p, f.profile.n, "profile", lim, &p, err)) < 0)
		goto fail;
	if (f.prev.n && (r = decode_pprof(f.prev.p, f.prev.n, "prev_profile", lim, &prev, err)) < 0)
		goto fail;
	r = -ENOMEM;
	if (!(cumul = calloc(p->ntypes + 1, sizeof(*cumul))))
		goto fail;
	/* Which columns count from process start: the config says, else Pyroscope's defaults for
	 * Go; only meaningful when a previous profile came to diff against. */
	bool any_cumul = false;
	for (uint32_t t = 0; t < p->ntypes; t++) {
		const char *st = strobe_str(p, p->types[t].type);
		const srv_pyro_stc *c = stc ? stc_find(stc, nstc, st)
					       : stc_find(default_stc,
							  sizeof(default_stc) / sizeof(*default_stc), st);
		cumul[t] = c && c->cumulative && (prev || stc);
		any_cumul |= cumul[t];
	}
	strobe_profile *use = p;
	if (prev && any_cumul) {
		strobe_err derr = {{0}};
		if ((r = strobe_profile_delta_cols(prev, p, cumul, &d, NULL, &derr)) < 0) {
			strobe_errf(err, r, "prev_profile: %s", derr.msg);
			goto fail;
		}
		use = d;
	}
	/* Pyroscope: a profile whose clock was not set (1970) gets the request's start. */
	if (use->time_nanos < (int64_t)365 * 86400 * 1000000000)
		use->time_nanos = m->from;
	if (!use->duration_nanos && m->until > m->from &&
	    __builtin_sub_overflow(m->until, m->from, &use->duration_nanos))
		use->duration_nanos = 0;
	r = -ENOMEM;
	if (!(names = calloc(use->ntypes + 1, sizeof(*names))))
		goto fail;
	if ((r = pyro_type_names(use, NULL, stc, nstc, names, err)) < 0)
		goto fail;
	for (uint32_t t = 0; t < use->ntypes; t++)
		for (uint32_t u = 0; u < t; u++)
			if (strcmp(names[t], names[u]) == 0) {
				r = strobe_errf(err, -EINVAL,
						"profile: two sample types make the same profile type %s",
						names[t]);
				goto fail;
			}
	if ((r = series_labels(&m->labels, m->app, m->spy)) < 0)
		goto fail;
	for (uint32_t t = 0; t < use->ntypes; t++) {
		/* A counter with nothing to diff against says nothing about this window. */
		if (cumul[t] && !prev)
			continue;
		strobe_profile *one;
		if ((r = strobe_profile_select_type(use, t, &one)) < 0)
			goto fail;
		if (!strobe_nsamples(one)) {
			strobe_profile_free(one);
			continue;
		}
		const char *st = strobe_str(use, use->types[t].type);
		const srv_pyro_stc *c = stc ? stc_find(stc, nstc, st) : NULL;
		const srv_pyro_stc *dc =
			stc_find(default_stc, sizeof(default_stc) / sizeof(*default_stc), st);
		int agg = c && c->aggregation >= 0 ? c->aggregation
			  : m->agg >= 0		   ? m->agg
			  : dc && dc->aggregation >= 0 ? dc->aggregation
						       : STROBE_AGG_SUM;
		if ((r = batch_add(out, names[t], &m->labels, m->from, m->until, one,
				   (srv_agg)agg)) < 0)
			goto fail;
	}
	r = 0;
	*status = 200;
fail:
	if (r < 0 && (r == -ENOMEM || r == -E2BIG))
		*status = status_of(r);
	strobe_profile_free(p);
	strobe_profile_free(prev);
	strobe_profile_free(d);
	free(stc);
	free(names);
	free(cumul);
	return r;
}

/* format=jfr: server/pyroscope_jfr.c makes the profiles, each becomes an item here. */
static int ingest_jfr(const srv_pyro_request *req, const srv_pyro_limits *lim, meta *m,
		      bool multipart, srv_pyro_batch *out, int *status, strobe_err *err)
{
	srv_jfr_item *items;
	size_t n;
	int r = srv_pyro_jfr(req->content_type, req->body, req->body_len, multipart,
			     lim->max_decompressed, m->sample_rate, &items, &n, status, err);
	if (r < 0)
		return r;
	/* pyroscope-java names uploads app.cpu, app.itimer, ...: the types come from the events,
	 * the suffix is no part of the app name. */
	char *dot = strrchr(m->app, '.');
	for (size_t i = 0; dot && i < sizeof(suffixes) / sizeof(*suffixes); i++)
		if (!strcmp(dot + 1, suffixes[i].suffix)) {
			*dot = 0;
			break;
		}
	if ((r = series_labels(&m->labels, m->app, m->spy)) < 0)
		*status = 500;
	for (size_t i = 0; r == 0 && i < n; i++) {
		items[i].profile->time_nanos = m->from;
		if (m->until > m->from)
			items[i].profile->duration_nanos = m->until - m->from;
		r = batch_add(out, items[i].type, &m->labels, m->from, m->until, items[i].profile,
			      m->agg >= 0 ? (srv_agg)m->agg : STROBE_AGG_SUM);
		items[i].profile = NULL; /* batch_add took it, or freed it on failure */
		if (r < 0)
			*status = 500;
	}
	srv_jfr_items_free(items, n);
	return r;
}

int srv_pyro_parse(const srv_pyro_request *req, srv_pyro_batch *out, int *status,
		      strobe_err *err)
{
	srv_pyro_limits lim = limits_of(req->limits);
	meta m = {0};
	int r;
	memset(out, 0, sizeof(*out));
	*status = 400;
	if (err)
		err->msg[0] = 0;
	if (req->body_len > lim.max_body) {
		*status = 413;
		return strobe_errf(err, -E2BIG, "request body is larger than %zu bytes", lim.max_body);
	}
	const char *name = param(req, "name");
	if (!name)
		return strobe_errf(err, -EINVAL, "name: the query parameter is required "
						 "(name=app.cpu{key=value,...})");
	srv_pyro_label *lv;
	uint32_t ln;
	if ((r = srv_pyro_parse_name(name, &lim, &m.app, &lv, &ln, err)) < 0) {
		*status = r == -ENOMEM ? 500 : 400;
		return r;
	}
	m.labels = (label_list){lv, ln, ln};
	int64_t now = req->now_ns ? req->now_ns : strobe_real_ns();
	const char *v;
	m.from = (v = param(req, "from")) && *v ? srv_pyro_parse_time(v, now) : now;
	m.until = (v = param(req, "until")) && *v ? srv_pyro_parse_time(v, now) : now;
	/* As Pyroscope: an unreadable or negative rate is the default rate. */
	m.sample_rate = DEFAULT_SAMPLE_RATE;
	if ((v = param(req, "sampleRate")) && *v) {
		int64_t sr;
		if (go_atoi(v, strlen(v), &sr) && sr >= 0)
			m.sample_rate = sr;
		if (m.sample_rate > 1000000000) {
			r = strobe_errf(err, -EINVAL,
					"sampleRate: %lld Hz is more than one sample per nanosecond",
					(long long)m.sample_rate);
			goto out;
		}
	}
	m.spy = (v = param(req, "spyName")) && *v ? v : "unknown";
	{ /* the label pyroscope_spy: the labels' rules, as for the name's labels */
		json_t *js = json_string(m.spy); /* NULL: not UTF-8 */
		json_decref(js);
		if (!js || strlen(m.spy) > lim.max_label_value) {
			r = strobe_errf(err, -EINVAL, "spyName: label 'pyroscope_spy' %s",
					js ? "is longer than max_label_value_length"
					   : "has a value that is not UTF-8");
			goto out;
		}
	}
	m.agg = -1;
	if (((v = param(req, "aggregationType")) && *v) ||
	    ((v = param(req, "aggregrationType")) && *v)) { /* the docs' spelling */
		if (!strcmp(v, "sum"))
			m.agg = STROBE_AGG_SUM;
		else if (!strcmp(v, "average"))
			m.agg = STROBE_AGG_AVERAGE;
		else {
			r = strobe_errf(err, -EINVAL, "aggregationType: '%.40s' is not sum or average",
					v);
			goto out;
		}
	}
	/* The format, decided as Pyroscope's readInputRawDataFromRequest does. */
	const char *fmt = param(req, "format");
	const char *ct = req->content_type ? req->content_type : "";
	if (!fmt)
		fmt = "";
	bool multipart = strstr(ct, "multipart/form-data") != NULL;
	if (!strcmp(fmt, "trie") || !strcmp(ct, "binary/octet-stream+trie") ||
	    !strcmp(fmt, "tree") || !strcmp(ct, "binary/octet-stream+tree") ||
	    !strcmp(fmt, "speedscope")) {
		*status = 415;
		r = strobe_errf(err, -ENOTSUP,
				"format: '%s' is not supported (supported: folded, lines, pprof, jfr, "
				"multipart pprof)",
				*fmt ? fmt : ct);
		goto out;
	}
	if (!strcmp(fmt, "jfr")) {
		r = ingest_jfr(req, &lim, &m, multipart, out, status, err);
	} else if (!strcmp(fmt, "lines")) {
		r = ingest_text(req, &lim, &m, true, out, status, err);
	} else if (!strcmp(fmt, "pprof") || multipart) {
		/* format=pprof with a multipart body is read as the form it is. */
		r = ingest_pprof(req, &lim, &m, multipart, out, status, err);
	} else if (!*fmt || !strcmp(fmt, "folded") || !strcmp(fmt, "groups")) {
		r = ingest_text(req, &lim, &m, false, out, status, err);
	} else {
		*status = 415;
		r = strobe_errf(err, -ENOTSUP,
				"format: unknown format '%.40s' (supported: folded, lines, pprof, jfr)",
				fmt);
	}
out:
	if (r < 0)
		srv_pyro_batch_free(out);
	else
		*status = 200;
	labels_free(m.labels.v, m.labels.n);
	free(m.app);
	return r;
}
