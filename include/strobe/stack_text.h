/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stack written as text, "root;caller;leaf" (the folded form's frames, Pyroscope's folded and
 * lines bodies, the collapser's output), turned into a stack of the profile model: each frame
 * a location named by its text, pushed root first. One reader for all of them, with the caps
 * every reader of untrusted text needs (a frame name of at most STROBE_MAX_NAME bytes, at most
 * STROBE_MAX_DEPTH frames).
 *
 * Ownership: the parser borrows the profile (which must outlive it) and owns its two caches,
 * freed by strobe_stack_parser_free. With reuse_prefix, the text of the previous call is read
 * again by the next one, so it must stay valid and unchanged until then (true of a buffer parsed
 * line by line); without it nothing is kept between calls.
 */
#ifndef STROBE_STACK_TEXT_H
#define STROBE_STACK_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strobe/profile.h"

typedef struct strobe_stack_parser {
	strobe_profile *p;
	bool reuse_prefix;
	/* Frames allowed in one stack: STROBE_MAX_DEPTH, or one more where the caller adds a
	 * frame of its own to stacks so capped (the collapser's comm). */
	uint32_t max_depth;
	uint32_t *loc_of_str; /* string id -> location id, UINT32_MAX = not yet */
	size_t nmap;
	/* The previous stack (reuse_prefix): its text, and per frame the end offset and the
	 * stack id; sorted input mostly repeats the previous line's leading frames, whose ids
	 * are then reused instead of hashed again. */
	const char *prev;
	uint32_t prev_depth;
	size_t *prev_end;     /* STROBE_MAX_DEPTH + 1 entries */
	uint32_t *prev_stack; /* STROBE_MAX_DEPTH + 1 entries */
} strobe_stack_parser;

/* 0 or -ENOMEM. */
int strobe_stack_parser_init(strobe_stack_parser *sp, strobe_profile *p, bool reuse_prefix);
void strobe_stack_parser_free(strobe_stack_parser *sp);

/* The stack id of the n bytes at s: frames separated by every ';', root first; an empty text or
 * an empty frame is a frame with an empty name. -EINVAL with "WHAT:LINENO: ..." in err for a
 * frame name over STROBE_MAX_NAME bytes or more than max_depth frames; -ENOMEM. */
int strobe_stack_parse(strobe_stack_parser *sp, const char *s, size_t n, const char *what,
		       size_t lineno, uint32_t *stack, strobe_err *err);

#endif
