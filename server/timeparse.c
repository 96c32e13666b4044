// SPDX-License-Identifier: Apache-2.0
/*
 * Times and durations as the query API takes them: unix timestamps in any of the usual units,
 * RFC 3339, and "now" with an offset, so a person can type from=now-1h and a program can pass
 * what its clock gives. Durations are Prometheus-style ("1h30m", "7d").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strobe/server.h"

#define TIME_TEXT_MAX 64

static int dur(const char *s, size_t len, int64_t *out)
{
	static const struct {
		const char *u;
		int64_t ns;
	} units[] = {{"ms", 1000000LL}, {"us", 1000LL}, {"ns", 1LL}, {"s", STROBE_NS_PER_S},
		     {"m", 60 * STROBE_NS_PER_S}, {"h", 3600 * STROBE_NS_PER_S},
		     {"d", 86400 * STROBE_NS_PER_S}, {"w", 7 * 86400 * STROBE_NS_PER_S}};
	size_t i = 0;
	int64_t total = 0;
	if (!len)
		return -EINVAL;
	while (i < len) {
		int64_t v = 0;
		size_t st = i;
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			if (v > (INT64_MAX - 9) / 10)
				return -ERANGE;
			v = v * 10 + (s[i++] - '0');
		}
		if (i == st)
			return -EINVAL;
		if (i == len && st == 0) { /* a bare number: seconds */
			if (v > INT64_MAX / STROBE_NS_PER_S)
				return -ERANGE;
			*out = v * STROBE_NS_PER_S;
			return 0;
		}
		size_t k;
		for (k = 0; k < sizeof(units) / sizeof(*units); k++) {
			size_t ul = strlen(units[k].u);
			if (i + ul <= len && strncmp(s + i, units[k].u, ul) == 0 &&
			    !(ul == 1 && units[k].u[0] == 'm' && i + 1 < len && s[i + 1] == 's')) {
				if (v > (INT64_MAX - total) / units[k].ns)
					return -ERANGE;
				total += v * units[k].ns;
				i += ul;
				break;
			}
		}
		if (k == sizeof(units) / sizeof(*units))
			return -EINVAL;
	}
	*out = total;
	return 0;
}

int strobe_duration_parse(const char *s, int64_t *out_ns, strobe_err *err)
{
	size_t len = strnlen(s, TIME_TEXT_MAX + 1);
	int64_t v;
	if (len > TIME_TEXT_MAX || dur(s, len, &v) < 0 || v <= 0)
		return strobe_errf(err, -EINVAL,
				   "'%.64s' is not a duration (like 15s, 1m, 1h30m, 7d)", s);
	*out_ns = v;
	return 0;
}

/* RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM). */
static int rfc3339(const char *s, int64_t *out)
{
	int Y, M, D, h, m, sec, n = 0;
	if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &n) != 6 ||
	    n != 19)
		return -EINVAL;
	if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
		return -EINVAL;
	const char *p = s + n;
	int64_t frac = 0;
	if (*p == '.') {
		p++;
		int digits = 0;
		while (*p >= '0' && *p <= '9') {
			if (digits < 9) {
				frac = frac * 10 + (*p - '0');
				digits++;
			}
			p++;
		}
		if (!digits)
			return -EINVAL;
		while (digits++ < 9)
			frac *= 10;
	}
	int64_t off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om, k = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5 || oh > 23 || om > 59)
			return -EINVAL;
		off = (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h,
			.tm_min = m, .tm_sec = sec};
	time_t t = timegm(&tm);
	/* Years before 1678 or after 2262 do not fit in int64 nanoseconds. */
	if (__builtin_mul_overflow((int64_t)t - off, STROBE_NS_PER_S, out) ||
	    __builtin_add_overflow(*out, frac, out))
		return -ERANGE;
	return 0;
}

int strobe_time_parse(const char *s, int64_t now_ns, int64_t *out, strobe_err *err)
{
	size_t len = strnlen(s, TIME_TEXT_MAX + 1);
	if (len > TIME_TEXT_MAX || len == 0)
		goto bad;
	if (strncmp(s, "now", 3) == 0) {
		if (len == 3) {
			*out = now_ns;
			return 0;
		}
		int64_t d;
		if ((s[3] != '-' && s[3] != '+') || dur(s + 4, len - 4, &d) < 0)
			goto bad;
		*out = s[3] == '-' ? now_ns - d : now_ns + d;
		return 0;
	}
	if (len >= 19 && s[4] == '-')
		return rfc3339(s, out) == 0 ? 0 : strobe_errf(err, -EINVAL, "'%.64s' is not a valid RFC 3339 time", s);
	/* A number: its integer digits tell the unit. */
	size_t i = 0, digits = 0;
	int64_t v = 0;
	while (i < len && s[i] >= '0' && s[i] <= '9') {
		if (v > (INT64_MAX - 9) / 10)
			goto bad;
		v = v * 10 + (s[i++] - '0');
		digits++;
	}
	if (!digits)
		goto bad;
	if (i < len) { /* seconds with a fraction */
		if (s[i] != '.' || digits > 10 || i + 1 == len)
			goto bad;
		int64_t frac = 0;
		int fd = 0;
		for (i++; i < len; i++) {
			if (s[i] < '0' || s[i] > '9')
				goto bad;
			if (fd < 9) {
				frac = frac * 10 + (s[i] - '0');
				fd++;
			}
		}
		while (fd++ < 9)
			frac *= 10;
		if (__builtin_mul_overflow(v, STROBE_NS_PER_S, out) ||
		    __builtin_add_overflow(*out, frac, out))
			goto bad; /* past the year 2262: not a time */
		return 0;
	}
	int64_t mul = digits <= 10 ? STROBE_NS_PER_S : digits <= 13 ? 1000000 : digits <= 16 ? 1000 : 1;
	if (__builtin_mul_overflow(v, mul, out))
		goto bad; /* past the year 2262: not a time */
	return 0;
bad:
	return strobe_errf(err, -EINVAL,
			   "'%.64s' is not a time (unix s/ms/us/ns, RFC 3339, now, now-1h)", s);
}
