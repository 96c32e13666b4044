/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A debuginfod client (elfutils' libdebuginfod, loaded when first used: net/debuginfod_lazy.c),
 * for the server's late naming. Which servers, where the cache is and how long a transfer may
 * take come from libdebuginfod's environment (DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH,
 * DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXSIZE), which `strobe server` sets from its options before
 * it starts any thread. libdebuginfod caches what it fetched and the misses a server answered.
 */
#ifndef STROBE_DEBUGINFOD_H
#define STROBE_DEBUGINFOD_H

/* The separate debug file of a build ID (hex): 0 and *path (malloc'd; the file in the cache);
 * -ENOENT when no server has it, -ENOSYS when libdebuginfod cannot be loaded, else -errno of the
 * transfer (a server down or slow: -ETIMEDOUT, -ECONNREFUSED...). Thread-safe. */
int strobe_debuginfod_find(const char *build_id_hex, char **path);

#endif
