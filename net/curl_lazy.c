/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl, loaded when it is first used instead of when strobe starts.
 *
 * Why: libcurl brings 27 more shared libraries with it (OpenSSL, Kerberos, LDAP, SSH, RTMP,
 * HTTP/2, IDN...), and loading and relocating them costs every strobe process about 3.5 MB of
 * resident memory before it does anything (measured: a program linked with strobe's libraries
 * peaks at 9.1 MB, 5.6 MB without libcurl). Only the HTTP clients need it (push, query, the
 * agent's sender, the server's scraper); `strobe record`, whose peak memory is a goal, and the
 * offline toolkit never do. So strobe is not linked with -lcurl: this file defines the handful
 * of libcurl functions strobe calls, with libcurl's own names and prototypes, and each forwards
 * to the real one, looked up with dlopen on the first call. Callers include <curl/curl.h> and
 * use libcurl as usual.
 *
 * Which libcurl: the GnuTLS build (libcurl-gnutls.so.4, Debian's libcurl3-gnutls) first, the
 * OpenSSL one (libcurl.so.4) when it is absent. strobe is linked with GnuTLS already (the
 * server's TLS), so the GnuTLS build adds no TLS library of its own, where the OpenSSL build
 * brings libssl and initialises much of libcrypto: about 1 MB more resident in the always-on
 * agent (measured with /proc/PID/smaps under process churn), for the same API and the same
 * options (--ca is CURLOPT_CAINFO in both).
 *
 * The executable does not export these names (it is not linked with -rdynamic), so they never
 * interpose on libcurl's own internal calls. When libcurl cannot be loaded, the constructors
 * return NULL and everything else an error code, which every caller already handles as a
 * failure of libcurl; curl_easy_strerror() then says that libcurl is missing.
 */
#define CURL_DISABLE_TYPECHECK /* the typecheck macros would rename the definitions below */
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

static struct {
	void *lib;
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	void (*free)(void *);
	time_t (*getdate)(const char *, const time_t *);
} lc;
static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

/* libcurl's global init calls libssh2_init(0) (for scp:// and sftp://, which strobe never asks
 * for), and libssh2 built with OpenSSL (Debian's) then initialises libcrypto for SSH's ciphers:
 * ENGINE_load_builtin_engines and ENGINE_register_all_complete, which fault in about 1.5 MB of
 * libcrypto's pages that every strobe process then keeps (measured: dlopen + curl_global_init in
 * a bare process, 8.9 MB resident, 7.5 MB with this; libcrypto's mapping 2.9 against 1.4 MB).
 * libssh2's own flag LIBSSH2_INIT_NO_CRYPTO skips that step, and libssh2 does it only at its
 * first init: so the first init is ours, with the flag, and libcurl's then only counts. OpenSSL
 * 1.1 and later initialise themselves on first use anyway, so an SSH transfer would still work.
 * Nothing happens where libcurl has no libssh2 (RTLD_NOLOAD: it is not loaded for this). */
static void quiet_ssh2(void)
{
	void *ssh = dlopen("libssh2.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!ssh)
		return;
	void *p = dlsym(ssh, "libssh2_init");
	int (*init)(int);
	memcpy(&init, &p, sizeof(p));
	if (p)
		init(0x0001); /* LIBSSH2_INIT_NO_CRYPTO (libssh2.h, not installed with libcurl) */
	dlclose(ssh);     /* (libcurl holds it: only our reference goes) */
}

static void lc_load(void)
{
	void *h = dlopen("libcurl-gnutls.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	/* Each pointer is set from dlsym's void * through memcpy: ISO C has no conversion from an
	 * object pointer to a function pointer, POSIX guarantees the representation. */
#define SYM(field, name)                                                                       \
	do {                                                                                   \
		void *p = dlsym(h, name);                                                      \
		if (!p)                                                                        \
			goto missing;                                                          \
		memcpy(&lc.field, &p, sizeof(p));                                              \
	} while (0)
	SYM(global_init, "curl_global_init");
	SYM(global_cleanup, "curl_global_cleanup");
	SYM(easy_init, "curl_easy_init");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(easy_escape, "curl_easy_escape");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
	SYM(free, "curl_free");
	SYM(getdate, "curl_getdate");
#undef SYM
	quiet_ssh2();
	lc.lib = h;
	return;
missing:
	dlclose(h);
}

static int lc_ready(void)
{
	pthread_once(&lc_once, lc_load);
	return lc.lib != NULL;
}

CURLcode curl_global_init(long flags)
{
	return lc_ready() ? lc.global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
	if (lc_ready())
		lc.global_cleanup();
}

CURL *curl_easy_init(void)
{
	return lc_ready() ? lc.easy_init() : NULL;
}

/* A handle exists only if libcurl was loaded, so the functions taking one need no check. */
void curl_easy_cleanup(CURL *h)
{
	if (h)
		lc.easy_cleanup(h);
}

/* The option's number says its argument's type (curl.h's CURLOPTTYPE_* ranges), exactly as
 * libcurl itself reads the variadic argument. */
CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
	if (!h)
		return CURLE_BAD_FUNCTION_ARGUMENT;
	va_list ap;
	va_start(ap, opt);
	CURLcode rc;
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = lc.easy_setopt(h, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = lc.easy_setopt(h, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = lc.easy_setopt(h, opt, va_arg(ap, void (*)(void)));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = lc.easy_setopt(h, opt, va_arg(ap, curl_off_t));
	else
		rc = lc.easy_setopt(h, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode curl_easy_perform(CURL *h)
{
	return h ? lc.easy_perform(h) : CURLE_BAD_FUNCTION_ARGUMENT;
}

/* Every CURLINFO_* takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	if (!h)
		return CURLE_BAD_FUNCTION_ARGUMENT;
	va_list ap;
	va_start(ap, info);
	CURLcode rc = lc.easy_getinfo(h, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

const char *curl_easy_strerror(CURLcode code)
{
	return lc_ready() ? lc.easy_strerror(code)
			  : "libcurl (libcurl-gnutls.so.4 or libcurl.so.4) could not be loaded: "
			    "install libcurl3-gnutls";
}

char *curl_easy_escape(CURL *h, const char *s, int len)
{
	return lc_ready() ? lc.easy_escape(h, s, len) : NULL;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	return lc_ready() ? lc.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
	if (l)
		lc.slist_free_all(l);
}

void curl_free(void *p)
{
	if (p)
		lc.free(p);
}

/* -1 when libcurl is missing, as for a date it cannot read. */
time_t curl_getdate(const char *p, const time_t *unused)
{
	return lc_ready() ? lc.getdate(p, unused) : (time_t)-1;
}
