// SPDX-License-Identifier: Apache-2.0
/*
 * Shared plumbing of the subcommands: error printing, option values, loading and merging inputs
 * with transforms, and atomic output files. See cli.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "strobe/profile_type.h"

void cli_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "strobe %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_double(const char *cmd, const char *opt, const char *arg, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (!*arg || *end || errno || v != v) {
		cli_err(cmd, "%s: '%s' is not a number", opt, arg);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_int(const char *cmd, const char *opt, const char *arg, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (!*arg || *end || errno || v < lo || v > hi) {
		cli_err(cmd, "%s: '%s' is not a whole number from %ld to %ld", opt, arg, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_profile_opt(const char *cmd, int opt, const char *arg, cli_profile_opts *o)
{
	switch (opt) {
	case OPT_SAMPLE_INDEX: o->sample_index = arg; return 1;
	case OPT_TYPE: o->type = arg; return 1;
	case OPT_FOCUS: o->filter.focus = arg; return 1;
	case OPT_IGNORE: o->filter.ignore = arg; return 1;
	case OPT_HIDE: o->filter.hide = arg; return 1;
	case OPT_SHOW: o->filter.show = arg; return 1;
	case OPT_TAGFOCUS: o->filter.tagfocus = arg; return 1;
	case OPT_TAGIGNORE: o->filter.tagignore = arg; return 1;
	case OPT_PRUNE:
		if (cli_double(cmd, "--prune", arg, &o->filter.prune) < 0)
			return -1;
		if (o->filter.prune < 0 || o->filter.prune >= 1) {
			cli_err(cmd, "--prune: '%s' must be a fraction in [0, 1)", arg);
			return -1;
		}
		return 1;
	case OPT_GRAN:
		if (strcmp(arg, "functions") == 0 || strcmp(arg, "function") == 0)
			o->gran = STROBE_GRAN_FUNCTIONS;
		else if (strcmp(arg, "lines") == 0 || strcmp(arg, "line") == 0)
			o->gran = STROBE_GRAN_LINES;
		else if (strcmp(arg, "addresses") == 0 || strcmp(arg, "address") == 0)
			o->gran = STROBE_GRAN_ADDRESSES;
		else {
			cli_err(cmd, "--granularity: '%s' is not functions, lines or addresses", arg);
			return -1;
		}
		return 1;
	}
	return 0;
}

int cli_read_profile(const char *cmd, const char *path, strobe_format from, const char *type,
		     strobe_profile **out)
{
	strobe_err err = {{0}};
	if (!type) {
		int rr = strobe_read_profile_as(path, from, out, &err);
		if (rr < 0)
			cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-rr));
		return rr;
	}
	if (from != STROBE_FMT_UNKNOWN) {
		cli_err(cmd, "--type: %s is read as %s, which names its own sample types (--type is "
			     "for folded and perf script input)",
			path, strobe_format_name(from));
		return -EINVAL;
	}
	strobe_input in;
	int r = strobe_input_open(path, &in, &err);
	if (r < 0) {
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-r));
		return r;
	}
	const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
	strobe_format f = strobe_detect(in.data, in.len);
	if (type && (f == STROBE_FMT_FOLDED || f == STROBE_FMT_PERF_SCRIPT || f == STROBE_FMT_UNKNOWN))
		r = strobe_decode_profile(in.data, in.len, name, out, &err);
	else if (type)
		r = strobe_errf(&err, -EINVAL,
				"--type: %s is %s, which names its own sample types (--type is for "
				"folded and perf script input)",
				name, strobe_format_name(f));
	else
		r = strobe_decode_profile(in.data, in.len, name, out, &err);
	strobe_input_close(&in);
	if (r == 0 && type && (r = strobe_profile_set_value_type(*out, type, &err)) < 0) {
		strobe_profile_free(*out);
		*out = NULL;
		char why[sizeof(err.msg)];
		memcpy(why, err.msg, sizeof(why));
		strobe_errf(&err, r, "%s: %s", name, why);
	}
	if (r < 0)
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-r));
	return r;
}

int cli_load_merged(const char *cmd, char **files, int nfiles, const char *type,
		    strobe_profile **out)
{
	return cli_load_merged_as(cmd, files, nfiles, STROBE_FMT_UNKNOWN, type, out);
}

int cli_load_merged_as(const char *cmd, char **files, int nfiles, strobe_format from,
		       const char *type, strobe_profile **out)
{
	char *dash[] = {"-"};
	if (nfiles == 0) {
		files = dash;
		nfiles = 1;
	}
	strobe_profile *acc = NULL;
	for (int i = 0; i < nfiles; i++) {
		strobe_err err = {{0}};
		strobe_profile *p;
		int r = cli_read_profile(cmd, files[i], from, type, &p);
		if (r < 0) {
			strobe_profile_free(acc);
			return r;
		}
		if (!acc) {
			acc = p;
			continue;
		}
		r = strobe_profile_merge(acc, p, &err);
		strobe_profile_free(p);
		if (r < 0) {
			cli_err(cmd, "%s: cannot merge: %s", files[i], err.msg[0] ? err.msg : strerror(-r));
			strobe_profile_free(acc);
			return r;
		}
	}
	*out = acc;
	return 0;
}

int cli_type(const char *cmd, const strobe_profile *p, const char *sample_index)
{
	int t = sample_index ? strobe_type_index(p, sample_index) : strobe_default_type_index(p);
	if (t >= 0)
		return t;
	char list[512];
	size_t o = 0;
	list[0] = 0;
	for (uint32_t i = 0; i < p->ntypes && o < sizeof(list); i++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
				      strobe_str(p, p->types[i].type));
	if (sample_index)
		cli_err(cmd, "--sample-index: no sample type '%s' (the profile has: %s)", sample_index,
			list);
	else
		cli_err(cmd, "the profile has no sample types");
	return -1;
}

int cli_load(const char *cmd, char **files, int nfiles, const cli_profile_opts *o,
	     strobe_profile **out, int *type)
{
	strobe_profile *p;
	int r = cli_load_merged_as(cmd, files, nfiles, o->from, o->type, &p);
	if (r < 0)
		return r;
	int t = cli_type(cmd, p, o->sample_index);
	if (t < 0) {
		strobe_profile_free(p);
		return -EINVAL;
	}
	strobe_err err = {{0}};
	if ((r = strobe_profile_filter(p, &o->filter, t, &err)) < 0) {
		cli_err(cmd, "%s", err.msg[0] ? err.msg : strerror(-r));
		strobe_profile_free(p);
		return r;
	}
	*out = p;
	*type = t;
	return 0;
}

int cli_out_open(const char *cmd, const char *path, cli_out *o)
{
	memset(o, 0, sizeof(*o));
	if (!path || strcmp(path, "-") == 0) {
		o->f = stdout;
		return 0;
	}
	/* Not a regular file (/dev/null, a FIFO, a terminal): written in place. A temporary
	 * renamed over it would replace the device node with a regular file. */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		o->f = fopen(path, "we");
		if (!o->f) {
			int e = errno;
			cli_err(cmd, "%s: %s", path, strerror(e));
			return -e;
		}
		if (!(o->path = strdup(path))) {
			fclose(o->f);
			cli_err(cmd, "out of memory");
			return -ENOMEM;
		}
		return 0;
	}
	o->path = strdup(path);
	if (!o->path || asprintf(&o->tmp, "%s.tmp.%d", path, (int)getpid()) < 0) {
		free(o->path);
		cli_err(cmd, "out of memory");
		return -ENOMEM;
	}
	o->f = fopen(o->tmp, "wbe");
	if (!o->f) {
		int e = errno;
		cli_err(cmd, "%s: %s", path, strerror(e));
		free(o->path);
		free(o->tmp);
		return -e;
	}
	return 0;
}

int cli_out_close(const char *cmd, cli_out *o, bool ok)
{
	if (o->f == stdout) {
		if (fflush(stdout) != 0 && ok) {
			cli_err(cmd, "writing output: %s", strerror(errno));
			return -EIO;
		}
		return 0;
	}
	int r = 0;
	if (fclose(o->f) != 0 && ok) {
		cli_err(cmd, "%s: %s", o->path, strerror(errno));
		ok = false;
		r = -EIO;
	}
	if (ok && o->tmp && rename(o->tmp, o->path) != 0) {
		cli_err(cmd, "%s: %s", o->path, strerror(errno));
		r = -errno;
		ok = false;
	}
	if (!ok && o->tmp)
		unlink(o->tmp);
	free(o->path);
	free(o->tmp);
	return r;
}

const char *cli_token(const char *cmd, const char *token, const char *file, bool *bad)
{
	static char buf[STROBE_TOKEN_MAX + 1]; /* one token per process: no free at each exit */
	strobe_err err = {{0}};
	*bad = true;
	if (token && file) {
		cli_err(cmd, "give --token or --token-file, not both");
		return NULL;
	}
	if (token && strobe_token_check(token, "--token", &err) < 0) {
		cli_err(cmd, "%s", err.msg);
		return NULL;
	}
	if (file) {
		char *t = NULL;
		if (strobe_token_file_read(file, &t, &err) < 0) {
			cli_err(cmd, "--token-file %s", err.msg);
			return NULL;
		}
		snprintf(buf, sizeof(buf), "%s", t);
		free(t);
		token = buf;
	}
	*bad = false;
	return token;
}
