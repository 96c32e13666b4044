// SPDX-License-Identifier: Apache-2.0
/*
 * The server's TLS certificate and key (--tls-cert, --tls-key): read and checked with GnuTLS
 * before libmicrohttpd is given them. libmicrohttpd would refuse a bad pair too, but only as
 * "cannot start the daemon", with no word on which file or why; here each problem names its
 * file: unreadable, not a PEM certificate, not a PEM private key, a key that does not belong to
 * the certificate (GnuTLS's own check, gnutls_certificate_set_x509_key_mem), a certificate
 * already expired, one of the two given without the other, or a libmicrohttpd built without
 * TLS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "server_impl.h"

#define PEM_MAX (1u << 20) /* a certificate chain is a few KB; more is the wrong file */

/* The whole file as a NUL-terminated string (GnuTLS's PEM readers want the length without it). */
static int read_pem(const char *what, const char *path, char **out, strobe_err *err)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return strobe_errf(err, -errno, "%s %s: %s", what, path, strerror(errno));
	char *buf = malloc(PEM_MAX + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	size_t n = fread(buf, 1, PEM_MAX + 1, f);
	int rerr = ferror(f) ? errno : 0;
	fclose(f);
	if (rerr) {
		free(buf);
		return strobe_errf(err, -rerr, "%s %s: %s", what, path, strerror(rerr));
	}
	if (n > PEM_MAX) {
		free(buf);
		return strobe_errf(err, -EFBIG, "%s %s: larger than 1 MiB; not a PEM file", what,
				   path);
	}
	buf[n] = 0;
	*out = buf;
	return 0;
}

int srv_tls_load(const strobe_server_config *c, char **cert_pem, char **key_pem,
		 int64_t *not_after, strobe_err *err)
{
	*cert_pem = *key_pem = NULL;
	*not_after = 0;
	if (!c->tls_cert && !c->tls_key)
		return 0;
	if (!c->tls_cert || !c->tls_key)
		return strobe_errf(err, -EINVAL,
				   "TLS needs both a certificate and its key: %s given (%s) without %s",
				   c->tls_cert ? "--tls-cert" : "--tls-key",
				   c->tls_cert ? c->tls_cert : c->tls_key,
				   c->tls_cert ? "--tls-key (config \"tls_key\")"
					       : "--tls-cert (config \"tls_cert\")");
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return strobe_errf(err, -ENOTSUP, "this libmicrohttpd was built without TLS "
				   "(GnuTLS): --tls-cert cannot be served");
	char *cert = NULL, *key = NULL;
	gnutls_x509_crt_t *crts = NULL;
	unsigned ncrt = 0;
	gnutls_x509_privkey_t pk = NULL;
	gnutls_certificate_credentials_t cred = NULL;
	int rc, g = 0;
	if ((rc = read_pem("TLS certificate", c->tls_cert, &cert, err)) < 0 ||
	    (rc = read_pem("TLS key", c->tls_key, &key, err)) < 0)
		goto out;
	gnutls_datum_t cd = {(unsigned char *)cert, (unsigned)strlen(cert)};
	gnutls_datum_t kd = {(unsigned char *)key, (unsigned)strlen(key)};
	/* Each file on its own first, so the error names the one that is wrong. */
	if (!strstr(cert, "-----BEGIN ") ||
	    (g = gnutls_x509_crt_list_import2(&crts, &ncrt, &cd, GNUTLS_X509_FMT_PEM, 0)) < 0 ||
	    !ncrt) {
		rc = strobe_errf(err, -EINVAL, "TLS certificate %s: not a PEM certificate "
				 "(-----BEGIN CERTIFICATE-----): %s", c->tls_cert,
				 strstr(cert, "-----BEGIN ") ? gnutls_strerror(g) : "no PEM block");
		goto out;
	}
	if ((g = gnutls_x509_privkey_init(&pk)) < 0) {
		rc = strobe_errf(err, -ENOMEM, "GnuTLS: %s", gnutls_strerror(g));
		goto out;
	}
	if (!strstr(key, "-----BEGIN ") ||
	    (g = gnutls_x509_privkey_import2(pk, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		rc = strobe_errf(err, -EINVAL, "TLS key %s: not an unencrypted PEM private key "
				 "(-----BEGIN PRIVATE KEY-----): %s", c->tls_key,
				 strstr(key, "-----BEGIN ") ? gnutls_strerror(g) : "no PEM block");
		goto out;
	}
	if ((g = gnutls_certificate_allocate_credentials(&cred)) < 0) {
		rc = strobe_errf(err, -ENOMEM, "GnuTLS: %s", gnutls_strerror(g));
		goto out;
	}
	/* The pair: GnuTLS checks that the key is the certificate's (its public half matches). */
	if ((g = gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM)) < 0) {
		rc = strobe_errf(err, -EINVAL, "TLS key %s does not go with the certificate %s: %s",
				 c->tls_key, c->tls_cert, gnutls_strerror(g));
		goto out;
	}
	/* Every client would refuse an expired certificate with a message about the handshake;
	 * say it here, once, with the date. */
	time_t exp = gnutls_x509_crt_get_expiration_time(crts[0]);
	if (exp != (time_t)-1 && exp < time(NULL)) {
		char when[32];
		struct tm tm;
		gmtime_r(&exp, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		rc = strobe_errf(err, -EINVAL, "TLS certificate %s expired on %s", c->tls_cert, when);
		goto out;
	}
	*not_after = exp == (time_t)-1 ? 0 : (int64_t)exp;
	*cert_pem = cert;
	*key_pem = key;
	cert = key = NULL;
	rc = 0;
out:
	if (cred)
		gnutls_certificate_free_credentials(cred);
	if (pk)
		gnutls_x509_privkey_deinit(pk);
	for (unsigned i = 0; i < ncrt; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	free(cert);
	if (key) /* the private key: not left behind in freed memory */
		explicit_bzero(key, strlen(key));
	free(key);
	return rc;
}

int strobe_server_check_tls(const strobe_server_config *c, strobe_err *err)
{
	char *cert, *key;
	int64_t not_after;
	int rc = srv_tls_load(c, &cert, &key, &not_after, err);
	if (key)
		explicit_bzero(key, strlen(key));
	free(key);
	free(cert);
	return rc;
}
