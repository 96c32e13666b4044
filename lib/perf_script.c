// SPDX-License-Identifier: Apache-2.0
/*
 * `perf script` text as a profile, or as folded text, so every command that takes a profile
 * takes perf's output directly. The stacks are exactly those of `strobe collapse` with no options (process name as
 * the root frame, then kernel and user frames, root first), built straight into the model: one
 * sample type samples/count, each distinct stack one sample, labelled comm=<process name>.
 *
 * The collapser hands over each stack as "comm;root;...;leaf" text; its frames are split on ';'
 * as any reader of folded stacks would (frame names have had their ';' turned into ':', so only
 * a process name can hold one, and it splits the same way in flamegraph.pl).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strobe/buf.h"
#include "strobe/codec.h"
#include "strobe/collapse.h"
#include "strobe/stack_text.h"

typedef struct build {
	strobe_stack_parser stk;
	uint32_t comm_key; /* string id of "comm" */
	size_t nsamples;
	strobe_err *err;
} build;

/* One collapsed stack, "comm;root;...;leaf": its first frame is also the sample's comm label.
 * The collapser has already capped names and depth (comm aside) with messages naming the input
 * line; its stacks are in no stable order, so no prefix is reused. */
static int add_stack(const char *stack, size_t len, uint64_t count, void *ctx)
{
	build *b = ctx;
	strobe_profile *p = b->stk.p;
	uint32_t node, labels = 0;
	int r = strobe_stack_parse(&b->stk, stack, len, "stack", b->nsamples + 1, &node, b->err);
	if (r < 0)
		return r;
	const char *semi = memchr(stack, ';', len);
	size_t clen = semi ? (size_t)(semi - stack) : len;
	if (clen) {
		strobe_label l = {.key = b->comm_key, .str = strobe_str_intern(p, stack, clen)};
		if (l.str == UINT32_MAX || (labels = strobe_labelset_intern(p, &l, 1)) == UINT32_MAX)
			return -ENOMEM;
	}
	int64_t v = count > INT64_MAX ? INT64_MAX : (int64_t)count;
	b->nsamples++;
	return strobe_sample_add(p, node, labels, &v);
}

/* "stack count\n" appended, without stdio: this is the flamegraph fast path. */
static int add_line(const char *stack, size_t len, uint64_t count, void *ctx)
{
	strobe_buf *t = ctx;
	int r = strobe_buf_reserve(t, len + 22);
	if (r < 0)
		return r;
	char *o = t->p + t->len;
	memcpy(o, stack, len);
	o += len;
	char num[24];
	size_t i = sizeof(num);
	do
		num[--i] = (char)('0' + count % 10);
	while ((count /= 10) != 0);
	*o++ = ' ';
	memcpy(o, num + i, sizeof(num) - i);
	o += sizeof(num) - i;
	*o++ = '\n';
	strobe_buf_commit(t, (size_t)(o - (t->p + t->len)));
	return 0;
}

int strobe_perf_script_fold(const char *buf, size_t len, const char *name, char **out,
			    size_t *outlen, strobe_err *err)
{
	strobe_buf t;
	strobe_buf_init(&t, STROBE_MAX_INPUT);
	strobe_collapse_opts o = {0};
	int r = strobe_collapse(buf, len, name, &o, add_line, &t, err);
	if (r == -ENOMEM)
		strobe_errf(err, r, "%s: out of memory", name);
	else if (r == -E2BIG)
		strobe_errf(err, r, "%s: the folded stacks exceed the %zu MiB limit", name,
			    STROBE_MAX_INPUT >> 20);
	else if (r == 0 && t.len == 0)
		r = strobe_errf(err, -EINVAL, "%s: no samples with call stacks in perf script input",
				name);
	if (r < 0) {
		strobe_buf_free(&t);
		return r;
	}
	*out = strobe_buf_take(&t, outlen);
	return *out ? 0 : strobe_errf(err, -ENOMEM, "%s: out of memory", name);
}

/* The value type after the event the samples are of: the periods of cpu-clock and task-clock
 * are nanoseconds on the CPU; any other event's are counts of that event ("cycles"). */
static int name_type(strobe_profile *p, const strobe_collapser *c)
{
	size_t n;
	const char *ev = strobe_collapser_event(c, &n);
	if (!ev || !n)
		return 0;
	size_t base = 0; /* "cpu-clock:pppH" -> "cpu-clock" */
	while (base < n && ev[base] != ':')
		base++;
	bool clock = (base == 9 && memcmp(ev, "cpu-clock", 9) == 0) ||
		     (base == 10 && memcmp(ev, "task-clock", 10) == 0);
	uint32_t type = clock ? strobe_str_intern0(p, "cpu") : strobe_str_intern(p, ev, base);
	uint32_t unit = strobe_str_intern0(p, clock ? "nanoseconds" : "count");
	if (type == UINT32_MAX || unit == UINT32_MAX)
		return -ENOMEM;
	/* Renaming the one value column changes no sample. */
	p->types[0] = (strobe_value_type){type, unit};
	if (clock)
		p->period_type = p->types[0];
	return 0;
}

int strobe_perf_script_decode(const char *buf, size_t len, const char *name, strobe_profile **out,
			      strobe_err *err)
{
	build b = {.err = err};
	strobe_profile *p = strobe_profile_new();
	int r;
	if (!p || (r = strobe_profile_add_type(p, "samples", "count")) < 0 ||
	    (b.comm_key = strobe_str_intern0(p, "comm")) == UINT32_MAX ||
	    strobe_stack_parser_init(&b.stk, p, false) < 0) {
		strobe_profile_free(p);
		return strobe_errf(err, -ENOMEM, "%s: out of memory", name);
	}
	strobe_collapse_opts o = {0};
	b.stk.max_depth = STROBE_MAX_DEPTH + 1; /* the comm frame */
	strobe_collapser *c = strobe_collapser_new(name, &o);
	if (!c) {
		strobe_stack_parser_free(&b.stk);
		strobe_profile_free(p);
		return strobe_errf(err, -ENOMEM, "%s: out of memory", name);
	}
	r = strobe_collapser_feed(c, buf, len, err);
	if (!r)
		r = strobe_collapser_finish(c, add_stack, &b, err);
	if (!r)
		r = name_type(p, c);
	strobe_collapser_free(c);
	strobe_stack_parser_free(&b.stk);
	if (r == -ENOMEM)
		strobe_errf(err, r, "%s: out of memory", name);
	else if (r == 0 && b.nsamples == 0)
		r = strobe_errf(err, -EINVAL, "%s: no samples with call stacks in perf script input",
				name);
	if (r < 0) {
		strobe_profile_free(p);
		return r;
	}
	*out = p;
	return 0;
}
