// SPDX-License-Identifier: Apache-2.0
/*
 * Getting profile bytes in: reading a file or stdin whole (gunzipped through lib/gzip.c), format
 * detection from content (JFR by its "FLR\0" magic), and the one entry point that turns any supported file into a
 * profile. Every command reads its inputs through
 * strobe_read_profile(), so they all take the same formats, gzip or not, and "-" for stdin.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strobe/buf.h"
#include "strobe/codec.h"
#include "strobe/jfr.h"

static const char *const format_names[] = {
	[STROBE_FMT_UNKNOWN] = "unknown",   [STROBE_FMT_PPROF] = "pprof",
	[STROBE_FMT_FOLDED] = "folded",     [STROBE_FMT_PERF_SCRIPT] = "perf",
	[STROBE_FMT_SPEEDSCOPE] = "speedscope", [STROBE_FMT_JSON] = "json",
	[STROBE_FMT_SVG] = "svg",           [STROBE_FMT_FLAT] = "flat",
	[STROBE_FMT_TOP] = "top",           [STROBE_FMT_JFR] = "jfr",
};

const char *strobe_format_name(strobe_format f)
{
	return (unsigned)f < sizeof(format_names) / sizeof(*format_names) ? format_names[f]
									   : "unknown";
}

strobe_format strobe_output_parse(const char *name)
{
	for (unsigned f = 1; f <= STROBE_FMT_TOP; f++) /* jfr is read, never written */
		if (strcmp(name, format_names[f]) == 0)
			return (strobe_format)f;
	return strobe_format_parse(name);
}

strobe_format strobe_format_parse(const char *name)
{
	for (unsigned f = 1; f <= STROBE_FMT_SVG; f++)
		if (strcmp(name, format_names[f]) == 0)
			return (strobe_format)f;
	if (strcmp(name, "perf-script") == 0)
		return STROBE_FMT_PERF_SCRIPT;
	if (strcmp(name, "jfr") == 0)
		return STROBE_FMT_JFR;
	return STROBE_FMT_UNKNOWN;
}

int strobe_gunzip(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, strobe_err *err)
{
	int r = strobe_gunzip_capped(in, inlen, STROBE_MAX_INPUT, out, outlen, NULL, err);
	if (r == -E2BIG)
		return strobe_errf(err, -EFBIG, "decompressed size exceeds the %zu MiB limit",
				   STROBE_MAX_INPUT >> 20);
	return r;
}

int strobe_slurp(const char *path, uint8_t **out, size_t *outlen, strobe_err *err)
{
	bool is_stdin = strcmp(path, "-") == 0;
	const char *shown = is_stdin ? "<stdin>" : path;
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strobe_errf(err, -errno, "%s: %s", shown, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!is_stdin)
			close(fd);
		return strobe_errf(err, -EISDIR, "%s: is a directory", shown);
	}
	/* A regular file's size at first (one more byte shows that it has not grown), else
	 * 64 KiB; doubling from there, up to STROBE_MAX_INPUT. */
	size_t first = (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
			       ? (size_t)st.st_size + 1
			       : 65536;
	strobe_buf b;
	strobe_buf_init(&b, STROBE_MAX_INPUT);
	int r = strobe_buf_reserve(&b, first < b.max ? first : b.max);
	while (r == 0) {
		size_t room = b.cap - b.len - 1;
		if (!room) {
			if (b.len >= b.max) {
				r = strobe_errf(err, -EFBIG, "%s: larger than the %zu MiB limit",
						shown, STROBE_MAX_INPUT >> 20);
				break;
			}
			r = strobe_buf_reserve(&b, b.len < b.max - b.len ? b.len : b.max - b.len);
			continue;
		}
		ssize_t n = read(fd, b.p + b.len, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = strobe_errf(err, -errno, "%s: read: %s", shown, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		strobe_buf_commit(&b, (size_t)n);
	}
	if (!is_stdin)
		close(fd);
	if (r == -ENOMEM)
		r = strobe_errf(err, -ENOMEM, "%s: out of memory", shown);
	if (r < 0) {
		strobe_buf_free(&b);
		return r;
	}
	const uint8_t *buf = (const uint8_t *)b.p;
	if (b.len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
		uint8_t *plain;
		size_t plen;
		strobe_err gz = {{0}};
		r = strobe_gunzip(buf, b.len, &plain, &plen, &gz);
		strobe_buf_free(&b);
		if (r < 0)
			return strobe_errf(err, r, "%s: %s", shown, gz.msg[0] ? gz.msg : strerror(-r));
		*out = plain;
		*outlen = plen;
		return 0;
	}
	*out = (uint8_t *)strobe_buf_take(&b, outlen); /* NUL-terminated */
	return 0;
}

/* A line that looks like a `perf script` stack frame: whitespace, hex address, space. */
static bool perf_frame_line(const uint8_t *s, const uint8_t *end)
{
	if (s >= end || (*s != '\t' && *s != ' '))
		return false;
	while (s < end && (*s == '\t' || *s == ' '))
		s++;
	const uint8_t *h = s;
	while (s < end && ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
		s++;
	return s > h && s < end && *s == ' ';
}

strobe_format strobe_detect(const uint8_t *buf, size_t len)
{
	if (strobe_jfr_is(buf, len))
		return STROBE_FMT_JFR;
	size_t i = 0;
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
		i++;
	if (i == len)
		return STROBE_FMT_UNKNOWN;
	/* Text formats have no control bytes besides whitespace in their first KiB; a protobuf
	 * nearly always does (tags and lengths). */
	size_t probe = len < 1024 ? len : 1024;
	bool binary = false;
	for (size_t k = 0; k < probe; k++)
		if (buf[k] < 0x20 && buf[k] != '\n' && buf[k] != '\r' && buf[k] != '\t')
			binary = true;
	if (binary)
		return STROBE_FMT_PPROF;
	if (buf[i] == '{') {
		return memmem(buf, probe, "speedscope", 10) ? STROBE_FMT_SPEEDSCOPE : STROBE_FMT_JSON;
	}
	if (buf[i] == '<')
		return STROBE_FMT_SVG;
	/* perf script: some line in the first 64 KiB is a stack frame line. A folded file's lines
	 * never start with whitespace followed by a hex address and a space. */
	size_t scan = len < 65536 ? len : 65536;
	const uint8_t *p = buf, *end = buf + scan;
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		const uint8_t *le = nl ? nl : end;
		if (perf_frame_line(p, le))
			return STROBE_FMT_PERF_SCRIPT;
		if (!nl)
			break;
		p = nl + 1;
	}
	/* A perf script whose samples have no call chains still has "comm pid ... :" lines; those
	 * are handled by the perf decoder only when asked for explicitly. */
	if (buf[0] == '#')
		return STROBE_FMT_PERF_SCRIPT;
	return STROBE_FMT_FOLDED;
}

int strobe_decode_profile(const uint8_t *buf, size_t len, const char *name, strobe_profile **out,
			  strobe_err *err)
{
	strobe_format f = strobe_detect(buf, len);
	switch (f) {
	case STROBE_FMT_PPROF:
		return strobe_pprof_decode(buf, len, name, out, err);
	case STROBE_FMT_FOLDED:
		return strobe_folded_decode((const char *)buf, len, name, out, err);
	case STROBE_FMT_PERF_SCRIPT:
		return strobe_perf_script_decode((const char *)buf, len, name, out, err);
	case STROBE_FMT_JFR:
		return strobe_jfr_decode(buf, len, name, NULL, out, err);
	case STROBE_FMT_UNKNOWN:
		return strobe_errf(err, -EINVAL, "%s: empty input (no profile data)", name);
	default:
		return strobe_errf(err, -EINVAL,
				   "%s: %s is an output format; give pprof, folded stacks or perf "
				   "script text",
				   name, strobe_format_name(f));
	}
}

int strobe_input_open(const char *path, strobe_input *in, strobe_err *err)
{
	memset(in, 0, sizeof(*in));
	if (strcmp(path, "-") != 0) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 2 &&
		    (uint64_t)st.st_size <= STROBE_MAX_INPUT) {
			void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE,
				       fd, 0);
			close(fd);
			if (m != MAP_FAILED) {
				const uint8_t *b = m;
				if (!(b[0] == 0x1f && b[1] == 0x8b)) {
					in->data = b;
					in->len = in->map_len = (size_t)st.st_size;
					return 0;
				}
				munmap(m, (size_t)st.st_size);
			}
		} else if (fd >= 0) {
			close(fd);
		}
	}
	/* stdin, pipes, small and gzipped files: read whole (and gunzip) */
	uint8_t *buf;
	size_t len;
	int r = strobe_slurp(path, &buf, &len, err);
	if (r < 0)
		return r;
	in->data = buf;
	in->len = len;
	in->owned = buf;
	return 0;
}

void strobe_input_close(strobe_input *in)
{
	if (in->map_len)
		munmap((void *)in->data, in->map_len);
	free(in->owned);
	memset(in, 0, sizeof(*in));
}

int strobe_read_profile(const char *path, strobe_profile **out, strobe_err *err)
{
	strobe_input in;
	int r = strobe_input_open(path, &in, err);
	if (r < 0)
		return r;
	r = strobe_decode_profile(in.data, in.len, strcmp(path, "-") == 0 ? "<stdin>" : path, out,
				  err);
	strobe_input_close(&in);
	return r;
}
