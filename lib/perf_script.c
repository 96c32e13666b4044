// SPDX-License-Identifier: Apache-2.0
/*
 * `perf script` text as a profile: collapsed exactly as stackcollapse-perf.pl does (process name
 * as the root frame, kernel and user frames), then read as folded stacks, so every command that
 * takes a profile takes perf's output directly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "strobe/codec.h"
#include "strobe/collapse.h"

static int to_folded(const char *stack, size_t len, uint64_t count, void *ctx)
{
	FILE *f = ctx;
	fwrite(stack, 1, len, f);
	fprintf(f, " %llu\n", (unsigned long long)count);
	return ferror(f) ? -EIO : 0;
}

int strobe_perf_script_fold(const char *buf, size_t len, const char *name, char **out,
			    size_t *outlen, strobe_err *err)
{
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (!f)
		return strobe_errf(err, -ENOMEM, "%s: out of memory", name);
	strobe_collapse_opts o = {0};
	int r = strobe_collapse(buf, len, name, &o, to_folded, f, err);
	if (fclose(f) != 0 && r == 0)
		r = strobe_errf(err, -ENOMEM, "%s: out of memory", name);
	if (r == 0 && tlen == 0)
		r = strobe_errf(err, -EINVAL, "%s: no samples with call stacks in perf script input",
				name);
	if (r < 0) {
		free(text);
		return r;
	}
	*out = text;
	*outlen = tlen;
	return 0;
}

int strobe_perf_script_decode(const char *buf, size_t len, const char *name, strobe_profile **out,
			      strobe_err *err)
{
	char *text;
	size_t tlen;
	int r = strobe_perf_script_fold(buf, len, name, &text, &tlen, err);
	if (r == 0) {
		r = strobe_folded_decode(text, tlen, name, out, err);
		free(text);
	}
	return r;
}
