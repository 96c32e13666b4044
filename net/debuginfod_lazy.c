// SPDX-License-Identifier: Apache-2.0
/*
 * libdebuginfod, loaded on first use (include/strobe/debuginfod.h). Like libcurl
 * (net/curl_lazy.c), it is not linked: it brings libcurl and its TLS stack, which only a server
 * configured with debuginfod URLs needs. Its handful of entry points are declared here with the
 * prototypes elfutils documents (debuginfod_find_debuginfo(3)); the headers come with
 * libdebuginfod-dev, which nothing else needs.
 *
 * A client handle is not thread-safe, so each lookup makes its own (cheap: it reads the
 * environment and the cache path).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strobe/debuginfod.h"

typedef struct debuginfod_client debuginfod_client;

static struct {
	void *lib;
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
} dl;
static pthread_once_t dl_once = PTHREAD_ONCE_INIT;

static void dl_load(void)
{
	void *h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	/* Function pointers from dlsym's void * through memcpy, as POSIX allows. */
	void *b = dlsym(h, "debuginfod_begin"), *e = dlsym(h, "debuginfod_end"),
	     *f = dlsym(h, "debuginfod_find_debuginfo");
	if (!b || !e || !f) {
		dlclose(h);
		return;
	}
	memcpy(&dl.begin, &b, sizeof(b));
	memcpy(&dl.end, &e, sizeof(e));
	memcpy(&dl.find_debuginfo, &f, sizeof(f));
	dl.lib = h;
}

int strobe_debuginfod_find(const char *build_id_hex, char **path)
{
	*path = NULL;
	pthread_once(&dl_once, dl_load);
	if (!dl.lib)
		return -ENOSYS;
	debuginfod_client *c = dl.begin();
	if (!c)
		return -ENOMEM;
	/* Length 0: the build ID is given as a hex string. */
	int fd = dl.find_debuginfo(c, (const unsigned char *)build_id_hex, 0, path);
	dl.end(c);
	if (fd < 0) {
		free(*path);
		*path = NULL;
		return fd;
	}
	close(fd);
	return *path ? 0 : -ENOENT;
}
