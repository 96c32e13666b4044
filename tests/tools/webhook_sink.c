// SPDX-License-Identifier: Apache-2.0
/*
 * webhook_sink: the tiny webhook receiver of tests/e2e/server_notify.sh (no python in tests).
 *
 *   webhook_sink --out FILE [--fail K]
 *
 * Listens on 127.0.0.1 at a port the kernel picks, prints that port on one line of stdout, and
 * for every POST appends its body and a newline to FILE (bodies of at most 1 MiB; a larger one
 * is refused with 413 and not written). The first K requests are answered 500 and their bodies
 * not written, to make the sender retry; later ones 200. Each request, failed or not, also
 * appends "attempt" to FILE.attempts, so a test can count the tries. Runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BODY (1u << 20)

static const char *out;
static long fail_left;

typedef struct req {
	char *b;
	size_t n;
	int too_big;
} req;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *size, void **ctx)
{
	req *r = *ctx;
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return MHD_NO;
		*ctx = r;
		return MHD_YES;
	}
	if (*size) {
		if (r->n + *size > MAX_BODY)
			r->too_big = 1;
		else {
			char *b = realloc(r->b, r->n + *size + 1);
			if (!b)
				return MHD_NO;
			memcpy(b + r->n, data, *size);
			r->b = b;
			r->n += *size;
		}
		*size = 0;
		return MHD_YES;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s.attempts", out);
	FILE *a = fopen(path, "a");
	if (a) {
		fputs("attempt\n", a);
		fclose(a);
	}
	unsigned status = 200;
	if (r->too_big)
		status = 413;
	else if (fail_left > 0) {
		fail_left--; /* one thread (MHD_USE_INTERNAL_POLLING_THREAD): no race */
		status = 500;
	} else if (strcmp(method, "POST") == 0) {
		FILE *f = fopen(out, "a");
		if (!f)
			status = 500;
		else {
			fwrite(r->b ? r->b : "", 1, r->n, f);
			fputc('\n', f);
			if (fclose(f) != 0)
				status = 500;
		}
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(2, (void *)"{}",
								    MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void done(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode t)
{
	req *r = *ctx;
	if (r) {
		free(r->b);
		free(r);
	}
	*ctx = NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--out") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--fail") && i + 1 < argc)
			fail_left = strtol(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: webhook_sink --out FILE [--fail K]\n");
			return 2;
		}
	}
	if (!out) {
		fprintf(stderr, "webhook_sink: --out FILE is required\n");
		return 2;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR,
		(struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "webhook_sink: cannot listen on 127.0.0.1\n");
		return 1;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", di ? di->port : 0);
	fflush(stdout);
	for (;;)
		pause();
}
