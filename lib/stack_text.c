// SPDX-License-Identifier: Apache-2.0
/*
 * "a;b;c" -> a stack of the profile model (include/strobe/stack_text.h): the folded decoder,
 * the Pyroscope parser's folded and lines bodies and the perf-script converter all read stacks
 * this way. Speed matters (the folded decoder is the flame-graph benchmark's input), hence the
 * two caches: a frame's text to its location, and the previous stack's frames.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/codec.h"
#include "strobe/stack_text.h"

int strobe_stack_parser_init(strobe_stack_parser *sp, strobe_profile *p, bool reuse_prefix)
{
	*sp = (strobe_stack_parser){.p = p, .reuse_prefix = reuse_prefix, .max_depth = STROBE_MAX_DEPTH};
	if (!reuse_prefix)
		return 0;
	sp->prev_end = malloc((STROBE_MAX_DEPTH + 1) * sizeof(*sp->prev_end));
	sp->prev_stack = malloc((STROBE_MAX_DEPTH + 1) * sizeof(*sp->prev_stack));
	if (!sp->prev_end || !sp->prev_stack) {
		strobe_stack_parser_free(sp);
		return -ENOMEM;
	}
	return 0;
}

void strobe_stack_parser_free(strobe_stack_parser *sp)
{
	free(sp->loc_of_str);
	free(sp->prev_end);
	free(sp->prev_stack);
	*sp = (strobe_stack_parser){0};
}

/* The location of a frame's text: a location per name, as strobe_location_for_name makes it,
 * looked up by the name's string id once interned. */
static uint32_t frame_location(strobe_stack_parser *sp, const char *s, size_t len)
{
	uint32_t sid = strobe_str_intern(sp->p, s, len);
	if (sid == UINT32_MAX)
		return UINT32_MAX;
	if (sid >= sp->nmap) {
		size_t nn = sp->nmap ? sp->nmap * 2 : 1024;
		while (nn <= sid)
			nn *= 2;
		uint32_t *m = realloc(sp->loc_of_str, nn * sizeof(*m));
		if (!m)
			return UINT32_MAX;
		memset(m + sp->nmap, 0xff, (nn - sp->nmap) * sizeof(*m));
		sp->loc_of_str = m;
		sp->nmap = nn;
	}
	if (sp->loc_of_str[sid] == UINT32_MAX)
		sp->loc_of_str[sid] = strobe_location_for_name(sp->p, s, len);
	return sp->loc_of_str[sid];
}

int strobe_stack_parse(strobe_stack_parser *sp, const char *s, size_t n, const char *what,
		       size_t lineno, uint32_t *stack_out, strobe_err *err)
{
	uint32_t stack = 0, depth = 0;
	bool same = sp->reuse_prefix && sp->prev;
	const char *f = s, *e = s + n;
	for (;;) {
		const char *semi = memchr(f, ';', (size_t)(e - f));
		const char *fe = semi ? semi : e;
		if (fe - f > (ptrdiff_t)STROBE_MAX_NAME) {
			sp->prev = NULL;
			return strobe_errf(err, -EINVAL,
					   "%s:%zu: frame name of %zu bytes exceeds the %u-byte limit",
					   what, lineno, (size_t)(fe - f), STROBE_MAX_NAME);
		}
		if (depth >= sp->max_depth || depth > STROBE_MAX_DEPTH) {
			sp->prev = NULL;
			return strobe_errf(err, -EINVAL, "%s:%zu: stack deeper than %u frames", what,
					   lineno, sp->max_depth);
		}
		size_t fend = (size_t)(fe - s);
		same = same && depth < sp->prev_depth && sp->prev_end[depth] == fend &&
		       memcmp(f, sp->prev + (f - s), (size_t)(fe - f)) == 0;
		if (same) {
			stack = sp->prev_stack[depth];
		} else {
			uint32_t loc = frame_location(sp, f, (size_t)(fe - f));
			if (loc == UINT32_MAX ||
			    (stack = strobe_stack_push(sp->p, stack, loc)) == UINT32_MAX) {
				sp->prev = NULL;
				return -ENOMEM;
			}
			if (sp->reuse_prefix) {
				sp->prev_end[depth] = fend;
				sp->prev_stack[depth] = stack;
			}
		}
		depth++;
		if (!semi)
			break;
		f = semi + 1;
	}
	if (sp->reuse_prefix) {
		sp->prev = s;
		sp->prev_depth = depth;
	}
	*stack_out = stack;
	return 0;
}
