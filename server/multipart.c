// SPDX-License-Identifier: Apache-2.0
/*
 * multipart/form-data bodies (RFC 7578), as Pyroscope's /ingest and the native push take them:
 * the parts' field names and contents, in order, without copying. A generic body helper of the
 * server, kept apart from any one endpoint's parser. The body is untrusted: the parts and each
 * part's header block have caps, and the boundary is at most 70 characters (RFC 2046).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "multipart.h"

#define MAX_PART_HEADERS (16u << 10) /* bytes of one part's header block */

static bool ieq_prefix(const char *s, size_t n, const char *lit)
{
	size_t l = strlen(lit);
	if (n < l)
		return false;
	for (size_t i = 0; i < l; i++) {
		char a = s[i], b = lit[i];
		if (a >= 'A' && a <= 'Z')
			a = (char)(a - 'A' + 'a');
		if (a != b)
			return false;
	}
	return true;
}

/* A parameter of a header value such as `form-data; name="profile"` or `multipart/form-data;
 * boundary=xyz`: the value, unquoted, into out (cap bytes). false when absent or too long. */
static bool header_param(const char *v, size_t n, const char *key, char *out, size_t cap)
{
	const char *p = v, *e = v + n;
	size_t klen = strlen(key);
	const char *semi = memchr(p, ';', n);
	if (!semi)
		return false;
	p = semi + 1;
	while (p < e) {
		while (p < e && (*p == ' ' || *p == '\t' || *p == ';'))
			p++;
		const char *ks = p;
		while (p < e && *p != '=' && *p != ';')
			p++;
		const char *ke = p;
		while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t'))
			ke--;
		if (p >= e || *p != '=') {
			continue;
		}
		p++;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		size_t o = 0;
		bool match = (size_t)(ke - ks) == klen && ieq_prefix(ks, klen, key);
		bool fits = true;
		if (p < e && *p == '"') {
			p++;
			while (p < e && *p != '"') {
				if (*p == '\\' && p + 1 < e)
					p++;
				if (o + 1 < cap)
					out[o++] = *p;
				else
					fits = false;
				p++;
			}
			if (p < e)
				p++;
		} else {
			while (p < e && *p != ';' && *p != ' ' && *p != '\t') {
				if (o + 1 < cap)
					out[o++] = *p;
				else
					fits = false;
				p++;
			}
		}
		if (match) {
			out[o] = 0;
			return fits;
		}
		while (p < e && *p != ';')
			p++;
	}
	return false;
}

static const uint8_t *find_bytes(const uint8_t *h, size_t hn, const uint8_t *n, size_t nn)
{
	if (nn == 0 || hn < nn)
		return NULL;
	const uint8_t *end = h + hn - nn + 1;
	for (const uint8_t *p = h; p < end;) {
		const uint8_t *c = memchr(p, n[0], (size_t)(end - p));
		if (!c)
			return NULL;
		if (memcmp(c, n, nn) == 0)
			return c;
		p = c + 1;
	}
	return NULL;
}

/* After "--boundary" at d: is it a delimiter line? Sets *close for "--boundary--" and *next to the
 * first byte after the line. */
static bool delimiter_line(const uint8_t *d, const uint8_t *end, bool *close, const uint8_t **next)
{
	*close = false;
	if (end - d >= 2 && d[0] == '-' && d[1] == '-') {
		*close = true;
		d += 2;
	}
	while (d < end && (*d == ' ' || *d == '\t'))
		d++;
	if (d == end && *close) {
		*next = d;
		return true;
	}
	if (d < end && *d == '\r')
		d++;
	if (d < end && *d == '\n') {
		*next = d + 1;
		return true;
	}
	return false;
}

int srv_multipart_parse(const char *ctype, const uint8_t *body, size_t len, unsigned max_parts,
			   srv_part_fn fn, void *ctx, strobe_err *err)
{
	char boundary[80];
	if (!ctype || !header_param(ctype, strlen(ctype), "boundary", boundary, sizeof(boundary)) ||
	    !boundary[0])
		return strobe_errf(err, -EINVAL,
				   "multipart body: Content-Type has no boundary parameter (of at "
				   "most 70 characters)");
	uint8_t delim[84];
	size_t blen = strlen(boundary), dlen = blen + 3;
	delim[0] = '\n';
	delim[1] = delim[2] = '-';
	memcpy(delim + 3, boundary, blen);
	const uint8_t *end = body + len, *p;
	/* The first delimiter may open the body without a preceding newline. */
	bool close;
	const uint8_t *next = NULL;
	if (len >= dlen - 1 && memcmp(body, delim + 1, dlen - 1) == 0 &&
	    delimiter_line(body + dlen - 1, end, &close, &next)) {
		p = next;
	} else {
		const uint8_t *s = body;
		for (;;) {
			const uint8_t *d = find_bytes(s, (size_t)(end - s), delim, dlen);
			if (!d)
				return strobe_errf(err, -EINVAL,
						   "multipart body: no boundary line '--%s'", boundary);
			if (delimiter_line(d + dlen, end, &close, &next))
				break;
			s = d + 1;
		}
		p = next;
	}
	if (close)
		return 0;
	for (unsigned part = 0;; part++) {
		if (part >= max_parts)
			return strobe_errf(err, -E2BIG, "multipart body: more than %u parts", max_parts);
		/* Headers up to an empty line. */
		char name[64] = "";
		size_t hbytes = 0;
		for (;;) {
			const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				return strobe_errf(err, -EINVAL,
						   "multipart body: part %u's headers do not end", part + 1);
			size_t ln = (size_t)(nl - p);
			hbytes += ln + 1;
			if (hbytes > MAX_PART_HEADERS)
				return strobe_errf(err, -EINVAL,
						   "multipart body: part %u's headers exceed %u bytes",
						   part + 1, MAX_PART_HEADERS);
			const char *h = (const char *)p;
			p = nl + 1;
			if (ln && h[ln - 1] == '\r')
				ln--;
			if (!ln)
				break;
			if (ieq_prefix(h, ln, "content-disposition:")) {
				char nm[64];
				if (header_param(h, ln, "name", nm, sizeof(nm)))
					memcpy(name, nm, sizeof(name));
			}
		}
		/* The content runs to the next delimiter line, whose leading CRLF belongs to it. */
		const uint8_t *s = p, *d;
		for (;;) {
			d = find_bytes(s, (size_t)(end - s), delim, dlen);
			if (!d)
				return strobe_errf(err, -EINVAL,
						   "multipart body: part %u ('%s') has no closing boundary",
						   part + 1, name);
			if (delimiter_line(d + dlen, end, &close, &next))
				break;
			s = d + 1;
		}
		const uint8_t *ce = d;
		if (ce > p && ce[-1] == '\r')
			ce--;
		int r = fn(ctx, name, p, (size_t)(ce - p));
		if (r < 0)
			return r;
		p = next;
		if (close)
			return 0;
	}
}
